//! `plan`: one pool's reconcile, as data.
//!
//! Given the pool's whole partition, `now` and a seed, [`plan`] returns every action the reconcile must take,
//! the pool's status, and the earliest future deadline (`wake_at`). It takes the steps docs/concepts.md lists under
//! "The planner" (Hive's ClusterPool algorithm with the seeds' changes): classify, budget, assign claims FIFO,
//! delete released clusters, then add / delete broken / delete excess / replace one stale cluster, then set power
//! states, hibernateAfter, claim lifetimes, status.
//!
//! Contract:
//! - Pure and deterministic: the same snapshot, `now` and seed give the same plan, byte for byte.
//! - Every write names the revision it expects; writes to one item within a plan carry successive revisions.
//! - Complete: the plan goes as far as the budgets allow, so applying it ([`crate::apply::apply`]) and planning
//!   again with nothing else changed yields no writes. Progress beyond that waits for the world (an install
//!   finishing, a deletion completing, time passing).

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::model::{Claim, Cluster, DesiredPower, PoolStatus, Snapshot, Timestamp};

mod claims;
mod planner;
mod running;
mod size;
mod slots;
mod status;

pub use size::{provisioning_backoff, MAX_PROVISIONING_BACKOFF, PROVISIONING_BACKOFF};

/// How long a name lease may exist without its cluster before it is reused or released (seed 003's guard
/// against a crash between reserving a name and creating the cluster).
pub const LEASE_GRACE: TimeDelta = TimeDelta::minutes(5);

/// Why a claim lets go of its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReleaseReason {
    /// The claimant released it.
    Released,
    /// Its lifetime ran out.
    Expired,
    /// The pool is being deleted and the claim was never served.
    PoolDeleted,
}

/// Why a cluster is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeleteReason {
    /// Its claim released it.
    Released,
    /// Provisioning stopped or a power transition timed out.
    Broken,
    /// The pool has more clusters than it needs.
    Excess,
    /// Made from an older poolVersion.
    Stale,
    /// Its inventory name was removed.
    InventoryNameRemoved,
    /// Its inventory entry's parameters changed since it was made.
    InventoryEntryChanged,
    /// The pool is being deleted.
    PoolDeleted,
}

/// One thing the reconcile must do. Writes carry the revision they expect; a lost condition means re-read
/// and re-plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Action {
    /// Delete the claim item; mark its cluster, if any, for deletion.
    ReleaseClaim {
        /// Claim name.
        claim: String,
        /// Expected claim revision.
        expected_rev: u64,
        /// The claim's cluster and its expected revision.
        cluster: Option<(String, u64)>,
        /// Why.
        reason: ReleaseReason,
    },
    /// One transaction: the claim gets the cluster; the cluster (unclaimed and Running) gets the claim,
    /// `claimedAt = at` and spec powerState Running.
    AssignClaim {
        /// Claim name.
        claim: String,
        /// Expected claim revision.
        claim_rev: u64,
        /// Cluster id.
        cluster: String,
        /// Expected cluster revision.
        cluster_rev: u64,
        /// Assignment time.
        at: Timestamp,
    },
    /// Write the `NAME#` lease, on condition that it does not exist; or, `replacing` an orphaned lease's holder
    /// (a lease whose cluster never came, or whose item is gone), on condition that the old holder still holds it.
    /// A new cluster never takes an old id: a reused id would reuse its provisioning token. Always right before
    /// the `createCluster` of its holder, with which it is written in one transaction.
    ReserveName {
        /// Inventory name.
        name: String,
        /// Cluster id that will hold it.
        holder: String,
        /// Reservation time.
        at: Timestamp,
        /// The orphaned lease's holder this reservation takes the name from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replacing: Option<String>,
    },
    /// Delete the `NAME#` lease, on condition that `holder` still holds it.
    ReleaseName {
        /// Inventory name.
        name: String,
        /// Expected holder.
        holder: String,
    },
    /// Write the new cluster item, on condition that it does not exist.
    CreateCluster {
        /// The item (rev 0).
        cluster: Box<Cluster>,
    },
    /// Mark the cluster deleting.
    DeleteCluster {
        /// Cluster id.
        cluster: String,
        /// Expected revision.
        expected_rev: u64,
        /// Why.
        reason: DeleteReason,
        /// When (its conditions say ClusterDeploymentDeleted from then on).
        at: Timestamp,
    },
    /// Set the cluster's spec powerState.
    SetPowerState {
        /// Cluster id.
        cluster: String,
        /// Expected revision.
        expected_rev: u64,
        /// New spec power state.
        power_state: DesiredPower,
    },
    /// Not a write: terminate the machines of a cluster this plan deletes; once they are gone, delete its item and
    /// lease. Planned once: the pool's tick looks at a deleting cluster until then, as at any cluster in motion.
    Deprovision {
        /// Cluster id.
        cluster: String,
    },
    /// Not a write: a power transition passed its deadline; drive the power state machine now.
    CheckPower {
        /// Cluster id.
        cluster: String,
    },
    /// Write the pool's status and next wake-up time.
    UpdatePool {
        /// Expected pool revision.
        expected_rev: u64,
        /// New status.
        status: Box<PoolStatus>,
        /// When to reconcile again at the latest.
        next_wake_at: Option<Timestamp>,
    },
    /// Delete the pool item: it is being deleted and nothing of it remains.
    DeletePool {
        /// Expected pool revision.
        expected_rev: u64,
    },
}

impl Action {
    /// Whether the action writes to the table (all but [`Action::Deprovision`] and [`Action::CheckPower`]).
    pub fn is_write(&self) -> bool {
        !matches!(self, Action::Deprovision { .. } | Action::CheckPower { .. })
    }
}

/// A reconcile's decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// The pool's status once the plan is applied.
    pub status: PoolStatus,
    /// The earliest future deadline; reconcile again then at the latest.
    pub wake_at: Option<Timestamp>,
}

impl Plan {
    /// The writes of the plan.
    pub fn writes(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter().filter(|a| a.is_write())
    }
}

/// Plans one reconcile of `snapshot`'s pool at `now`; `seed` draws the names of new clusters.
pub fn plan(snapshot: &Snapshot, now: Timestamp, seed: u64) -> Plan {
    planner::Planner::new(snapshot, now, seed).run()
}

/// Clusters by age, oldest first; ties by id. Power, assignment and deletion orders all follow it.
fn by_age(a: &slots::Slot<'_>, b: &slots::Slot<'_>) -> std::cmp::Ordering {
    (a.c.created_at, &a.c.id).cmp(&(b.c.created_at, &b.c.id))
}

/// Claims in the order they are served: oldest first, ties by name.
fn fifo(a: &Claim, b: &Claim) -> std::cmp::Ordering {
    (a.created_at, &a.name).cmp(&(b.created_at, &b.name))
}

/// Returns the revision a write must expect and advances the working revision past it.
fn bump(rev: &mut u64) -> u64 {
    let expected = *rev;
    *rev += 1;
    expected
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn to_count(n: i64) -> usize {
    usize::try_from(n.max(0)).unwrap_or(usize::MAX)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
