//! The power Lambda function: SQS events in, per-message batch failures out.
//!
//! Besides the AWS adapters it drives the clouds reached over HTTP (`apiary-clouds`), reading their credentials
//! from Secrets Manager: the only function that does.

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    apiary_aws::logging::init("power");
    let sdk = apiary_aws::load_sdk_config().await;
    let config = apiary_ports::Config::from_env()?;
    let policy = config.url_policy.clone();
    let mut deps = apiary_aws::deps(config, &sdk);
    let secrets = Arc::new(apiary_aws::secrets::SecretsManager::new(&sdk));
    let endpoints = apiary_clouds::Endpoints::from_env();
    deps.platforms = Arc::new(apiary_clouds::with_clouds(&deps.platforms, secrets, endpoints, policy)?);
    lambda_runtime::run(service_fn(|e: LambdaEvent<SqsEvent>| {
        let deps = deps.clone();
        async move { Ok::<_, lambda_runtime::Error>(power::handle(&deps, e.payload).await) }
    }))
    .await
}
