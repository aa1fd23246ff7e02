//! Conditions, as Kubernetes and Hive keep them on a pool and its clusters.

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// Status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The item is in the condition.
    True,
    /// The item is not in the condition.
    False,
    /// It cannot be decided.
    Unknown,
}

/// A condition, Kubernetes-style: `lastTransitionTime` moves only when `status` changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type (`Hibernating`, `Ready`, `Pending`, …).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the item is in the condition.
    pub status: ConditionStatus,
    /// One CamelCase word saying why.
    pub reason: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Timestamp,
}

/// Condition types.
pub mod condition {
    /// Cluster: whether it is hibernating (seed 004).
    pub const HIBERNATING: &str = "Hibernating";
    /// Cluster: whether it is running and ready (seed 004).
    pub const READY: &str = "Ready";
    /// Cluster: provisioning gave up.
    pub const PROVISION_STOPPED: &str = "ProvisionStopped";
    /// Cluster (deleting): the cloud refused to terminate some of its machines; retried with backoff.
    pub const DEPROVISION_FAILED: &str = "DeprovisionFailed";
    /// Cluster: the last provisioning attempt failed; another follows after a backoff (Hive's ProvisionFailed).
    pub const PROVISION_FAILED: &str = "ProvisionFailed";
    /// Pool: clusters keep failing to provision, so new ones wait a growing backoff.
    pub const PROVISIONING_BACKOFF: &str = "ProvisioningBackoff";
    /// Claim: waiting for a cluster.
    pub const PENDING: &str = "Pending";
    /// Pool: every unclaimed cluster matches the current poolVersion.
    pub const ALL_CLUSTERS_CURRENT: &str = "AllClustersCurrent";
    /// Cluster: its readiness check could not reach it (seed 004's Unreachable).
    pub const UNREACHABLE: &str = "Unreachable";
    /// Pool: maxSize leaves room for more clusters.
    pub const CAPACITY_AVAILABLE: &str = "CapacityAvailable";
    /// Pool: the credentials it names (an AWS pool's `roleArn`) were refused; True until a call with them succeeds
    /// (Hive's ClusterDeployment condition of the same name).
    pub const AUTHENTICATION_FAILURE: &str = "AuthenticationFailure";
}

/// Condition reasons, exactly as seed 004 (and seed 002 for the timeouts) name them.
pub mod reason {
    /// Hibernating=False: the cluster is resuming or running; see Ready.
    pub const RESUMING_OR_RUNNING: &str = "ResumingOrRunning";
    /// Hibernating=False: stopping machines.
    pub const STOPPING: &str = "Stopping";
    /// Hibernating=False: waiting for cloud VMs to stop.
    pub const WAITING_FOR_MACHINES_TO_STOP: &str = "WaitingForMachinesToStop";
    /// Hibernating=True.
    pub const HIBERNATING: &str = "Hibernating";
    /// The platform cannot hibernate.
    pub const UNSUPPORTED: &str = "Unsupported";
    /// Stopping failed (actuator error, or seed 002's timeout with a "timed out" message).
    pub const FAILED_TO_STOP: &str = "FailedToStop";
    /// Seed 002: the resume timed out.
    pub const FAILED_TO_START: &str = "FailedToStart";
    /// Hive only.
    pub const SYNC_SETS_NOT_APPLIED: &str = "SyncSetsNotApplied";
    /// Hive only.
    pub const SYNC_SETS_APPLIED: &str = "SyncSetsApplied";
    /// Power state discovery is paused.
    pub const POWER_STATE_PAUSED: &str = "PowerStatePaused";
    /// The cluster is being deleted.
    pub const CLUSTER_DEPLOYMENT_DELETED: &str = "ClusterDeploymentDeleted";
    /// Ready=False: the cluster is stopping or hibernating; see Hibernating.
    pub const STOPPING_OR_HIBERNATING: &str = "StoppingOrHibernating";
    /// Ready=False: listing and starting cloud VMs.
    pub const STARTING_MACHINES: &str = "StartingMachines";
    /// Ready=False: starting cloud VMs failed.
    pub const FAILED_TO_START_MACHINES: &str = "FailedToStartMachines";
    /// Ready=False: waiting for cloud VMs to start.
    pub const WAITING_FOR_MACHINES: &str = "WaitingForMachines";
    /// Ready=False: waiting for nodes to become Ready.
    pub const WAITING_FOR_NODES: &str = "WaitingForNodes";
    /// Hive only.
    pub const PAUSING_FOR_CLUSTER_OPERATORS_TO_SETTLE: &str = "PausingForClusterOperatorsToSettle";
    /// Hive only.
    pub const WAITING_FOR_CLUSTER_OPERATORS: &str = "WaitingForClusterOperators";
    /// Ready=True.
    pub const RUNNING: &str = "Running";
    /// Unreachable=True: the readiness check cannot reach the cluster.
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Unreachable=False: it can again.
    pub const CLUSTER_REACHABLE: &str = "ClusterReachable";
    /// ProvisionStopped=True: the install failed.
    pub const PROVISION_FAILED: &str = "ProvisionFailed";
    /// ProvisionStopped=True: every provisioning attempt the pool allows failed (Hive's reason).
    pub const INSTALL_ATTEMPTS_LIMIT_REACHED: &str = "InstallAttemptsLimitReached";
    /// ProvisionStopped=True: the install outlived the pool's installTimeout.
    pub const INSTALL_TIMED_OUT: &str = "InstallTimedOut";
    /// DeprovisionFailed=True: the cloud refused to terminate machines.
    pub const TERMINATION_REFUSED: &str = "TerminationRefused";
    /// Claim Pending=True: no Running cluster was free.
    pub const NO_CLUSTERS: &str = "NoClusters";
    /// Claim Pending=False: a cluster was assigned.
    pub const CLUSTER_ASSIGNED: &str = "ClusterAssigned";
    /// AuthenticationFailure=True: the cloud refused the pool's credentials.
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    /// AuthenticationFailure=False: a call with them succeeded since.
    pub const AUTHENTICATION_SUCCEEDED: &str = "AuthenticationSucceeded";
}

/// Longest condition message kept (a cloud's error text can be long; items must stay small).
pub const MAX_CONDITION_MESSAGE: usize = 1024;

/// Sets a condition in `conditions`, keeping `lastTransitionTime` when the status is unchanged. A message longer
/// than [`MAX_CONDITION_MESSAGE`] bytes is cut. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let cut;
    let message = if message.len() > MAX_CONDITION_MESSAGE {
        let mut end = MAX_CONDITION_MESSAGE - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        cut = format!("{}…", &message[..end]);
        cut.as_str()
    } else {
        message
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message.to_string();
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status,
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now,
            });
            conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
            true
        }
    }
}

/// The condition of `type_`, if set.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}
