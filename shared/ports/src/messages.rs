//! Every message Apiary puts on a queue or receives from a schedule. Bodies are JSON of these types.

use serde::{Deserialize, Serialize};

/// Reconcile one pool (reconcile queue, FIFO, group = pool). Sent by the claim API, the power function, the sweep
/// and the pool's own schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReconcileMessage {
    /// The pool.
    pub pool: String,
    /// Why, for logs: `claim`, `pool-updated`, `power`, `sweep`, `schedule`, ….
    #[serde(default)]
    pub reason: String,
}

/// Drive one cluster's power state machine one step (power queue, standard, delayed re-checks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PowerMessage {
    /// The pool.
    pub pool: String,
    /// The cluster id.
    pub cluster: String,
    /// The re-check chain this message continues (the power function's own delayed look), or `None` for a nudge
    /// (from a reconcile, the claim API or the sweep): see `apiary_planner::power::chain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<u64>,
}

/// The sweep's input from its schedule. EventBridge Scheduler sends whatever the schedule's input says; the sweep
/// needs nothing from it, so any JSON is accepted.
pub type SweepEvent = serde_json::Value;
