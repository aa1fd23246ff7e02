//! The simulation's hook: every port call yields (so the invocations in flight interleave between any two of
//! their calls) and, while faults are on, may be killed, fail, lose its answer, or meet a slow, stuck or
//! refusing machine. All of it drawn from one seeded stream, so a seed replays exactly.

use std::collections::BTreeSet;
use std::sync::Mutex;

use apiary_ports::Error;
use apiary_testkit::hook::{Change, Gate, Hook, Op, Transition};
use apiary_testkit::time::SplitMix;
use chrono::TimeDelta;

/// How often each fault strikes while faults are on (probabilities per call, per message or per transition).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Faults {
    /// A port call kills its invocation (the function dies between two calls; its messages come back after the
    /// visibility timeout).
    pub kill: f64,
    /// A call fails without effect: a throttle or a 5xx.
    pub fail: f64,
    /// A state-changing call lands but its answer is lost (it timed out after the service acted).
    pub lost_answer: f64,
    /// A power message is delivered twice.
    pub duplicate: f64,
    /// A message sent is delayed by up to [`Faults::max_delay`] beyond what it asked for.
    pub delay: f64,
    /// Longest extra delay of a delayed message.
    pub max_delay: TimeDelta,
    /// A machine transition takes 3 to 10 times its usual time.
    pub slow: f64,
    /// A machine transition never completes.
    pub stuck: f64,
    /// A machine refuses a start, stop or termination.
    pub refuse: f64,
    /// At each sweep, a machine of a fake cloud gets stuck (a transition that never ends, a guest that never
    /// boots); and, as often, another starts refusing every call. Both last until the faults stop.
    pub harm: f64,
    /// At each sweep, a cluster's item is removed behind Apiary's back (an operator's slip, a restore of an old
    /// backup): its machines are left for the reaper to find.
    pub forget: f64,
    /// At each sweep, a pool's role stops being assumable (its trust changed, its account's region disabled), or
    /// one that was comes back: every cloud call of the pool is refused meanwhile. Off in [`Faults::all`] (it
    /// changes every seed's course, and the seeds already run keep theirs); [`Faults::with_roles_denied`] and
    /// `--deny-roles` turn it on.
    pub deny_role: f64,
}

impl Faults {
    /// No faults at all.
    pub fn none() -> Self {
        Self {
            kill: 0.0,
            fail: 0.0,
            lost_answer: 0.0,
            duplicate: 0.0,
            delay: 0.0,
            max_delay: TimeDelta::zero(),
            slow: 0.0,
            stuck: 0.0,
            refuse: 0.0,
            harm: 0.0,
            forget: 0.0,
            deny_role: 0.0,
        }
    }

    /// Every fault, often enough that each run meets all of them many times.
    pub fn all() -> Self {
        Self {
            kill: 0.01,
            fail: 0.03,
            lost_answer: 0.01,
            duplicate: 0.05,
            delay: 0.05,
            max_delay: TimeDelta::seconds(90),
            slow: 0.05,
            stuck: 0.01,
            refuse: 0.02,
            harm: 0.03,
            forget: 0.004,
            deny_role: 0.0,
        }
    }

    /// [`Faults::all`], and pools' roles denied and given back now and then.
    pub fn with_roles_denied() -> Self {
        Self { deny_role: 0.05, ..Self::all() }
    }
}

/// What the faults did, for the run's report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Invocations killed.
    pub kills: u64,
    /// Calls failed.
    pub failures: u64,
    /// Answers lost after the call landed.
    pub lost_answers: u64,
    /// Messages duplicated.
    pub duplicates: u64,
    /// Messages delayed.
    pub delays: u64,
    /// Transitions slowed.
    pub slow: u64,
    /// Transitions stuck.
    pub stuck: u64,
    /// Changes refused.
    pub refusals: u64,
    /// Cluster items removed behind Apiary's back.
    pub forgotten: u64,
    /// Pools whose role was denied.
    pub roles_denied: u64,
    /// Cloud calls refused for a denied role.
    pub credentials_refused: u64,
}

struct State {
    rng: SplitMix,
    faults: Faults,
    active: bool,
    interleave: bool,
    current: u64,
    killed: BTreeSet<u64>,
    counts: FaultCounts,
    /// Pools whose role is denied (while the faults are on).
    denied: BTreeSet<String>,
}

/// The hook of a simulated world.
pub struct SimHook {
    state: Mutex<State>,
}

impl SimHook {
    /// A hook drawing from `seed`, with `faults` on from the start; `interleave` makes every call yield.
    pub fn new(seed: u64, faults: Faults, interleave: bool) -> Self {
        Self {
            state: Mutex::new(State {
                rng: SplitMix::new(seed ^ 0x5eed_f00d),
                faults,
                active: true,
                interleave,
                current: 0,
                killed: BTreeSet::new(),
                counts: FaultCounts::default(),
                denied: BTreeSet::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turns the faults off (the quiet phase) or back on.
    pub fn set_active(&self, active: bool) {
        self.lock().active = active;
    }

    /// The odds of harming a fake cloud's machine at a sweep: [`Faults::harm`] while faults are on, else none.
    pub fn harm(&self) -> f64 {
        self.while_active(|f| f.harm)
    }

    /// The odds of removing a cluster's item behind Apiary's back at a sweep: [`Faults::forget`] while faults are
    /// on, else none.
    pub fn forget(&self) -> f64 {
        self.while_active(|f| f.forget)
    }

    /// The odds `pick` gives while the faults are on, else none.
    fn while_active(&self, pick: impl Fn(&Faults) -> f64) -> f64 {
        let s = self.lock();
        if s.active {
            pick(&s.faults)
        } else {
            0.0
        }
    }

    /// Counts a cluster item removed behind Apiary's back.
    pub fn forgot(&self) {
        self.lock().counts.forgotten += 1;
    }

    /// The odds of denying a pool's role, or giving it back, at a sweep: [`Faults::deny_role`] while faults are
    /// on, else none.
    pub fn deny_role(&self) -> f64 {
        self.while_active(|f| f.deny_role)
    }

    /// Denies `pool`'s role, or gives it back if it was denied; whether it is denied now.
    pub fn toggle_role(&self, pool: &str) -> bool {
        let mut s = self.lock();
        if s.denied.remove(pool) {
            return false;
        }
        s.denied.insert(pool.to_owned());
        s.counts.roles_denied += 1;
        true
    }

    /// Names the invocation about to be polled: calls made until the next one are its own.
    pub fn enter_invocation(&self, id: u64) {
        self.lock().current = id;
    }

    /// Whether invocation `id` was killed (and forgets it).
    pub fn take_killed(&self, id: u64) -> bool {
        self.lock().killed.remove(&id)
    }

    /// What the faults did so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts.clone()
    }
}

impl SimHook {
    fn extra_delay(&self) -> TimeDelta {
        let mut guard = self.lock();
        let s = &mut *guard;
        if !s.active || !s.rng.chance(s.faults.delay) {
            return TimeDelta::zero();
        }
        s.counts.delays += 1;
        let max = s.faults.max_delay.num_milliseconds().max(1) as u64;
        TimeDelta::milliseconds(s.rng.below(max) as i64)
    }
}

fn throttle(op: Op) -> Error {
    let (name, message) = match op {
        Op::Read | Op::Write => {
            ("dynamodb", "ProvisionedThroughputExceededException: rate of requests exceeds the limit")
        }
        Op::Send => ("sqs", "ServiceUnavailable: the service is unavailable"),
        Op::Schedules => ("scheduler", "ThrottlingException: rate exceeded"),
        Op::Describe | Op::Change | Op::Provision | Op::Terminate => {
            ("ec2", "RequestLimitExceeded: request limit exceeded")
        }
        Op::CloudRead | Op::CloudWrite => ("cloud", "503 Service Unavailable"),
    };
    Error::service(if name == "ec2" { "ec2:Call" } else { "aws:Call" }, message, true)
}

impl Hook for SimHook {
    fn before(&self, op: Op) -> Gate {
        let mut guard = self.lock();
        let s = &mut *guard;
        if s.active {
            if s.rng.chance(s.faults.kill) {
                let id = s.current;
                s.killed.insert(id);
                s.counts.kills += 1;
                return Gate::Kill;
            }
            if s.rng.chance(s.faults.fail) {
                s.counts.failures += 1;
                return Gate::Fail(throttle(op));
            }
        }
        if s.interleave {
            Gate::Yield
        } else {
            Gate::Proceed
        }
    }

    fn after(&self, op: Op) -> Option<Error> {
        let mut guard = self.lock();
        let s = &mut *guard;
        if s.active && op.changes_state() && s.rng.chance(s.faults.lost_answer) {
            s.counts.lost_answers += 1;
            return Some(Error::service(
                "aws:Call",
                "operation timed out after 10s (the request may have landed)",
                true,
            ));
        }
        None
    }

    fn transition(&self, kind: Transition, usual: TimeDelta) -> Option<TimeDelta> {
        let mut guard = self.lock();
        let s = &mut *guard;
        if !s.active {
            return Some(usual);
        }
        // A termination is never stuck forever here: EC2 always finishes terminating.
        if kind != Transition::Terminate && s.rng.chance(s.faults.stuck) {
            s.counts.stuck += 1;
            return None;
        }
        if s.rng.chance(s.faults.slow) {
            s.counts.slow += 1;
            let factor = 3 + s.rng.below(8) as i32;
            return Some(usual * factor);
        }
        Some(usual)
    }

    fn refuses(&self, machine: &str, change: Change) -> Option<String> {
        let mut guard = self.lock();
        let s = &mut *guard;
        if s.active && s.rng.chance(s.faults.refuse) {
            s.counts.refusals += 1;
            return Some(format!("IncorrectInstanceState: {machine} cannot {change:?} now"));
        }
        None
    }

    fn credentials(&self, pool: &str) -> Option<String> {
        let mut s = self.lock();
        if !(s.active && s.denied.contains(pool)) {
            return None;
        }
        s.counts.credentials_refused += 1;
        Some(format!("AccessDenied: not authorized to perform sts:AssumeRole on the role of pool {pool}"))
    }

    fn duplicate(&self) -> bool {
        let mut guard = self.lock();
        let s = &mut *guard;
        if s.active && s.rng.chance(s.faults.duplicate) {
            s.counts.duplicates += 1;
            return true;
        }
        false
    }

    fn send_delay(&self) -> TimeDelta {
        self.extra_delay()
    }
}
