//! The `Actuator` and `Provisioner` ports: a cluster's machines on its pool's platform.
//!
//! Machines are found by the cluster's `infraId` (on AWS, the `kubernetes.io/cluster/<infraId> = owned` tag an
//! OpenShift installer also sets). Calls report which machines are not there yet instead of failing as a whole:
//! one failing machine never blocks the others.

use std::collections::BTreeMap;
use std::sync::Arc;

use apiary_planner::{Cluster, PoolSpec, Timestamp};
use async_trait::async_trait;

use crate::error::{Error, Result};

/// Machines of one cluster, as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Machines {
    /// Machines found (terminated ones excluded).
    pub total: u32,
    /// Ids of those not yet in the asked-for state.
    pub not_ready: Vec<String>,
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

/// Powers a cluster's machines (seed 004's actuator).
#[async_trait]
pub trait Actuator: Send + Sync {
    /// Machines found, and those not running yet.
    async fn machines_running(&self, t: Target<'_>) -> Result<Machines>;
    /// Machines found, and those not stopped yet.
    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines>;
    /// Whether the cluster's nodes are ready (on EC2: every instance passes its status checks).
    async fn nodes_ready(&self, t: Target<'_>) -> Result<bool>;
    /// Starts every machine not running.
    async fn start_machines(&self, t: Target<'_>) -> Result<Refused>;
    /// Stops every machine not stopped.
    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused>;
}

/// Creates and removes a cluster's machines.
#[async_trait]
pub trait Provisioner: Send + Sync {
    /// Creates the machines, idempotently (keyed by the cluster id). `Err(message)` when the cloud refused.
    async fn provision(&self, t: Target<'_>) -> Result<std::result::Result<(), String>>;
    /// Terminates the machines; `true` once none is left.
    async fn deprovision(&self, t: Target<'_>) -> Result<bool>;
}

/// The idempotency token of a cluster's provisioning request (EC2's RunInstances `ClientToken`, GCP's
/// `requestId`): at most 64 characters, the same for every retry of one cluster's provision, different for
/// every cluster.
pub fn client_token(pool: &str, cluster: &Cluster) -> String {
    let id = &cluster.id;
    let token = format!("{pool}/{id}");
    if token.len() <= 64 {
        return token;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in token.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{h:016x}", &id[..id.len().min(47)])
}

/// Both roles, for one platform.
pub trait Machinery: Actuator + Provisioner {}
impl<T: Actuator + Provisioner> Machinery for T {}

/// The platforms this process drives, by [`apiary_planner::Platform::kind`].
#[derive(Clone, Default)]
pub struct Platforms {
    by_kind: BTreeMap<&'static str, Arc<dyn Machinery>>,
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

    /// The platform of `spec`; a configuration error when this process cannot drive it.
    pub fn of(&self, spec: &PoolSpec) -> Result<&dyn Machinery> {
        let kind = spec.platform.kind();
        self.by_kind
            .get(kind)
            .map(|m| m.as_ref())
            .ok_or_else(|| Error::Config(format!("no actuator for platform {kind} in this deployment")))
    }
}
