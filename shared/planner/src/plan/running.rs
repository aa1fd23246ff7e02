//! Steps 7 and 8: which unclaimed clusters run (seed 000), hibernateAfter for claimed ones, and installs or
//! power transitions past their deadline.

use crate::model::DesiredPower;
use crate::power;

use super::planner::Planner;
use super::{bump, earliest, Action};

impl Planner<'_> {
    /// Step 7: the oldest `min(runningCount, size) + pending claims` unclaimed, unbroken clusters (installing
    /// included) are kept Running, the rest Hibernating (seed 000). New clusters get theirs at creation; a cluster
    /// whose power management is paused keeps its own and is neither a spare nor a standby.
    pub(super) fn set_power_states(&mut self) -> Vec<Action> {
        let target = self.targets.running + self.pending.len();
        let mut out = Vec::new();
        let candidates = self.slots.iter_mut().filter(|s| s.unassigned() && !s.c.is_broken() && !s.c.power_paused);
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
