//! The timeouts Lambda function: the sweep, invoked by its schedule.

use apiary_ports::messages::SweepEvent;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    apiary_aws::logging::init("timeouts");
    let deps = apiary_aws::deps_from_env().await?;
    lambda_runtime::run(service_fn(|_: LambdaEvent<SweepEvent>| {
        let deps = deps.clone();
        async move {
            match timeouts::run(&deps).await {
                Ok(o) => Ok(serde_json::json!({"pools": o.pools, "enqueued": o.enqueued, "full": o.full})),
                Err(e) => Err(lambda_runtime::Diagnostic {
                    error_type: if e.is_retryable() { "Retryable" } else { "Fatal" }.into(),
                    error_message: e.to_string(),
                }),
            }
        }
    }))
    .await
}
