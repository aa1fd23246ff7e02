//! The planner's state for one plan, and the order of its steps.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::hash::{FastMap, FastSet};
use crate::ids::Suffixes;
use crate::model::{Claim, Cluster, ProvisionFailure, Snapshot, Timestamp};
use crate::{schedule, version};

use super::slots::{self, Buckets, Item, Slot, Version};
use super::{by_age, earliest, fifo, to_count, Action, Plan, LEASE_GRACE};

/// The counts the pool is held to in this plan, after schedules, the adaptive count and the inventory cap.
pub(super) struct Targets {
    /// Effective size.
    pub(super) size: usize,
    /// Effective running count.
    pub(super) running: usize,
    /// Clusters up or on their way up that stay so, at least `running` ([`crate::adaptive::Decision::held`]).
    pub(super) held: usize,
    pub(super) max_size: Option<usize>,
    pub(super) max_concurrent: Option<usize>,
    /// The open schedule window, if any, and the schedules' answer, to keep in the status.
    pub(super) active_schedule: Option<String>,
    pub(super) schedule_state: Option<schedule::ScheduleState>,
    /// The adaptive running count's rate estimate, to store in the status.
    pub(super) demand: Option<crate::adaptive::Demand>,
    /// Which just-installed clusters are kept Running beyond the running count (`keepFresh`), while claims are
    /// expected for them.
    pub(super) keep_fresh: Option<crate::adaptive::KeepFresh>,
}

/// Inventory names (seed 003): which are taken, which leases are orphaned, which this plan reserves.
#[derive(Default)]
pub(super) struct Names<'a> {
    /// Inventory names in spec order, if the pool has an inventory.
    pub(super) inventory: Option<Vec<&'a str>>,
    /// Names taken by a lease or an existing cluster.
    pub(super) taken: FastSet<Cow<'a, str>>,
    /// Leases whose holder does not exist and whose grace has passed: reuse (under a new id) or release.
    pub(super) orphans: Vec<(&'a str, &'a str)>,
    /// New clusters' leases, in creation order: (name, holder id, the orphaned holder it replaces).
    pub(super) reserved: Vec<(String, String, Option<String>)>,
}

/// Clusters lost to provisioning in a row, and the last of them: new clusters wait a growing backoff.
pub(super) struct Failures {
    pub(super) count: u32,
    pub(super) last: Option<ProvisionFailure>,
}

/// What the plan decided so far, in the order it will be written.
#[derive(Default)]
pub(super) struct Decisions {
    pub(super) releases: Vec<Action>,
    pub(super) assigns: Vec<Action>,
    pub(super) deletes: Vec<Action>,
    /// The earliest future deadline seen.
    pub(super) wake: Option<Timestamp>,
}

pub(super) struct Planner<'a> {
    pub(super) snap: &'a Snapshot,
    pub(super) now: Timestamp,
    pub(super) ids: Suffixes,
    pub(super) version: String,
    pub(super) targets: Targets,
    pub(super) slots: Vec<Slot<'a>>,
    /// Clusters installing or deleting: what maxConcurrent bounds.
    pub(super) busy: usize,
    /// Pending claims, oldest first, with their working revision.
    pub(super) pending: Vec<(&'a Claim, u64)>,
    pub(super) names: Names<'a>,
    pub(super) failures: Failures,
    /// The pool's pace, measured on its clusters as they were read ([`crate::pace`]).
    pub(super) pace: Option<crate::pace::Pace>,
    pub(super) out: Decisions,
}

impl<'a> Planner<'a> {
    /// The slots by what they are now ([`slots::classify`]).
    pub(super) fn classify(&self) -> Buckets {
        slots::classify(&self.slots)
    }

    /// Stored clusters' ids → slot index.
    pub(super) fn stored_index(&self) -> FastMap<&'a str, usize> {
        slots::stored_index(&self.slots)
    }

    /// The planner of `snap` at `now`: its targets, its clusters as slots oldest first, its names, its claims in
    /// line, and what the spec's schedule, the demand and the last failures say.
    pub(super) fn new(snap: &'a Snapshot, now: Timestamp, seed: u64) -> Self {
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
        let mut samples = crate::pace::Samples::default();
        let slots = slots_of(snap, inventory.as_deref(), &version, &mut samples);
        let (taken, orphans, lease_wake) = leased_names(snap, now);

        let mut pending: Vec<(&Claim, u64)> =
            snap.claims.iter().filter(|c| c.cluster.is_none()).map(|c| (c, c.rev)).collect();
        pending.sort_by(|a, b| fifo(a.0, b.0));

        // Running spares never outnumber the pool: at most size, and at most maxSize.
        let running_cap = max_size.map_or(size, |m| m.min(size));
        let spares = spares(snap, now, to_count(eff.running_count).min(running_cap), running_cap);
        let wake = earliest(earliest(eff.next_change.filter(|t| *t > now), lease_wake), spares.next_drop);

        let busy = slots.iter().filter(|s| s.deleting || s.installing()).count();
        let pace = samples.pace(snap.pool.status.pace);
        Self {
            snap,
            now,
            ids: Suffixes::new(seed),
            version,
            targets: Targets {
                size,
                running: spares.running,
                held: spares.held,
                max_size,
                max_concurrent: spec.max_concurrent.map(to_count),
                active_schedule: eff.active,
                schedule_state: eff.state,
                demand: spares.demand,
                keep_fresh: spares.keep_fresh,
            },
            slots,
            busy,
            pending,
            names: Names { inventory, taken, orphans, reserved: Vec::new() },
            failures: failures(snap),
            pace,
            out: Decisions { wake, ..Decisions::default() },
        }
    }

    /// The steps of docs/concepts.md ("The planner"), in order.
    pub(super) fn run(mut self) -> Plan {
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

    /// Installing and deleting clusters count against maxConcurrent.
    pub(super) fn budget(&self) -> usize {
        self.targets.max_concurrent.map_or(usize::MAX, |m| m.saturating_sub(self.busy))
    }

    pub(super) fn capacity(&self) -> usize {
        self.targets.max_size.map_or(usize::MAX, |m| m.saturating_sub(self.slots.len()))
    }

    pub(super) fn wake_at(&mut self, t: Option<Timestamp>) {
        self.out.wake = earliest(self.out.wake, t);
    }

    fn finish(mut self, power_actions: Vec<Action>) -> Plan {
        let mut actions = std::mem::take(&mut self.out.releases);
        actions.append(&mut self.out.assigns);
        let leftover: Vec<(&str, &str)> = std::mem::take(&mut self.names.orphans);
        for (name, holder) in leftover {
            actions.push(Action::ReleaseName { name: name.to_string(), holder: holder.to_string() });
        }
        // Deletes before creates: a delete is conditional on its cluster's revision, so a reconcile that planned
        // from the same partition as another and lost the delete stops before installing a second replacement.
        actions.append(&mut self.out.deletes);
        let reserved: HashMap<&str, (&str, &Option<String>)> = self
            .names
            .reserved
            .iter()
            .map(|(name, holder, replacing)| (holder.as_str(), (name.as_str(), replacing)))
            .collect();
        for slot in &self.slots {
            if let Item::New(c) = &slot.c {
                if let Some((name, replacing)) = reserved.get(c.id.as_str()) {
                    actions.push(Action::ReserveName {
                        name: name.to_string(),
                        holder: c.id.clone(),
                        at: self.now,
                        replacing: (*replacing).clone(),
                    });
                }
                let mut cluster = c.clone();
                cluster.spec_power_state = slot.power;
                actions.push(Action::CreateCluster { cluster });
            }
        }
        actions.extend(power_actions);
        // A cluster deleted by this plan is deprovisioned; one deleting already is the pool's tick's to look at.
        for slot in self.slots.iter().filter(|s| s.deleting && !s.c.deleting) {
            actions.push(Action::Deprovision { cluster: slot.c.id.clone() });
        }

        let mut status = self.status();
        let wake_at = self.out.wake.filter(|t| *t > self.now);
        let pool = &self.snap.pool;
        let released = |kind: fn(&Action) -> bool| actions.iter().filter(|a| kind(a)).count();
        let claims_left = self.snap.claims.len() > released(|a| matches!(a, Action::ReleaseClaim { .. }));
        let leases_left = self.snap.leases.len() > released(|a| matches!(a, Action::ReleaseName { .. }));
        // Nor before the reaper has found nothing of it left behind (its machines' marks name it).
        let drained = self.slots.is_empty() && !claims_left && !leases_left && crate::reaper::cleared(pool);
        if pool.deletion_requested_at.is_some() && drained {
            actions.push(Action::DeletePool { expected_rev: pool.rev });
        } else if status != pool.status || wake_at != pool.next_wake_at {
            // The plan's time is written with a status that changed, never alone.
            if status != pool.status {
                status.planned_at = Some(self.now);
            }
            actions.push(Action::UpdatePool {
                expected_rev: pool.rev,
                status: Box::new(status.clone()),
                next_wake_at: wake_at,
            });
        }
        Plan { actions, status, wake_at }
    }
}

/// The pool's clusters as slots, oldest first, each with what its version and its inventory entry say; every
/// cluster's durations go to `samples` for the pool's pace.
fn slots_of<'a>(
    snap: &'a Snapshot,
    inventory: Option<&[&str]>,
    version: &str,
    samples: &mut crate::pace::Samples,
) -> Vec<Slot<'a>> {
    let spec = &snap.pool.spec;
    let inventory_set: Option<FastSet<&str>> = inventory.map(|n| n.iter().copied().collect());
    let held_by: FastMap<&str, &str> = match inventory {
        Some(_) => snap.leases.iter().map(|l| (l.holder.as_str(), l.name.as_str())).collect(),
        None => FastMap::default(),
    };
    // An unclaimed holder of an inventory name goes when the name is removed, or its entry's parameters are not
    // the ones it was made with (seed 003's rules for an entry).
    let entry = |c: &Cluster| match (&inventory_set, held_by.get(c.id.as_str())) {
        (Some(names), Some(name)) if c.claim.is_none() => match names.contains(name) {
            false => (true, false),
            true => {
                let changed = spec.inventory_parameters(name).is_some_and(|p| *p != c.parameters);
                (changed, changed)
            }
        },
        _ => (false, false),
    };
    let mut slots: Vec<Slot<'a>> = snap
        .clusters
        .iter()
        .inspect(|c| samples.add(c))
        .map(|c| (c, entry(c)))
        .map(|(c, (name_removed, entry_changed))| Slot {
            rev: c.rev,
            claimed: c.claim.is_some() && !c.marked_for_deletion,
            marked: c.marked_for_deletion,
            deleting: c.deleting,
            power: c.spec_power_state,
            name_removed,
            entry_changed,
            version: match c.pool_version.as_deref() {
                None | Some("") => Version::Unknown,
                Some(v) if v == version => Version::Current,
                Some(_) => Version::Mismatched,
            },
            c: Item::Stored(c),
        })
        .collect();
    slots.sort_by(by_age);
    slots
}

/// Every name taken (by a cluster or a lease), the orphaned leases (name, holder), and when the first lease still
/// in its grace ends.
type Leased<'a> = (FastSet<Cow<'a, str>>, Vec<(&'a str, &'a str)>, Option<Timestamp>);

/// The names leases hold: every name taken (by a cluster or a lease), the orphaned leases (their holder gone past
/// the grace), and when the first lease still in its grace ends.
fn leased_names(snap: &Snapshot, now: Timestamp) -> Leased<'_> {
    let existing: FastSet<&str> =
        if snap.leases.is_empty() { FastSet::default() } else { snap.clusters.iter().map(|c| c.id.as_str()).collect() };
    let mut taken: FastSet<Cow<'_, str>> =
        FastSet::with_capacity_and_hasher(snap.clusters.len() + snap.leases.len(), Default::default());
    taken.extend(snap.clusters.iter().map(|c| Cow::Borrowed(c.cluster_name.as_str())));
    let mut orphans = Vec::new();
    let mut wake = None;
    for lease in &snap.leases {
        // Every leased name is taken: an orphaned lease's name is reusable only through the lease itself.
        taken.insert(Cow::Borrowed(lease.name.as_str()));
        if existing.contains(lease.holder.as_str()) {
            continue;
        }
        if lease.reserved_at + LEASE_GRACE > now {
            wake = earliest(wake, Some(lease.reserved_at + LEASE_GRACE));
        } else {
            orphans.push((lease.name.as_str(), lease.holder.as_str()));
        }
    }
    orphans.sort();
    (taken, orphans, wake)
}

/// How many spares to keep Running and how many to keep at all, with what the demand said.
struct Spares {
    running: usize,
    held: usize,
    next_drop: Option<Timestamp>,
    demand: Option<crate::adaptive::Demand>,
    keep_fresh: Option<crate::adaptive::KeepFresh>,
}

/// The spares the spec's running count asks for (`running`, already capped at `running_cap`), raised by the
/// adaptive running count: demand sets the spares, the running count is the floor.
fn spares(snap: &Snapshot, now: Timestamp, mut running: usize, running_cap: usize) -> Spares {
    let spec = &snap.pool.spec;
    let mut held = running;
    let (mut next_drop, mut demand, mut keep_fresh) = (None, None, None);
    if let Some(adaptive) = &spec.adaptive_running_count {
        let status = snap.pool.status.demand.as_ref();
        let decision = adaptive.decide(status, &snap.claims, &snap.clusters, now, running_cap);
        running = running.max(decision.running);
        held = running.max(decision.held.min(running_cap));
        next_drop = decision.next_drop;
        demand = Some(decision.demand);
        keep_fresh = decision.keep_fresh;
    }
    Spares { running, held, next_drop, demand, keep_fresh }
}

/// The pool's provisioning failures in a row, which end with the first cluster installed after the last of them.
fn failures(snap: &Snapshot) -> Failures {
    let status = &snap.pool.status;
    let recovered = status
        .last_provision_failure
        .as_ref()
        .is_none_or(|last| snap.clusters.iter().any(|c| c.installed_at.is_some_and(|t| t > last.at)));
    if recovered {
        Failures { count: 0, last: None }
    } else {
        Failures { count: status.provision_failures, last: status.last_provision_failure.clone() }
    }
}
