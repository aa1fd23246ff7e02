//! Apiary's planner: every decision about a pool, as pure functions.
//!
//! No I/O, no clock, no randomness: `now` and a seed are arguments, and the same inputs always give the same
//! output. The Lambda functions read state, call into this crate, and carry out what it returns.
//!
//! - [`model`]: pool spec, clusters, claims, name leases, conditions, power states and reasons (seed 004).
//! - [`validate`]: every problem of a pool spec, each with its field path.
//! - [`plan`](mod@plan): one reconcile of a pool as a list of conditional writes, its status and its next deadline.
//! - [`power`]: the hibernation state machine with seed 002's timeouts, one step at a time.
//! - [`apply`](mod@apply): the reference meaning of each action, as the store carries it out.
//! - [`version`]: `poolVersion`, for stale-cluster replacement (seed 003's inventory marker included).

pub mod apply;
pub mod duration;
mod hash;
pub mod ids;
pub mod model;
pub mod plan;
pub mod power;
pub mod schedule;
pub mod validate;
pub mod version;

pub use apply::{apply, Conflict};
pub use duration::GoDuration;
pub use model::*;
pub use plan::{plan, Action, DeleteReason, Plan, ReleaseReason};
pub use validate::{validate_spec, FieldError};
pub use version::pool_version;
