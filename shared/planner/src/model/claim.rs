//! Claims, and the leases of inventory names.

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use super::conditions::{condition, reason, set_condition, Condition, ConditionStatus};
use super::spec::ClaimLifetime;
use super::Timestamp;
use crate::duration::GoDuration;

/// A request for one cluster (`CLAIM#<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// Name, unique within the pool.
    pub name: String,
    /// The IAM principal that made the claim.
    pub owner: String,
    /// Principals (patterns as a pool's `access` takes them) who may use the claim as its owner does: read it,
    /// power its cluster, change its lifetime and release it. Only the owner and the pool's admins change them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// The labels the claim chose its pool by, when it named a selector instead of a pool ([`crate::select`]): its
    /// name is then the stack's, and its directory entry goes with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<crate::select::Labels>,
    /// When the claim was made; claims are served oldest first.
    pub created_at: Timestamp,
    /// Lifetime the claimant asked for; bounded by the pool's claimLifetime.maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<GoDuration>,
    /// The assigned cluster's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// When the cluster was assigned; the lifetime counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_at: Option<Timestamp>,
    /// The claimant released the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_requested_at: Option<Timestamp>,
    /// The Pending condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
    /// Fields of a later release, kept as read ([`super::Later`]).
    #[serde(flatten, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub later: super::Later,
}

impl Claim {
    /// A new pending claim.
    pub fn new(name: impl Into<String>, owner: impl Into<String>, created_at: Timestamp) -> Self {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            condition::PENDING,
            ConditionStatus::True,
            reason::NO_CLUSTERS,
            "waiting for a Running cluster",
            created_at,
        );
        Self {
            name: name.into(),
            owner: owner.into(),
            subjects: Vec::new(),
            selector: None,
            created_at,
            lifetime: None,
            cluster: None,
            assigned_at: None,
            release_requested_at: None,
            conditions,
            rev: 0,
            later: Default::default(),
        }
    }

    /// The claim's lifetime under `pool`: `min(maximum, own or default)`; `None` lives forever.
    pub fn effective_lifetime(&self, pool: Option<&ClaimLifetime>) -> Option<TimeDelta> {
        let own = self.lifetime.as_ref().and_then(GoDuration::get);
        let default = pool.and_then(|p| p.default.as_ref()).and_then(GoDuration::get);
        let maximum = pool.and_then(|p| p.maximum.as_ref()).and_then(GoDuration::get);
        match (own.or(default), maximum) {
            (Some(l), Some(m)) => Some(l.min(m)),
            (l, m) => l.or(m),
        }
    }

    /// Whether `principal` may use the claim as its owner does: it is the owner, or one of the subjects names it.
    pub fn shared_with(&self, principal: &str) -> bool {
        principal == self.owner || self.subjects.iter().any(|s| crate::access::matches(s, principal))
    }

    /// When the claim expires, if it is assigned and has a lifetime.
    pub fn expires_at(&self, pool: Option<&ClaimLifetime>) -> Option<Timestamp> {
        Some(self.assigned_at? + self.effective_lifetime(pool)?)
    }

    /// Where the claim stands, given its cluster's item (`None` when it has none, or the item is gone).
    pub fn phase(&self, cluster: Option<&Cluster>) -> ClaimPhase {
        match (self.release_requested_at, &self.cluster, cluster) {
            (Some(_), _, _) => ClaimPhase::Releasing,
            (None, None, _) => ClaimPhase::Pending,
            (None, Some(_), Some(c)) if c.is_running() => ClaimPhase::Ready,
            (None, Some(_), _) => ClaimPhase::Assigned,
        }
    }

    /// Waiting for a cluster: not assigned, not released.
    pub fn is_pending(&self) -> bool {
        self.phase(None) == ClaimPhase::Pending
    }
}

/// Where a claim stands, as the API, the metrics and the status view show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimPhase {
    /// No cluster yet.
    Pending,
    /// A cluster is assigned but not Running (the claimant hibernated it, or it is resuming).
    Assigned,
    /// Its cluster is Running: ready to use.
    Ready,
    /// The claimant released it; its cluster is being removed.
    Releasing,
}

/// An inventory name held by a cluster (`NAME#<clusterName>`, seed 003's ClusterNameUsage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameLease {
    /// The inventory name.
    pub name: String,
    /// Id of the cluster holding it (which may not exist yet: the lease is written first).
    pub holder: String,
    /// When it was reserved.
    pub reserved_at: Timestamp,
}
