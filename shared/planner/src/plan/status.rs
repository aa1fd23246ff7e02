//! Step 10: the pool's counts and conditions once the plan is applied.

use crate::model::{condition, set_condition, ConditionStatus, PoolStatus};

use super::planner::Planner;
use super::slots::Item;
use super::{count, provisioning_backoff};

impl Planner<'_> {
    pub(super) fn status(&self) -> PoolStatus {
        let b = self.classify();
        let old = &self.snap.pool.status;
        let conditions = self.conditions(&b);
        let refusing = |c: &crate::model::Cluster| {
            crate::model::find_condition(&c.conditions, condition::DEPROVISION_FAILED)
                .is_some_and(|k| k.status == ConditionStatus::True)
        };
        let deprovision_failing =
            self.slots.iter().filter(|s| s.deleting && matches!(s.c, Item::Stored(_)) && refusing(&s.c)).count();
        PoolStatus {
            pool_version: self.version.clone(),
            size: count(self.targets.size),
            running_count: count(self.targets.running),
            ready: count(b.assignable.len()),
            standby: count(b.standby.len()),
            installing: count(b.installing.len()),
            broken: count(b.broken.len()),
            stale: count(b.stale.len()),
            claimed: count(b.claimed),
            deleting: count(b.deleting + b.marked.len()),
            pending_claims: count(self.pending.len()),
            // Seed 000: the oldest Running spares, in the order this plan assigns them, and none this plan sets in
            // motion (a spare asked to hibernate waits for a reconcile to ask it to run again).
            next_spares: b
                .assignable
                .iter()
                .map(|&i| &self.slots[i])
                .filter(|s| s.power == Some(crate::model::DesiredPower::Running))
                .take(crate::model::NEXT_SPARES)
                .map(|s| s.c.id.clone())
                .collect(),
            deprovision_failing: count(deprovision_failing),
            provision_failures: self.failures.count,
            last_provision_failure: self.failures.last.clone().filter(|_| self.failures.count > 0),
            active_schedule: self.targets.active_schedule.clone(),
            schedule: self.targets.schedule_state.clone(),
            demand: self.targets.demand.clone(),
            pace: self.pace,
            orphans: self.snap.pool.status.orphans.clone(),
            // The plan's own time, set by the plan when it writes a status that changed.
            planned_at: self.snap.pool.status.planned_at,
            conditions,
            // The label index, a step closer to the spec's labels: the store writes the entries with the status.
            labels_indexed: Some(crate::select::index_step(old.labels_indexed.as_ref(), &self.snap.pool.spec.labels)),
            // What a later release keeps in the status is its own to change: written back as it was.
            later: old.later.clone(),
        }
    }

    /// The pool's conditions: AllClustersCurrent, CapacityAvailable and ProvisioningBackoff, each as this plan
    /// leaves the pool.
    fn conditions(&self, b: &super::slots::Buckets) -> Vec<crate::model::Condition> {
        let mut conditions = self.snap.pool.status.conditions.clone();
        // Hive's AllClustersCurrent: False when some unclaimed cluster has another version, Unknown when the only
        // stale ones have none recorded (they may match), True otherwise.
        let (status, why, message) = if b.stale.is_empty() {
            (ConditionStatus::True, "ClustersCurrent", String::new())
        } else if b.mismatched {
            (
                ConditionStatus::False,
                "SomeClustersStale",
                format!("{} clusters are from an older poolVersion", b.stale.len()),
            )
        } else {
            (
                ConditionStatus::Unknown,
                "UnknownVersions",
                format!("{} clusters have no poolVersion recorded", b.stale.len()),
            )
        };
        set_condition(&mut conditions, condition::ALL_CLUSTERS_CURRENT, status, why, &message, self.now);
        let (status, why, message) = if self.capacity() == 0 {
            (
                ConditionStatus::False,
                "MaxSizeReached",
                format!("the pool holds maxSize ({}) clusters", self.slots.len()),
            )
        } else {
            (ConditionStatus::True, "Available", String::new())
        };
        set_condition(&mut conditions, condition::CAPACITY_AVAILABLE, status, why, &message, self.now);
        match &self.failures.last {
            Some(last) if self.failures.count > 0 => {
                let n = self.failures.count;
                let until = last.at + provisioning_backoff(n);
                let message = format!(
                    "{n} cluster(s) in a row failed to provision; new clusters wait until {} (last, {}: {})",
                    until.to_rfc3339(),
                    last.cluster,
                    last.message
                );
                let c = &mut conditions;
                set_condition(
                    c,
                    condition::PROVISIONING_BACKOFF,
                    ConditionStatus::True,
                    "ProvisionFailing",
                    &message,
                    self.now,
                );
            }
            _ => {
                if conditions.iter().any(|c| c.type_ == condition::PROVISIONING_BACKOFF) {
                    let c = &mut conditions;
                    set_condition(
                        c,
                        condition::PROVISIONING_BACKOFF,
                        ConditionStatus::False,
                        "Provisioned",
                        "",
                        self.now,
                    );
                }
            }
        }
        conditions
    }
}
