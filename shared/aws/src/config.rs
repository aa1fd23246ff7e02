//! The SDK configuration with Apiary's timeouts, and the [`Deps`] of the AWS adapters built from it once per
//! process.

use std::sync::Arc;
use std::time::Duration;

use apiary_ports::clock::SystemClock;
use apiary_ports::metrics::Metrics;
use apiary_ports::platform::Platforms;
use apiary_ports::{Config, Deps, Result};

use crate::dynamo::DynamoStore;
use crate::ec2::Ec2Platform;
use crate::fake::FakePlatform;
use crate::queue::SqsQueue;
use crate::scheduler::EventBridgeSchedules;

/// Longest wait for a connection to an AWS endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest one attempt of an AWS call may take before the SDK gives up on it and retries. Without it a request
/// whose answer never comes holds its function until Lambda's timeout, and the message it serves until the
/// visibility timeout (six minutes). Above the local runtime's 5-second ReceiveMessage long poll.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest an AWS call may take, retries included: within the functions' 60-second timeout.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(25);

/// Loads the AWS configuration (region, credentials, `AWS_ENDPOINT_URL`) with Apiary's timeouts.
///
/// A call that times out is retried by the SDK like any transient error. Retrying a call whose first attempt did
/// land is safe: every table write is conditional on the revision it read, so the retry loses its condition and the
/// caller re-reads; RunInstances carries a client token; a message sent twice only makes a function look again.
pub async fn load_sdk_config() -> aws_config::SdkConfig {
    with_timeouts(aws_config::defaults(aws_config::BehaviorVersion::latest())).load().await
}

/// `loader` with Apiary's timeouts.
fn with_timeouts(loader: aws_config::ConfigLoader) -> aws_config::ConfigLoader {
    loader.timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .operation_attempt_timeout(ATTEMPT_TIMEOUT)
            .operation_timeout(OPERATION_TIMEOUT)
            .build(),
    )
}

/// `sdk` with the credentials of a session of `role_arn` named `session`, refreshed before they expire: what Lambda
/// gives a function from its execution role. The local runtime runs each function this way, so that every call it
/// makes is authorized as that function's role (the emulator evaluates it against the role's policies).
pub async fn assume(sdk: &aws_config::SdkConfig, role_arn: &str, session: &str) -> aws_config::SdkConfig {
    let provider =
        aws_config::sts::AssumeRoleProvider::builder(role_arn).session_name(session).configure(sdk).build().await;
    sdk.to_builder().credentials_provider(aws_sdk_sts::config::SharedCredentialsProvider::new(provider)).build()
}

/// Every adapter, built from `sdk` for the deployment `config` describes, on the system clock.
pub fn deps(config: Config, sdk: &aws_config::SdkConfig) -> Deps {
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let scheduler = aws_sdk_scheduler::Client::new(sdk);
    Deps {
        store: Arc::new(DynamoStore::new(dynamo, config.table.clone())),
        queue: Arc::new(SqsQueue::new(sqs, &config)),
        platforms: Arc::new(
            Platforms::new()
                .with("aws", Arc::new(Ec2Platform::new(sdk.clone(), config.stack_id.clone())))
                .with("fake", Arc::new(FakePlatform)),
        ),
        schedules: Arc::new(EventBridgeSchedules::new(scheduler, &config)),
        metrics: Arc::new(Metrics {
            stack: config.stack.clone(),
            sink: config.metrics.clone(),
            monitoring: config.monitoring,
        }),
        clock: Arc::new(SystemClock),
        config: Arc::new(config),
        secrets: Arc::new(crate::secrets::SecretsManager::new(sdk)),
    }
}

/// [`deps`] from the environment: the stack's settings ([`Config::from_env`]) and the SDK configuration
/// ([`load_sdk_config`]).
pub async fn deps_from_env() -> Result<Deps> {
    Ok(deps(Config::from_env()?, &load_sdk_config().await))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint that accepts connections and never answers costs a call [`OPERATION_TIMEOUT`] and a retryable
    /// error, not a hung function.
    #[tokio::test]
    async fn a_silent_endpoint_times_out_with_a_retryable_error() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let held = tokio::spawn(async move {
            let mut open = vec![];
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        let sdk = with_timeouts(aws_config::defaults(aws_config::BehaviorVersion::latest()))
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new("k", "s", None, None, "test"))
            .endpoint_url(format!("http://{addr}"))
            .load()
            .await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let bound = OPERATION_TIMEOUT + Duration::from_secs(15);
        let result = tokio::time::timeout(bound, sqs.list_queues().send()).await.expect("the call must time out");
        let err = crate::error::aws("sqs:ListQueues", result.expect_err("nothing answered"));
        assert!(err.is_retryable(), "{err}");
        held.abort();
    }
}
