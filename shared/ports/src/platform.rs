//! The `Actuator` and `Provisioner` ports: a cluster's machines on its pool's platform.
//!
//! Machines are found by the cluster's `infraId` (on AWS, the `kubernetes.io/cluster/<infraId> = owned` tag an
//! OpenShift installer also sets). Calls report which machines are not there yet instead of failing as a whole:
//! one failing machine never blocks the others.

use std::collections::BTreeMap;
use std::sync::Arc;

use apiary_planner::machines::MachineState;
use apiary_planner::notify::NotifyHook;
use apiary_planner::power::certificates::CertificateLook;
use apiary_planner::power::{Install, Readiness, Termination};
use apiary_planner::{Cluster, Machine, PoolSpec, Timestamp};
use async_trait::async_trait;

use crate::error::{Error, Result};

/// Machines of one cluster, as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Machines {
    /// Machines found (terminated ones excluded).
    pub total: u32,
    /// Ids of those not yet in the asked-for state.
    pub not_ready: Vec<String>,
    /// How many of those a start (when asked about running) or a stop (when asked about stopped) would act on
    /// now, by [`apiary_planner::machines::MachineState`]'s rules; the others are mid-transition.
    pub actionable: u32,
    /// `(machine id, why)` for each machine the asked-for change can never act on (a stop of a VM with an
    /// ephemeral OS disk): the platform does not support it for this cluster. Filled by `machines_stopped` only.
    pub unsupported: Vec<(String, String)>,
}

impl Machines {
    /// The machines of `states` (id, state) as an answer to "are they in state `want`?", where `acts` says which
    /// the call towards `want` would act on.
    pub fn of<'a>(
        states: impl IntoIterator<Item = (&'a str, MachineState)>,
        want: MachineState,
        acts: fn(MachineState) -> bool,
    ) -> Self {
        let mut m = Machines::default();
        for (id, state) in states {
            m.total += 1;
            if state != want {
                m.not_ready.push(id.to_owned());
                m.actionable += u32::from(acts(state));
            }
        }
        m
    }

    /// The answer to "how does the install stand?" for platforms whose install is done once every machine
    /// runs: none found is [`Install::Absent`], all `running` is [`Install::Done`], else under way.
    pub fn install(&self) -> Install {
        match (self.total, self.not_ready.len()) {
            (0, _) => Install::Absent,
            (_, 0) => Install::Done,
            _ => Install::UnderWay,
        }
    }

    /// One message naming every machine in `unsupported`, if any.
    pub fn unsupported_message(&self) -> Option<String> {
        if self.unsupported.is_empty() {
            return None;
        }
        let detail: Vec<String> = self.unsupported.iter().map(|(id, why)| format!("{id}: {why}")).collect();
        Some(format!("{} machine(s) cannot be stopped: {}", self.unsupported.len(), detail.join("; ")))
    }
}

/// What one look at many clusters of a pool found for one of them ([`Actuator::look_many`]): the answers to the
/// questions the power function asks of a cluster's machines, as the one-cluster calls would give them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// [`Actuator::machines_running`]'s answer.
    pub running: Machines,
    /// [`Actuator::machines_stopped`]'s answer.
    pub stopped: Machines,
    /// [`Provisioner::install_state`]'s answer, when the platform's install is judged by its machines (`None`:
    /// ask the provisioner).
    pub install: Option<Install>,
}

impl Seen {
    /// The answers for a cluster whose machines are `states` (id, state, why it cannot be stopped if it cannot),
    /// on a platform whose install is done once every machine runs.
    pub fn of<'a>(states: impl IntoIterator<Item = (&'a str, MachineState, Option<&'a str>)>) -> Self {
        let states: Vec<_> = states.into_iter().collect();
        let pairs = || states.iter().map(|(id, state, _)| (*id, *state));
        let running = Machines::of(pairs(), MachineState::Running, MachineState::start_acts);
        let mut stopped = Machines::of(pairs(), MachineState::Stopped, MachineState::stop_acts);
        stopped.unsupported = states
            .iter()
            .filter(|(_, state, _)| *state != MachineState::Stopped)
            .filter_map(|(id, _, why)| why.map(|w| ((*id).to_owned(), w.to_owned())))
            .collect();
        let install = Some(running.install());
        Self { running, stopped, install }
    }
}

/// Whether a cluster's nodes are ready, as its platform finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nodes {
    /// Every machine runs and its node is ready.
    Ready,
    /// Every machine runs, some node is not ready yet: which, or what the cluster said of them.
    NotReady(String),
    /// Every machine runs, but the cluster's API could not be reached to read its nodes: why.
    Unreachable(String),
    /// Not every machine runs (one stopped under the resume, or never started): what `machines_running` says.
    Machines(Machines),
}

/// The outcome of a start or stop: which machines the cloud refused, with its message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused {
    /// `(machine id, error)` for each refused machine.
    pub machines: Vec<(String, String)>,
}

impl Refused {
    /// `Ok` when nothing was refused, else one message naming every refused machine.
    pub fn into_result(self) -> std::result::Result<(), String> {
        if self.machines.is_empty() {
            return Ok(());
        }
        let detail: Vec<String> = self.machines.iter().map(|(id, e)| format!("{id}: {e}")).collect();
        Err(format!("{} machine(s) refused: {}", self.machines.len(), detail.join("; ")))
    }
}

/// What the actuator is asked about, with the context it may need.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The pool's name.
    pub pool: &'a str,
    /// The pool's spec (platform, tags).
    pub spec: &'a PoolSpec,
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The current time (a simulated platform derives its machines' state from it).
    pub now: Timestamp,
}

impl Target<'_> {
    /// The provisioning attempt under way: 1, then one more after each failed attempt. Platforms that name what
    /// they create (Azure's deployment, GCP's `requestId`) name it by attempt, so a retry after a failure is a
    /// new request and a retry of the same attempt is the same one.
    pub fn attempt(&self) -> u32 {
        self.cluster.install_failures + 1
    }
}

/// Powers a cluster's machines (seed 004's actuator).
#[async_trait]
pub trait Actuator: Send + Sync {
    /// The machines of each of `clusters` (all of pool `pool`), found in as few calls as the cloud allows, by
    /// cluster id; a cluster with no machines is there with none. `None` when the platform looks at one cluster
    /// at a time (the default): the pool's tick then asks for each cluster alone.
    async fn look_many(
        &self,
        pool: &str,
        spec: &PoolSpec,
        clusters: &[Cluster],
        now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        let _ = (pool, spec, clusters, now);
        Ok(None)
    }
    /// Machines found, and those not running yet.
    async fn machines_running(&self, t: Target<'_>) -> Result<Machines>;
    /// Machines found, and those not stopped yet.
    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines>;
    /// Whether the cluster's nodes are ready (on EC2: every instance passes its status checks), or, when not
    /// every machine runs, which are not.
    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes>;
    /// [`Actuator::nodes_ready`], with what the pool's readiness check did with the nodes' certificate requests
    /// in the same look (seed 004); a platform alone approves none.
    async fn nodes_look(&self, t: Target<'_>) -> Result<(Nodes, CertificateLook)> {
        Ok((self.nodes_ready(t).await?, CertificateLook::default()))
    }
    /// The cluster's machines with their addresses: asked each time the cluster becomes Running, for the claim
    /// that gets it (a public address may change with each start).
    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>>;
    /// Starts every machine not running.
    async fn start_machines(&self, t: Target<'_>) -> Result<Refused>;
    /// Stops every machine not stopped.
    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused>;
    /// Whether the cluster passes its pool's readiness check; only pools with one are asked.
    async fn cluster_ready(&self, t: Target<'_>) -> Result<Readiness> {
        Err(Error::Config(format!("pool {} has a readiness check this deployment cannot run", t.pool)))
    }
}

/// What a readiness check found of a cluster's own nodes ([`ReadinessCheck::nodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesFound {
    /// Whether every node is ready.
    pub readiness: Readiness,
    /// The certificate requests the look approved or left pending.
    pub certificates: CertificateLook,
}

impl NodesFound {
    /// Found `readiness`, with no certificate request looked at.
    pub fn only(readiness: Readiness) -> Self {
        Self { readiness, certificates: CertificateLook::default() }
    }
}

/// Checks that a cluster is usable (a pool's `readiness`).
#[async_trait]
pub trait ReadinessCheck: Send + Sync {
    /// Whether the cluster of `t` passes its pool's check.
    async fn check(&self, t: Target<'_>) -> Result<Readiness>;
    /// Whether the cluster's own nodes are ready, asked once its platform says every machine runs and is
    /// healthy (seed 004's WaitingForNodes), with the certificate requests the look approved or left pending;
    /// `None` when the pool's check does not read the cluster's nodes.
    async fn nodes(&self, t: Target<'_>) -> Result<Option<NodesFound>> {
        let _ = t;
        Ok(None)
    }
}

/// What a provisioning call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provision {
    /// The cloud accepted it; `handle` is what to follow it by at the next [`Provisioner::install_state`], when
    /// the platform needs one (it is kept on the cluster).
    Accepted {
        /// The handle.
        handle: Option<String>,
    },
    /// The cloud refused it: its message.
    Refused(String),
}

/// Creates and removes a cluster's machines.
#[async_trait]
pub trait Provisioner: Send + Sync {
    /// How the cluster's install stands for attempt [`Target::attempt`]: nothing under way, under way, failed, or
    /// done (every machine there and running).
    async fn install_state(&self, t: Target<'_>) -> Result<Install>;
    /// Creates what is missing of the machines, idempotently (keyed by the cluster and the attempt).
    async fn provision(&self, t: Target<'_>) -> Result<Provision>;
    /// Terminates the machines: how many are left, and which the cloud refused to terminate.
    async fn deprovision(&self, t: Target<'_>) -> Result<Termination>;
    /// Every machine on the pool's platform that carries the mark Apiary gives what it makes for pool `pool`,
    /// whatever cluster it was made for: one filtered list (the reaper's look for orphans; `now` signs what needs
    /// it). `None`: this provisioner cannot list what it made, and the reaper has nothing to look at.
    async fn marked(&self, pool: &str, spec: &PoolSpec, now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let _ = (pool, spec, now);
        Ok(None)
    }
}

/// A machine carrying Apiary's mark for a pool, as [`Provisioner::marked`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The infraId of the cluster it was made for (for an installer, which keys what it holds by the cluster's
    /// id, that id).
    pub infra_id: String,
    /// The machine (an instance id, a VM's name, a resource group).
    pub machine: String,
}

/// A cluster of infraId `infra_id` being deleted, as the reaper deprovisions an orphan's machines with the
/// platform's own [`Provisioner::deprovision`]: no provisioning of it is under way or recorded.
pub fn orphan(infra_id: &str, first_seen: Timestamp) -> Cluster {
    let mut c = Cluster::new(infra_id, infra_id, infra_id, first_seen);
    c.deleting = true;
    c
}

/// The idempotency token of a cluster's provisioning request (EC2's RunInstances `ClientToken`, GCP's
/// `requestId`): at most 64 characters, the same for every retry of one cluster's provision, different for
/// every cluster, including a later cluster that happens to have an earlier one's id (the creation time is part
/// of it: a token's old, terminated machines must never come back for a new cluster).
pub fn client_token(pool: &str, cluster: &Cluster) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let created = cluster.created_at.timestamp_nanos_opt().unwrap_or_default().to_string();
    for b in pool.bytes().chain([0]).chain(cluster.id.bytes()).chain([0]).chain(created.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let id = &cluster.id;
    format!("{}-{h:016x}", &id[..id.len().min(47)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_the_same_for_one_cluster_and_differs_for_a_reused_id() {
        let t = |s: i64| chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time");
        let c = Cluster::new("foo-abcde", "foo", "foo-xyz", t(0));
        assert_eq!(client_token("ci", &c), client_token("ci", &c.clone()));
        assert!(client_token("ci", &c).len() <= 64);
        let again = Cluster::new("foo-abcde", "foo", "foo-xyz", t(60));
        assert_ne!(client_token("ci", &c), client_token("ci", &again));
        assert_ne!(client_token("ci", &c), client_token("cd", &c));
    }
}

/// Both roles, for one platform.
pub trait Machinery: Actuator + Provisioner {}
impl<T: Actuator + Provisioner> Machinery for T {}

/// Posts notifications to pools' `notify` webhooks ([`crate::notify`]).
#[async_trait]
pub trait Notifier: Send + Sync {
    /// Posts `body` to `hook` of `pool` once, signed per Standard Webhooks with the hook's key as `id` at
    /// `timestamp` (Unix seconds), within a few seconds: the receiver's status. `Err`: it was not reached in
    /// time, or its key could not be read (the message says which).
    async fn post(&self, pool: &str, hook: &NotifyHook, id: &str, timestamp: i64, body: &[u8]) -> Result<u16>;
}

/// The platforms this process drives, by [`apiary_planner::Platform::kind`], and the external installer, if any.
#[derive(Clone, Default)]
pub struct Platforms {
    by_kind: BTreeMap<&'static str, Arc<dyn Machinery>>,
    installer: Option<Arc<dyn Provisioner>>,
    readiness: Option<Arc<dyn ReadinessCheck>>,
    notifier: Option<Arc<dyn Notifier>>,
}

/// A pool's machinery as its spec composes it: its platform's actuator; the external installer in place of the
/// platform's own provisioning when the pool names one (Hive's split between installing and hibernating: the
/// platform powers the machines of the infraId the installer names); the readiness check when it sets one.
struct Composed {
    platform: Arc<dyn Machinery>,
    installer: Option<Arc<dyn Provisioner>>,
    check: Option<Arc<dyn ReadinessCheck>>,
}

impl Composed {
    fn provisioner(&self) -> &dyn Provisioner {
        match &self.installer {
            Some(installer) => installer.as_ref(),
            None => self.platform.as_ref(),
        }
    }
}

#[async_trait]
impl Actuator for Composed {
    async fn look_many(
        &self,
        pool: &str,
        spec: &PoolSpec,
        clusters: &[Cluster],
        now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        let mut seen = self.platform.look_many(pool, spec, clusters, now).await?;
        if self.installer.is_some() {
            // The installer says how an install stands, not the machines.
            seen.iter_mut().flat_map(|s| s.values_mut()).for_each(|s| s.install = None);
        }
        Ok(seen)
    }
    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        self.platform.machines_running(t).await
    }
    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        self.platform.machines_stopped(t).await
    }
    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        Ok(self.nodes_look(t).await?.0)
    }
    async fn nodes_look(&self, t: Target<'_>) -> Result<(Nodes, CertificateLook)> {
        let nodes = self.platform.nodes_ready(t).await?;
        let Some(check) = self.check.as_ref().filter(|_| nodes == Nodes::Ready) else {
            return Ok((nodes, CertificateLook::default()));
        };
        let Some(found) = check.nodes(t).await? else { return Ok((Nodes::Ready, CertificateLook::default())) };
        let nodes = match found.readiness {
            Readiness::Ready => Nodes::Ready,
            Readiness::NotReady { message } => Nodes::NotReady(message),
            Readiness::Unreachable { message } => Nodes::Unreachable(message),
        };
        Ok((nodes, found.certificates))
    }
    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        self.platform.machine_addresses(t).await
    }
    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        self.platform.start_machines(t).await
    }
    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        self.platform.stop_machines(t).await
    }
    async fn cluster_ready(&self, t: Target<'_>) -> Result<Readiness> {
        match &self.check {
            Some(check) => check.check(t).await,
            None => self.platform.cluster_ready(t).await,
        }
    }
}

#[async_trait]
impl Provisioner for Composed {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        self.provisioner().install_state(t).await
    }
    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        self.provisioner().provision(t).await
    }
    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        self.provisioner().deprovision(t).await
    }
    async fn marked(&self, pool: &str, spec: &PoolSpec, now: Timestamp) -> Result<Option<Vec<Marked>>> {
        self.provisioner().marked(pool, spec, now).await
    }
}

impl Platforms {
    /// No platform yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drives pools whose platform is `kind` with `machinery`.
    pub fn with(mut self, kind: &'static str, machinery: Arc<dyn Machinery>) -> Self {
        self.by_kind.insert(kind, machinery);
        self
    }

    /// Installs and removes clusters of pools that name a webhook provisioner with `installer`.
    pub fn with_installer(mut self, installer: Arc<dyn Provisioner>) -> Self {
        self.installer = Some(installer);
        self
    }

    /// Checks the readiness of clusters of pools that set `readiness` with `check`.
    pub fn with_readiness(mut self, check: Arc<dyn ReadinessCheck>) -> Self {
        self.readiness = Some(check);
        self
    }

    /// Posts pools' notifications with `notifier`.
    pub fn with_notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// What posts pools' notifications; a configuration error when this process has none.
    pub fn notifier(&self) -> Result<Arc<dyn Notifier>> {
        self.notifier.clone().ok_or_else(|| Error::Config("no notifier in this deployment".to_owned()))
    }

    /// The machinery of `spec`: its platform, with the external installer in place of the platform's own
    /// provisioning when the pool names one, and the readiness check when it sets one; a configuration error
    /// when this process cannot drive it.
    pub fn of(&self, spec: &PoolSpec) -> Result<Arc<dyn Machinery>> {
        let kind = spec.platform.kind();
        let platform = self
            .by_kind
            .get(kind)
            .cloned()
            .ok_or_else(|| Error::Config(format!("no actuator for platform {kind} in this deployment")))?;
        let installer = match spec.provisioner.as_ref().and_then(|p| p.webhook.as_ref()) {
            None => None,
            Some(_) => Some(
                self.installer
                    .clone()
                    .ok_or_else(|| Error::Config("no webhook provisioner in this deployment".to_owned()))?,
            ),
        };
        let check = match &spec.readiness {
            None => None,
            Some(_) => Some(
                self.readiness
                    .clone()
                    .ok_or_else(|| Error::Config("no readiness check in this deployment".to_owned()))?,
            ),
        };
        if installer.is_none() && check.is_none() {
            return Ok(platform);
        }
        Ok(Arc::new(Composed { platform, installer, check }))
    }
}
