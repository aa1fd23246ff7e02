//! Settings from the environment (the stack's outputs, as the template passes them to each function) and the
//! clients built from them once per process.

use std::sync::Arc;
use std::time::Duration;

use crate::dynamo::DynamoStore;
use crate::ec2::Ec2Platform;
use crate::error::{Error, Result};
use crate::fake::FakePlatform;
use crate::platform::Platforms;
use crate::queue::SqsQueue;
use crate::scheduler::EventBridgeSchedules;

/// What the functions read from their environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `APIARY_TABLE`: the DynamoDB table.
    pub table: String,
    /// `APIARY_RECONCILE_QUEUE_URL`: the FIFO reconcile queue.
    pub reconcile_queue_url: String,
    /// `APIARY_RECONCILE_QUEUE_ARN`: the same queue, as the target of pool schedules.
    pub reconcile_queue_arn: String,
    /// `APIARY_POWER_QUEUE_URL`: the power queue.
    pub power_queue_url: String,
    /// `APIARY_SCHEDULER_ROLE_ARN`: the role EventBridge Scheduler assumes to send to the reconcile queue.
    pub scheduler_role_arn: String,
    /// `APIARY_SCHEDULE_PREFIX`: prefix of this deployment's schedule names (default `apiary-`).
    pub schedule_prefix: String,
    /// `APIARY_ADMINS`: comma-separated principal ARNs that may manage pools and act on any claim.
    pub admins: Vec<String>,
    /// `APIARY_MAX_RECHECK_SECONDS`: longest wait between two looks at a cluster (default and maximum 900, the
    /// SQS delay limit). Lower it to make transitions on a fast cloud or emulator observable sooner.
    pub max_recheck_seconds: u32,
    /// `APIARY_STACK`: the deployment's name, the `Stack` dimension of its metrics (default `apiary`).
    pub stack: String,
    /// `APIARY_METRICS`: `emf` (default) writes CloudWatch metrics to stdout, `file:PATH` appends them to a file
    /// (the local runtime, whose stdout is the status screen), `off` writes none.
    pub metrics: crate::metrics::Sink,
}

impl Config {
    /// Reads the settings from the environment; a missing required one is an error naming it.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings from `lookup` (the environment, or a stack's outputs).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |name: &str| lookup(name).ok_or_else(|| Error::Config(format!("{name} is not set")));
        let max_recheck_seconds = match lookup("APIARY_MAX_RECHECK_SECONDS") {
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|s| (1..=900).contains(s))
                .ok_or_else(|| Error::Config(format!("APIARY_MAX_RECHECK_SECONDS={v:?}: want 1 to 900")))?,
            None => 900,
        };
        Ok(Config {
            table: var("APIARY_TABLE")?,
            reconcile_queue_url: var("APIARY_RECONCILE_QUEUE_URL")?,
            reconcile_queue_arn: var("APIARY_RECONCILE_QUEUE_ARN")?,
            power_queue_url: var("APIARY_POWER_QUEUE_URL")?,
            scheduler_role_arn: var("APIARY_SCHEDULER_ROLE_ARN")?,
            schedule_prefix: lookup("APIARY_SCHEDULE_PREFIX").unwrap_or_else(|| "apiary-".into()),
            admins: lookup("APIARY_ADMINS")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            max_recheck_seconds,
            stack: lookup("APIARY_STACK").unwrap_or_else(|| "apiary".into()),
            metrics: match lookup("APIARY_METRICS").as_deref() {
                None | Some("emf") => crate::metrics::Sink::Stdout,
                Some("off") => crate::metrics::Sink::Off,
                Some(v) if v.starts_with("file:") && v.len() > 5 => crate::metrics::Sink::File(v[5..].into()),
                Some(v) => return Err(Error::Config(format!("APIARY_METRICS={v:?}: want emf, file:PATH or off"))),
            },
        })
    }
}

/// Everything a handler needs, built once per process and shared by its invocations.
#[derive(Clone)]
pub struct Deps {
    /// Settings.
    pub config: Arc<Config>,
    /// The table.
    pub store: Arc<dyn crate::store::Store>,
    /// The queues.
    pub queue: Arc<dyn crate::queue::Queue>,
    /// Machines, per platform.
    pub platforms: Arc<Platforms>,
    /// Pool schedules.
    pub schedules: Arc<dyn crate::scheduler::Schedules>,
    /// Where CloudWatch metrics go.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The SDK configuration the clients were built from (for pollers and tools).
    pub sdk: aws_config::SdkConfig,
}

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

impl Deps {
    /// Loads the AWS configuration (see [`load_sdk_config`]) and builds every client.
    pub async fn from_env() -> Result<Self> {
        Ok(Self::new(Config::from_env()?, load_sdk_config().await))
    }

    /// Builds every client from `sdk` for the deployment `config` describes.
    pub fn new(config: Config, sdk: aws_config::SdkConfig) -> Self {
        let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let scheduler = aws_sdk_scheduler::Client::new(&sdk);
        Deps {
            store: Arc::new(DynamoStore::new(dynamo, config.table.clone())),
            queue: Arc::new(SqsQueue::new(sqs, &config)),
            platforms: Arc::new(Platforms {
                aws: Arc::new(Ec2Platform::new(sdk.clone())),
                fake: Arc::new(FakePlatform),
            }),
            schedules: Arc::new(EventBridgeSchedules::new(scheduler, &config)),
            metrics: Arc::new(crate::metrics::Metrics { stack: config.stack.clone(), sink: config.metrics.clone() }),
            sdk,
            config: Arc::new(config),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::metrics::Sink;

    fn config(extra: &[(&str, &str)]) -> Result<Config> {
        let mut env: HashMap<&str, &str> = [
            ("APIARY_TABLE", "t"),
            ("APIARY_RECONCILE_QUEUE_URL", "r"),
            ("APIARY_RECONCILE_QUEUE_ARN", "ra"),
            ("APIARY_POWER_QUEUE_URL", "p"),
            ("APIARY_SCHEDULER_ROLE_ARN", "s"),
        ]
        .into();
        env.extend(extra.iter().copied());
        Config::from_lookup(|k| env.get(k).map(|v| (*v).to_owned()))
    }

    #[test]
    fn defaults_and_metrics_sinks() {
        let c = config(&[]).expect("config");
        assert_eq!((c.stack.as_str(), c.metrics, c.max_recheck_seconds), ("apiary", Sink::Stdout, 900));
        let c = config(&[("APIARY_METRICS", "file:/tmp/m.log"), ("APIARY_STACK", "prod")]).expect("config");
        assert_eq!((c.stack.as_str(), c.metrics), ("prod", Sink::File("/tmp/m.log".into())));
        assert_eq!(config(&[("APIARY_METRICS", "off")]).expect("config").metrics, Sink::Off);
    }

    #[test]
    fn bad_settings_name_the_variable() {
        for (name, value) in
            [("APIARY_METRICS", "loud"), ("APIARY_METRICS", "file:"), ("APIARY_MAX_RECHECK_SECONDS", "0")]
        {
            let e = config(&[(name, value)]).expect_err(value).to_string();
            assert!(e.contains(name), "{e}");
        }
        let e = Config::from_lookup(|_| None).expect_err("nothing set").to_string();
        assert!(e.contains("APIARY_TABLE"), "{e}");
    }

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
        let err = Error::aws("ListQueues", result.expect_err("nothing answered"));
        assert!(err.is_retryable(), "{err}");
        held.abort();
    }
}
