//! A pool's clusters: their power, their machines, and what the power function is doing with them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::conditions::{condition, find_condition, Condition};
use super::Timestamp;

/// The power state a cluster's spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DesiredPower {
    /// All machines running.
    Running,
    /// All machines stopped.
    Hibernating,
}

/// A cluster's observed power state, named exactly as seed 004 names `ClusterPowerState`.
///
/// Apiary drives `StartingMachines → WaitingForMachines → WaitingForNodes → Running` and
/// `Stopping → WaitingForMachinesToStop → Hibernating`, with `FailedToStartMachines` / `FailedToStop` on
/// actuator errors. The remaining seed states are kept so stored items written by other tools read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PowerState {
    /// All machines are running.
    Running,
    /// The machines are stopped.
    Hibernating,
    /// Starting cloud VMs failed.
    FailedToStartMachines,
    /// Stopping machines for hibernation failed.
    FailedToStop,
    /// SyncSets have not been applied yet (Hive only).
    SyncSetsNotApplied,
    /// Listing and starting cloud VMs.
    StartingMachines,
    /// Transitioning from Running to Hibernating.
    Stopping,
    /// Waiting for cloud VMs to stop.
    WaitingForMachinesToStop,
    /// Waiting for cloud VMs to start.
    WaitingForMachines,
    /// Waiting for nodes to become Ready.
    WaitingForNodes,
    /// Pausing for ClusterOperators to settle (Hive only).
    PausingForClusterOperatorsToSettle,
    /// Waiting for ClusterOperators (Hive only).
    WaitingForClusterOperators,
    /// The machines' state cannot be discovered.
    Unknown,
}

impl PowerState {
    /// States on the way to Running (where a resume timeout applies).
    pub fn is_resuming(self) -> bool {
        matches!(
            self,
            Self::StartingMachines
                | Self::WaitingForMachines
                | Self::WaitingForNodes
                | Self::FailedToStartMachines
                | Self::PausingForClusterOperatorsToSettle
                | Self::WaitingForClusterOperators
        )
    }

    /// States on the way to Hibernating (where a hibernate timeout applies).
    pub fn is_stopping(self) -> bool {
        matches!(self, Self::Stopping | Self::WaitingForMachinesToStop | Self::FailedToStop)
    }
}

/// One of a cluster's machines, as its platform names it, with its addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The platform's id (an EC2 instance id, a Compute Engine or Azure VM name, a vSphere VM id).
    pub id: String,
    /// Its private address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_ip: Option<String>,
    /// Its public address, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_ip: Option<String>,
}

/// One cluster of a pool (`CLUSTER#<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Unique id within the pool: `<name>-<5 chars>`.
    pub id: String,
    /// The cluster's name (the inventory name, or the id).
    pub cluster_name: String,
    /// Infrastructure id: machines are tagged `kubernetes.io/cluster/<infraId>=owned`.
    pub infra_id: String,
    /// The poolVersion the cluster was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_version: Option<String>,
    /// The release it was installed from (the pool's `release` when it was made); none when the pool named none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// When the cluster was created.
    pub created_at: Timestamp,
    /// When installation completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_at: Option<Timestamp>,
    /// Installation gave up: the cluster is broken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provision_stopped: bool,
    /// The claim holding the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// When it was claimed; never changes once set (seed 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<Timestamp>,
    /// The power state asked for; unset while nobody has decided (seed 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_power_state: Option<DesiredPower>,
    /// The observed power state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// When the power transition under way began; timeouts count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_started_at: Option<Timestamp>,
    /// When the cluster last became Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<Timestamp>,
    /// How long the last resume took, from start to Running; the adaptive running count learns from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume_seconds: Option<u32>,
    /// How long the last stop took, from start to Hibernating; the pool's pace learns from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop_seconds: Option<u32>,
    /// When a power transition timed out (seed 002): the cluster is broken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<Timestamp>,
    /// Hibernating, Ready and ProvisionStopped conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Released by its claim: delete within budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marked_for_deletion: bool,
    /// Deprovisioning has started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// When deprovisioning started: its looks grow sparser as it ages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleting_since: Option<Timestamp>,
    /// What an external installer said of the cluster it made (its API and console URLs, the ARN of the secret
    /// holding its kubeconfig, …): never a secret itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// The parameters of the inventory entry it was made from (`inventory.clusterDeployments[].parameters`): sent
    /// to the installer, and compared with the entry's now (a changed entry replaces it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// The cluster's machines and their addresses, as its platform found them when it last became Running (a
    /// public address may change with each resume).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<Machine>,
    /// An admin paused power management of this cluster (seed 004's PowerStatePaused): Apiary neither starts nor
    /// stops it, no power timeout runs, and the pool does not assign it, until it is unpaused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub power_paused: bool,
    /// Failed provisioning attempts so far.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub install_failures: u32,
    /// Termination attempts the cloud refused so far (while deleting).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub deprovision_failures: u32,
    /// What the platform answered the current provisioning attempt with, to follow it by (vSphere's clone
    /// tasks); opaque to the planner, dropped once the cluster is installed or the attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provision_ref: Option<String>,
    /// After a failed actuator call (provision, start, stop, terminate): not retried before then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
    /// The actuator call an invocation recorded it is making (the power module's `fenced_until`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_call: Option<PendingCall>,
    /// What the readiness check did with the nodes' certificate requests since the last resume began (seed 004).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_certificates: Option<crate::power::certificates::NodeCertificates>,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
    /// Fields of a later release, kept as read ([`super::Later`]).
    #[serde(flatten, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub later: super::Later,
}

pub(super) fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// An actuator call under way: the invocation making it recorded it before calling, so that nobody else acts on
/// the cluster's machines (or declares them Running) until its outcome is written or the fence passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The call.
    pub call: ActuatorCall,
    /// When it was recorded.
    pub at: Timestamp,
}

/// One link of a pool's tick chain: the token its power message carries and when it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recheck {
    /// The token (drawn fresh for each link, never reused).
    pub token: u64,
    /// When the message is due.
    pub due: Timestamp,
}

impl Cluster {
    /// A new, uninstalled cluster.
    pub fn new(
        id: impl Into<String>,
        cluster_name: impl Into<String>,
        infra_id: impl Into<String>,
        created_at: Timestamp,
    ) -> Self {
        Self {
            id: id.into(),
            cluster_name: cluster_name.into(),
            infra_id: infra_id.into(),
            pool_version: None,
            release: None,
            created_at,
            installed_at: None,
            provision_stopped: false,
            claim: None,
            claimed_at: None,
            spec_power_state: None,
            power_state: None,
            transition_started_at: None,
            running_since: None,
            last_resume_seconds: None,
            last_stop_seconds: None,
            broken_at: None,
            conditions: Vec::new(),
            marked_for_deletion: false,
            deleting: false,
            deleting_since: None,
            power_paused: false,
            outputs: BTreeMap::new(),
            parameters: BTreeMap::new(),
            machines: Vec::new(),
            install_failures: 0,
            deprovision_failures: 0,
            provision_ref: None,
            retry_at: None,
            pending_call: None,
            node_certificates: None,
            rev: 0,
            later: Default::default(),
        }
    }

    /// Broken: provisioning stopped, or a power transition timed out (seed 002).
    pub fn is_broken(&self) -> bool {
        self.provision_stopped || self.broken_at.is_some()
    }

    /// Why a broken cluster is broken: the reason of its `ProvisionStopped` condition (provisioning gave up), or
    /// of its `Hibernating` condition (a power transition timed out: FailedToStart, FailedToStop). `None` when it
    /// is not broken.
    pub fn broken_reason(&self) -> Option<&str> {
        let type_ = if self.provision_stopped {
            condition::PROVISION_STOPPED
        } else if self.broken_at.is_some() {
            condition::HIBERNATING
        } else {
            return None;
        };
        Some(find_condition(&self.conditions, type_).map_or("Broken", |c| c.reason.as_str()))
    }

    /// Installed and observed Running: the only clusters a claim may get (seed 002).
    pub fn is_running(&self) -> bool {
        self.installed_at.is_some() && self.power_state == Some(PowerState::Running)
    }

    /// Ready to serve a claim as far as the cluster itself can tell: not broken, installed and Running, its power
    /// not paused by an admin (seed 004). The reconcile's classification calls an unclaimed cluster that passes
    /// this assignable.
    pub fn can_serve(&self) -> bool {
        !self.is_broken() && self.is_running() && !self.power_paused
    }

    /// A spare a claim may take now: unclaimed, not on its way out (released, deleting), and [`Self::can_serve`].
    /// The pool's sparse index of spares holds exactly the clusters for which this is true; the claim API still
    /// asks [`PoolSpec::may_assign`](super::PoolSpec::may_assign) of the one it picks, which adds what only the
    /// pool's spec knows.
    pub fn is_assignable(&self) -> bool {
        self.claim.is_none() && !self.marked_for_deletion && !self.deleting && self.can_serve()
    }
}

/// A call the shell must make through the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActuatorCall {
    /// Create the cluster's machines (idempotent: keyed by the cluster).
    Provision,
    /// Start the machines.
    Start,
    /// Stop the machines.
    Stop,
}
