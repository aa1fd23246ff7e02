//! Resuming and hibernating: machines started or stopped, a resumed cluster proven usable (nodes, certificates,
//! the pool's check) before it is Running, and each transition's looks paced by the pool.

use super::*;

/// The step for an outcome report, or for a machines report whose machines a call would act on now.
pub(super) fn resume(out: &mut PowerStep, report: &Report, now: Timestamp, limits: PowerLimits) {
    let (readiness, quick) = (limits.readiness, limits.pace.resume());
    let c = &mut out.cluster;
    let state = c.power_state;
    match report {
        Report::Machines { not_ready: 0, total, .. } if *total > 0 => {
            if state != Some(PowerState::Running) {
                begin(c, PowerState::WaitingForNodes, now);
                out.recheck_after = Some(TimeDelta::zero());
            } else if !hibernation_unsupported(c) && says_unsupported(c) {
                // Running was asked for again: the Hibernating condition no longer says Unsupported.
                enter(c, PowerState::Running, "", now);
            }
        }
        Report::Machines { actionable, .. } => {
            if !state.is_some_and(PowerState::is_resuming) {
                begin(c, PowerState::StartingMachines, now);
            }
            match c.retry_at {
                Some(at) if at > now => out.recheck_after = Some(at - now),
                // Some machine can be started now (again: a start is re-issued until every machine runs).
                _ if *actionable > 0 => {
                    if c.power_state != Some(PowerState::StartingMachines) {
                        enter(c, PowerState::StartingMachines, "", now);
                    }
                    out.call = Some(ActuatorCall::Start);
                }
                // The machines are on their way (or still stopping, or went down while the nodes were awaited):
                // look again, at the machines.
                _ => {
                    if matches!(c.power_state, Some(PowerState::StartingMachines | PowerState::WaitingForNodes)) {
                        enter(c, PowerState::WaitingForMachines, "", now);
                    }
                    out.recheck_after = Some(transition_look(c, now, quick));
                }
            }
        }
        Report::Nodes(Readiness::Ready) => {
            say_reachable(c, &Readiness::Ready, now);
            match readiness {
                None => enter(c, PowerState::Running, "", now),
                // Seed 004: let the operators settle, then wait for the pool's check.
                Some(pause) if pause > TimeDelta::zero() => {
                    enter(c, PowerState::PausingForClusterOperatorsToSettle, "", now);
                    c.retry_at = Some(now + pause);
                    out.recheck_after = Some(pause);
                }
                Some(_) => {
                    enter(c, PowerState::WaitingForClusterOperators, "", now);
                    out.recheck_after = Some(TimeDelta::zero());
                }
            }
        }
        Report::Nodes(found @ (Readiness::NotReady { message } | Readiness::Unreachable { message })) => {
            say_reachable(c, found, now);
            enter(c, PowerState::WaitingForNodes, message, now);
            out.recheck_after = Some(transition_look(c, now, quick));
        }
        Report::Ready(_)
            if state == Some(PowerState::PausingForClusterOperatorsToSettle)
                && c.retry_at.is_some_and(|at| at > now) =>
        {
            out.recheck_after = c.retry_at.map(|at| at - now);
        }
        Report::Ready(found) => {
            c.retry_at = None;
            say_reachable(c, found, now);
            match found {
                Readiness::Ready => enter(c, PowerState::Running, "", now),
                Readiness::NotReady { message } | Readiness::Unreachable { message } => {
                    enter(c, PowerState::WaitingForClusterOperators, message, now);
                    out.recheck_after = Some(transition_look(c, now, quick));
                }
            }
        }
        Report::CallAccepted => {
            c.retry_at = None;
            enter(c, PowerState::WaitingForMachines, "", now);
            out.recheck_after = Some(transition_look(c, now, quick));
        }
        Report::Install(_) | Report::Provisioned { .. } | Report::Unsupported { .. } => out.recheck_after = Some(POLL),
        Report::CallFailed { message } => {
            // The first look may be what failed: the transition starts here all the same, so its timeout runs.
            begin(c, PowerState::FailedToStartMachines, now);
            enter(c, PowerState::FailedToStartMachines, message, now);
            let wait = backoff(c, now);
            c.retry_at = Some(now + wait);
            out.recheck_after = Some(wait);
        }
    }
}

pub(super) fn hibernate(out: &mut PowerStep, report: &Report, now: Timestamp, pace: Pace) {
    let quick = pace.stop();
    let c = &mut out.cluster;
    let state = c.power_state;
    match report {
        Report::Machines { not_ready: 0, total, .. } if *total > 0 => {
            if state != Some(PowerState::Hibernating) {
                enter(c, PowerState::Hibernating, "", now);
            }
        }
        Report::Machines { actionable, .. } => {
            if !state.is_some_and(PowerState::is_stopping) {
                begin(c, PowerState::Stopping, now);
            }
            match c.retry_at {
                Some(at) if at > now => out.recheck_after = Some(at - now),
                // Some machine can be stopped now (again: a stop is re-issued until every machine is stopped).
                _ if *actionable > 0 => {
                    if c.power_state != Some(PowerState::Stopping) {
                        enter(c, PowerState::Stopping, "", now);
                    }
                    out.call = Some(ActuatorCall::Stop);
                }
                _ => {
                    if c.power_state == Some(PowerState::Stopping) {
                        enter(c, PowerState::WaitingForMachinesToStop, "", now);
                    }
                    out.recheck_after = Some(stop_look(quick));
                }
            }
        }
        Report::Nodes(_) | Report::Ready(_) | Report::Install(_) | Report::Provisioned { .. } => {
            out.recheck_after = Some(POLL)
        }
        Report::Unsupported { message } => {
            // Nothing was stopped: the cluster stays as it is, driven Running, and says why (seed 004).
            set_condition(
                &mut c.conditions,
                condition::HIBERNATING,
                ConditionStatus::False,
                reason::UNSUPPORTED,
                message,
                now,
            );
            c.retry_at = None;
            if state != Some(PowerState::Running) {
                out.recheck_after = Some(TimeDelta::zero());
            }
        }
        Report::CallAccepted => {
            c.retry_at = None;
            enter(c, PowerState::WaitingForMachinesToStop, "", now);
            out.recheck_after = Some(stop_look(quick));
        }
        Report::CallFailed { message } => {
            begin(c, PowerState::FailedToStop, now);
            enter(c, PowerState::FailedToStop, message, now);
            let wait = backoff(c, now);
            c.retry_at = Some(now + wait);
            out.recheck_after = Some(wait);
        }
    }
}

/// Seed 004's Unreachable condition: said while a check cannot reach the cluster, withdrawn once it can.
pub(super) fn say_reachable(c: &mut Cluster, found: &Readiness, now: Timestamp) {
    let said = crate::model::find_condition(&c.conditions, condition::UNREACHABLE).is_some();
    match found {
        Readiness::Unreachable { message } => set_condition(
            &mut c.conditions,
            condition::UNREACHABLE,
            ConditionStatus::True,
            reason::CLUSTER_UNREACHABLE,
            message,
            now,
        ),
        _ if said => set_condition(
            &mut c.conditions,
            condition::UNREACHABLE,
            ConditionStatus::False,
            reason::CLUSTER_REACHABLE,
            "",
            now,
        ),
        _ => false,
    };
}

/// When to look again at `c`'s resume under way: every [`SPARSE_POLL`] until the pool's `quick` time for it has
/// passed since it started (never past that time), every [`PACED_POLL`] from then on, and every [`POLL`] when the
/// quick time is not known (a new pool, or claims waiting).
pub fn transition_look(c: &Cluster, now: Timestamp, quick: Option<TimeDelta>) -> TimeDelta {
    let (Some(quick), Some(started)) = (quick, c.transition_started_at) else { return POLL };
    (started + quick - PACED_POLL - now).clamp(PACED_POLL, SPARSE_POLL)
}

/// When to look again at a stop under way: every [`SPARSE_POLL`] once the pool's pace for stops is known and no
/// claim waits (`quick`), else every [`POLL`].
pub fn stop_look(quick: Option<TimeDelta>) -> TimeDelta {
    if quick.is_some() {
        SPARSE_POLL
    } else {
        POLL
    }
}
