//! The reconcile Lambda function: SQS (FIFO) events in, per-message batch failures out.

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    apiary_aws::logging::init("reconcile");
    let deps = apiary_aws::deps_from_env().await?;
    lambda_runtime::run(service_fn(|e: LambdaEvent<SqsEvent>| {
        let deps = deps.clone();
        async move { Ok::<_, lambda_runtime::Error>(reconcile::handle(&deps, e.payload).await) }
    }))
    .await
}
