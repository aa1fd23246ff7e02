//! The power state machine (seed 004) with seed 002's timeouts, as a pure step.
//!
//! The power function drives one cluster like this:
//! 1. [`fenced_until`]: if another invocation recorded an actuator call still within its fence, leave the cluster
//!    alone until then;
//! 2. [`probe`] says what to ask the platform (how the install stands? machines running? stopped? nodes
//!    ready?), or that there is nothing to do;
//! 3. [`step`] takes the answer, `now` and the pool's [`PowerLimits`], and returns the updated cluster, the
//!    actuator call to make if any (provision, start, stop), and when to look again;
//! 4. when a call is asked for, the step's cluster carries it as its [`PendingCall`] (and the state the call
//!    leads to): the shell **writes that first**, makes the call, then steps again with its outcome
//!    ([`Report::CallAccepted`] or [`Report::CallFailed`]), which clears it. Recording the intent first means the
//!    table never says Running while a stop is landing, so no claim is given a stopping cluster.
//!
//! A start or stop is re-issued on every check while some machine is actionable ([`Report::Machines`]'s
//! `actionable`, from [`crate::machines::MachineState`]'s rules), as Hive's hibernation controller does: a
//! resume asked for while the machines are still stopping starts them once they have stopped. Actuator errors are
//! retried with a backoff that grows with the age of the transition; only a seed 002 timeout, when the pool sets
//! one, declares the cluster broken. A platform that cannot stop a cluster's machines says so
//! ([`Report::Unsupported`]): the cluster then stays Running with its Hibernating condition False, reason
//! Unsupported (seed 004), instead of failing forever. Failed provisioning (refused at once, or failed later as
//! [`Install::Failed`]) is retried with an exponential backoff up to the pool's `installAttemptsLimit`; an install
//! that outlives `installTimeout` breaks the cluster. A deleting cluster whose
//! machines the cloud refuses to terminate is retried with an exponential backoff and says so
//! ([`deprovision_step`]). Re-checks travel as one chain of delayed messages per pool, its [`tick`], which looks
//! at every cluster in motion ([`chain`]).

pub mod certificates;
pub mod chain;
pub mod tick;

mod deprovision;
mod install;
mod transitions;

pub use deprovision::*;
use install::*;
use transitions::*;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::duration;
pub use crate::model::ActuatorCall;
use crate::model::{
    condition, reason, set_condition, Cluster, ConditionStatus, DesiredPower, PendingCall, PowerLimits, PowerState,
    Timestamp,
};
use crate::pace::Pace;

/// How often a power transition under way is looked at: a claim may be waiting for it.
pub const POLL: TimeDelta = TimeDelta::seconds(15);
/// How often an install under way is looked at: installs take tens of minutes, and a minute's delay in noticing
/// one finished costs no claim a resume's worth of waiting, while a 15-second poll would cost four times the calls.
pub const INSTALL_POLL: TimeDelta = TimeDelta::minutes(1);
/// How often a power transition is looked at before its pool's quick time for it ([`crate::pace`]): a machine
/// that could not be started (or stopped) at first, being mid-transition, is acted on within this. A stop is
/// looked at this often throughout while no claim waits: nothing waits on a stop's end.
pub const SPARSE_POLL: TimeDelta = TimeDelta::minutes(1);
/// How often a resume is looked at past its pool's quick time while no claim waits. A claim that comes meanwhile
/// and finds no Running spare waits, and its reconcile hurries the tick: every transition is looked at then, and
/// every [`POLL`] while claims wait (the pace is set aside: [`crate::Pool::power_limits`]).
pub const PACED_POLL: TimeDelta = TimeDelta::seconds(30);
/// Longest gap between looks at an install before its pool's quick install time: an install that fails early is
/// noticed within this.
pub const SPARSE_INSTALL_POLL: TimeDelta = TimeDelta::minutes(5);
/// Shortest wait before retrying a failed actuator call.
pub const MIN_BACKOFF: TimeDelta = TimeDelta::seconds(15);
/// Longest wait before retrying a failed start or stop (SQS delays stop at 15 minutes).
pub const MAX_BACKOFF: TimeDelta = TimeDelta::minutes(5);
/// Wait after the first failed provisioning attempt; it doubles with each further failure (Hive's 2ⁿ minutes).
pub const INSTALL_BACKOFF: TimeDelta = TimeDelta::minutes(1);
/// Longest wait between provisioning attempts.
pub const MAX_INSTALL_BACKOFF: TimeDelta = TimeDelta::hours(1);
/// Wait after the first refused termination; it doubles with each further refusal.
pub const DEPROVISION_BACKOFF: TimeDelta = TimeDelta::seconds(15);
/// Longest wait between termination attempts (SQS's longest delay).
pub const MAX_DEPROVISION_BACKOFF: TimeDelta = TimeDelta::minutes(15);
/// How long a recorded actuator call holds off other invocations: longer than a call can take (25 s) and than a
/// function can live (60 s), so a call recorded by an invocation that died can no longer land when it passes.
pub const CALL_FENCE: TimeDelta = TimeDelta::seconds(90);

/// What to ask the actuator about a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Probe {
    /// How the cluster's install stands (attempt `installFailures + 1`).
    Install,
    /// Which machines are not running yet.
    MachinesRunning,
    /// Which machines are not stopped yet.
    MachinesStopped,
    /// Whether the cluster's nodes are ready.
    NodesReady,
    /// Whether the cluster passes the pool's readiness check.
    Readiness,
}

/// What the pool's readiness check found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Readiness {
    /// The check passed.
    Ready,
    /// The cluster answered, but not as ready.
    NotReady {
        /// What it answered.
        message: String,
    },
    /// The cluster could not be reached.
    Unreachable {
        /// Why.
        message: String,
    },
}

/// Where a cluster's install stands, as its platform reports it for the current attempt (`installFailures + 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum Install {
    /// Nothing is under way and the machines are not all there: a provisioning call is needed.
    Absent,
    /// The provisioning is under way.
    UnderWay,
    /// The current attempt failed (a deployment or a clone that failed after it was accepted).
    Failed {
        /// The cloud's error.
        message: String,
    },
    /// Apiary's own look at the install was refused (its credentials, a cloud error that is not the install's): the
    /// attempt fails and is tried again whatever the message says, as a refused call is.
    Refused {
        /// The cloud's error.
        message: String,
    },
    /// Every machine is there and running.
    Done,
    /// An external installer finished: the cluster is the one it names (its infraId, which the platform's actuator
    /// powers), with what it said of it. [`step`] takes it only if [`crate::validate::check_installed`] passes,
    /// and fails the attempt otherwise.
    Installed {
        /// The infraId the machines carry.
        infra_id: String,
        /// API URL, console URL, the ARN of the kubeconfig's secret, …: never a secret itself.
        #[serde(default)]
        outputs: std::collections::BTreeMap<String, String>,
    },
}

/// What the actuator reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Report {
    /// Answer to [`Probe::Install`].
    Install(Install),
    /// Answer to a machines probe: of `total` machines found, `not_ready` are not yet in the asked-for state, and
    /// `actionable` of those a start (for [`Probe::MachinesRunning`]) or a stop (for [`Probe::MachinesStopped`])
    /// would act on now. No machine found at all is never "ready".
    Machines {
        /// Machines not yet running (or stopped).
        not_ready: u32,
        /// Machines found.
        total: u32,
        /// Machines a start (or stop) would act on now; the others are mid-transition.
        actionable: u32,
    },
    /// Answer to [`Probe::NodesReady`]: whether every node is ready, as the platform (and the pool's readiness
    /// check, when it reads the cluster's nodes) says; not ready with which, or what the cluster said.
    Nodes(Readiness),
    /// Answer to [`Probe::Readiness`].
    Ready(Readiness),
    /// The call the last step asked for was accepted by the cloud.
    CallAccepted,
    /// The provisioning call was accepted; `handle` is what the cloud answered to follow it by (vSphere's clone
    /// tasks, …), kept on the cluster for the next [`Probe::Install`].
    Provisioned {
        /// The handle, if the platform needs one.
        handle: Option<String>,
    },
    /// Answer to [`Probe::MachinesStopped`]: the platform cannot stop these machines (an ephemeral OS disk, an
    /// instance-store root volume): hibernation is unsupported for this cluster.
    Unsupported {
        /// Which machines, and why.
        message: String,
    },
    /// The call the last step asked for failed.
    CallFailed {
        /// The cloud's error.
        message: String,
    },
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerStep {
    /// The cluster after the step (same `rev`: the shell writes it conditionally). When `call` is set, it carries
    /// the call as its pending call: write it before making the call.
    pub cluster: Cluster,
    /// Whether `cluster` differs from the input and must be written.
    pub changed: bool,
    /// Call to make now (after writing `cluster`), then step again with its outcome.
    pub call: Option<ActuatorCall>,
    /// Look again after this long; `None` when the cluster is settled (or broken).
    pub recheck_after: Option<TimeDelta>,
    /// The pool must reconcile: the cluster became Running, finished installing, or broke (a Running cluster can
    /// serve a pending claim; a broken one must be replaced), or became Hibernating in a pool whose resume
    /// canaries rank the standbys asleep ([`PowerLimits::sleep_is_news`](crate::PowerLimits::sleep_is_news)). A stop
    /// that ends is no news elsewhere: the plan counts a stopping cluster as a standby already.
    pub wakes_pool: bool,
}

/// Until when another invocation's recorded actuator call holds the cluster, if it does at `now`.
pub fn fenced_until(cluster: &Cluster, now: Timestamp) -> Option<Timestamp> {
    let until = cluster.pending_call?.at + CALL_FENCE;
    (now < until).then_some(until)
}

/// What to ask the actuator about `cluster`, or `None` when nothing drives it now.
pub fn probe(cluster: &Cluster) -> Option<Probe> {
    if cluster.deleting || cluster.is_broken() {
        return None;
    }
    if cluster.installed_at.is_none() {
        return Some(Probe::Install);
    }
    if cluster.power_paused {
        return None;
    }
    let checking = matches!(
        cluster.power_state,
        Some(PowerState::PausingForClusterOperatorsToSettle | PowerState::WaitingForClusterOperators)
    );
    match desired(cluster)? {
        DesiredPower::Running if cluster.power_state == Some(PowerState::WaitingForNodes) => Some(Probe::NodesReady),
        DesiredPower::Running if checking => Some(Probe::Readiness),
        DesiredPower::Running => Some(Probe::MachinesRunning),
        DesiredPower::Hibernating => Some(Probe::MachinesStopped),
    }
}

/// Whether the platform said it cannot stop `cluster`'s machines since it was last asked to hibernate: its
/// Hibernating condition is False with reason Unsupported (seed 004).
pub fn hibernation_unsupported(cluster: &Cluster) -> bool {
    cluster.spec_power_state == Some(DesiredPower::Hibernating) && says_unsupported(cluster)
}

/// The power state the cluster is driven to: the spec's, except that a cluster whose hibernation is unsupported
/// is kept Running. The next change of the spec asks the platform again.
fn desired(cluster: &Cluster) -> Option<DesiredPower> {
    if hibernation_unsupported(cluster) {
        return Some(DesiredPower::Running);
    }
    cluster.spec_power_state
}

/// Whether the power function still has work on `cluster`: it is being deprovisioned, it is installing, or its
/// power state has not reached the one asked for.
pub fn in_progress(cluster: &Cluster) -> bool {
    if cluster.deleting {
        return true;
    }
    if probe(cluster).is_none() {
        return false;
    }
    let settled = match desired(cluster) {
        _ if cluster.installed_at.is_none() => false,
        Some(DesiredPower::Running) => cluster.power_state == Some(PowerState::Running),
        Some(DesiredPower::Hibernating) => cluster.power_state == Some(PowerState::Hibernating),
        None => true,
    };
    !settled
}

/// Whether the sweep's full pass must start `clusters`' pool's tick: the power function has work on one of them
/// and no live tick ([`tick::Tick`]) is carrying that work (none was started, or its next link is overdue and
/// presumed lost).
pub fn needs_tick(clusters: &[Cluster], tick: Option<&tick::Tick>, now: Timestamp) -> bool {
    clusters.iter().any(in_progress) && !tick.is_some_and(|t| chain::live(t, now))
}

/// One step of the state machine for `cluster` given what the actuator reported.
pub fn step(cluster: &Cluster, report: &Report, now: Timestamp, limits: PowerLimits) -> PowerStep {
    let mut out =
        PowerStep { cluster: cluster.clone(), changed: false, call: None, recheck_after: None, wakes_pool: false };
    if cluster.deleting || cluster.is_broken() || (cluster.power_paused && cluster.installed_at.is_some()) {
        // Nothing drives it (any more, or while paused), but the outcome of the call it was making still counts:
        // a provisioning handle is what its deprovisioning follows (clones still to land).
        let c = &mut out.cluster;
        match report {
            Report::Provisioned { handle } => {
                c.provision_ref = keepable(handle);
                c.pending_call = None;
            }
            Report::CallAccepted | Report::CallFailed { .. } => c.pending_call = None,
            _ => {}
        }
        out.changed = out.cluster != *cluster;
        return out;
    }
    let outcome = matches!(report, Report::CallAccepted | Report::Provisioned { .. } | Report::CallFailed { .. });
    if outcome || fenced_until(cluster, now).is_none() {
        // The call was answered, or whoever recorded it can no longer be making it.
        out.cluster.pending_call = None;
    }
    if cluster.installed_at.is_none() {
        install(&mut out, report, now, limits);
    } else {
        match desired(cluster) {
            None => {}
            Some(DesiredPower::Running) => resume(&mut out, report, now, limits),
            Some(DesiredPower::Hibernating) => hibernate(&mut out, report, now, limits.pace),
        }
        let c = &mut out.cluster;
        if c.transition_started_at.is_none() && c.power_state.is_some_and(|s| s.is_resuming() || s.is_stopping()) {
            // A transition written without its clock (before a failed first look began one) starts it now, so its
            // timeout runs.
            c.transition_started_at = Some(now);
        }
        enforce_timeout(&mut out, now, limits);
    }
    if let Some(call) = out.call {
        out.cluster.pending_call = Some(PendingCall { call, at: now });
    }
    out.changed = out.cluster != *cluster;
    let c = &out.cluster;
    let news = match c.power_state {
        Some(PowerState::Running) => true,
        Some(PowerState::Hibernating) => limits.sleep_is_news,
        _ => false,
    };
    out.wakes_pool = (news && c.power_state != cluster.power_state)
        || c.installed_at != cluster.installed_at
        || c.is_broken() != cluster.is_broken();
    out
}

/// Starts a transition in `state`'s direction, unless one in that direction is already under way.
fn begin(c: &mut Cluster, state: PowerState, now: Timestamp) {
    let same_direction = match c.power_state {
        Some(s) => (s.is_resuming() && state.is_resuming()) || (s.is_stopping() && state.is_stopping()),
        None => false,
    };
    if !same_direction || c.transition_started_at.is_none() {
        c.transition_started_at = Some(now);
        c.node_certificates = None;
        // A backoff of the other direction does not hold this one back.
        c.retry_at = None;
    }
    enter(c, state, "", now);
}

/// Pauses power management of `c` (seed 004's PowerStatePaused): once installed, the power function neither
/// starts nor stops it, no power timeout runs, and the pool neither assigns it nor counts it as a spare; both
/// conditions are Unknown with reason PowerStatePaused. An install under way carries on (installing is not power
/// management). `false` when it was paused already.
pub fn pause(c: &mut Cluster, now: Timestamp) -> bool {
    if c.power_paused {
        return false;
    }
    c.power_paused = true;
    say_paused(c, now);
    true
}

fn say_paused(c: &mut Cluster, now: Timestamp) {
    for kind in [condition::HIBERNATING, condition::READY] {
        let message = "power management of this cluster is paused";
        set_condition(&mut c.conditions, kind, ConditionStatus::Unknown, reason::POWER_STATE_PAUSED, message, now);
    }
}

/// Resumes power management of `c`: the conditions say its power state again, and a transition that was under
/// way when it was paused counts its timeout from now (the pause is not the cluster's fault). `false` when it was
/// not paused.
pub fn unpause(c: &mut Cluster, now: Timestamp) -> bool {
    if !c.power_paused {
        return false;
    }
    c.power_paused = false;
    if c.transition_started_at.is_some() {
        c.transition_started_at = Some(now);
    }
    c.conditions.retain(|k| k.reason != reason::POWER_STATE_PAUSED);
    if let Some(state) = c.power_state {
        enter(c, state, "", now);
    }
    true
}

/// Sets the status power state and the Hibernating / Ready conditions as seed 004 describes them.
fn enter(c: &mut Cluster, state: PowerState, message: &str, now: Timestamp) {
    use ConditionStatus::{False, True};
    let (hibernating, ready) = match state {
        PowerState::Running => ((False, reason::RESUMING_OR_RUNNING), (True, reason::RUNNING)),
        PowerState::StartingMachines => ((False, reason::RESUMING_OR_RUNNING), (False, reason::STARTING_MACHINES)),
        PowerState::WaitingForMachines => ((False, reason::RESUMING_OR_RUNNING), (False, reason::WAITING_FOR_MACHINES)),
        PowerState::WaitingForNodes => ((False, reason::RESUMING_OR_RUNNING), (False, reason::WAITING_FOR_NODES)),
        PowerState::PausingForClusterOperatorsToSettle => {
            ((False, reason::RESUMING_OR_RUNNING), (False, reason::PAUSING_FOR_CLUSTER_OPERATORS_TO_SETTLE))
        }
        PowerState::WaitingForClusterOperators => {
            ((False, reason::RESUMING_OR_RUNNING), (False, reason::WAITING_FOR_CLUSTER_OPERATORS))
        }
        PowerState::FailedToStartMachines => {
            ((False, reason::RESUMING_OR_RUNNING), (False, reason::FAILED_TO_START_MACHINES))
        }
        PowerState::Stopping => ((False, reason::STOPPING), (False, reason::STOPPING_OR_HIBERNATING)),
        PowerState::WaitingForMachinesToStop => {
            ((False, reason::WAITING_FOR_MACHINES_TO_STOP), (False, reason::STOPPING_OR_HIBERNATING))
        }
        PowerState::FailedToStop => ((False, reason::FAILED_TO_STOP), (False, reason::STOPPING_OR_HIBERNATING)),
        PowerState::Hibernating => ((True, reason::HIBERNATING), (False, reason::STOPPING_OR_HIBERNATING)),
        // Never entered by Apiary.
        _ => return,
    };
    let ready_message = if state.is_resuming() { message } else { "" };
    let hibernating_message = if state.is_stopping() { message } else { "" };
    // A cluster kept Running because it cannot hibernate goes on saying so.
    if !hibernation_unsupported(c) {
        set_condition(
            &mut c.conditions,
            condition::HIBERNATING,
            hibernating.0,
            hibernating.1,
            hibernating_message,
            now,
        );
    }
    set_condition(&mut c.conditions, condition::READY, ready.0, ready.1, ready_message, now);
    if state == PowerState::Running && c.power_state != Some(PowerState::Running) {
        c.running_since = Some(now);
        if let Some(started) = c.transition_started_at {
            c.last_resume_seconds = u32::try_from((now - started).num_seconds().max(0)).ok();
        }
    }
    if state == PowerState::Hibernating && c.power_state != Some(PowerState::Hibernating) {
        if let Some(started) = c.transition_started_at {
            c.last_stop_seconds = u32::try_from((now - started).num_seconds().max(0)).ok();
        }
    }
    if matches!(state, PowerState::Running | PowerState::Hibernating) {
        c.transition_started_at = None;
        c.retry_at = None;
    }
    c.power_state = Some(state);
}

/// Whether the Hibernating condition says Unsupported.
fn says_unsupported(c: &Cluster) -> bool {
    crate::model::find_condition(&c.conditions, condition::HIBERNATING).is_some_and(|h| h.reason == reason::UNSUPPORTED)
}

/// Retry delay after an actuator error: a quarter of the transition's age, within [`MIN_BACKOFF`, `MAX_BACKOFF`].
fn backoff(c: &Cluster, now: Timestamp) -> TimeDelta {
    let age = c.transition_started_at.map_or(TimeDelta::zero(), |t| now - t);
    (age / 4).clamp(MIN_BACKOFF, MAX_BACKOFF)
}

/// The deadline of what `c` is doing, if the pool bounds it: the install (`installTimeout`) or the power
/// transition under way (seed 002's timeouts).
pub fn deadline(c: &Cluster, limits: PowerLimits) -> Option<Timestamp> {
    if c.installed_at.is_none() {
        return Some(c.created_at + limits.install?);
    }
    if c.power_paused {
        return None;
    }
    let state = c.power_state?;
    let limit = if state.is_resuming() {
        limits.to_running?
    } else if state.is_stopping() {
        limits.to_hibernating?
    } else {
        return None;
    };
    Some(c.transition_started_at? + limit)
}

/// Marks the cluster broken when its transition outlived the timeout (seed 002); otherwise makes sure the
/// next look comes no later than the deadline.
fn enforce_timeout(out: &mut PowerStep, now: Timestamp, limits: PowerLimits) {
    let c = &mut out.cluster;
    let Some(deadline) = deadline(c, limits) else {
        return;
    };
    if now < deadline {
        let until = (deadline - now).max(TimeDelta::seconds(1));
        out.recheck_after = Some(out.recheck_after.map_or(until, |r| r.min(until)));
        return;
    }
    let state = c.power_state.unwrap_or(PowerState::Unknown);
    let (why, verb, limit) = if state.is_resuming() {
        (reason::FAILED_TO_START, "start", limits.to_running)
    } else {
        (reason::FAILED_TO_STOP, "stop", limits.to_hibernating)
    };
    let limit = limit.map(duration::format).unwrap_or_default();
    let message = format!("timed out after {limit} waiting for the cluster to {verb} (last state {state:?})");
    set_condition(&mut c.conditions, condition::HIBERNATING, ConditionStatus::False, why, &message, now);
    c.broken_at = Some(now);
    c.pending_call = None;
    out.call = None;
    out.recheck_after = None;
}
