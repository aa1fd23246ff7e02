//! Apiary's ports: what the functions need from the world, as small traits speaking the planner's domain types.
//!
//! - [`Store`](store::Store): one pool's partition of the table, read whole, written conditionally ([`store`]).
//! - [`Queue`](queue::Queue): the reconcile (FIFO, grouped by pool) and power (delayed re-checks) queues
//!   ([`queue`]); every message type lives in [`messages`].
//! - [`Actuator`](platform::Actuator) and [`Provisioner`](platform::Provisioner): a cluster's machines on its
//!   pool's platform ([`platform`]).
//! - [`Schedules`](schedules::Schedules): a pool's cron overrides, kept in the cloud's scheduler ([`schedules`]).
//! - [`Secrets`](secrets::Secrets): cloud credentials by ARN, read by the power function only ([`secrets`]).
//! - [`Clock`](clock::Clock): the time and the seeds of randomness; a handler never reads ambient time ([`clock`]).
//! - [`Notifier`](platform::Notifier): posts notifications to pools' `notify` webhooks; [`notify`] says which
//!   are sent, by whom, and how the pass over a pool's trail finds one its writer did not send.
//! - [`retry`]: a write that lost its condition, read again and tried again, in one loop.
//! - [`metrics`]: CloudWatch metrics in Embedded Metric Format, built by pure functions, written to a sink.
//!
//! [`Deps`] bundles one implementation of each, built once per process. This crate has no cloud SDK in its
//! dependency tree: the AWS adapters (`apiary-aws`), the in-memory ones (`apiary-testkit`) and the other clouds'
//! implement these traits, and none of them depends on another.

pub mod calls;
pub mod clock;
pub mod config;
pub mod deps;
pub mod error;
pub mod messages;
pub mod metrics;
pub mod notify;
pub mod platform;
pub mod queue;
pub mod retry;
pub mod schedules;
pub mod secrets;
pub mod store;

/// Apiary's release (CHANGELOG.md), as every function, the command line and `GET /version` say it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use config::Config;
pub use deps::Deps;
pub use error::{Error, Result};
