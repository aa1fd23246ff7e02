//! A pool item, and the snapshot of a pool's partition the planner plans from.

use serde::{Deserialize, Serialize};

use super::{Claim, Cluster, NameLease, PoolSpec, PoolStatus, Timestamp};

/// A pool (`POOL` item).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// Name, unique in the table.
    pub name: String,
    /// What the operator asked for.
    pub spec: PoolSpec,
    /// What the last reconcile saw.
    #[serde(default)]
    pub status: PoolStatus,
    /// When the pool next needs a reconcile even if nothing happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_at: Option<Timestamp>,
    /// Deletion was asked for: clusters are drained, then the item goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_requested_at: Option<Timestamp>,
    /// When the pool was created.
    pub created_at: Timestamp,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
    /// Fields of a later release, kept as read ([`super::Later`]).
    #[serde(flatten, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub later: super::Later,
}

impl Pool {
    /// A pool `name` of `spec`, created at `now`: no status yet, not being deleted, at revision 0.
    pub fn new(name: impl Into<String>, spec: PoolSpec, now: Timestamp) -> Self {
        Self {
            name: name.into(),
            spec,
            status: Default::default(),
            next_wake_at: None,
            deletion_requested_at: None,
            created_at: now,
            rev: 0,
            later: Default::default(),
        }
    }

    /// What the power state machine holds this pool's clusters to: the spec's limits, paced by the status's
    /// measured [`crate::pace::Pace`] — except while claims wait: a claim waits on whichever transition ends first,
    /// so each is looked at every poll, and one quicker than the pool's quick time is not noticed a sparse gap late.
    pub fn power_limits(&self) -> super::PowerLimits {
        let pace = self.status.pace.filter(|_| self.status.pending_claims == 0);
        super::PowerLimits { pace: pace.unwrap_or_default(), ..self.spec.power_limits() }
    }

    /// Whether a cluster's removal (its machines gone, its item deleted) is news to the pool: where it frees room
    /// the pool is held to (`maxSize`, `maxConcurrent`) or an inventory name, or brings a pool being deleted
    /// closer to its end. Elsewhere the plan counted the cluster out when it began deleting it, and only the
    /// status's `deleting` count waits for the next reconcile.
    pub fn removal_is_news(&self) -> bool {
        let s = &self.spec;
        s.max_size.is_some()
            || s.max_concurrent.is_some()
            || s.inventory.is_some()
            || self.deletion_requested_at.is_some()
    }
}

/// Everything a reconcile reads: one pool's whole partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The pool item.
    pub pool: Pool,
    /// Its clusters.
    #[serde(default)]
    pub clusters: Vec<Cluster>,
    /// Its claims.
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// Its name leases.
    #[serde(default)]
    pub leases: Vec<NameLease>,
}
