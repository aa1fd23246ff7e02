//! The power state machine (seed 004) with seed 002's timeouts, as a pure step.
//!
//! The power function drives one cluster like this:
//! 1. [`probe`] says what to ask the actuator (machines running? stopped? nodes ready?), or that there is
//!    nothing to do;
//! 2. [`step`] takes the answer, `now` and the pool's timeouts, and returns the updated cluster, the actuator
//!    call to make if any (start, stop, provision), and when to look again;
//! 3. when a call was made, [`step`] runs again with its outcome ([`Report::CallAccepted`] or
//!    [`Report::CallFailed`]).
//!
//! The shell writes the cluster conditional on its `rev` when [`PowerStep::changed`], and re-enqueues itself
//! after [`PowerStep::recheck_after`]. Actuator errors are retried with a backoff that grows with the age of the
//! transition; only a seed 002 timeout, when the pool sets one, declares the cluster broken.

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::duration;
use crate::model::{
    condition, reason, set_condition, Cluster, ConditionStatus, DesiredPower, PowerState, PowerTimeouts, Timestamp,
};

/// How often a power transition under way is looked at: a claim may be waiting for it.
pub const POLL: TimeDelta = TimeDelta::seconds(15);
/// How often an install under way is looked at: installs take tens of minutes, and a minute's delay in noticing
/// one finished costs no claim a resume's worth of waiting, while a 15-second poll would cost four times the calls.
pub const INSTALL_POLL: TimeDelta = TimeDelta::minutes(1);
/// Shortest wait before retrying a failed actuator call.
pub const MIN_BACKOFF: TimeDelta = TimeDelta::seconds(15);
/// Longest wait before retrying a failed actuator call (SQS delays stop at 15 minutes).
pub const MAX_BACKOFF: TimeDelta = TimeDelta::minutes(5);

/// What to ask the actuator about a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Probe {
    /// Which machines are not running yet.
    MachinesRunning,
    /// Which machines are not stopped yet.
    MachinesStopped,
    /// Whether the cluster's nodes are ready.
    NodesReady,
}

/// What the actuator reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Report {
    /// Answer to a machines probe: of `total` machines found, `not_ready` are not yet in the asked-for state.
    /// No machine found at all is never "ready".
    Machines {
        /// Machines not yet running (or stopped).
        not_ready: u32,
        /// Machines found.
        total: u32,
    },
    /// Answer to [`Probe::NodesReady`].
    Nodes {
        /// All nodes ready.
        ready: bool,
    },
    /// The call the last step asked for was accepted by the cloud.
    CallAccepted,
    /// The call the last step asked for failed.
    CallFailed {
        /// The cloud's error.
        message: String,
    },
}

/// A call the shell must make through the platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActuatorCall {
    /// Create the cluster's machines (idempotent: keyed by the cluster id).
    Provision,
    /// Start the machines.
    Start,
    /// Stop the machines.
    Stop,
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerStep {
    /// The cluster after the step (same `rev`: the shell writes it conditionally).
    pub cluster: Cluster,
    /// Whether `cluster` differs from the input and must be written.
    pub changed: bool,
    /// Call to make now, then step again with its outcome.
    pub call: Option<ActuatorCall>,
    /// Look again after this long; `None` when the cluster is settled (or broken).
    pub recheck_after: Option<TimeDelta>,
    /// The pool must reconcile: the cluster became Running or Hibernating, finished installing, or broke.
    /// (A Running cluster can serve a pending claim; a broken one must be replaced.)
    pub wakes_pool: bool,
}

/// What to ask the actuator about `cluster`, or `None` when nothing drives it now.
pub fn probe(cluster: &Cluster) -> Option<Probe> {
    if cluster.deleting || cluster.is_broken() {
        return None;
    }
    if cluster.installed_at.is_none() {
        return Some(Probe::MachinesRunning);
    }
    match cluster.spec_power_state? {
        DesiredPower::Running if cluster.power_state == Some(PowerState::WaitingForNodes) => Some(Probe::NodesReady),
        DesiredPower::Running => Some(Probe::MachinesRunning),
        DesiredPower::Hibernating => Some(Probe::MachinesStopped),
    }
}

/// Whether the power function still has work on `cluster`: it is being deprovisioned, it is installing, or its
/// power state has not reached the one asked for. The sweep's full pass sends these a power message, in case the
/// message their re-checks chain from was lost.
pub fn in_progress(cluster: &Cluster) -> bool {
    if cluster.deleting {
        return true;
    }
    if probe(cluster).is_none() {
        return false;
    }
    let settled = match cluster.spec_power_state {
        _ if cluster.installed_at.is_none() => false,
        Some(DesiredPower::Running) => cluster.power_state == Some(PowerState::Running),
        Some(DesiredPower::Hibernating) => cluster.power_state == Some(PowerState::Hibernating),
        None => true,
    };
    !settled
}

/// One step of the state machine for `cluster` given what the actuator reported.
pub fn step(cluster: &Cluster, report: &Report, now: Timestamp, timeouts: PowerTimeouts) -> PowerStep {
    let mut out =
        PowerStep { cluster: cluster.clone(), changed: false, call: None, recheck_after: None, wakes_pool: false };
    if cluster.deleting || cluster.is_broken() {
        return out;
    }
    if cluster.installed_at.is_none() {
        install(&mut out, report, now);
    } else {
        match cluster.spec_power_state {
            None => {}
            Some(DesiredPower::Running) => resume(&mut out, report, now),
            Some(DesiredPower::Hibernating) => hibernate(&mut out, report, now),
        }
        enforce_timeout(&mut out, now, timeouts);
    }
    out.changed = out.cluster != *cluster;
    let c = &out.cluster;
    let settled = matches!(c.power_state, Some(PowerState::Running | PowerState::Hibernating));
    out.wakes_pool = (settled && c.power_state != cluster.power_state)
        || c.installed_at != cluster.installed_at
        || c.is_broken() != cluster.is_broken();
    out
}

fn install(out: &mut PowerStep, report: &Report, now: Timestamp) {
    let c = &mut out.cluster;
    match report {
        Report::Machines { not_ready: 0, total } if *total > 0 => {
            c.installed_at = Some(now);
            enter(c, PowerState::Running, "", now);
            // The spec's power state takes over at once.
            out.recheck_after = c.spec_power_state.map(|_| TimeDelta::zero());
        }
        Report::Machines { total: 0, .. } => {
            out.call = Some(ActuatorCall::Provision);
            out.recheck_after = Some(INSTALL_POLL);
        }
        Report::CallFailed { message } => {
            c.provision_stopped = true;
            set_condition(
                &mut c.conditions,
                condition::PROVISION_STOPPED,
                ConditionStatus::True,
                reason::PROVISION_FAILED,
                message,
                now,
            );
        }
        Report::Machines { .. } | Report::Nodes { .. } | Report::CallAccepted => out.recheck_after = Some(INSTALL_POLL),
    }
}

fn resume(out: &mut PowerStep, report: &Report, now: Timestamp) {
    let c = &mut out.cluster;
    let state = c.power_state;
    match report {
        Report::Machines { not_ready: 0, total } if *total > 0 => {
            if state != Some(PowerState::Running) {
                begin(c, PowerState::WaitingForNodes, now);
                out.recheck_after = Some(TimeDelta::zero());
            }
        }
        Report::Machines { .. } => match state {
            Some(PowerState::WaitingForMachines) => out.recheck_after = Some(POLL),
            Some(PowerState::StartingMachines | PowerState::FailedToStartMachines) => {
                out.call = Some(ActuatorCall::Start);
            }
            _ => {
                begin(c, PowerState::StartingMachines, now);
                out.call = Some(ActuatorCall::Start);
            }
        },
        Report::Nodes { ready: true } => {
            enter(c, PowerState::Running, "", now);
        }
        Report::Nodes { ready: false } => out.recheck_after = Some(POLL),
        Report::CallAccepted => {
            enter(c, PowerState::WaitingForMachines, "", now);
            out.recheck_after = Some(POLL);
        }
        Report::CallFailed { message } => {
            enter(c, PowerState::FailedToStartMachines, message, now);
            out.recheck_after = Some(backoff(c, now));
        }
    }
}

fn hibernate(out: &mut PowerStep, report: &Report, now: Timestamp) {
    let c = &mut out.cluster;
    let state = c.power_state;
    match report {
        Report::Machines { not_ready: 0, total } if *total > 0 => {
            if state != Some(PowerState::Hibernating) {
                enter(c, PowerState::Hibernating, "", now);
            }
        }
        Report::Machines { .. } => match state {
            Some(PowerState::WaitingForMachinesToStop) => out.recheck_after = Some(POLL),
            Some(PowerState::Stopping | PowerState::FailedToStop) => out.call = Some(ActuatorCall::Stop),
            _ => {
                begin(c, PowerState::Stopping, now);
                out.call = Some(ActuatorCall::Stop);
            }
        },
        Report::Nodes { .. } => out.recheck_after = Some(POLL),
        Report::CallAccepted => {
            enter(c, PowerState::WaitingForMachinesToStop, "", now);
            out.recheck_after = Some(POLL);
        }
        Report::CallFailed { message } => {
            enter(c, PowerState::FailedToStop, message, now);
            out.recheck_after = Some(backoff(c, now));
        }
    }
}

/// Starts a transition in `state`'s direction, unless one in that direction is already under way.
fn begin(c: &mut Cluster, state: PowerState, now: Timestamp) {
    let same_direction = match c.power_state {
        Some(s) => (s.is_resuming() && state.is_resuming()) || (s.is_stopping() && state.is_stopping()),
        None => false,
    };
    if !same_direction || c.transition_started_at.is_none() {
        c.transition_started_at = Some(now);
    }
    enter(c, state, "", now);
}

/// Sets the status power state and the Hibernating / Ready conditions as seed 004 describes them.
fn enter(c: &mut Cluster, state: PowerState, message: &str, now: Timestamp) {
    use ConditionStatus::{False, True};
    let (hibernating, ready) = match state {
        PowerState::Running => ((False, reason::RESUMING_OR_RUNNING), (True, reason::RUNNING)),
        PowerState::StartingMachines => ((False, reason::RESUMING_OR_RUNNING), (False, reason::STARTING_MACHINES)),
        PowerState::WaitingForMachines => ((False, reason::RESUMING_OR_RUNNING), (False, reason::WAITING_FOR_MACHINES)),
        PowerState::WaitingForNodes => ((False, reason::RESUMING_OR_RUNNING), (False, reason::WAITING_FOR_NODES)),
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
    set_condition(&mut c.conditions, condition::HIBERNATING, hibernating.0, hibernating.1, hibernating_message, now);
    set_condition(&mut c.conditions, condition::READY, ready.0, ready.1, ready_message, now);
    if state == PowerState::Running && c.power_state != Some(PowerState::Running) {
        c.running_since = Some(now);
        if let Some(started) = c.transition_started_at {
            c.last_resume_seconds = u32::try_from((now - started).num_seconds().max(0)).ok();
        }
    }
    if matches!(state, PowerState::Running | PowerState::Hibernating) {
        c.transition_started_at = None;
    }
    c.power_state = Some(state);
}

/// Retry delay after an actuator error: a quarter of the transition's age, within [`MIN_BACKOFF`, `MAX_BACKOFF`].
fn backoff(c: &Cluster, now: Timestamp) -> TimeDelta {
    let age = c.transition_started_at.map_or(TimeDelta::zero(), |t| now - t);
    (age / 4).clamp(MIN_BACKOFF, MAX_BACKOFF)
}

/// The deadline of the transition under way, if the pool sets a timeout for its direction.
pub fn transition_deadline(c: &Cluster, timeouts: PowerTimeouts) -> Option<Timestamp> {
    let state = c.power_state?;
    let limit = if state.is_resuming() {
        timeouts.to_running?
    } else if state.is_stopping() {
        timeouts.to_hibernating?
    } else {
        return None;
    };
    Some(c.transition_started_at? + limit)
}

/// Marks the cluster broken when its transition outlived the timeout (seed 002); otherwise makes sure the
/// next look comes no later than the deadline.
fn enforce_timeout(out: &mut PowerStep, now: Timestamp, timeouts: PowerTimeouts) {
    let c = &mut out.cluster;
    let Some(deadline) = transition_deadline(c, timeouts) else {
        return;
    };
    if now < deadline {
        let until = (deadline - now).max(TimeDelta::seconds(1));
        out.recheck_after = Some(out.recheck_after.map_or(until, |r| r.min(until)));
        return;
    }
    let state = c.power_state.unwrap_or(PowerState::Unknown);
    let (why, verb, limit) = if state.is_resuming() {
        (reason::FAILED_TO_START, "start", timeouts.to_running)
    } else {
        (reason::FAILED_TO_STOP, "stop", timeouts.to_hibernating)
    };
    let limit = limit.map(duration::format).unwrap_or_default();
    let message = format!("timed out after {limit} waiting for the cluster to {verb} (last state {state:?})");
    set_condition(&mut c.conditions, condition::HIBERNATING, ConditionStatus::False, why, &message, now);
    c.broken_at = Some(now);
    out.call = None;
    out.recheck_after = None;
}
