//! The event loop: one pool, driven by the real planner and the real power state machine, on a simulated clock
//! and a simulated platform.
//!
//! It stands in for the Lambda functions exactly where they would act: a claim arriving or being released, a
//! machine finishing a transition, the pool's tick coming due, or the pool's own wake-up time all lead to
//! `plan` + `apply` (the reconcile) or to `power::probe` + `power::step` (the power function). The power
//! function's looks are the pool's tick, carried by the planner's own `tick` and `chain` rules: a nudge steps its
//! cluster and starts or brings the tick forward only when it must; a tick looks at the clusters in motion whose
//! look is due. Time moves from event to event; nothing waits. The same trace, platform and seed give the same
//! report.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use chrono::TimeDelta;

use apiary_planner::events::{self, EventType};
use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::tick::Tick;
use apiary_planner::sweep;
use apiary_planner::{Claim, Pool, PoolSpec, PoolStatus, Snapshot, Timestamp};
use apiary_ports::store::{Cond, Item, Key, Write};

use crate::claimant::TickLog;
use crate::report::{Calls, Costs, Meter, Outcome, Sample, Usage};
use crate::rng::Rng;
use crate::trace::Trace;
use crate::units;

mod claims;
mod looks;
mod machines;
mod outcome;
mod reconcile;

/// A duration drawn from a log-normal distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: TimeDelta,
    /// Log-normal shape; 0 always gives the median.
    pub sigma: f64,
}

impl Spread {
    /// A spread around `minutes`.
    pub fn minutes(minutes: f64, sigma: f64) -> Self {
        Self { median: TimeDelta::milliseconds((minutes * 60_000.0) as i64), sigma }
    }

    fn draw(&self, rng: &mut Rng) -> TimeDelta {
        let ms = rng.lognormal(self.median.num_milliseconds() as f64, self.sigma);
        TimeDelta::milliseconds(ms.max(1000.0) as i64)
    }

    /// The value `z` standard deviations above the median (z = 2.33: the 99th percentile).
    pub fn quantile(&self, z: f64) -> TimeDelta {
        TimeDelta::milliseconds((self.median.num_milliseconds() as f64 * (self.sigma * z).exp()) as i64)
    }
}

/// How the simulated cloud behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    /// Machines per cluster.
    pub machines: u32,
    /// Time to install a cluster.
    pub install: Spread,
    /// Time from start to Running.
    pub resume: Spread,
    /// Time from stop to stopped.
    pub stop: Spread,
    /// Time to terminate a cluster's machines.
    pub delete: Spread,
    /// Probability an install fails.
    pub install_failure: f64,
    /// Probability a resume never completes (caught by the pool's resume timeout).
    pub resume_failure: f64,
    /// Added to that per day the cluster has been asleep (certificates, credentials and operators that do not
    /// survive a long hibernation; seed 002).
    pub resume_failure_per_day_asleep: f64,
    /// The kubelets' certificates (seed 004): a resume after they expired waits one look more, for the readiness
    /// check to approve its nodes' certificate requests. `None`: they never expire.
    pub certificates: Option<Certificates>,
}

/// How long kubelet certificates last: `first` from the install (24 hours on OpenShift), `later` once renewed
/// (30 days). A cluster renews them while up once they are past 80 % of their life; one asleep until they expired
/// renews them on resume, through certificate requests the readiness check approves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Certificates {
    /// Their life from the install.
    pub first: TimeDelta,
    /// Their life once renewed.
    pub later: TimeDelta,
}

impl Certificates {
    /// OpenShift's: 24 hours from the install, then 30 days.
    pub fn openshift() -> Self {
        Self { first: TimeDelta::hours(24), later: TimeDelta::days(30) }
    }
}

/// A cluster's kubelets' certificates, as the simulation follows them.
#[derive(Debug, Clone, Copy)]
struct Kubelets {
    issued: Timestamp,
    life: TimeDelta,
    /// Running since (renewing as they near their end); `None` while stopped.
    up_since: Option<Timestamp>,
    /// Resumed after they expired: the next node look approves the requests (and finds the nodes not Ready).
    expired: bool,
}

impl Kubelets {
    /// Renewals while up from `up_since` to `now`: each once past 80 % of the life, before its end.
    fn renew_while_up(&mut self, now: Timestamp, later: TimeDelta) {
        let Some(from) = self.up_since else { return };
        loop {
            let at = (self.issued + self.life * 4 / 5).max(from);
            if at >= self.issued + self.life || at > now {
                break;
            }
            (self.issued, self.life) = (at, later);
        }
    }
}

impl Default for Platform {
    /// An OpenShift-like cluster: ~40 minutes to install, 2–5 minutes to resume (seed 000), 1% of resumes stuck,
    /// OpenShift's kubelet certificates (seed 004).
    fn default() -> Self {
        Self {
            machines: 3,
            install: Spread::minutes(40.0, 0.15),
            resume: Spread::minutes(3.5, 0.3),
            stop: Spread::minutes(2.0, 0.2),
            delete: Spread::minutes(5.0, 0.2),
            install_failure: 0.0,
            resume_failure: 0.01,
            resume_failure_per_day_asleep: 0.0,
            certificates: Some(Certificates::openshift()),
        }
    }
}

/// The longest a delayed message waits (SQS's limit): a look wanted later comes then.
const MAX_DELAY: TimeDelta = TimeDelta::minutes(15);
/// Where `late` keeps the installs and resumes done while a claim waited: after installs, resumes and stops, in
/// that order.
const WAITED_ON: usize = 3;
/// Where `late` keeps the deprovisions: after the installs and resumes waited on.
const DEPROVISIONS: usize = 5;

/// Where `metric_hours` keeps the hours of the pool's gauges, of claims' assignment delays, of resumes' and of
/// stops' durations.
const GAUGES: usize = 0;
const ASSIGNED: usize = 1;
const RESUMED: usize = 2;
const STOPPED: usize = 3;

/// How often the timeouts sweep runs: the template's default `SweepRate`, rate(1 minute).
pub const SWEEP_EVERY: TimeDelta = TimeDelta::minutes(1);

/// How long the pool runs before the trace starts, so it is filled and settled when measuring begins.
pub const WARM_UP: TimeDelta = TimeDelta::hours(2);

/// One simulation's inputs.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Name of the policy, for the report.
    pub policy: String,
    /// The pool spec (its platform is ignored: machines are simulated).
    pub spec: PoolSpec,
    /// runningCount changes over time (the oracle's foresight), from the trace's start.
    pub running_changes: Vec<(TimeDelta, i64)>,
    /// The cloud.
    pub platform: Platform,
    /// Prices.
    pub costs: Costs,
    /// Seed for every draw.
    pub seed: u64,
    /// How often the picture samples the pool.
    pub sample_every: TimeDelta,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Machines {
    /// Not provisioned yet.
    Absent,
    Installing(Timestamp),
    Running,
    /// Starting; `None` never finishes (a stuck resume).
    Starting(Option<Timestamp>),
    Stopping(Timestamp),
    Stopped,
    Terminating,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Arrival(usize),
    SetRunning(i64),
    Release(String),
    MachinesDone(String, Timestamp),
    /// A link of the pool's tick arrives.
    Tick(u64),
    Deprovisioned(String),
    /// A message asks for a reconcile: the pool's creation, or news a reconcile's nudges brought.
    Wake,
    /// The timeouts sweep runs.
    Sweep,
    /// The learning weeks are over: what happened so far is not measured.
    Measure,
}

/// A running simulation.
pub struct Simulation<'t> {
    trace: &'t Trace,
    setup: Setup,
    snap: Snapshot,
    machines: HashMap<String, Machines>,
    events: BinaryHeap<Reverse<(Timestamp, u64, Event)>>,
    seq: u64,
    rng: Rng,
    plan_seed: u64,
    holds: HashMap<String, TimeDelta>,
    /// Each cluster's kubelets' certificates, when the platform's expire.
    kubelets: HashMap<String, Kubelets>,
    /// The pool's tick item: its chain, and each cluster's next look.
    tick: Tick,
    /// Tokens drawn for the tick's links.
    tokens: u64,
    /// Times the live link's message has been received (it carries the chain on while it has receives to spare).
    live_receives: u32,
    /// Transitions whose machines are done and which no look has noticed yet: which kind (install, resume, stop),
    /// when they were done, and whether a claim waited then. The simulation acts on them at once; the pool's tick
    /// looks at them as it would at a cluster still in motion, and the look that notices each is measured.
    noticing: HashMap<String, (usize, Timestamp, bool)>,
    /// The tick item over time, as the claim API reads it for a waiting claim's hint.
    tick_log: TickLog,
    /// Claims that waited for a cluster: when each was made and given its cluster, and when that was readable
    /// (`None` while the cluster given is done but no look has noticed it yet).
    waited: HashMap<String, (Timestamp, Timestamp, Option<Timestamp>)>,
    /// Clusters given to a waiting claim before a look noticed them done: the claim.
    given: HashMap<String, String>,
    /// When the sweep last made a full pass.
    last_full_sweep: Option<Timestamp>,
    /// Where each cluster sits in `snap.clusters`; checked on use and rebuilt when stale.
    index: HashMap<String, usize>,
    // what is measured
    /// Clusters by what their machines do (spare running, installing, hibernated, claimed), as of the last event.
    counts: (usize, usize, usize, usize),
    /// Something changed since `counts` was taken.
    dirty: bool,
    now: Timestamp,
    next_sample: Timestamp,
    samples: Vec<Sample>,
    waits: Vec<(Timestamp, TimeDelta)>,
    spare_running_h: f64,
    installing_h: f64,
    hibernated_h: f64,
    claimed_h: f64,
    installs: usize,
    broken: usize,
    calls: Calls,
    writes: usize,
    reconciles: usize,
    usage: Usage,
    /// The pool's partition as a reconcile's Query weighs it (once measuring: only then are its reads counted).
    partition: units::Partition,
    /// The measured weeks have begun.
    measuring: bool,
    /// The measured hours in which the pool's own metric series got data, as CloudWatch bills them by the hour:
    /// its gauges (each reconcile), a claim's assignment delay, a resume's and a stop's duration.
    metric_hours: [HashSet<i64>; 4],
    /// The hours each of the alarms' series (`metrics::ALARMED`) got data, as `alarms` publishes them.
    alarm_hours: [HashSet<i64>; 3],
    /// Seconds from a transition's machines being done to the power function's next look (install, resume,
    /// stop, then from [`WAITED_ON`] the installs and resumes done while a claim waited, then the deprovisions):
    /// what the look schedule adds before the pool can act on it.
    late: [Vec<f64>; 6],
    /// Claims made since the measured weeks began.
    made: usize,
    /// The table's counters at the start of each measured minute so far.
    minutes: Vec<Meter>,
}

impl<'t> Simulation<'t> {
    /// A simulation of `trace` under `setup`. The pool is created [`WARM_UP`] before the trace starts.
    pub fn new(trace: &'t Trace, setup: Setup) -> Self {
        let start = trace.start - WARM_UP;
        let pool = Pool {
            name: "sim".into(),
            spec: setup.spec.clone(),
            status: PoolStatus::default(),
            next_wake_at: None,
            deletion_requested_at: None,
            created_at: start,
            rev: 0,
            later: Default::default(),
        };
        let rng = Rng::new(setup.seed);
        Self {
            trace,
            snap: Snapshot { pool, clusters: Vec::new(), claims: Vec::new(), leases: Vec::new() },
            machines: HashMap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            rng,
            plan_seed: setup.seed,
            holds: HashMap::new(),
            kubelets: HashMap::new(),
            tick: Tick::default(),
            tokens: 0,
            live_receives: 0,
            noticing: HashMap::new(),
            tick_log: TickLog::default(),
            waited: HashMap::new(),
            given: HashMap::new(),
            last_full_sweep: None,
            index: HashMap::new(),
            counts: (0, 0, 0, 0),
            dirty: false,
            now: start,
            next_sample: trace.measured_from(),
            samples: Vec::new(),
            waits: Vec::new(),
            spare_running_h: 0.0,
            installing_h: 0.0,
            hibernated_h: 0.0,
            claimed_h: 0.0,
            installs: 0,
            broken: 0,
            calls: Calls::default(),
            writes: 0,
            reconciles: 0,
            usage: Usage::default(),
            partition: units::Partition::default(),
            measuring: false,
            metric_hours: Default::default(),
            alarm_hours: Default::default(),
            late: Default::default(),
            made: 0,
            minutes: Vec::new(),
            setup,
        }
    }

    fn at(&mut self, t: Timestamp, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    /// Runs the whole period and reports.
    pub fn run(mut self) -> Outcome {
        let start = self.trace.start;
        let end = start + self.trace.length;
        for (i, a) in self.trace.arrivals.iter().enumerate() {
            self.at(start + a.at, Event::Arrival(i));
        }
        for (offset, n) in self.setup.running_changes.clone() {
            self.at(start + offset, Event::SetRunning(n));
        }
        self.at(start - WARM_UP, Event::Wake);
        self.at(start - WARM_UP + SWEEP_EVERY, Event::Sweep);
        if self.trace.learn > TimeDelta::zero() {
            self.at(self.trace.measured_from(), Event::Measure);
        }
        while let Some(Reverse((t, _, _))) = self.events.peek() {
            let now = *t;
            if now > end {
                break;
            }
            self.meter(now);
            self.advance(now);
            let mut reconcile = false;
            while let Some(Reverse((t, _, _))) = self.events.peek() {
                if *t != now {
                    break;
                }
                let Some(Reverse((_, _, event))) = self.events.pop() else { break };
                // Each event that asks for a reconcile is a message to the reconcile queue.
                let asks = self.handle(event, now);
                self.usage.reconcile_messages += usize::from(asks);
                reconcile |= asks;
            }
            if reconcile {
                self.reconcile(now);
            }
            if self.dirty {
                self.counts = self.count();
                self.dirty = false;
            }
        }
        self.advance(end);
        self.finish(end)
    }

    /// Handles one event; true when the pool needs a reconcile.
    fn handle(&mut self, event: Event, now: Timestamp) -> bool {
        match event {
            Event::Arrival(i) => {
                let name = format!("k{i:05}");
                self.holds.insert(name.clone(), self.trace.arrivals[i].hold);
                self.snap.claims.push(Claim::new(name, "sim", now));
                self.made += 1;
                true
            }
            Event::SetRunning(n) => {
                self.snap.pool.spec.running_count = n;
                self.snap.pool.rev += 1;
                true
            }
            Event::Release(name) => self.release(name, now),
            Event::MachinesDone(id, when) => self.machines_done(id, when, now),
            Event::Tick(token) => {
                // A tick link is a delayed message to the power function; only the live link looks (a stale one
                // ends on arrival, the superseded one clears its record).
                self.usage.power_runs += 1;
                self.usage.ticks += 1;
                match chain::admit(&self.tick, Some(token)) {
                    Admission::Drop => false,
                    Admission::Forget => {
                        self.tick.superseded = None;
                        self.write_tick(now);
                        false
                    }
                    admission @ (Admission::Own | Admission::Nudge) => self.tick_run(admission, now),
                }
            }
            Event::Deprovisioned(id) => self.deprovisioned(id, now),
            Event::Wake => {
                self.usage.news += 1;
                true
            }
            Event::Sweep => self.sweep(now),
            Event::Measure => {
                self.start_measuring();
                false
            }
        }
    }

    /// A claim asked to be released: the claim API writes the claim, and the event that says so, together.
    fn release(&mut self, name: String, now: Timestamp) -> bool {
        let Some(i) = self.snap.claims.iter().position(|c| c.name == name) else { return true };
        let mut next = self.snap.claims[i].clone();
        next.release_requested_at = Some(now);
        next.rev += 1;
        let mut said = events::Event::new(EventType::ClaimReleaseRequested, now, next.rev).claim(&name);
        if let Some(id) = &next.cluster {
            said = said.cluster(id);
        }
        let writes = [Write::Put(Item::Claim(Box::new(next.clone())), Cond::Rev(next.rev - 1)), Write::Append(said)];
        let parts = units::of(&self.snap, &writes);
        self.written(|w| &mut w.claim_api, parts);
        self.snap.claims[i] = next;
        true
    }

    /// A cluster's machines finished a transition at `when`: a look will find them Running or Stopped.
    fn machines_done(&mut self, id: String, when: Timestamp, now: Timestamp) -> bool {
        self.note_lateness(&id, when);
        let next = match self.machines.get(&id) {
            Some(Machines::Installing(t)) | Some(Machines::Starting(Some(t))) if *t == when => Some(Machines::Running),
            Some(Machines::Stopping(t)) if *t == when => Some(Machines::Stopped),
            _ => None,
        };
        match next {
            Some(state) => {
                self.kubelets_up(&id, now);
                self.machines.insert(id.clone(), state);
                self.dirty = true;
                self.at_once(&id, now)
            }
            None => false,
        }
    }

    /// A deleted cluster's machines are gone. The power function deletes the cluster's item with the events of its
    /// removal, together, at its first look after the machines are gone (the tick's next link, for a cluster without
    /// a look of its own recorded); the simulation deletes it at once and measures when that look would have come.
    fn deprovisioned(&mut self, id: String, now: Timestamp) -> bool {
        if let Some(next) = self.tick.due.get(&id).copied().or(self.tick.check.map(|c| c.due)) {
            self.late[DEPROVISIONS].push((next - now).as_seconds_f64().max(0.0));
        }
        self.kubelets.remove(&id);
        if let Some(stored) = self.snap.clusters.iter().find(|c| c.id == id) {
            let mut gone = vec![Write::Delete(Key::Cluster(id.clone()), Cond::Rev(stored.rev))];
            gone.extend(events::of_cluster(stored, None, now).into_iter().map(Write::Append));
            let parts = units::of(&self.snap, &gone);
            self.written(|w| &mut w.deprovisions, parts);
        }
        self.snap.clusters.retain(|c| c.id != id);
        self.snap.leases.retain(|l| l.holder != id);
        self.machines.remove(&id);
        self.tick.due.remove(&id);
        self.noticing.remove(&id);
        self.dirty = true;
        // The power function tells the pool only where the removal frees room it is held to.
        self.snap.pool.removal_is_news()
    }

    /// The timeouts sweep runs: true when it finds the pool due.
    fn sweep(&mut self, now: Timestamp) -> bool {
        self.at(now + SWEEP_EVERY, Event::Sweep);
        self.usage.sweeps += 1;
        let full = sweep::full_due(self.last_full_sweep, now, sweep::FULL_SWEEP_EVERY);
        if full {
            self.last_full_sweep = Some(now);
            self.usage.full_sweeps += 1;
        }
        let due = full || sweep::due(&self.snap.pool, now);
        self.usage.sweep_reconciles += usize::from(due);
        due
    }

    /// The learning weeks are over: nothing before now is measured.
    fn start_measuring(&mut self) {
        self.measuring = true;
        (self.installs, self.broken, self.writes, self.reconciles) = (0, 0, 0, 0);
        self.usage = Usage::default();
        self.late = Default::default();
        self.calls = Calls::default();
        self.made = 0;
        self.minutes = vec![self.reading()];
    }
}
