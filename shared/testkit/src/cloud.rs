//! A cloud in memory with EC2's machine lifecycle, as the `aws` platform's actuator and provisioner.
//!
//! - A cluster's machines are found by its `infraId` (EC2's `kubernetes.io/cluster/<infraId> = owned` tag);
//!   machines shutting down or terminated are not the cluster's any more.
//! - Provisioning launches `machineCount` machines (the `aws` platform's, else one) once per client token
//!   ([`client_token`]): a repeated request, even after the machines were terminated, launches nothing and
//!   answers as the first did, as RunInstances does. An image listed with [`Cloud::refuse_image`] is refused.
//! - Transitions take time: `pending → running`, `stopping → stopped`, `shutting-down → terminated`, each
//!   completing after the hook's duration (or never, when the hook says so). A `stopping` machine cannot be
//!   started, a `pending` one cannot be stopped: the actuator acts only on the machines the planner's
//!   [`MachineState`] rules select, and re-issues on later checks.
//! - A machine's status checks pass [`Timings::status_checks`] after it started running ("nodes ready").
//! - A look at many clusters is one describe ([`Actuator::look_many`]), as EC2 makes it.
//! - The hook may refuse a change per machine; the others proceed.
//! - A machine made [`Cloud::unstoppable`] (an instance-store root volume) is reported by `machines_stopped` as
//!   one the platform cannot stop, and a stop never acts on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use apiary_planner::machines::MachineState;
use apiary_planner::power::{Install, Termination};
use apiary_planner::Machine as Addressed;
use apiary_planner::{Cluster, Platform, PoolSpec, Timestamp};
use apiary_ports::platform::{
    client_token, Actuator, Machines, Marked, Nodes, Provision, Provisioner, Refused, Seen, Target,
};
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use chrono::TimeDelta;

use crate::hook::{enter, leave, Change, Hook, Op, Transition};
use crate::time::Time;

/// How long the cloud usually takes (the hook may change each draw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Launch to running.
    pub launch: TimeDelta,
    /// Start to running.
    pub start: TimeDelta,
    /// Stop to stopped.
    pub stop: TimeDelta,
    /// Terminate to terminated.
    pub terminate: TimeDelta,
    /// Running to passing status checks.
    pub status_checks: TimeDelta,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            launch: TimeDelta::seconds(30),
            start: TimeDelta::seconds(20),
            stop: TimeDelta::seconds(20),
            terminate: TimeDelta::seconds(10),
            status_checks: TimeDelta::seconds(10),
        }
    }
}

/// One machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Its id (`i-…`).
    pub id: String,
    /// The cluster's infraId it is tagged with.
    pub infra_id: String,
    /// The pool it was launched for (`apiary:pool`).
    pub pool: String,
    /// The cluster id it was launched for (`apiary:cluster`).
    pub cluster: String,
    /// Its state.
    pub state: MachineState,
    /// When its transition under way completes: `None` when none is under way, `Some(None)` never (stuck).
    pub until: Option<Option<Timestamp>>,
    /// When it last became running.
    pub running_since: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct State {
    machines: BTreeMap<String, Machine>,
    tokens: BTreeMap<String, Vec<String>>,
    refused_images: BTreeSet<String>,
    /// Pools whose credentials are refused, with the cloud's reason.
    refused_credentials: BTreeMap<String, String>,
    refusing: BTreeSet<(String, Change)>,
    unstoppable: BTreeSet<String>,
    next: u64,
}

/// The cloud.
pub struct Cloud {
    time: Arc<Time>,
    hook: Arc<dyn Hook>,
    state: Mutex<State>,
    timings: Mutex<Timings>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl Cloud {
    /// An empty cloud on `time`, whose calls pass through `hook`.
    pub fn new(time: Arc<Time>, hook: Arc<dyn Hook>) -> Self {
        Self {
            time,
            hook,
            state: Mutex::new(State::default()),
            timings: Mutex::new(Timings::default()),
            calls: Mutex::new(BTreeMap::new()),
        }
    }

    /// Sets how long transitions usually take.
    pub fn set_timings(&self, timings: Timings) {
        *self.timings.lock().unwrap_or_else(|e| e.into_inner()) = timings;
    }

    /// Refuses every provisioning request naming `image` (a launch template or image that does not exist).
    pub fn refuse_image(&self, image: &str) {
        self.lock().refused_images.insert(image.to_owned());
    }

    /// Refuses every call with `pool`'s credentials, for `why` (a role that cannot be assumed), until
    /// [`Cloud::accept_credentials`]. Refused calls reach no machine and count as `assume-refused`.
    pub fn refuse_credentials(&self, pool: &str, why: &str) {
        self.lock().refused_credentials.insert(pool.to_owned(), why.to_owned());
    }

    /// Accepts `pool`'s credentials again.
    pub fn accept_credentials(&self, pool: &str) {
        self.lock().refused_credentials.remove(pool);
    }

    /// `Err` when `pool`'s credentials are refused now, by the test or the hook.
    fn authenticate(&self, pool: &str) -> Result<()> {
        let why = self.lock().refused_credentials.get(pool).cloned().or_else(|| self.hook.credentials(pool));
        match why {
            Some(why) => {
                self.count("assume-refused");
                Err(Error::Credentials(format!("cannot assume the role of pool {pool}: {why}")))
            }
            None => Ok(()),
        }
    }

    /// Makes `machine` refuse every `change` from now on (a termination-protected instance, a broken host).
    pub fn refuse(&self, machine: &str, change: Change) {
        self.lock().refusing.insert((machine.to_owned(), change));
    }

    /// Makes the machines of `infra_id` impossible to stop, as EC2 cannot stop an instance-store instance.
    pub fn unstoppable(&self, infra_id: &str) {
        self.lock().unstoppable.insert(infra_id.to_owned());
    }

    /// Calls of each kind the cloud answered (describes, changes, provisions, terminations), for tests that
    /// count what a function asked.
    pub fn calls(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn count(&self, op: &'static str) {
        *self.calls.lock().unwrap_or_else(|e| e.into_inner()).entry(op).or_default() += 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn timings(&self) -> Timings {
        *self.timings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every machine ever launched, as of now (no hook: for tests and invariant checks).
    pub fn machines(&self) -> Vec<Machine> {
        let now = self.time.now();
        let mut s = self.lock();
        settle(&mut s, now);
        s.machines.values().cloned().collect()
    }

    /// Completes every transition due by now and returns when the next one is due (for a simulation's clock).
    pub fn next_transition(&self) -> Option<Timestamp> {
        let now = self.time.now();
        let mut s = self.lock();
        settle(&mut s, now);
        s.machines.values().filter_map(|m| m.until.flatten()).min()
    }

    /// Sets a machine's state behind Apiary's back (an operator, a cloud failure); no transition under way.
    pub fn force(&self, machine: &str, state: MachineState) {
        if let Some(m) = self.lock().machines.get_mut(machine) {
            m.state = state;
            m.until = None;
        }
    }

    /// The machines of `infra_id` that are still the cluster's (not shutting down or terminated), by id.
    fn cluster(&self, infra_id: &str) -> Vec<Machine> {
        let now = self.time.now();
        let mut s = self.lock();
        settle(&mut s, now);
        s.machines.values().filter(|m| m.infra_id == infra_id && !m.state.is_gone()).cloned().collect()
    }

    fn draw(&self, kind: Transition) -> Option<Timestamp> {
        let t = self.timings();
        let usual = match kind {
            Transition::Launch => t.launch,
            Transition::Start => t.start,
            Transition::Stop => t.stop,
            Transition::Terminate => t.terminate,
        };
        self.hook.transition(kind, usual).map(|d| self.time.now() + d)
    }

    /// Applies `change` to the machines of `infra_id` that `acts` selects; each refusal is reported with its
    /// machine, the others proceed.
    fn change(&self, infra_id: &str, acts: fn(MachineState) -> bool, change: Change) -> Refused {
        let mut refused = Refused::default();
        if change == Change::Stop && self.lock().unstoppable.contains(infra_id) {
            return refused;
        }
        for m in self.cluster(infra_id).into_iter().filter(|m| acts(m.state)) {
            let refusing = self.lock().refusing.contains(&(m.id.clone(), change));
            let why = if refusing {
                Some(format!("OperationNotPermitted: {} refuses to {change:?}", m.id))
            } else {
                self.hook.refuses(&m.id, change)
            };
            if let Some(why) = why {
                refused.machines.push((m.id.clone(), why));
                continue;
            }
            let (state, kind) = match change {
                Change::Start => (MachineState::Pending, Transition::Start),
                Change::Stop => (MachineState::Stopping, Transition::Stop),
                Change::Terminate => (MachineState::ShuttingDown, Transition::Terminate),
            };
            let until = self.draw(kind);
            if let Some(m) = self.lock().machines.get_mut(&m.id) {
                m.state = state;
                m.until = Some(until);
            }
        }
        refused
    }
}

/// Completes the transitions due by `now`.
fn settle(s: &mut State, now: Timestamp) {
    for m in s.machines.values_mut() {
        let Some(Some(at)) = m.until else { continue };
        if at > now {
            continue;
        }
        m.until = None;
        m.state = match m.state {
            MachineState::Pending => {
                m.running_since = Some(at);
                MachineState::Running
            }
            MachineState::Stopping => MachineState::Stopped,
            MachineState::ShuttingDown => MachineState::Terminated,
            other => other,
        };
    }
}

/// Why a machine of an unstoppable cluster cannot be stopped.
const UNSTOPPABLE: &str = "its root volume is an instance store, which cannot be stopped";

fn machines(list: &[Machine], want: MachineState, acts: fn(MachineState) -> bool) -> Machines {
    Machines::of(list.iter().map(|m| (m.id.as_str(), m.state)), want, acts)
}

#[async_trait]
impl Actuator for Cloud {
    async fn look_many(
        &self,
        pool: &str,
        _spec: &PoolSpec,
        clusters: &[Cluster],
        _now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(pool)?;
        self.count("describe");
        let unstoppable = self.lock().unstoppable.clone();
        let seen = clusters
            .iter()
            .map(|c| {
                let list = self.cluster(&c.infra_id);
                let why = unstoppable.contains(&c.infra_id).then_some(UNSTOPPABLE);
                (c.id.clone(), Seen::of(list.iter().map(|m| (m.id.as_str(), m.state, why))))
            })
            .collect();
        leave(self.hook.as_ref(), Op::Describe, Ok(Some(seen)))
    }

    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(t.pool)?;
        self.count("describe");
        let found = machines(&self.cluster(&t.cluster.infra_id), MachineState::Running, MachineState::start_acts);
        leave(self.hook.as_ref(), Op::Describe, Ok(found))
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(t.pool)?;
        self.count("describe");
        let list = self.cluster(&t.cluster.infra_id);
        let mut found = machines(&list, MachineState::Stopped, MachineState::stop_acts);
        if self.lock().unstoppable.contains(&t.cluster.infra_id) {
            found.unsupported = list
                .iter()
                .filter(|m| m.state != MachineState::Stopped)
                .map(|m| (m.id.clone(), UNSTOPPABLE.to_owned()))
                .collect();
        }
        leave(self.hook.as_ref(), Op::Describe, Ok(found))
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(t.pool)?;
        self.count("describe");
        let now = self.time.now();
        let checks = self.timings().status_checks;
        let list = self.cluster(&t.cluster.infra_id);
        let m = machines(&list, MachineState::Running, MachineState::start_acts);
        let nodes = if m.total == 0 || !m.not_ready.is_empty() {
            Nodes::Machines(m)
        } else if list.iter().all(|m| m.running_since.is_some_and(|since| since + checks <= now)) {
            Nodes::Ready
        } else {
            let checking = list.iter().filter(|m| m.running_since.is_none_or(|since| since + checks > now)).count();
            Nodes::NotReady(format!("{checking} of {} instances have not passed their status checks", list.len()))
        };
        leave(self.hook.as_ref(), Op::Describe, Ok(nodes))
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Addressed>> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(t.pool)?;
        self.count("describe");
        // As EC2 gives them: a private address for every machine, from its launch order; a public address (from
        // the documentation range) while it runs.
        let found = self
            .cluster(&t.cluster.infra_id)
            .into_iter()
            .map(|m| {
                let n = u64::from_str_radix(m.id.trim_start_matches("i-"), 16).unwrap_or_default();
                let [.., hi, lo] = n.to_be_bytes();
                Addressed {
                    private_ip: Some(format!("10.0.{hi}.{lo}")),
                    public_ip: (m.state == MachineState::Running).then(|| format!("203.0.113.{lo}")),
                    id: m.id,
                }
            })
            .collect();
        leave(self.hook.as_ref(), Op::Describe, Ok(found))
    }

    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        enter(self.hook.as_ref(), Op::Change).await?;
        self.authenticate(t.pool)?;
        self.count("start");
        let refused = self.change(&t.cluster.infra_id, MachineState::start_acts, Change::Start);
        leave(self.hook.as_ref(), Op::Change, Ok(refused))
    }

    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        enter(self.hook.as_ref(), Op::Change).await?;
        self.authenticate(t.pool)?;
        self.count("stop");
        let refused = self.change(&t.cluster.infra_id, MachineState::stop_acts, Change::Stop);
        leave(self.hook.as_ref(), Op::Change, Ok(refused))
    }
}

#[async_trait]
impl Provisioner for Cloud {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(t.pool)?;
        self.count("describe");
        let found = machines(&self.cluster(&t.cluster.infra_id), MachineState::Running, MachineState::start_acts);
        leave(self.hook.as_ref(), Op::Describe, Ok(found.install()))
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        enter(self.hook.as_ref(), Op::Provision).await?;
        self.authenticate(t.pool)?;
        self.count("provision");
        let (count, image) = match &t.spec.platform {
            Platform::Aws(aws) => (
                u32::try_from(aws.machine_count).unwrap_or(1).max(1),
                aws.launch_template.as_ref().map(|lt| lt.id.clone()).or_else(|| aws.image_id.clone()),
            ),
            _ => (1, None),
        };
        let token = client_token(t.pool, t.cluster);
        let outcome = {
            let mut s = self.lock();
            if let Some(image) = image.filter(|i| s.refused_images.contains(i)) {
                Provision::Refused(format!("InvalidParameterValue: {image} does not exist"))
            } else if s.tokens.contains_key(&token) {
                // Idempotent: the same token launches nothing more, whatever became of its machines.
                Provision::Accepted { handle: None }
            } else {
                let mut ids = vec![];
                for _ in 0..count {
                    s.next += 1;
                    ids.push(format!("i-{:017x}", s.next));
                }
                s.tokens.insert(token, ids.clone());
                drop(s);
                for id in ids {
                    let until = self.draw(Transition::Launch);
                    self.lock().machines.insert(
                        id.clone(),
                        Machine {
                            id,
                            infra_id: t.cluster.infra_id.clone(),
                            pool: t.pool.to_owned(),
                            cluster: t.cluster.id.clone(),
                            state: MachineState::Pending,
                            until: Some(until),
                            running_since: None,
                        },
                    );
                }
                Provision::Accepted { handle: None }
            }
        };
        leave(self.hook.as_ref(), Op::Provision, Ok(outcome))
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        enter(self.hook.as_ref(), Op::Terminate).await?;
        self.authenticate(t.pool)?;
        self.count("terminate");
        let refused = self.change(&t.cluster.infra_id, MachineState::terminate_acts, Change::Terminate);
        let remaining = self.cluster(&t.cluster.infra_id).len() as u32;
        leave(self.hook.as_ref(), Op::Terminate, Ok(Termination { remaining, refused: refused.machines }))
    }

    /// The machines tagged `apiary:pool = pool` that are not gone: one DescribeInstances with a tag filter.
    async fn marked(&self, pool: &str, _spec: &PoolSpec, _now: Timestamp) -> Result<Option<Vec<Marked>>> {
        enter(self.hook.as_ref(), Op::Describe).await?;
        self.authenticate(pool)?;
        self.count("describe");
        let now = self.time.now();
        let marked = {
            let mut s = self.lock();
            settle(&mut s, now);
            s.machines
                .values()
                .filter(|m| m.pool == pool && !m.state.is_gone())
                .map(|m| Marked { infra_id: m.infra_id.clone(), machine: m.id.clone() })
                .collect()
        };
        leave(self.hook.as_ref(), Op::Describe, Ok(Some(marked)))
    }
}
