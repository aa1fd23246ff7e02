//! Steps 5 and 6, and pool deletion: released clusters go, then, repeated until nothing applies, the pool adds
//! clusters for its deficit, deletes broken ones, deletes its excess, or replaces one stale cluster. Clusters
//! lost to provisioning hold back new ones for a growing while ([`provisioning_backoff`]), so a pool whose
//! installs always fail does not make and delete clusters as fast as it can.

use std::borrow::Cow;

use chrono::TimeDelta;

use crate::model::{condition, find_condition, Cluster, ProvisionFailure};

use super::planner::Planner;
use super::slots::{Item, Slot, Version};
use super::{bump, by_age, Action, DeleteReason};

/// Wait before a new cluster after the first cluster lost to provisioning; it doubles with each further loss.
pub const PROVISIONING_BACKOFF: TimeDelta = TimeDelta::minutes(1);
/// Longest wait before a new cluster while clusters keep failing to provision.
pub const MAX_PROVISIONING_BACKOFF: TimeDelta = TimeDelta::hours(1);

/// How long after the last of `failures` clusters lost to provisioning in a row the pool makes a new one.
pub fn provisioning_backoff(failures: u32) -> TimeDelta {
    let doublings = failures.saturating_sub(1).min(10);
    (PROVISIONING_BACKOFF * 2i32.pow(doublings)).min(MAX_PROVISIONING_BACKOFF)
}

impl Planner<'_> {
    /// Step 5: released clusters and holders of removed inventory names go first, within budget.
    pub(super) fn delete_marked(&mut self) {
        let marked = self.classify().marked;
        let _ = self.delete_within_budget(marked, usize::MAX, DeleteReason::Released);
    }

    /// Step 6, repeated until nothing applies: add · delete broken · delete excess · replace one stale cluster.
    pub(super) fn adjust_size(&mut self) {
        // Each round adds or deletes at least one cluster, and rounds cannot alternate forever: adding needs a
        // deficit, which only deleting broken or stale clusters creates, and those are finite. The bound is a
        // guard, not a limit reached in practice.
        for _ in 0..64 {
            if !self.adjust_once() {
                return;
            }
        }
    }

    /// One round of step 6; whether it added or deleted anything. At maxConcurrent nothing is added and only
    /// installing clusters are deleted (that turns one operation into another); everything else waits for
    /// installs and deletions to finish.
    fn adjust_once(&mut self) -> bool {
        let b = self.classify();
        let budget = self.budget();
        let drift = b.unassigned() as i64 - self.targets.size as i64 - self.pending.len() as i64;
        let names = self.free_name_count();
        // Adding comes first: a claim waiting for a cluster matters more than cleaning up.
        if budget > 0 && drift < 0 && self.capacity() > 0 && names > 0 && self.may_add() {
            let n = (drift.unsigned_abs() as usize).min(self.capacity()).min(budget).min(names);
            let first_new = self.slots.len();
            for _ in 0..n {
                self.add();
            }
            // Keep the slots in age order, ties by id. New clusters are created `now`, normally the youngest of
            // all, so ordering the new tail is enough; a stored cluster from the future (clock skew) forces a
            // full sort.
            self.slots[first_new..].sort_by(by_age);
            let in_order = first_new == 0
                || first_new == self.slots.len()
                || by_age(&self.slots[first_new - 1], &self.slots[first_new]).is_lt();
            if !in_order {
                self.slots.sort_by(by_age);
            }
            return true;
        }
        // Broken clusters go even when the pool is at maxSize: they are what keeps it from being useful.
        if !b.broken.is_empty() && budget > 0 {
            return self.delete_within_budget(b.broken, usize::MAX, DeleteReason::Broken) > 0;
        }
        if drift > 0 {
            let order: Vec<usize> = b.excess_order().collect();
            return self.delete_within_budget(order, drift as usize, DeleteReason::Excess) > 0;
        }
        // Replace stale clusters one at a time, and only from a full, settled pool, so claims keep being served:
        // one with no version recorded first, else the oldest (Hive's order).
        if drift == 0 && b.installing.is_empty() && budget > 0 {
            if let Some(&first) = b.stale.first() {
                self.delete(first, DeleteReason::Stale);
                return true;
            }
        }
        false
    }

    /// Whether new clusters may be made now: not while the pool backs off after clusters lost to provisioning
    /// (then the pool wakes when the backoff ends).
    fn may_add(&mut self) -> bool {
        let Some(last) = self.failures.last.as_ref().filter(|_| self.failures.count > 0) else { return true };
        let until = last.at + provisioning_backoff(self.failures.count);
        if self.now >= until {
            return true;
        }
        self.wake_at(Some(until));
        false
    }

    fn free_name_count(&self) -> usize {
        match &self.names.inventory {
            None => usize::MAX,
            Some(names) => {
                let reusable = self.names.orphans.iter().filter(|(n, _)| names.contains(n)).count();
                reusable + names.iter().filter(|n| !self.names.taken.contains(**n)).count()
            }
        }
    }

    /// Adds one cluster. With an inventory it takes a free name: an orphaned lease's first (moving the lease to
    /// the new cluster's id), else one nobody holds (reserving it).
    fn add(&mut self) {
        let pool = &self.snap.pool.name;
        let (name, id) = match &self.names.inventory {
            None => {
                let id = loop {
                    let id = format!("{pool}-{}", self.ids.next_suffix());
                    if !self.names.taken.contains(id.as_str()) {
                        break id;
                    }
                };
                (id.clone(), id)
            }
            Some(names) => {
                let (name, replacing) =
                    if let Some(pos) = self.names.orphans.iter().position(|(n, _)| names.contains(n)) {
                        let (name, holder) = self.names.orphans.remove(pos);
                        (name.to_string(), Some(holder.to_string()))
                    } else {
                        let Some(name) = names.iter().find(|n| !self.names.taken.contains(**n)) else {
                            return;
                        };
                        (name.to_string(), None)
                    };
                // Never the orphaned holder's id: a new cluster gets a new id, and so a new provisioning token.
                let id = loop {
                    let id = format!("{name}-{}", self.ids.next_suffix());
                    if replacing.as_deref() != Some(id.as_str()) && !self.snap.clusters.iter().any(|c| c.id == id) {
                        break id;
                    }
                };
                self.names.reserved.push((name.clone(), id.clone(), replacing));
                (name, id)
            }
        };
        // `<stem>-<5 chars>`: at most MAX_INFRA_ID_LEN, openshift-install's length.
        let stem: String = name.chars().take(crate::validate::limits::MAX_INFRA_ID_LEN - 6).collect();
        let infra_id = format!("{}-{}", stem.trim_end_matches('-'), self.ids.next_suffix());
        self.busy += 1;
        let mut cluster = Cluster::new(id, name.clone(), infra_id, self.now);
        cluster.pool_version = Some(self.version.clone());
        cluster.release.clone_from(&self.snap.pool.spec.release);
        // What its inventory entry asks of it, sent to its installer (and compared with the entry from now on).
        cluster.parameters = self.snap.pool.spec.inventory_parameters(&name).cloned().unwrap_or_default();
        self.names.taken.insert(Cow::Owned(name));
        self.slots.push(Slot {
            c: Item::New(Box::new(cluster)),
            rev: 0,
            claimed: false,
            marked: false,
            deleting: false,
            power: None,
            name_removed: false,
            entry_changed: false,
            version: Version::Current,
        });
    }

    /// Deletes up to `limit` of `candidates`, in order, while the budget allows. Deleting an installing cluster
    /// is free: it turns one operation into another. Released clusters and holders of removed names keep their
    /// own reason whatever `reason` says. Returns how many it deleted.
    fn delete_within_budget(&mut self, candidates: Vec<usize>, limit: usize, reason: DeleteReason) -> usize {
        let mut done = 0;
        for i in candidates {
            if done == limit {
                break;
            }
            if !self.slots[i].installing() && self.budget() == 0 {
                continue;
            }
            let slot = &self.slots[i];
            let why = if slot.marked {
                DeleteReason::Released
            } else if slot.entry_changed {
                DeleteReason::InventoryEntryChanged
            } else if slot.name_removed {
                DeleteReason::InventoryNameRemoved
            } else {
                reason
            };
            self.delete(i, why);
            done += 1;
        }
        done
    }

    fn delete(&mut self, i: usize, reason: DeleteReason) {
        let slot = &mut self.slots[i];
        if !slot.installing() {
            self.busy += 1;
        }
        slot.deleting = true;
        self.out.deletes.push(Action::DeleteCluster {
            cluster: slot.c.id.clone(),
            expected_rev: bump(&mut slot.rev),
            reason,
            at: self.now,
        });
        if reason == DeleteReason::Broken && slot.c.provision_stopped {
            // One more cluster lost to provisioning: the next one waits longer.
            let stopped = find_condition(&slot.c.conditions, condition::PROVISION_STOPPED);
            let failure = ProvisionFailure {
                at: stopped.map_or(self.now, |k| k.last_transition_time),
                cluster: slot.c.id.clone(),
                message: stopped.map(|k| k.message.clone()).unwrap_or_default(),
            };
            self.failures.count += 1;
            if self.failures.last.as_ref().is_none_or(|last| failure.at >= last.at) {
                self.failures.last = Some(failure);
            }
        }
    }

    /// Pool deletion: unclaimed clusters go within budget, in the order excess ones go (released and broken ones
    /// first), claimed ones stay until their claims let go. Deleting a pool and resizing it to zero delete the
    /// same clusters.
    pub(super) fn drain(&mut self) {
        let b = self.classify();
        let order: Vec<usize> = b.marked.iter().chain(&b.broken).copied().chain(b.excess_order()).collect();
        let _ = self.delete_within_budget(order, usize::MAX, DeleteReason::PoolDeleted);
    }
}
