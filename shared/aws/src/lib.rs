//! Apiary's AWS side: the ports the functions use and their adapters.
//!
//! This is the only crate that imports `aws-sdk-*`. The functions speak the planner's domain types through
//! small traits named by role:
//!
//! - [`Store`](store::Store): one pool's partition in DynamoDB, every write conditional ([`store`], [`dynamo`]).
//! - [`Queue`](queue::Queue): the reconcile (FIFO) and power (delayed re-checks) SQS queues ([`queue`]);
//!   every message type lives in [`messages`].
//! - [`Actuator`](platform::Actuator) and [`Provisioner`](platform::Provisioner): a cluster's machines, on EC2
//!   ([`ec2`]) or simulated ([`fake`]).
//! - [`Schedules`](scheduler::Schedules): a pool's cron overrides as EventBridge Scheduler schedules ([`scheduler`]).
//!
//! [`logging`] writes JSON lines with each span's pool, cluster and claim; [`metrics`] writes CloudWatch metrics in
//! Embedded Metric Format.
//! [`calls`] counts every AWS call the adapters make, so benchmarks can report calls per operation.
//! Endpoints come from the environment (`AWS_ENDPOINT_URL`); nothing here knows whether it talks to AWS or to an
//! emulator.

pub mod calls;
pub mod clock;
pub mod config;
pub mod dynamo;
pub mod ec2;
pub mod error;
pub mod fake;
pub mod logging;
pub mod messages;
pub mod metrics;
pub mod platform;
pub mod queue;
pub mod scheduler;
pub mod store;

pub use config::{Config, Deps};
pub use error::{Error, Result};

/// The SDK's EC2 client, for tools and tests that look at machines the way an operator would.
pub use aws_sdk_ec2 as sdk_ec2;
