//! Steps 7 and 8: which unclaimed clusters run (seed 000), hibernateAfter for claimed ones, and installs or
//! power transitions past their deadline.

use crate::canary;
use crate::model::DesiredPower;
use crate::power;

use super::planner::Planner;
use super::{bump, earliest, Action};

impl Planner<'_> {
    /// Step 7: the oldest `min(runningCount, size) + pending claims` unclaimed, unbroken clusters (installing
    /// included) are kept Running, the rest Hibernating (seed 000). New clusters get theirs at creation; a cluster
    /// whose power management is paused keeps its own and is neither a spare nor a standby.
    ///
    /// With the forecast, a cluster up or coming up stays so beyond the count while the count comes back to it
    /// within a stop and a resume ([`crate::adaptive::Decision::held`]): it is not stopped only to be resumed.
    ///
    /// With `keepFresh`, clusters that are up come first ([`Planner::ranked`]). Beyond the count, a cluster still
    /// installing, or installed within the fresh window and still Running, stays so while it is the `k`-th such
    /// and a `k`-th is worth keeping ([`crate::adaptive::KeepFresh::keeps`]); one installed hibernates when its
    /// window ends.
    pub(super) fn set_power_states(&mut self) -> Vec<Action> {
        let target = self.targets.running + self.pending.len();
        let held = self.targets.held + self.pending.len();
        let ranked = self.ranked();
        let canaries = self.canaries(target, &ranked);
        let (now, keep) = (self.now, self.targets.keep_fresh);
        let mut out = Vec::new();
        let (mut wake, mut kept_so_far) = (None, 0);
        for (rank, &i) in ranked.iter().enumerate() {
            let slot = &mut self.slots[i];
            let within = rank < target || canaries.contains(&rank);
            let fresh = |k: &crate::adaptive::KeepFresh| match slot.c.installed_at {
                None => true,
                Some(at) => at + k.window > now && slot.power == Some(DesiredPower::Running),
            };
            let kept = !within && keep.is_some_and(|k| fresh(&k) && k.keeps(kept_so_far + 1));
            if kept {
                kept_so_far += 1;
                let until = slot.c.installed_at.zip(keep).map(|(at, k)| at + k.window);
                wake = earliest(wake, until);
            }
            // Beyond the count but within what it comes back to before a stop and a resume would be done: a
            // cluster up or coming up stays so.
            let holds = !within && rank < held && slot.power == Some(DesiredPower::Running);
            let want = if within || kept || holds { DesiredPower::Running } else { DesiredPower::Hibernating };
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
        // A kept cluster not claimed by the end of its window hibernates then.
        self.wake_at(wake);
        out
    }

    /// The clusters step 7 powers, as slot indices in the order the running count takes them: oldest first
    /// (seed 000). With `keepFresh`, those Running and meant to stay so come before the rest, each part oldest
    /// first: a kept cluster then stands in for a claimed spare, instead of an older standby being resumed
    /// beside it while it is stopped. Up is what the machines are, not what a plan wants of them: a plan that
    /// resumes a standby (a canary beyond the count) would otherwise rank it ahead of the next plan's.
    fn ranked(&self) -> Vec<usize> {
        let mut ranked: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                let s = &self.slots[i];
                s.unassigned() && !s.c.is_broken() && !s.c.power_paused
            })
            .collect();
        if self.snap.pool.spec.adaptive_running_count.as_ref().is_some_and(|a| a.keeps_fresh()) {
            let up = |i: &usize| {
                let s = &self.slots[*i];
                s.power == Some(DesiredPower::Running) && s.c.is_running()
            };
            ranked.sort_by_key(|i| !up(i));
        }
        ranked
    }

    /// Resume canaries: the ranks (among the clusters step 7 powers) of the standbys beyond `target` to resume
    /// as canaries. Those already resuming go on; in the option's hours, the ones that have slept longest are
    /// added up to its number at a time. When none can start now, the pool wakes when one can.
    fn canaries(&mut self, target: usize, ranked: &[usize]) -> Vec<usize> {
        let Some(option) = self.snap.pool.spec.resume_canaries.as_ref() else { return Vec::new() };
        let Some(after) = option.after() else { return Vec::new() };
        let now = self.now;
        let asleep_since = |c: &crate::model::Cluster| canary::idle_since(c).filter(|t| *t + after <= now);
        let mut resuming = Vec::new();
        let mut asleep = Vec::new();
        let mut soonest = None;
        for (rank, slot) in ranked.iter().map(|&i| &self.slots[i]).enumerate().skip(target) {
            if slot.is_new() || slot.c.installed_at.is_none() {
                continue;
            }
            let resuming_now = slot.power == Some(DesiredPower::Running) && !slot.c.is_running();
            match asleep_since(&slot.c) {
                Some(_) if resuming_now => resuming.push(rank),
                Some(since) if slot.c.power_state == Some(crate::model::PowerState::Hibernating) => {
                    asleep.push((since, rank))
                }
                Some(_) => {}
                // Step 7 hibernates it if it is not already: it is a canary once it has slept long enough.
                None => soonest = earliest(soonest, canary::idle_since(&slot.c).map(|t| t + after)),
            }
        }
        let (open, next_open) = option.window(now);
        let room = option.at_a_time().saturating_sub(resuming.len());
        if open {
            asleep.sort();
            resuming.extend(asleep.iter().take(room).map(|(_, rank)| *rank));
            if asleep.len() <= room {
                self.out.wake = earliest(self.out.wake, soonest);
            }
        } else if !asleep.is_empty() || soonest.is_some() {
            self.out.wake = earliest(self.out.wake, next_open.map(|t| soonest.map_or(t, |s| s.max(t))));
        }
        resuming
    }

    /// Step 8: hibernateAfter never applies to unclaimed pool clusters; a claimed one hibernates that long after
    /// the later of its claim and its last becoming Running (seed 000).
    pub(super) fn hibernate_after(&mut self) -> Vec<Action> {
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
                self.out.wake = earliest(self.out.wake, Some(deadline));
            }
        }
        out
    }

    /// Installs and power transitions past their deadline (installTimeout, seed 002) get a check now; future
    /// deadlines become wake-ups.
    pub(super) fn overdue_transitions(&mut self) -> Vec<Action> {
        let limits = self.snap.pool.spec.power_limits();
        let mut out = Vec::new();
        let mut wake = self.out.wake;
        for slot in self.slots.iter().filter(|s| !s.deleting && !s.is_new() && !s.c.is_broken()) {
            match power::deadline(&slot.c, limits) {
                Some(t) if t <= self.now => out.push(Action::CheckPower { cluster: slot.c.id.clone() }),
                t => wake = earliest(wake, t),
            }
        }
        self.out.wake = wake;
        out
    }
}
