//! The reconcile, as the reconcile function runs it: `plan` + `apply` on the pool's snapshot, every write counted
//! at its write units, and the pool's gauges as its metrics would carry them.

use std::collections::HashSet;

use apiary_planner::events;
use apiary_planner::power::chain::Admission;
use apiary_planner::power::tick;
use apiary_planner::{apply_mut, plan, Action, Buckets, Plan, Pool, Profile, Timestamp};
use apiary_ports::store::{writes_with_events, Cond, Item, Key, ProfileItem, Write};

use crate::claimant;
use crate::report::Written;
use crate::units;

use super::*;

impl Simulation<'_> {
    /// The reconcile function: plan, apply, carry out.
    pub(super) fn reconcile(&mut self, now: Timestamp) {
        self.plan_seed = self.plan_seed.wrapping_add(1);
        let plan = plan(&self.snap, now, self.plan_seed);
        self.reconciles += 1;
        self.metered(GAUGES, now);
        self.writes += plan.writes().count();
        self.count_units(&plan, now);
        let updates = plan.actions.iter().any(|a| matches!(a, Action::UpdatePool { .. }));
        let buckets_before = updates.then(|| profile_buckets(&self.snap.pool)).flatten();
        for action in &plan.actions {
            if let Action::AssignClaim { claim, at, .. } = action {
                self.metered(ASSIGNED, now);
                if let Some(c) = self.snap.claims.iter().find(|c| &c.name == claim) {
                    self.waits.push((c.created_at, *at - c.created_at));
                    if *at > c.created_at {
                        self.note_given(c.created_at, claim, action, now);
                    }
                }
                let hold = self.holds.get(claim).copied().unwrap_or_default();
                self.at(*at + hold, Event::Release(claim.clone()));
            }
        }
        self.dirty = true;
        let hurry = tick::hurry(self.snap.pool.status.pending_claims, plan.status.pending_claims, &self.snap.clusters);
        // A single writer never loses a condition; a conflict here is a planner bug, and the next event re-plans.
        if apply_mut(&mut self.snap, &plan).is_err() {
            return;
        }
        if updates {
            self.count_pool_write(buckets_before);
        }
        self.alarm_gauges(&plan.status, now);
        // Each cluster the plan created, powered, assigned, deleted, wants checked or deprovisioned, once, in the
        // plan's order.
        let mut drive = Vec::new();
        for action in plan.actions {
            match action {
                Action::CreateCluster { cluster } => {
                    self.installs += 1;
                    self.machines.insert(cluster.id.clone(), Machines::Absent);
                    drive.push(cluster.id);
                }
                Action::SetPowerState { cluster, .. }
                | Action::AssignClaim { cluster, .. }
                | Action::DeleteCluster { cluster, .. }
                | Action::CheckPower { cluster } => drive.push(cluster),
                Action::Deprovision { cluster } => {
                    // Its machines begin to go once (a plan deprovisions a cluster once; a second would find them
                    // going).
                    if self.machines.get(&cluster) != Some(&Machines::Terminating) {
                        self.calls.deprovision += 1;
                        self.machines.insert(cluster.clone(), Machines::Terminating);
                        let d = self.setup.platform.delete.draw(&mut self.rng);
                        self.at(now + d, Event::Deprovisioned(cluster.clone()));
                    }
                    drive.push(cluster);
                }
                _ => {}
            }
        }
        // Each cluster the plan touches is a message to the power function, and so is the tick's nudge.
        let mut seen = HashSet::new();
        drive.retain(|id| seen.insert(id.clone()));
        self.usage.power_runs += drive.len();
        // Sent ten to a request (SendMessageBatch).
        self.usage.nudge_sends += drive.len().div_ceil(apiary_ports::queue::SEND_BATCH);
        let mut again = false;
        if hurry {
            self.usage.power_runs += 1;
            self.usage.ticks += 1;
            again |= self.tick_run(Admission::Nudge, now);
        }
        for id in drive {
            again |= self.nudge(&id, now);
        }
        // News a nudge brought asks for another reconcile. The plan's wake-up time is not a message: it is stored on
        // the pool item (`nextWakeAt`), a later plan overwrites it, and the sweep reconciles the pool in the first
        // minute it finds it past (`sweep::due`).
        if again {
            self.at(now, Event::Wake);
        }
    }

    /// A claim made at `made` that waited is given its cluster by `assign` at `now`: readable Ready once a look has
    /// noticed the cluster (the simulation gives clusters the moment their machines are done) and the reconcile
    /// it asks for has run.
    pub(super) fn note_given(&mut self, made: Timestamp, claim: &str, assign: &Action, now: Timestamp) {
        let Action::AssignClaim { cluster, .. } = assign else { return };
        let readable = if self.noticing.contains_key(cluster) {
            self.given.insert(cluster.clone(), claim.to_string());
            None
        } else {
            Some(now + claimant::NEWS)
        };
        self.waited.insert(claim.to_string(), (made, now, readable));
    }

    /// A reconcile wrote the pool item, and with it the profile's own item when its buckets are not what they were
    /// (`before`), as the store writes them.
    pub(super) fn count_pool_write(&mut self, before: Option<(Buckets, Buckets)>) {
        self.usage.pool_writes += 1;
        let mut bare = self.snap.pool.clone();
        if let Some((mean, spread)) = bare.status.profile_mut().map(Profile::take_buckets) {
            if before.as_ref().is_none_or(|(m, s)| *m != mean || *s != spread) {
                self.usage.profile_writes += 1;
                let item = ProfileItem { rev: bare.rev, mean, spread };
                self.usage.profile_item_bytes = units::size(&Item::Profile(Box::new(item)));
            }
        }
        self.usage.pool_item_bytes = units::size(&Item::Pool(Box::new(bare)));
    }

    /// The read units of the reconcile's Query of the partition, and the write units of `plan`'s writes as the
    /// store sends them, each action's in one go. An assignment made at once is the claim API's: the claim made
    /// with its cluster, and the event of its making, in one transaction; a claim that waited was made pending on
    /// its own first.
    pub(super) fn count_units(&mut self, plan: &Plan, now: Timestamp) {
        // The partition as the reconcile read it: the profile's buckets kept in their own item, as every write of
        // the pool after its first leaves them.
        let mut read = self.snap.clone();
        let rev = read.pool.rev;
        if let Some(p) = read.pool.status.profile_mut().filter(|p| p.has_buckets()) {
            p.kept = Some(rev);
        }
        if self.measuring {
            self.usage.query_units += self.partition.read_units(&read, &self.tick);
        }
        let mut after = read.clone();
        for action in plan.writes() {
            let Ok(mut writes) = writes_with_events(&mut after, action, now) else { continue };
            let Action::AssignClaim { claim, at, .. } = action else {
                self.written(|w| &mut w.reconcile, units::of(&read, &writes));
                continue;
            };
            let Some(made) = read.claims.iter().find(|c| &c.name == claim) else { continue };
            let created = Write::Append(events::claim_created(made));
            let unmade = |key: &Key| match key {
                Key::Claim(name) if name == claim => None,
                key => units::stored(&read, key),
            };
            if *at == made.created_at {
                writes.push(created);
                self.written(|w| &mut w.claim_api, units::of_items(unmade, &writes));
            } else {
                let pending = [Write::Put(Item::Claim(Box::new(made.clone())), Cond::Absent), created];
                self.written(|w| &mut w.claim_api, units::of_items(unmade, &pending));
                self.written(|w| &mut w.reconcile, units::of(&read, &writes));
            }
        }
    }

    /// Counts the write units `parts` sent by the source `by` picks.
    pub(super) fn written(&mut self, by: impl FnOnce(&mut Written) -> &mut units::Parts, parts: units::Parts) {
        self.usage.write_units += parts.total();
        *by(&mut self.usage.written) += parts;
    }

    /// The pool's metric series `which` got data at `now`.
    pub(super) fn metered(&mut self, which: usize, now: Timestamp) {
        if self.measuring {
            self.metric_hours[which].insert((now - self.trace.measured_from()).num_hours());
        }
    }

    /// The reconcile's gauges line as the stack's default `Monitoring` (`alarms`) writes it: only when some value
    /// in it could fire an alarm, each such series getting data in the hour of `now`.
    pub(super) fn alarm_gauges(&mut self, status: &apiary_planner::PoolStatus, now: Timestamp) {
        use apiary_ports::metrics::{metric_names, pool_status, published, Monitoring, ALARMED};
        if !self.measuring {
            return;
        }
        let Some(line) = published(pool_status("sim", &self.snap, status, now), Monitoring::Alarms) else { return };
        self.usage.alarm_lines += 1;
        let hour = (now - self.trace.measured_from()).num_hours();
        for name in metric_names(&line) {
            if let Some(i) = ALARMED.iter().position(|a| *a == name) {
                self.alarm_hours[i].insert(hour);
            }
        }
    }
}

/// The buckets of `pool`'s forecast profile, if it has one.
pub(super) fn profile_buckets(pool: &Pool) -> Option<(Buckets, Buckets)> {
    pool.status.profile().map(|p| (p.mean.clone(), p.spread.clone()))
}

/// The write units of the power function's write of cluster `stored` as `written` (`store::cluster_change`): its
/// item, with the events told in its transaction, then each event of its progress alone.
pub(super) fn cluster_write_units(
    stored: &apiary_planner::Cluster,
    written: &apiary_planner::Cluster,
    now: Timestamp,
) -> units::Parts {
    let (writes, progress) = apiary_ports::store::cluster_change(stored, written, now);
    let old = Item::Cluster(Box::new(stored.clone()));
    let mut parts = units::of_items(|key| (*key == old.key()).then(|| old.clone()), &writes);
    for event in progress {
        parts += units::of_items(|_| None, &[Write::Append(event)]);
    }
    parts
}
