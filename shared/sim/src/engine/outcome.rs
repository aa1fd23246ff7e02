//! The end of a run: what the measured weeks came to, as the report's [`Outcome`].

use std::collections::HashSet;

use apiary_planner::power::{Install, Probe, Readiness, Report};
use apiary_planner::{GoDuration, Timestamp};
use chrono::TimeDelta;

use crate::report::{Lateness, Noticed, Outcome};

use super::*;

impl Simulation<'_> {
    /// What the simulated actuator answers.
    pub(super) fn report(&mut self, id: &str, probe: Probe) -> Report {
        let n = self.setup.platform.machines;
        let state = self.machines.get(id).copied().unwrap_or(Machines::Absent);
        // A start acts on stopped or stopping machines here, a stop on running or starting ones (`call`).
        let all = |ready: bool, acts: bool| Report::Machines {
            not_ready: if ready { 0 } else { n },
            total: n,
            actionable: if acts { n } else { 0 },
        };
        match (probe, state) {
            (Probe::Install, Machines::Absent) => Report::Install(Install::Absent),
            (Probe::Install, Machines::Installing(_)) => Report::Install(Install::UnderWay),
            (Probe::Install, _) => Report::Install(Install::Done),
            (_, Machines::Absent) => Report::Machines { not_ready: 0, total: 0, actionable: 0 },
            (Probe::MachinesRunning, s) => {
                all(s == Machines::Running, matches!(s, Machines::Stopped | Machines::Stopping(_)))
            }
            (Probe::MachinesStopped, s) => {
                all(s == Machines::Stopped, matches!(s, Machines::Running | Machines::Starting(_)))
            }
            (Probe::NodesReady, Machines::Running) if self.approve_certificates(id) => {
                let message = "nodes NotReady: their certificate requests were approved at this look".into();
                Report::Nodes(Readiness::NotReady { message })
            }
            (Probe::NodesReady, Machines::Running) => Report::Nodes(Readiness::Ready),
            (Probe::NodesReady, _) => Report::Nodes(Readiness::NotReady { message: "machines not running".into() }),
            // The simulated clusters are usable once their machines run.
            (Probe::Readiness, Machines::Running) => Report::Ready(Readiness::Ready),
            (Probe::Readiness, _) => Report::Ready(Readiness::NotReady { message: "machines not running".into() }),
        }
    }

    pub(super) fn finish(mut self, end: Timestamp) -> Outcome {
        // The counters at the end close the last minute (what happened at the end itself counted in it).
        self.meter(end);
        let mut minutes = std::mem::take(&mut self.minutes);
        if let Some(last) = minutes.last_mut() {
            *last = self.reading();
        }
        // Claims never served wait until the end: counted, as a lower bound of their wait.
        let measured = self.trace.measured_from();
        self.waits.retain(|(at, _)| *at >= measured);
        let unserved: Vec<(Timestamp, TimeDelta)> = self
            .snap
            .claims
            .iter()
            .filter(|c| c.cluster.is_none() && c.created_at >= measured)
            .map(|c| (c.created_at, end - c.created_at))
            .collect();
        let unserved_count = unserved.len();
        self.waits.extend(unserved);
        self.waits.sort();
        let claimants = self.claimants(end);
        let costs = self.setup.costs;
        let mut outcome = Outcome::new(
            &self.setup.policy,
            &self.trace.name,
            self.trace.arrivals.iter().filter(|a| self.trace.start + a.at >= measured).count(),
            unserved_count,
            self.waits,
            crate::report::Hours {
                spare_running: self.spare_running_h,
                installing: self.installing_h,
                hibernated: self.hibernated_h,
                claimed: self.claimed_h,
            },
            costs,
            self.installs,
            self.broken,
            self.calls,
            self.writes,
            self.reconciles,
            self.samples,
        );
        // Claims wait for a Running cluster; one that waited longer than a resume may take waited on a resume
        // that broke (or on a pool with nothing left to resume).
        let timeout = self.setup.spec.powerstate_transition_to_running_timeout.as_ref().and_then(GoDuration::get);
        self.usage.clusters = self.snap.clusters.len();
        let hours = usize::try_from((end - measured).num_hours()).unwrap_or(0);
        // Each kind's series (a metric each) for the hours they had data; the reaper's every hour (it passes every
        // half hour).
        let docs = crate::bill::Documents::new();
        let series = |doc| apiary_ports::metrics::metric_names(doc).len();
        let [gauges, assigned, resumed, stopped] = self.metric_hours.each_ref().map(HashSet::len);
        self.usage.metric_hours = series(&docs.gauges) * gauges
            + series(&docs.assigned) * assigned
            + series(&docs.resumed) * resumed
            + series(&docs.stopped) * stopped
            + series(&docs.orphans) * hours;
        self.usage.alarm_hours = self.alarm_hours.iter().map(HashSet::len).sum();
        outcome.usage = self.usage;
        outcome.minutes_from = (!minutes.is_empty()).then_some(measured);
        outcome.minutes = minutes;
        let [install, resume, stop, install_waited_on, resume_waited_on, deprovision] = self.late.map(Lateness::of);
        outcome.noticed = Noticed {
            install,
            resume,
            stop,
            resume_waited_on,
            install_waited_on,
            deprovision,
            claim_seen: claimants.seen,
            claim_seen_unhinted: claimants.seen_unhinted,
        };
        outcome.usage.claim_looks = claimants.looks.len();
        outcome.usage.claim_looks_unhinted = claimants.unhinted;
        outcome.usage.claims_made_after_others = claimants.told_at_making.len();
        outcome.made_after_others = claimants.told_at_making;
        outcome.looks = claimants.looks;
        outcome.claims_hit_broken = timeout.map_or(0, |t| outcome.waits.iter().filter(|(_, w)| *w >= t).count());
        outcome
    }
}
