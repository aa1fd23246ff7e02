//! The claim-api Lambda function: API Gateway proxy events in, JSON responses out.

use lambda_http::{service_fn, Request};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    apiary_aws::logging::init("claim-api");
    let deps = apiary_aws::deps_from_env().await?;
    lambda_http::run(service_fn(|req: Request| {
        let deps = deps.clone();
        async move { Ok::<_, std::convert::Infallible>(claim_api::handle(&deps, req).await) }
    }))
    .await
}
