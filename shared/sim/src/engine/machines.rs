//! The simulated platform: machines that take their drawn time to install, start and stop, kubelets whose
//! certificates expire while they are down, and the calls the power function makes counted.

use apiary_planner::duration::hours;
use apiary_planner::power::{ActuatorCall, Report};
use apiary_planner::Timestamp;
use chrono::TimeDelta;

use crate::report::Sample;

use super::*;

impl Simulation<'_> {
    /// `id`'s machines are done installing or starting at `now`: its kubelets are up, with the certificates an
    /// install gives, or those they had, expired or not.
    pub(super) fn kubelets_up(&mut self, id: &str, now: Timestamp) {
        let Some(c) = self.setup.platform.certificates else { return };
        match self.machines.get(id) {
            Some(Machines::Installing(_)) => {
                let k = Kubelets { issued: now, life: c.first, up_since: Some(now), expired: false };
                self.kubelets.insert(id.to_string(), k);
            }
            Some(Machines::Starting(_)) => {
                if let Some(k) = self.kubelets.get_mut(id) {
                    k.expired = now >= k.issued + k.life;
                    k.up_since = Some(now);
                }
            }
            _ => {}
        }
    }

    /// Whether `id`'s nodes wait on certificate requests at this look, which approves them (the next finds the
    /// nodes Ready): one look more for a resume after its kubelets' certificates expired.
    pub(super) fn approve_certificates(&mut self, id: &str) -> bool {
        let (Some(c), Some(k)) = (self.setup.platform.certificates, self.kubelets.get_mut(id)) else { return false };
        if !k.expired {
            return false;
        }
        let now = self.now;
        *k = Kubelets { issued: now, life: c.later, up_since: Some(now), expired: false };
        self.usage.certificate_resumes += 1;
        true
    }

    /// Makes an actuator call against the simulated machines.
    pub(super) fn call(&mut self, id: &str, call: ActuatorCall, now: Timestamp) -> Report {
        let state = self.machines.get(id).copied().unwrap_or(Machines::Absent);
        let p = self.setup.platform.clone();
        let next = match (call, state) {
            (ActuatorCall::Provision, Machines::Absent) => {
                self.calls.provision += 1;
                if self.rng.chance(p.install_failure) {
                    return Report::CallFailed { message: "simulated install failure".into() };
                }
                let t = now + p.install.draw(&mut self.rng);
                self.at(t, Event::MachinesDone(id.to_string(), t));
                Machines::Installing(t)
            }
            (ActuatorCall::Start, Machines::Stopped | Machines::Stopping(_)) => {
                self.calls.start += 1;
                let asleep = self
                    .position(id)
                    .and_then(|i| apiary_planner::canary::idle_since(&self.snap.clusters[i]))
                    .map_or(0.0, |t| hours(now - t) / 24.0);
                let failure = (p.resume_failure + p.resume_failure_per_day_asleep * asleep).min(1.0);
                if self.rng.chance(failure) {
                    Machines::Starting(None)
                } else {
                    let t = now + p.resume.draw(&mut self.rng);
                    self.at(t, Event::MachinesDone(id.to_string(), t));
                    Machines::Starting(Some(t))
                }
            }
            (ActuatorCall::Stop, Machines::Running | Machines::Starting(_)) => {
                self.calls.stop += 1;
                if let (Some(k), Some(c)) = (self.kubelets.get_mut(id), p.certificates) {
                    k.renew_while_up(now, c.later);
                    k.up_since = None;
                }
                let t = now + p.stop.draw(&mut self.rng);
                self.at(t, Event::MachinesDone(id.to_string(), t));
                Machines::Stopping(t)
            }
            // Already there or on the way: the call is accepted and changes nothing.
            (_, s) => s,
        };
        self.machines.insert(id.to_string(), next);
        self.dirty = true;
        match call {
            ActuatorCall::Provision => Report::Provisioned { handle: None },
            ActuatorCall::Start | ActuatorCall::Stop => Report::CallAccepted,
        }
    }

    /// Counts the clusters by what their machines do.
    pub(super) fn count(&self) -> (usize, usize, usize, usize) {
        let (mut spare, mut installing, mut hibernated, mut claimed) = (0, 0, 0, 0);
        for c in &self.snap.clusters {
            let held = c.claim.is_some() && !c.marked_for_deletion;
            match self.machines.get(&c.id) {
                Some(Machines::Installing(_)) => installing += 1,
                Some(Machines::Running | Machines::Starting(_) | Machines::Stopping(_)) if held => claimed += 1,
                Some(Machines::Running | Machines::Starting(_) | Machines::Stopping(_)) => spare += 1,
                Some(Machines::Stopped) => hibernated += 1,
                _ => {}
            }
        }
        (spare, installing, hibernated, claimed)
    }

    /// Accounts the time since the last event at the counts it left, and samples the picture.
    pub(super) fn advance(&mut self, now: Timestamp) {
        let (spare, installing, hibernated, claimed) = self.counts;
        while self.next_sample <= now {
            self.samples.push(Sample {
                at: self.next_sample,
                running: spare,
                hibernating: hibernated,
                installing,
                claimed,
            });
            self.next_sample += self.setup.sample_every;
        }
        // Only the trace's measured period counts.
        let from = self.now.max(self.trace.measured_from());
        let h = hours((now - from).max(TimeDelta::zero()));
        self.spare_running_h += spare as f64 * h;
        self.installing_h += installing as f64 * h;
        self.hibernated_h += hibernated as f64 * h;
        self.claimed_h += claimed as f64 * h;
        self.now = now;
    }
}
