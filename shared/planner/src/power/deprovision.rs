//! A cluster being removed: its machines terminated (or the installer's removal followed) until nothing is left,
//! refusals retried with a backoff.

use super::*;

/// What a termination of a deleting cluster's machines achieved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Termination {
    /// Machines still the cluster's (not shutting down or terminated).
    pub remaining: u32,
    /// `(machine, the cloud's refusal)` for each machine that refused.
    pub refused: Vec<(String, String)>,
}

/// The next step of a deleting cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprovisionStep {
    /// The cluster with its DeprovisionFailed condition and refusal count (when not done).
    pub cluster: Cluster,
    /// Every machine is gone: delete the item and its name lease.
    pub done: bool,
    /// Try again after this long, when not done.
    pub recheck_after: Option<TimeDelta>,
}

/// The step after a termination attempt of a deleting cluster: done once no machine remains; refusals are
/// retried after [`DEPROVISION_BACKOFF`] doubling with each (at most [`MAX_DEPROVISION_BACKOFF`]) and surfaced as
/// the DeprovisionFailed condition; machines still going are looked at again after half as long as the cluster
/// has been deleting, [`POLL`] to [`SPARSE_POLL`] ([`deprovision_look`]).
///
/// Nothing left is not done while a provisioning call recorded on the cluster may still be under way (its
/// invocation is inside the call's fence): what that call makes could land after this look, with no cluster left
/// to own it. The machines are looked for again once the fence has passed.
pub fn deprovision_step(cluster: &Cluster, outcome: &Termination, now: Timestamp) -> DeprovisionStep {
    let mut c = cluster.clone();
    if outcome.remaining == 0 && outcome.refused.is_empty() {
        let provisioning = cluster.pending_call.is_some_and(|p| p.call == ActuatorCall::Provision);
        if let Some(until) = fenced_until(cluster, now).filter(|_| provisioning) {
            return DeprovisionStep { cluster: c, done: false, recheck_after: Some(until - now) };
        }
        return DeprovisionStep { cluster: c, done: true, recheck_after: None };
    }
    if outcome.refused.is_empty() {
        return DeprovisionStep { cluster: c, done: false, recheck_after: Some(deprovision_look(cluster, now)) };
    }
    c.deprovision_failures += 1;
    let detail: Vec<String> = outcome.refused.iter().map(|(m, e)| format!("{m}: {e}")).collect();
    let message = format!(
        "{} machine(s) refused to terminate (attempt {}): {}",
        outcome.refused.len(),
        c.deprovision_failures,
        detail.join("; ")
    );
    set_condition(
        &mut c.conditions,
        condition::DEPROVISION_FAILED,
        ConditionStatus::True,
        reason::TERMINATION_REFUSED,
        &message,
        now,
    );
    let doublings = c.deprovision_failures.saturating_sub(1).min(10);
    let wait = (DEPROVISION_BACKOFF * 2i32.pow(doublings)).min(MAX_DEPROVISION_BACKOFF);
    c.retry_at = Some(now + wait);
    DeprovisionStep { cluster: c, done: false, recheck_after: Some(wait) }
}

/// When to look again at a deleting cluster whose machines are still going: after half as long as it has been
/// deleting, [`POLL`] at least and [`SPARSE_POLL`] at most, so a deprovision of a few seconds (EC2's) is seen done
/// within a poll and one of minutes (a resource group's, an installer's destroy) costs a look a minute, seen done
/// at most a minute late. Every [`POLL`] when its start is not recorded.
pub fn deprovision_look(cluster: &Cluster, now: Timestamp) -> TimeDelta {
    cluster.deleting_since.map_or(POLL, |since| ((now - since) / 2).clamp(POLL, SPARSE_POLL))
}

/// How long a deleting cluster must still wait before its machines are asked to terminate again, if it must.
pub fn deprovision_wait(cluster: &Cluster, now: Timestamp) -> Option<TimeDelta> {
    cluster.retry_at.filter(|t| *t > now).map(|t| t - now)
}
