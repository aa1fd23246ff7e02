//! `plan`: one pool's reconcile, as data.
//!
//! Given the pool's whole partition, `now` and a seed, [`plan`] returns every action the reconcile must take,
//! the pool's status, and the earliest future deadline (`wake_at`). It follows DESIGN.md's Reconcile steps
//! (Hive's ClusterPool algorithm with the seeds' changes): classify, budget, assign claims FIFO, delete
//! released clusters, then add / delete broken / delete excess / replace one stale cluster, then set power
//! states, hibernateAfter, claim lifetimes, status.
//!
//! Contract:
//! - Pure and deterministic: the same snapshot, `now` and seed give the same plan, byte for byte.
//! - Every write names the revision it expects; writes to one item within a plan carry successive revisions.
//! - Complete: the plan goes as far as the budgets allow, so applying it ([`crate::apply::apply`]) and planning
//!   again with nothing else changed yields no writes. Progress beyond that waits for the world (an install
//!   finishing, a deletion completing, time passing).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::hash::{FastMap, FastSet};
use crate::ids::Suffixes;
use crate::model::{
    condition, set_condition, Claim, Cluster, ConditionStatus, DesiredPower, PoolStatus, Snapshot, Timestamp,
};
use crate::{power, schedule, version};

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
    /// Write the `NAME#` lease, on condition that it does not exist.
    ReserveName {
        /// Inventory name.
        name: String,
        /// Cluster id that will hold it.
        holder: String,
        /// Reservation time.
        at: Timestamp,
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
    /// Not a write: terminate the deleting cluster's machines; once they are gone, delete its item and lease.
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
        status: PoolStatus,
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
    Planner::new(snapshot, now, seed).run()
}

/// The cluster behind a slot: borrowed from the snapshot, or made by this plan. Kept small so that sorting and
/// scanning ten thousand slots stays in cache.
enum Item<'a> {
    Stored(&'a Cluster),
    New(Box<Cluster>),
}

impl std::ops::Deref for Item<'_> {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        match self {
            Item::Stored(c) => c,
            Item::New(c) => c,
        }
    }
}

/// A cluster as the plan sees it: the stored item (or a new one) plus what the plan changed so far.
struct Slot<'a> {
    c: Item<'a>,
    rev: u64,
    claimed: bool,
    marked: bool,
    deleting: bool,
    power: Option<DesiredPower>,
    name_removed: bool,
    /// Made from another poolVersion.
    stale: bool,
}

impl Slot<'_> {
    fn is_new(&self) -> bool {
        matches!(self.c, Item::New(_))
    }
    fn installing(&self) -> bool {
        !self.deleting && self.c.installed_at.is_none() && !self.c.is_broken()
    }
    /// Unclaimed, not on its way out: the clusters the pool's own logic counts.
    fn unassigned(&self) -> bool {
        !self.deleting && !self.claimed && !self.marked && !self.name_removed
    }
}

/// The buckets of DESIGN.md step 2, as indexes into the age-ordered slots.
#[derive(Default)]
struct Buckets {
    installing: Vec<usize>,
    standby: Vec<usize>,
    assignable: Vec<usize>,
    broken: Vec<usize>,
    /// Released by a claim, or holding a removed inventory name: delete within budget.
    marked: Vec<usize>,
    /// Unassigned clusters from another poolVersion (also in one of the buckets above).
    stale: Vec<usize>,
    claimed: usize,
    deleting: usize,
}

impl Buckets {
    fn unassigned(&self) -> usize {
        self.installing.len() + self.standby.len() + self.assignable.len() + self.broken.len()
    }
}

struct Planner<'a> {
    snap: &'a Snapshot,
    now: Timestamp,
    ids: Suffixes,
    version: String,
    /// Effective size and running count, after schedules and the inventory cap.
    size: usize,
    running: usize,
    max_size: Option<usize>,
    max_concurrent: Option<usize>,
    active_schedule: Option<String>,
    /// The schedules' answer, to keep in the status.
    schedule_state: Option<schedule::ScheduleState>,
    /// The adaptive running count's rate estimate, to store in the status.
    demand: Option<crate::adaptive::Demand>,
    slots: Vec<Slot<'a>>,
    /// Clusters installing or deleting: what maxConcurrent bounds.
    busy: usize,
    /// Pending claims, oldest first, with their working revision.
    pending: Vec<(&'a Claim, u64)>,
    /// Inventory names in spec order, if the pool has an inventory.
    inventory: Option<Vec<&'a str>>,
    /// Names taken by a lease or an existing cluster.
    taken_names: FastSet<Cow<'a, str>>,
    /// Leases whose holder does not exist and whose grace has passed: reuse or release.
    orphans: Vec<(&'a str, &'a str)>,
    /// New clusters' leases, in creation order: (name, holder id).
    reserved: Vec<(String, String)>,
    wake: Option<Timestamp>,
    releases: Vec<Action>,
    assigns: Vec<Action>,
    deletes: Vec<Action>,
}

impl<'a> Planner<'a> {
    fn new(snap: &'a Snapshot, now: Timestamp, seed: u64) -> Self {
        let spec = &snap.pool.spec;
        let eff = schedule::effective(spec, now, snap.pool.status.schedule.as_ref());
        let inventory = spec.inventory_names();
        let cap = |n: usize| inventory.as_ref().map_or(n, |names| n.min(names.len()));
        let size = cap(to_count(eff.size));
        let max_size = match (spec.max_size, &inventory) {
            (Some(m), _) => Some(cap(to_count(m))),
            (None, Some(names)) => Some(names.len()),
            (None, None) => None,
        };

        let version = version::pool_version(spec);
        let inventory_set: Option<FastSet<&str>> = inventory.as_ref().map(|n| n.iter().copied().collect());
        let held_by: FastMap<&str, &str> = match inventory {
            Some(_) => snap.leases.iter().map(|l| (l.holder.as_str(), l.name.as_str())).collect(),
            None => FastMap::default(),
        };
        let mut slots: Vec<Slot<'a>> = snap
            .clusters
            .iter()
            .map(|c| Slot {
                rev: c.rev,
                claimed: c.claim.is_some() && !c.marked_for_deletion,
                marked: c.marked_for_deletion,
                deleting: c.deleting,
                power: c.spec_power_state,
                name_removed: match (&inventory_set, held_by.get(c.id.as_str())) {
                    (Some(names), Some(name)) => c.claim.is_none() && !names.contains(name),
                    _ => false,
                },
                stale: c.pool_version.as_deref() != Some(version.as_str()),
                c: Item::Stored(c),
            })
            .collect();
        slots.sort_by(by_age);

        let existing: FastSet<&str> = if snap.leases.is_empty() {
            FastSet::default()
        } else {
            snap.clusters.iter().map(|c| c.id.as_str()).collect()
        };
        let mut taken_names: FastSet<Cow<'a, str>> =
            FastSet::with_capacity_and_hasher(snap.clusters.len() + snap.leases.len(), Default::default());
        taken_names.extend(snap.clusters.iter().map(|c| Cow::Borrowed(c.cluster_name.as_str())));
        let mut orphans = Vec::new();
        let mut wake = eff.next_change.filter(|t| *t > now);
        for lease in &snap.leases {
            if existing.contains(lease.holder.as_str()) {
                taken_names.insert(Cow::Borrowed(lease.name.as_str()));
            } else if lease.reserved_at + LEASE_GRACE > now {
                taken_names.insert(Cow::Borrowed(lease.name.as_str()));
                wake = earliest(wake, Some(lease.reserved_at + LEASE_GRACE));
            } else {
                // Still held by its lease: reusable under the lease's holder id, never as a free name.
                taken_names.insert(Cow::Borrowed(lease.name.as_str()));
                orphans.push((lease.name.as_str(), lease.holder.as_str()));
            }
        }
        orphans.sort();

        let mut pending: Vec<(&Claim, u64)> =
            snap.claims.iter().filter(|c| c.cluster.is_none()).map(|c| (c, c.rev)).collect();
        pending.sort_by(|a, b| fifo(a.0, b.0));

        // Adaptive running count: demand sets the spares, runningCount (or the open schedule's) is the floor.
        // Running spares never outnumber the pool: at most size, and at most maxSize.
        let running_cap = max_size.map_or(size, |m| m.min(size));
        let mut running = to_count(eff.running_count).min(running_cap);
        let mut demand = None;
        if let Some(adaptive) = &spec.adaptive_running_count {
            let status = snap.pool.status.demand.as_ref();
            let decision = adaptive.decide(status, &snap.claims, &snap.clusters, now, running_cap);
            running = running.max(decision.running);
            wake = earliest(wake, decision.next_drop);
            demand = Some(decision.demand);
        }

        let busy = slots.iter().filter(|s| s.deleting || s.installing()).count();
        Self {
            snap,
            now,
            ids: Suffixes::new(seed),
            version,
            size,
            running,
            max_size,
            max_concurrent: spec.max_concurrent.map(to_count),
            active_schedule: eff.active,
            schedule_state: eff.state,
            demand,
            slots,
            busy,
            pending,
            inventory,
            taken_names,
            orphans,
            reserved: Vec::new(),
            wake,
            releases: Vec::new(),
            assigns: Vec::new(),
            deletes: Vec::new(),
        }
    }

    fn run(mut self) -> Plan {
        let deleting_pool = self.snap.pool.deletion_requested_at.is_some();
        self.release_claims(deleting_pool);
        let mut power = Vec::new();
        if deleting_pool {
            self.drain();
        } else {
            self.assign_claims();
            self.delete_marked();
            self.adjust_size();
            power = self.set_power_states();
        }
        power.extend(self.hibernate_after());
        power.extend(self.overdue_transitions());
        self.finish(power)
    }

    fn classify(&self) -> Buckets {
        let mut b = Buckets::default();
        for (i, s) in self.slots.iter().enumerate() {
            if s.deleting {
                b.deleting += 1;
                continue;
            }
            if s.marked || s.name_removed {
                b.marked.push(i);
                continue;
            }
            if s.claimed {
                b.claimed += 1;
                continue;
            }
            if s.stale {
                b.stale.push(i);
            }
            if s.c.is_broken() {
                b.broken.push(i);
            } else if s.c.installed_at.is_none() {
                b.installing.push(i);
            } else if s.c.is_running() {
                b.assignable.push(i);
            } else {
                b.standby.push(i);
            }
        }
        b
    }

    /// Stored clusters' ids → slot index (keys borrowed from the snapshot, so slots stay mutable).
    fn stored_index(&self) -> FastMap<&'a str, usize> {
        let mut index = FastMap::with_capacity_and_hasher(self.slots.len(), Default::default());
        for (i, slot) in self.slots.iter().enumerate() {
            if let Item::Stored(c) = slot.c {
                index.insert(c.id.as_str(), i);
            }
        }
        index
    }

    /// Installing and deleting clusters count against maxConcurrent.
    fn budget(&self) -> usize {
        self.max_concurrent.map_or(usize::MAX, |m| m.saturating_sub(self.busy))
    }

    fn capacity(&self) -> usize {
        self.max_size.map_or(usize::MAX, |m| m.saturating_sub(self.slots.len()))
    }

    /// Step 9: claims the claimant released or whose lifetime ran out let go of their clusters.
    fn release_claims(&mut self, deleting_pool: bool) {
        let lifetime = self.snap.pool.spec.claim_lifetime.as_ref();
        let mut claims: Vec<&Claim> = self.snap.claims.iter().collect();
        claims.sort_by(|a, b| fifo(a, b));
        let mut releases = Vec::new();
        for claim in claims {
            let expires = claim.expires_at(lifetime);
            let reason = if claim.release_requested_at.is_some() {
                ReleaseReason::Released
            } else if expires.is_some_and(|t| t <= self.now) {
                ReleaseReason::Expired
            } else if deleting_pool && claim.cluster.is_none() {
                ReleaseReason::PoolDeleted
            } else {
                self.wake = earliest(self.wake, expires);
                continue;
            };
            releases.push((claim, reason));
        }
        if releases.is_empty() {
            return;
        }
        let index = self.stored_index();
        let mut released = BTreeSet::new();
        for (claim, reason) in releases {
            let cluster = claim.cluster.as_deref().and_then(|id| index.get(id).copied()).map(|i| {
                let slot = &mut self.slots[i];
                slot.marked = true;
                slot.claimed = false;
                (slot.c.id.clone(), bump(&mut slot.rev))
            });
            self.releases.push(Action::ReleaseClaim {
                claim: claim.name.clone(),
                expected_rev: claim.rev,
                cluster,
                reason,
            });
            released.insert(claim.name.as_str());
        }
        self.pending.retain(|(c, _)| !released.contains(c.name.as_str()));
    }

    /// Step 4: oldest pending claim ↔ oldest Running cluster. Only Running clusters are assignable (seed 002).
    fn assign_claims(&mut self) {
        let assignable = self.classify().assignable;
        let served = self.pending.len().min(assignable.len());
        for ((claim, claim_rev), &i) in self.pending.drain(..served).zip(&assignable) {
            let slot = &mut self.slots[i];
            slot.claimed = true;
            slot.power = Some(DesiredPower::Running);
            self.assigns.push(Action::AssignClaim {
                claim: claim.name.clone(),
                claim_rev,
                cluster: slot.c.id.clone(),
                cluster_rev: bump(&mut slot.rev),
                at: self.now,
            });
            let lifetime = claim.effective_lifetime(self.snap.pool.spec.claim_lifetime.as_ref());
            self.wake = earliest(self.wake, lifetime.map(|l| self.now + l));
        }
    }

    /// Step 5: released clusters and holders of removed inventory names go first, within budget.
    fn delete_marked(&mut self) {
        let marked = self.classify().marked;
        self.delete_within_budget(marked, usize::MAX, DeleteReason::Released);
    }

    /// Step 6, repeated until nothing applies: add · delete broken · delete excess · replace one stale cluster.
    fn adjust_size(&mut self) {
        // Each round adds or deletes at least one cluster, and rounds cannot alternate forever: adding needs a
        // deficit, which only deleting broken or stale clusters creates, and those are finite. The bound is a
        // guard, not a limit reached in practice.
        for _ in 0..64 {
            if !self.adjust_once() {
                return;
            }
        }
    }

    fn adjust_once(&mut self) -> bool {
        let b = self.classify();
        let budget = self.budget();
        if budget == 0 {
            return false; // maxConcurrent reached: installs and deletions must finish first
        }
        let drift = b.unassigned() as i64 - self.size as i64 - self.pending.len() as i64;
        let names = self.free_name_count();
        // Adding comes first: a claim waiting for a cluster matters more than cleaning up.
        if drift < 0 && self.capacity() > 0 && names > 0 {
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
        if !b.broken.is_empty() {
            self.delete_within_budget(b.broken, usize::MAX, DeleteReason::Broken);
            return true;
        }
        if drift > 0 {
            // Least useful first: installing newest first, then standby newest first, then assignable oldest first.
            let order = b.installing.iter().rev().chain(b.standby.iter().rev()).chain(b.assignable.iter());
            let order: Vec<usize> = order.copied().collect();
            self.delete_within_budget(order, drift as usize, DeleteReason::Excess);
            return true;
        }
        // Replace stale clusters one at a time, and only from a full, settled pool, so claims keep being served.
        if drift == 0 && b.installing.is_empty() {
            if let Some(&oldest) = b.stale.first() {
                self.delete(oldest, DeleteReason::Stale);
                return true;
            }
        }
        false
    }

    fn free_name_count(&self) -> usize {
        match &self.inventory {
            None => usize::MAX,
            Some(names) => {
                let reusable = self.orphans.iter().filter(|(n, _)| names.contains(n)).count();
                reusable + names.iter().filter(|n| !self.taken_names.contains(**n)).count()
            }
        }
    }

    /// Adds one cluster; with an inventory it takes a free name (an orphaned lease first, reusing its holder id).
    fn add(&mut self) {
        let pool = &self.snap.pool.name;
        let (name, id) = match &self.inventory {
            None => {
                let id = loop {
                    let id = format!("{pool}-{}", self.ids.next_suffix());
                    if !self.taken_names.contains(id.as_str()) {
                        break id;
                    }
                };
                (id.clone(), id)
            }
            Some(names) => {
                if let Some(pos) = self.orphans.iter().position(|(n, _)| names.contains(n)) {
                    let (name, holder) = self.orphans.remove(pos);
                    (name.to_string(), holder.to_string())
                } else {
                    let Some(name) = names.iter().find(|n| !self.taken_names.contains(**n)) else {
                        return;
                    };
                    let id = format!("{name}-{}", self.ids.next_suffix());
                    self.reserved.push((name.to_string(), id.clone()));
                    (name.to_string(), id)
                }
            }
        };
        let stem: String = name.chars().take(21).collect();
        let infra_id = format!("{}-{}", stem.trim_end_matches('-'), self.ids.next_suffix());
        self.busy += 1;
        let mut cluster = Cluster::new(id, name.clone(), infra_id, self.now);
        cluster.pool_version = Some(self.version.clone());
        self.taken_names.insert(Cow::Owned(name));
        self.slots.push(Slot {
            c: Item::New(Box::new(cluster)),
            rev: 0,
            claimed: false,
            marked: false,
            deleting: false,
            power: None,
            name_removed: false,
            stale: false,
        });
    }

    /// Deletes up to `limit` of `candidates`, in order, while the budget allows. Deleting an installing cluster
    /// is free: it turns one operation into another. Released clusters and holders of removed names keep their
    /// own reason whatever `reason` says.
    fn delete_within_budget(&mut self, candidates: Vec<usize>, limit: usize, reason: DeleteReason) {
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
            } else if slot.name_removed {
                DeleteReason::InventoryNameRemoved
            } else {
                reason
            };
            self.delete(i, why);
            done += 1;
        }
    }

    fn delete(&mut self, i: usize, reason: DeleteReason) {
        let slot = &mut self.slots[i];
        if !slot.installing() {
            self.busy += 1;
        }
        slot.deleting = true;
        self.deletes.push(Action::DeleteCluster {
            cluster: slot.c.id.clone(),
            expected_rev: bump(&mut slot.rev),
            reason,
        });
    }

    /// Pool deletion: unclaimed clusters go within budget, claimed ones stay until their claims let go.
    fn drain(&mut self) {
        let b = self.classify();
        let order: Vec<usize> = b
            .marked
            .iter()
            .chain(&b.broken)
            .chain(b.installing.iter().rev())
            .chain(b.standby.iter().rev())
            .chain(&b.assignable)
            .copied()
            .collect();
        self.delete_within_budget(order, usize::MAX, DeleteReason::PoolDeleted);
    }

    /// Step 7: the oldest `min(runningCount, size) + pending claims` unclaimed, unbroken clusters (installing
    /// included) are kept Running, the rest Hibernating (seed 000). New clusters get theirs at creation.
    fn set_power_states(&mut self) -> Vec<Action> {
        let target = self.running + self.pending.len();
        let mut out = Vec::new();
        let candidates = self.slots.iter_mut().filter(|s| s.unassigned() && !s.c.is_broken());
        for (rank, slot) in candidates.enumerate() {
            let want = if rank < target { DesiredPower::Running } else { DesiredPower::Hibernating };
            if slot.power == Some(want) {
                continue;
            }
            slot.power = Some(want);
            if !slot.is_new() {
                out.push(Action::SetPowerState {
                    cluster: slot.c.id.clone(),
                    expected_rev: bump(&mut slot.rev),
                    power_state: want,
                });
            }
        }
        out
    }

    /// Step 8: hibernateAfter never applies to unclaimed pool clusters; a claimed one hibernates that long after
    /// the later of its claim and its last becoming Running (seed 000).
    fn hibernate_after(&mut self) -> Vec<Action> {
        let Some(after) = self.snap.pool.spec.hibernate_after.as_ref().and_then(|d| d.get()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.claimed && !s.deleting) {
            if slot.power != Some(DesiredPower::Running) || !slot.c.is_running() {
                continue;
            }
            let base = [slot.c.claimed_at, slot.c.running_since, slot.c.installed_at].into_iter().flatten().max();
            // A cluster assigned in this very plan was claimed now.
            let base = if slot.c.claim.is_none() { Some(self.now) } else { base };
            let Some(deadline) = base.map(|b| b + after) else {
                continue;
            };
            if deadline <= self.now {
                slot.power = Some(DesiredPower::Hibernating);
                out.push(Action::SetPowerState {
                    cluster: slot.c.id.clone(),
                    expected_rev: bump(&mut slot.rev),
                    power_state: DesiredPower::Hibernating,
                });
            } else {
                self.wake = earliest(self.wake, Some(deadline));
            }
        }
        out
    }

    /// Power transitions past their seed 002 deadline get a check now; future deadlines become wake-ups.
    fn overdue_transitions(&mut self) -> Vec<Action> {
        let timeouts = self.snap.pool.spec.power_timeouts();
        let mut out = Vec::new();
        for slot in self.slots.iter().filter(|s| !s.deleting && !s.is_new() && !s.c.is_broken()) {
            match power::transition_deadline(&slot.c, timeouts) {
                Some(t) if t <= self.now => out.push(Action::CheckPower { cluster: slot.c.id.clone() }),
                t => self.wake = earliest(self.wake, t),
            }
        }
        out
    }

    fn finish(mut self, power_actions: Vec<Action>) -> Plan {
        let mut actions = std::mem::take(&mut self.releases);
        actions.append(&mut self.assigns);
        let leftover: Vec<(&str, &str)> = std::mem::take(&mut self.orphans);
        for (name, holder) in leftover {
            actions.push(Action::ReleaseName { name: name.to_string(), holder: holder.to_string() });
        }
        let reserved: HashMap<&str, &str> =
            self.reserved.iter().map(|(name, holder)| (holder.as_str(), name.as_str())).collect();
        for slot in &self.slots {
            if let Item::New(c) = &slot.c {
                if let Some(name) = reserved.get(c.id.as_str()) {
                    actions.push(Action::ReserveName { name: name.to_string(), holder: c.id.clone(), at: self.now });
                }
                let mut cluster = c.clone();
                cluster.spec_power_state = slot.power;
                actions.push(Action::CreateCluster { cluster });
            }
        }
        actions.append(&mut self.deletes);
        actions.extend(power_actions);
        for slot in self.slots.iter().filter(|s| s.deleting) {
            actions.push(Action::Deprovision { cluster: slot.c.id.clone() });
        }

        let status = self.status();
        let wake_at = self.wake.filter(|t| *t > self.now);
        let pool = &self.snap.pool;
        let released = |kind: fn(&Action) -> bool| actions.iter().filter(|a| kind(a)).count();
        let claims_left = self.snap.claims.len() > released(|a| matches!(a, Action::ReleaseClaim { .. }));
        let leases_left = self.snap.leases.len() > released(|a| matches!(a, Action::ReleaseName { .. }));
        if pool.deletion_requested_at.is_some() && self.slots.is_empty() && !claims_left && !leases_left {
            actions.push(Action::DeletePool { expected_rev: pool.rev });
        } else if status != pool.status || wake_at != pool.next_wake_at {
            actions.push(Action::UpdatePool { expected_rev: pool.rev, status: status.clone(), next_wake_at: wake_at });
        }
        Plan { actions, status, wake_at }
    }

    /// Step 10: counts and conditions of the pool once the plan is applied.
    fn status(&self) -> PoolStatus {
        let b = self.classify();
        let old = &self.snap.pool.status;
        let mut conditions = old.conditions.clone();
        let (status, why, message) = if b.stale.is_empty() {
            (ConditionStatus::True, "ClustersCurrent", String::new())
        } else {
            (
                ConditionStatus::False,
                "SomeClustersStale",
                format!("{} clusters are from an older poolVersion", b.stale.len()),
            )
        };
        set_condition(&mut conditions, condition::ALL_CLUSTERS_CURRENT, status, why, &message, self.now);
        let full = self.capacity() == 0;
        let (status, why, message) = if full {
            (
                ConditionStatus::False,
                "MaxSizeReached",
                format!("the pool holds maxSize ({}) clusters", self.slots.len()),
            )
        } else {
            (ConditionStatus::True, "Available", String::new())
        };
        set_condition(&mut conditions, condition::CAPACITY_AVAILABLE, status, why, &message, self.now);
        PoolStatus {
            pool_version: self.version.clone(),
            size: count(self.size),
            running_count: count(self.running),
            ready: count(b.assignable.len()),
            standby: count(b.standby.len()),
            installing: count(b.installing.len()),
            broken: count(b.broken.len()),
            stale: count(b.stale.len()),
            claimed: count(b.claimed),
            deleting: count(b.deleting + b.marked.len()),
            pending_claims: count(self.pending.len()),
            active_schedule: self.active_schedule.clone(),
            schedule: self.schedule_state.clone(),
            demand: self.demand.clone(),
            conditions,
        }
    }
}

/// Clusters by age, oldest first; ties by id. Power, assignment and deletion orders all follow it.
fn by_age(a: &Slot<'_>, b: &Slot<'_>) -> std::cmp::Ordering {
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
