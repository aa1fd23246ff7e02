//! Apiary's planner: every decision about a pool, as pure functions.
//!
//! No I/O, no clock, no randomness: `now` and a seed are arguments, and the same inputs always give the same
//! output. The Lambda functions read state, call into this crate, and carry out what it returns.
//!
//! - [`model`]: pool spec, clusters, claims, name leases, conditions, power states and reasons (seed 004).
//! - [`validate`]: every problem of a pool spec, each with its field path.
//! - [`access`]: who may claim from a pool, and who may administer it.
//! - [`plan`](mod@plan): one reconcile of a pool as a list of conditional writes, its status and its next deadline.
//! - [`apply`](mod@apply): the reference meaning of each action, as the store carries it out.
//! - [`events`]: a pool's event trail, what happened to its claims and clusters and who asked.
//! - [`notify`]: what a pool's `notify` webhooks hear of its claims and clusters, and when they are told again.
//! - [`power`]: the hibernation state machine with seed 002's timeouts, one step at a time, and the pool's tick.
//! - [`machines`]: a machine's lifecycle, and which machines a start or a stop acts on.
//! - [`pace`]: how soon a pool's installs, resumes and stops finish when they are quick.
//! - [`adaptive`], [`forecast`]: the running count set from the claims' arrival rate, and from what the pool
//!   learned of its week.
//! - [`canary`]: resuming long-idle standbys in quiet hours, to find one that no longer resumes.
//! - [`schedule`]: recurring windows that override size and runningCount.
//! - [`reaper`]: which of a pool's machines belong to no cluster, and when they go.
//! - [`version`]: `poolVersion`, for stale-cluster replacement (seed 003's inventory marker included).
//! - [`ids`]: new clusters' names, drawn from the plan's seed.
//! - [`duration`]: durations in Go / Hive syntax.
//! - [`secret_tags`]: which pools may use a secret.
//! - [`select`]: claims by labels: which pools a selector matches, which serves a claim first, the label index.
//! - [`sweep`]: which pools the periodic sweep enqueues, and when a pass is a full one.
//! - [`waiting`]: when a claimant looks at a claim it waits on.
//!
//! The comments cite the four design documents Apiary implements by number, each a behaviour: **seed 000**
//! running clusters in a pool (`runningCount`, claims served oldest first), **seed 002** broken clusters detected
//! and replaced (the power transitions' timeouts), **seed 003** cluster names drawn from an inventory, **seed 004**
//! hibernation (power states, their reasons, node certificates on resume). docs/concepts.md, "The seeds, behaviour
//! by behaviour", lists each behaviour with where it is explained and the tests that hold it.
//!
//! ```
//! use apiary_planner::{apply, plan, Action, FakePlatform, Platform, Pool, PoolSpec, PoolStatus, Snapshot};
//! use chrono::{TimeZone, Utc};
//!
//! let now = Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap();
//! let mut spec = PoolSpec::new(3, Platform::Fake(FakePlatform::default()));
//! spec.running_count = 1;
//! let pool = Pool {
//!     name: "ci".into(),
//!     spec,
//!     status: PoolStatus::default(),
//!     next_wake_at: None,
//!     deletion_requested_at: None,
//!     created_at: now,
//!     rev: 0,
//!     later: Default::default(),
//! };
//! let snapshot = Snapshot { pool, clusters: vec![], claims: vec![], leases: vec![] };
//!
//! // An empty pool of size 3: three clusters are created, the oldest kept Running.
//! let first = plan(&snapshot, now, 7);
//! let created = first.actions.iter().filter(|a| matches!(a, Action::CreateCluster { .. })).count();
//! assert_eq!(created, 3);
//! assert_eq!(first.status.installing, 3);
//!
//! // Applied, and planned again with nothing else changed: nothing left to write.
//! let applied = apply(&snapshot, &first).unwrap().unwrap();
//! assert_eq!(plan(&applied, now, 8).writes().count(), 0);
//! ```

pub mod access;
pub mod adaptive;
pub mod apply;
pub mod canary;
pub mod change;
pub mod duration;
pub mod events;
pub mod failure;
pub mod forecast;
mod glob;
mod hash;
pub mod ids;
pub mod machines;
pub mod model;
pub mod notify;
pub mod pace;
pub mod plan;
pub mod power;
pub mod reaper;
pub mod schedule;
pub mod secret_tags;
pub mod select;
pub mod sweep;
pub mod validate;
pub mod version;
pub mod waiting;

pub use adaptive::{AdaptiveRunningCount, Demand};
pub use apply::{apply, apply_mut, Conflict};
pub use canary::ResumeCanaries;
pub use duration::GoDuration;
pub use forecast::Forecast;
pub use model::*;
pub use pace::Pace;
pub use plan::{plan, Action, DeleteReason, Plan, ReleaseReason};
pub use validate::{validate_spec, validate_update, FieldError};
pub use version::pool_version;
