//! The domain model: what a pool asks for, and the clusters, claims and name leases it holds.
//!
//! These are the items of Apiary's single table (one partition per pool), in domain form. Field names
//! follow the seeds (Hive's names, camelCase in JSON). Every mutable item carries `rev`, the revision a
//! conditional write expects; a write sets `rev` to `expected + 1`.
//!
//! Split along its seams: `spec` (what the operator asks), `readiness` (how it proves a cluster usable), `cluster`, `claim`, `status` (what the pool
//! observed), `conditions`, and `pool` (the item and the snapshot). The policies (adaptive, forecast,
//! canaries, schedules, power) read and write these types and are never read by them.

use chrono::{DateTime, Utc};

mod claim;
mod cluster;
mod conditions;
pub mod notice;
mod pool;
mod readiness;
mod spec;
mod status;

pub use claim::*;
pub use cluster::*;
pub use conditions::*;
pub use pool::*;
pub use readiness::*;
pub use spec::*;
pub use status::*;

/// A point in time. The planner never reads the clock: every `now` is an argument.
pub type Timestamp = DateTime<Utc>;

/// The fields of a stored item that this release does not know: a later release's, kept as they were read and
/// written back with the item, so that a function of this release rewriting an item during an update (the two
/// releases side by side) never drops what the other wrote. Only the stored types' top level keeps them (pool,
/// spec, status, cluster, claim); a caller may not send them ([`crate::validate::validate_spec`] names each).
pub type Later = std::collections::BTreeMap<String, serde_json::Value>;
