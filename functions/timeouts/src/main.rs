//! The timeouts Lambda function: the sweep, invoked by its schedule.

use apiary_ports::messages::SweepEvent;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    apiary_aws::logging::init("timeouts");
    let deps = apiary_aws::deps_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<SweepEvent>| {
        let deps = deps.clone();
        async move { timeouts::handle(&deps, e.payload).await }
    }))
    .await
}
