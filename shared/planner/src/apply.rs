//! The meaning of each [`Action`], applied to a snapshot in memory.
//!
//! This is the reference the DynamoDB store implements item by item: the same conditions (revision, absence,
//! holder), the same effects, `rev` moving to `expected + 1` on every write. Tests and the simulator use it
//! as their store. Non-write actions ([`Action::Deprovision`], [`Action::CheckPower`]) ask for work outside
//! the table and change nothing here.

use crate::model::{condition, find_condition, reason, set_condition, ConditionStatus, NameLease, Snapshot};
use crate::plan::{Action, Plan};

/// A write whose condition did not hold: someone else acted first. Re-read and re-plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Index of the action in the plan.
    pub action: usize,
    /// Which condition failed.
    pub what: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "action {}: {}", self.action, self.what)
    }
}

impl std::error::Error for Conflict {}

/// Applies `plan` to `snapshot`. `Ok(None)` when the plan deleted the pool.
pub fn apply(snapshot: &Snapshot, plan: &Plan) -> Result<Option<Snapshot>, Conflict> {
    let mut s = snapshot.clone();
    Ok(apply_mut(&mut s, plan)?.then_some(s))
}

/// Applies `plan` to `s` in place; `Ok(false)` when the plan deleted the pool. On a conflict, the actions before
/// the failed one have been applied (as they would have been in the table).
pub fn apply_mut(s: &mut Snapshot, plan: &Plan) -> Result<bool, Conflict> {
    for (i, action) in plan.actions.iter().enumerate() {
        let conflict = |what: String| Conflict { action: i, what };
        match action {
            Action::ReleaseClaim { claim, expected_rev, cluster, .. } => {
                release_claim(s, claim, *expected_rev, cluster.as_ref()).map_err(conflict)?
            }
            Action::AssignClaim { claim, claim_rev, cluster, cluster_rev, at } => {
                assign_claim(s, claim, *claim_rev, cluster, *cluster_rev, *at).map_err(conflict)?
            }
            Action::ReserveName { name, holder, at, replacing: None } => {
                if s.leases.iter().any(|l| &l.name == name) {
                    return Err(conflict(format!("name {name} already leased")));
                }
                s.leases.push(NameLease { name: name.clone(), holder: holder.clone(), reserved_at: *at });
            }
            Action::ReserveName { name, holder, at, replacing: Some(old) } => {
                let lease = s
                    .leases
                    .iter_mut()
                    .find(|l| &l.name == name && &l.holder == old)
                    .ok_or_else(|| conflict(format!("name {name} not held by {old}")))?;
                lease.holder = holder.clone();
                lease.reserved_at = *at;
            }
            Action::ReleaseName { name, holder } => {
                let pos = s
                    .leases
                    .iter()
                    .position(|l| &l.name == name && &l.holder == holder)
                    .ok_or_else(|| conflict(format!("name {name} not held by {holder}")))?;
                s.leases.remove(pos);
            }
            Action::CreateCluster { cluster } => {
                if s.clusters.iter().any(|c| c.id == cluster.id) {
                    return Err(conflict(format!("cluster {} already exists", cluster.id)));
                }
                s.clusters.push((**cluster).clone());
            }
            Action::DeleteCluster { cluster, expected_rev, at, .. } => {
                delete_cluster(s, cluster, *expected_rev, *at).map_err(conflict)?
            }
            Action::SetPowerState { cluster, expected_rev, power_state } => {
                let c = s
                    .clusters
                    .iter_mut()
                    .find(|c| &c.id == cluster && c.rev == *expected_rev)
                    .ok_or_else(|| conflict(format!("cluster {cluster} not at rev {expected_rev}")))?;
                c.spec_power_state = Some(*power_state);
                c.rev += 1;
            }
            Action::UpdatePool { expected_rev, status, next_wake_at } => {
                if s.pool.rev != *expected_rev {
                    return Err(conflict(format!("pool not at rev {expected_rev}")));
                }
                s.pool.status = (**status).clone();
                s.pool.next_wake_at = *next_wake_at;
                s.pool.rev += 1;
            }
            Action::DeletePool { expected_rev } => {
                if s.pool.rev != *expected_rev {
                    return Err(conflict(format!("pool not at rev {expected_rev}")));
                }
                return Ok(false);
            }
            Action::Deprovision { .. } | Action::CheckPower { .. } => {}
        }
    }
    Ok(true)
}

/// A claim's release: the claim goes, and its cluster (if it had one) is marked for deletion.
fn release_claim(
    s: &mut Snapshot,
    claim: &str,
    expected_rev: u64,
    cluster: Option<&(String, u64)>,
) -> Result<(), String> {
    let pos = s
        .claims
        .iter()
        .position(|c| c.name == claim && c.rev == expected_rev)
        .ok_or_else(|| format!("claim {claim} not at rev {expected_rev}"))?;
    if let Some((id, rev)) = cluster {
        let c = s
            .clusters
            .iter_mut()
            .find(|c| &c.id == id && c.rev == *rev)
            .ok_or_else(|| format!("cluster {id} not at rev {rev}"))?;
        c.marked_for_deletion = true;
        c.rev += 1;
    }
    s.claims.remove(pos);
    Ok(())
}

/// A claim's assignment: the cluster, unclaimed and Running, takes the claim, and the claim the cluster.
fn assign_claim(
    s: &mut Snapshot,
    claim: &str,
    claim_rev: u64,
    cluster: &str,
    cluster_rev: u64,
    at: crate::Timestamp,
) -> Result<(), String> {
    let c = s
        .clusters
        .iter_mut()
        .find(|c| c.id == cluster && c.rev == cluster_rev && c.claim.is_none() && c.is_running())
        .ok_or_else(|| format!("cluster {cluster} not unclaimed and Running at rev {cluster_rev}"))?;
    c.claim = Some(claim.to_owned());
    c.claimed_at = Some(at);
    c.spec_power_state = Some(crate::model::DesiredPower::Running);
    c.rev += 1;
    let k = s
        .claims
        .iter_mut()
        .find(|k| k.name == claim && k.rev == claim_rev && k.cluster.is_none())
        .ok_or_else(|| format!("claim {claim} not pending at rev {claim_rev}"))?;
    k.cluster = Some(cluster.to_owned());
    k.assigned_at = Some(at);
    set_condition(
        &mut k.conditions,
        condition::PENDING,
        ConditionStatus::False,
        reason::CLUSTER_ASSIGNED,
        &format!("assigned cluster {cluster}"),
        at,
    );
    k.rev += 1;
    Ok(())
}

/// A cluster's deletion begins: it is deleting, and its power conditions say so.
fn delete_cluster(s: &mut Snapshot, cluster: &str, expected_rev: u64, at: crate::Timestamp) -> Result<(), String> {
    let c = s
        .clusters
        .iter_mut()
        .find(|c| c.id == cluster && c.rev == expected_rev)
        .ok_or_else(|| format!("cluster {cluster} not at rev {expected_rev}"))?;
    c.deleting = true;
    c.deleting_since = Some(at);
    // Seed 004: a deleting cluster's power conditions say so, instead of the last state they saw; what
    // they said of a failure (why it broke) is kept in the message.
    for kind in [condition::HIBERNATING, condition::READY] {
        let was = find_condition(&c.conditions, kind)
            .filter(|k| !k.message.is_empty() && k.reason != reason::CLUSTER_DEPLOYMENT_DELETED)
            .map(|k| format!(" (was {}: {})", k.reason, k.message))
            .unwrap_or_default();
        let message = format!("the cluster is being deprovisioned{was}");
        set_condition(
            &mut c.conditions,
            kind,
            ConditionStatus::False,
            reason::CLUSTER_DEPLOYMENT_DELETED,
            &message,
            at,
        );
    }
    c.rev += 1;
    Ok(())
}
