//! Apiary's AWS adapters of the ports ([`apiary_ports`]).
//!
//! This is the only crate that imports `aws-sdk-*`:
//!
//! - [`dynamo`]: the [`Store`](apiary_ports::store::Store) over the one table, a partition per pool.
//! - [`queue`]: the [`Queue`](apiary_ports::queue::Queue) over the two SQS queues, and a [`Poller`](queue::Poller)
//!   that feeds handlers batches as Lambda's event source mapping does (for the local runtime).
//! - [`ec2`]: the [`Actuator`](apiary_ports::platform::Actuator) and
//!   [`Provisioner`](apiary_ports::platform::Provisioner) of the `aws` platform; [`fake`]: the `fake` platform.
//! - [`roles`]: a pool's role in another account, assumed with its ExternalId and kept until shortly before it
//!   expires.
//! - [`scheduler`]: the [`Schedules`](apiary_ports::schedules::Schedules) as EventBridge Scheduler schedules.
//! - [`secrets`]: the [`Secrets`](apiary_ports::secrets::Secrets) in Secrets Manager (built by the power function
//!   only).
//!
//! [`config`] loads the SDK configuration with Apiary's timeouts and builds [`Deps`](apiary_ports::Deps) from it;
//! [`logging`] writes JSON lines with each span's pool, cluster and claim; [`calls`] counts every AWS call the
//! adapters make, so benchmarks can report calls per operation. Endpoints come from the environment
//! (`AWS_ENDPOINT_URL`); nothing here knows whether it talks to AWS or to an emulator.

pub use apiary_ports::calls;
pub mod config;
pub mod dynamo;
pub mod ec2;
pub mod error;
pub mod fake;
pub mod logging;
pub mod queue;
pub mod roles;
pub mod scheduler;
pub mod secrets;

pub use aws_config::SdkConfig;
pub use config::{assume, deps, deps_from_env, load_sdk_config};

/// The SDK's EC2 client, for tools and tests that look at machines the way an operator would.
pub use aws_sdk_ec2 as sdk_ec2;
/// The SDK's STS client, for tests that enter another emulated account the way its administrators would.
pub use aws_sdk_sts as sdk_sts;
