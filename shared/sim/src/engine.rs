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

use apiary_planner::duration::hours;
use apiary_planner::events::{self, EventType};
use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::tick::{self, Tick};
use apiary_planner::power::{self, ActuatorCall, Install, Probe, Readiness, Report, Termination};
use apiary_planner::sweep;
use apiary_planner::{
    apply_mut, plan, Action, Buckets, Claim, GoDuration, Plan, Pool, PoolSpec, PoolStatus, Profile, Snapshot, Timestamp,
};
use apiary_ports::store::{writes_with_events, Cond, Item, Key, ProfileItem, Write};

use crate::claimant::{self, Claimant, TickLog};
use crate::report::{Calls, Costs, Lateness, Meter, Noticed, Outcome, Sample, Usage, Written};
use crate::rng::Rng;
use crate::trace::Trace;
use crate::units;

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
            Event::Release(name) => {
                let Some(i) = self.snap.claims.iter().position(|c| c.name == name) else { return true };
                // The claim API writes the claim asked to release and the event that says so, together.
                let mut next = self.snap.claims[i].clone();
                next.release_requested_at = Some(now);
                next.rev += 1;
                let mut said = events::Event::new(EventType::ClaimReleaseRequested, now, next.rev).claim(&name);
                if let Some(id) = &next.cluster {
                    said = said.cluster(id);
                }
                let writes =
                    [Write::Put(Item::Claim(Box::new(next.clone())), Cond::Rev(next.rev - 1)), Write::Append(said)];
                let parts = units::of(&self.snap, &writes);
                self.written(|w| &mut w.claim_api, parts);
                self.snap.claims[i] = next;
                true
            }
            Event::MachinesDone(id, when) => {
                self.note_lateness(&id, when);
                let next = match self.machines.get(&id) {
                    Some(Machines::Installing(t)) | Some(Machines::Starting(Some(t))) if *t == when => {
                        Some(Machines::Running)
                    }
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
            Event::Deprovisioned(id) => {
                // The power function deletes the cluster's item with the events of its removal, together, at its
                // first look after the machines are gone (the tick's next link, for a cluster without a look of its
                // own recorded); the simulation deletes it at once and measures when that look would have come.
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
            Event::Wake => {
                self.usage.news += 1;
                true
            }
            Event::Sweep => {
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
            Event::Measure => {
                self.measuring = true;
                (self.installs, self.broken, self.writes, self.reconciles) = (0, 0, 0, 0);
                self.usage = Usage::default();
                self.late = Default::default();
                self.calls = Calls::default();
                self.made = 0;
                self.minutes = vec![self.reading()];
                false
            }
        }
    }

    /// A reconcile wrote the pool item, and with it the profile's own item when its buckets are not what they were
    /// (`before`), as the store writes them.
    fn count_pool_write(&mut self, before: Option<(Buckets, Buckets)>) {
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
    fn count_units(&mut self, plan: &Plan, now: Timestamp) {
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

    /// The reconcile function: plan, apply, carry out.
    fn reconcile(&mut self, now: Timestamp) {
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
    fn note_given(&mut self, made: Timestamp, claim: &str, assign: &Action, now: Timestamp) {
        let Action::AssignClaim { cluster, .. } = assign else { return };
        let readable = if self.noticing.contains_key(cluster) {
            self.given.insert(cluster.clone(), claim.to_string());
            None
        } else {
            Some(now + claimant::NEWS)
        };
        self.waited.insert(claim.to_string(), (made, now, readable));
    }

    /// A nudge of the power function for `id`: it steps the cluster, and makes sure the pool's tick comes soon
    /// enough for the look it wants next (writing the tick item only when it starts or brings the tick forward).
    /// True when it reached a state the pool acts on.
    fn nudge(&mut self, id: &str, now: Timestamp) -> bool {
        self.usage.nudges += 1;
        let (notable, want) = self.steps(id, now);
        let want = want.map(|w| tick::aligned(w, now));
        if let Some(want) = want {
            self.tokens += 1;
            let next = chain::next(&self.tick, Admission::Nudge, Some(want), now, self.tokens);
            if let Some(link) = next.send {
                (self.tick.check, self.tick.superseded) = (next.check, next.superseded);
                self.live_receives = 0;
                self.tick.due.insert(id.to_string(), want);
                self.write_tick(now);
                self.at(link.due, Event::Tick(link.token));
            }
        }
        notable
    }

    /// A step the simulation takes the moment machines finish (a deployed pool takes it at the first look at `id`
    /// after that, which [`Self::noticed`] measures); the tick's record of `id` is left as that look will find it.
    fn at_once(&mut self, id: &str, now: Timestamp) -> bool {
        self.steps(id, now).0
    }

    /// The tick's look at `id` at `now`: if it notices a transition done since the last look, how long after it
    /// came. (A nudge may look sooner; the simulation, acting at once, makes some nudges at the very moment machines
    /// are done that a deployed pool makes only after the tick noticed them, so only the tick's looks count.)
    /// True when it noticed an install or a resume done: a cluster come up ([`Tick::up`]).
    fn noticed(&mut self, id: &str, now: Timestamp) -> bool {
        let Some((kind, done, claim_waiting)) = self.noticing.remove(id) else { return false };
        let late = (now - done).as_seconds_f64();
        self.late[kind].push(late);
        if claim_waiting {
            self.late[kind + WAITED_ON].push(late);
        }
        // A claim given it meanwhile is readable Ready once the reconcile this look asks for has run.
        if let Some(claim) = self.given.remove(id) {
            if let Some(w) = self.waited.get_mut(&claim) {
                w.2 = Some(now + claimant::NEWS);
            }
        }
        kind < 2
    }

    /// The pool's tick, admitted: looks at the clusters in motion whose look is due, records their next looks
    /// and sends the next link. True when a look reached a state the pool acts on.
    fn tick_run(&mut self, admission: Admission, now: Timestamp) -> bool {
        let moving = self.moving();
        let mut looked = Vec::new();
        let (mut notable, mut came_up) = (false, false);
        let hurry = tick::hurried(admission, self.snap.pool.status.pending_claims);
        for id in tick::looks(&self.tick, &moving, now, hurry) {
            self.usage.tick_looks += 1;
            came_up |= self.noticed(&id, now);
            let (n, want) = self.steps(&id, now);
            notable |= n;
            looked.push((id, want.map(|w| tick::aligned(w, now))));
        }
        let moving = self.moving();
        self.tick.due = tick::after(&self.tick, &moving, &looked);
        let want = tick::next_due(&self.tick.due, &moving, now).map(|at| at.min(now + MAX_DELAY));
        // The live link goes on in its own message, with its own token, while the message has receives to spare;
        // else in a new one.
        let receives = self.live_receives + 1;
        let live = self.tick.check.map(|c| c.token);
        let back = chain::carries_on(admission, receives);
        let token = match live.filter(|_| back) {
            Some(token) => token,
            None => {
                self.tokens += 1;
                self.tokens
            }
        };
        let next = chain::next(&self.tick, admission, want, now, token);
        if admission == Admission::Own && next.send.is_some() {
            if back {
                self.usage.tick_returns += 1;
            } else {
                self.usage.tick_sends += 1;
            }
        }
        self.live_receives = match next.check.map(|c| c.token) {
            t if t != live => 0,
            _ if admission == Admission::Own => receives,
            _ => self.live_receives,
        };
        (self.tick.check, self.tick.superseded) = (next.check, next.superseded);
        self.tick.up = tick::up(&self.tick, came_up, now);
        self.write_tick(now);
        if let Some(link) = next.send {
            self.at(link.due, Event::Tick(link.token));
        }
        notable
    }

    /// The reconcile's gauges line as the stack's default `Monitoring` (`alarms`) writes it: only when some value
    /// in it could fire an alarm, each such series getting data in the hour of `now`.
    fn alarm_gauges(&mut self, status: &apiary_planner::PoolStatus, now: Timestamp) {
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

    /// The pool's metric series `which` got data at `now`.
    fn metered(&mut self, which: usize, now: Timestamp) {
        if self.measuring {
            self.metric_hours[which].insert((now - self.trace.measured_from()).num_hours());
        }
    }

    /// The clusters the pool's index says are in motion: those the power function has work on (deleting ones
    /// included), and those whose done transition no look has noticed yet (to the table, still in motion).
    fn moving(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .snap
            .clusters
            .iter()
            .filter(|c| power::in_progress(c) || self.noticing.contains_key(&c.id))
            .map(|c| c.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Counts the write units `parts` sent by the source `by` picks.
    fn written(&mut self, by: impl FnOnce(&mut Written) -> &mut units::Parts, parts: units::Parts) {
        self.usage.write_units += parts.total();
        *by(&mut self.usage.written) += parts;
    }

    /// Counts a write of the tick item at `now`: one conditional put, a unit per KB of it.
    fn write_tick(&mut self, now: Timestamp) {
        self.tick_log.write(now, &self.tick);
        let bytes = units::size(&Item::Tick(Box::new(self.tick.clone())));
        self.usage.tick_writes += 1;
        self.usage.tick_write_units += units::kb(bytes);
    }

    /// The steps of one look at `id`: whether it reached a state the pool acts on, and when it wants its next
    /// look. The intent before each call and the outcome after it are counted as table writes.
    fn steps(&mut self, id: &str, now: Timestamp) -> (bool, Option<Timestamp>) {
        if let Some(deleting) = self.position(id).map(|i| &self.snap.clusters[i]).filter(|c| c.deleting) {
            // A look at a deleting cluster asks the cloud to terminate its machines. They are still going: the
            // simulation deletes the item the moment they are gone (`Event::Deprovisioned`).
            let going = Termination { remaining: 1, refused: vec![] };
            let step = power::deprovision_step(deleting, &going, now);
            return (false, step.recheck_after.map(|d| now + d.min(MAX_DELAY)));
        }
        let timeouts = self.snap.pool.power_limits();
        let mut notable = false;
        for _ in 0..4 {
            let Some(idx) = self.position(id) else { break };
            let Some(probe) = power::probe(&self.snap.clusters[idx]) else { break };
            let report = self.report(id, probe);
            let before = &self.snap.clusters[idx];
            let mut step = power::step(before, &report, now, timeouts);
            let mut intent = None;
            if let Some(call) = step.call {
                // The intent is written before the call, with the events of what it changed.
                self.writes += 1;
                let parts = cluster_write_units(before, &step.cluster, now);
                self.written(|w| &mut w.power_intents, parts);
                intent = Some(step.cluster.clone());
                let outcome = self.call(id, call, now);
                let (changed, wakes) = (step.changed, step.wakes_pool);
                step = power::step(&step.cluster, &outcome, now, timeouts);
                step.changed |= changed;
                step.wakes_pool |= wakes;
            }
            notable |= step.wakes_pool;
            let before = &self.snap.clusters[idx];
            let mut after = step.cluster;
            if step.changed {
                self.dirty = true;
                after.rev = before.rev + 1;
                self.writes += 1;
                let parts = cluster_write_units(intent.as_ref().unwrap_or(before), &after, now);
                if after.is_broken() && !before.is_broken() {
                    self.broken += 1;
                }
                let timed = apiary_ports::metrics::power_transition("sim", "sim", before, &after, now);
                self.written(|w| &mut w.power_outcomes, parts);
                match timed.as_ref().and_then(|doc| doc["Transition"].as_str()) {
                    Some("Resume") => self.metered(RESUMED, now),
                    Some(_) => self.metered(STOPPED, now),
                    None => {}
                }
                self.snap.clusters[idx] = after;
            }
            match step.recheck_after {
                Some(d) if d <= TimeDelta::zero() => continue,
                Some(d) => return (notable, Some(now + d.min(MAX_DELAY))),
                None => return (notable, None),
            }
        }
        // The step budget ran out: come back after the short poll.
        let more = self.position(id).is_some_and(|i| power::in_progress(&self.snap.clusters[i]));
        (notable, more.then(|| now + power::POLL))
    }

    /// Notes that `id`'s machines finished their transition at `done`: the power function's next look at it
    /// notices it ([`Self::noticed`]; the simulation acts on machines at once, a deployed pool at that look).
    fn note_lateness(&mut self, id: &str, done: Timestamp) {
        let kind = match self.machines.get(id) {
            Some(Machines::Installing(t)) if *t == done => 0,
            Some(Machines::Starting(Some(t))) if *t == done => 1,
            Some(Machines::Stopping(t)) if *t == done => 2,
            _ => return,
        };
        let claim_waiting =
            kind < 2 && self.snap.claims.iter().any(|c| c.cluster.is_none() && c.release_requested_at.is_none());
        self.noticing.insert(id.to_string(), (kind, done, claim_waiting));
    }

    /// The index of cluster `id` in the snapshot.
    fn position(&mut self, id: &str) -> Option<usize> {
        if let Some(&i) = self.index.get(id) {
            if self.snap.clusters.get(i).is_some_and(|c| c.id == id) {
                return Some(i);
            }
        }
        self.index = self.snap.clusters.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect();
        self.index.get(id).copied()
    }

    /// What the simulated actuator answers.
    fn report(&mut self, id: &str, probe: Probe) -> Report {
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

    /// `id`'s machines are done installing or starting at `now`: its kubelets are up, with the certificates an
    /// install gives, or those they had, expired or not.
    fn kubelets_up(&mut self, id: &str, now: Timestamp) {
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
    fn approve_certificates(&mut self, id: &str) -> bool {
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
    fn call(&mut self, id: &str, call: ActuatorCall, now: Timestamp) -> Report {
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
    fn count(&self) -> (usize, usize, usize, usize) {
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

    /// Reads the table's counters at the start of each measured minute up to the one `now` is in, before
    /// anything happens at `now`.
    fn meter(&mut self, now: Timestamp) {
        let from = self.trace.measured_from();
        if now < from {
            return;
        }
        let minute = usize::try_from((now - from).num_minutes()).unwrap_or(0);
        while self.minutes.len() <= minute {
            let reading = self.reading();
            self.minutes.push(reading);
        }
    }

    /// The counters as they stand.
    fn reading(&self) -> Meter {
        let u = &self.usage;
        let all = u.written.total();
        Meter {
            table_writes: all.items + all.entries + all.events + u.tick_write_units,
            index_writes: all.copies,
            query_units: u.query_units,
            claims: self.made,
            nudges: u.nudges,
            ticks: u.ticks,
            looks: u.tick_looks,
        }
    }

    /// Accounts the time since the last event at the counts it left, and samples the picture.
    fn advance(&mut self, now: Timestamp) {
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

    /// The looks of the measured claims that waited, each claimant following the claim API's hints and, for
    /// comparison, on its own gaps alone; how long after being readable Ready each saw its claim so.
    fn claimants(&self, end: Timestamp) -> Claimants {
        let measured = self.trace.measured_from();
        // Each waiting claim: when made, and when readable Ready (a cluster given but never noticed: when given).
        let mut claims: Vec<(Timestamp, Option<Timestamp>)> = self
            .waited
            .values()
            .filter(|(made, ..)| *made >= measured)
            .map(|(made, given, ready)| (*made, Some(ready.unwrap_or(*given + claimant::NEWS))))
            .collect();
        claims.extend(
            self.snap
                .claims
                .iter()
                .filter(|c| c.cluster.is_none() && c.created_at >= measured)
                .map(|c| (c.created_at, None)),
        );
        claims.sort();
        let (mut seen, mut seen_unhinted) = (Vec::new(), Vec::new());
        let mut c = Claimants::default();
        // Claims made a reconcile's time before this one (so counted waiting) are readable Ready by then at the
        // latest: while that is later, older claims still wait for the tick.
        let (mut counted, mut waiting_until) = (0, None);
        for (i, &(made, ready)) in claims.iter().enumerate() {
            while counted < i && claims[counted].0 + claimant::SEEN <= made {
                waiting_until = waiting_until.max(Some(claims[counted].1.unwrap_or(end)));
                counted += 1;
            }
            let after_others = waiting_until.is_some_and(|until| until > made);
            if after_others {
                c.told_at_making.push(made);
            }
            let told = claimant::looks(made, ready, end, &self.tick_log, Claimant::Told { after_others });
            let own = claimant::looks(made, ready, end, &self.tick_log, Claimant::Own);
            if let Some(ready) = ready.filter(|r| *r <= end) {
                seen.push((told.seen - ready).as_seconds_f64());
                seen_unhinted.push((own.seen - ready).as_seconds_f64());
            }
            c.unhinted += own.at.len();
            c.looks.extend(told.at);
        }
        c.looks.sort();
        (c.seen, c.seen_unhinted) = (Lateness::of(seen), Lateness::of(seen_unhinted));
        c
    }

    fn finish(mut self, end: Timestamp) -> Outcome {
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

/// The claimants of the claims that waited ([`Simulation::claimants`]).
#[derive(Debug, Default)]
struct Claimants {
    /// Each look, following the claim API's hints, in order.
    looks: Vec<Timestamp>,
    /// How many looks they would have taken on their own gaps alone.
    unhinted: usize,
    /// When each claim made while older ones waited was made: its making read the tick item too.
    told_at_making: Vec<Timestamp>,
    /// From readable Ready to seen, following the hints.
    seen: Lateness,
    /// The same on their own gaps alone.
    seen_unhinted: Lateness,
}

/// The buckets of `pool`'s forecast profile, if it has one.
fn profile_buckets(pool: &Pool) -> Option<(Buckets, Buckets)> {
    pool.status.profile().map(|p| (p.mean.clone(), p.spread.clone()))
}

/// The write units of the power function's write of cluster `stored` as `written` (`store::cluster_change`): its
/// item, with the events told in its transaction, then each event of its progress alone.
fn cluster_write_units(
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
