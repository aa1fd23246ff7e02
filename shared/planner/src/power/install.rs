//! A cluster being installed: the installer's answers taken (or refused when unusable), failed attempts retried
//! with a backoff up to the pool's limit, and the install's deadline.

use crate::failure::{self, FailureReason};

use super::*;

/// The step of a cluster being installed, given what the installer or the platform answered.
pub(super) fn install(out: &mut PowerStep, report: &Report, now: Timestamp, limits: PowerLimits) {
    let report = &usable(report);
    if let Some(limit) = limits.install.filter(|l| now >= out.cluster.created_at + *l) {
        let message = format!("not installed {} after it was created", duration::format(limit));
        stop_provisioning(&mut out.cluster, reason::INSTALL_TIMED_OUT, &message, now);
        return;
    }
    match report {
        Report::Install(done @ (Install::Done | Install::Installed { .. })) => installed(out, done, now, limits),
        Report::Install(Install::Absent) => match out.cluster.retry_at {
            Some(at) if at > now => out.recheck_after = Some(at - now),
            _ => {
                out.call = Some(ActuatorCall::Provision);
                out.recheck_after = Some(INSTALL_POLL);
            }
        },
        Report::Provisioned { handle } => {
            out.cluster.provision_ref = keepable(handle);
            out.recheck_after = Some(install_look(&out.cluster, now, limits.pace));
        }
        // Apiary's own call refused (its role not yet assumable, a throttle) is tried again as it always was; an
        // install the installer says failed is tried again only for the classes the pool retries.
        Report::CallFailed { message } | Report::Install(Install::Refused { message }) => {
            install_failed(out, message, FailureReason::Unknown, now, limits)
        }
        Report::Install(Install::Failed { message }) => {
            install_failed(out, message, failure::classify(message), now, limits)
        }
        Report::Install(Install::UnderWay)
        | Report::Machines { .. }
        | Report::Nodes(_)
        | Report::Ready(_)
        | Report::CallAccepted
        | Report::Unsupported { .. } => out.recheck_after = Some(install_look(&out.cluster, now, limits.pace)),
    }
    if let Some(limit) = limits.install {
        // Look again no later than the install deadline.
        let until = (out.cluster.created_at + limit - now).max(TimeDelta::seconds(1));
        out.recheck_after = out.recheck_after.map(|r| r.min(until));
    }
}

/// What an external installer names is taken only if the cluster's item can hold it and the clouds can find machines
/// by it; an answer that cannot be used fails the attempt.
pub(super) fn usable(report: &Report) -> Report {
    match report {
        Report::Install(Install::Installed { infra_id, outputs }) => {
            match crate::validate::check_installed(infra_id, outputs) {
                Ok(()) => report.clone(),
                Err(why) => {
                    let message = format!("the installer's answer is not usable: {why}");
                    Report::Install(Install::Failed { message })
                }
            }
        }
        _ => report.clone(),
    }
}

/// The install is done: the cluster is proven usable (its nodes, then the pool's check) or Running, and the spec's
/// power state takes over.
pub(super) fn installed(out: &mut PowerStep, done: &Install, now: Timestamp, limits: PowerLimits) {
    let c = &mut out.cluster;
    if let Install::Installed { infra_id, outputs } = done {
        c.infra_id.clone_from(infra_id);
        c.outputs.clone_from(outputs);
    }
    c.installed_at = Some(now);
    c.retry_at = None;
    c.provision_ref = None;
    if c.install_failures > 0 {
        set_condition(&mut c.conditions, condition::PROVISION_FAILED, ConditionStatus::False, "Installed", "", now);
    }
    if limits.readiness.is_some() {
        // Proven usable first, as a resume is: its nodes, then the pool's check.
        begin(c, PowerState::WaitingForNodes, now);
    } else {
        enter(c, PowerState::Running, "", now);
    }
    if c.power_paused {
        // Installed while paused: power management waits for the unpause.
        say_paused(c, now);
    } else {
        // The spec's power state takes over at once.
        out.recheck_after = c.spec_power_state.map(|_| TimeDelta::zero());
    }
}

/// An install attempt failed (its failure of class `class`): tried again after a backoff, or the cluster stops
/// provisioning at the pool's limit, or at once for a class the pool does not retry.
pub(super) fn install_failed(
    out: &mut PowerStep,
    message: &str,
    class: FailureReason,
    now: Timestamp,
    limits: PowerLimits,
) {
    let c = &mut out.cluster;
    c.install_failures += 1;
    c.provision_ref = None;
    let (n, limit) = (c.install_failures, limits.install_attempts);
    let message = format!("attempt {n} of {limit} failed: {message}");
    if !limits.retried.contains(class) {
        // A failure the pool does not try again (a quota, refused credentials, a bad config) ends it at once.
        c.retry_at = None;
        let message = format!("{}, not tried again (installRetryReasons): {message}", class.words());
        stop_provisioning(c, class.condition_reason(), &message, now);
    } else if n >= limit {
        c.retry_at = None;
        stop_provisioning(c, reason::INSTALL_ATTEMPTS_LIMIT_REACHED, &message, now);
    } else {
        let wait = install_backoff(n);
        c.retry_at = Some(now + wait);
        set_condition(
            &mut c.conditions,
            condition::PROVISION_FAILED,
            ConditionStatus::True,
            class.condition_reason(),
            &message,
            now,
        );
        out.recheck_after = Some(wait);
    }
}

/// A provisioning handle the cluster can keep: one longer than the limit is not kept (the platform then follows
/// its provisioning without it).
pub(super) fn keepable(handle: &Option<String>) -> Option<String> {
    handle.as_ref().filter(|h| h.len() <= crate::validate::limits::MAX_PROVISION_REF_LEN).cloned()
}

/// When to look again at `c`'s install: on a first attempt, after gaps that grow with its age (at most
/// [`SPARSE_INSTALL_POLL`]) until the pool's quick install time, never past it; every [`INSTALL_POLL`] from then on,
/// and always when the pool's pace is not known yet.
pub fn install_look(c: &Cluster, now: Timestamp, pace: Pace) -> TimeDelta {
    let Some(quick) = pace.install().filter(|_| c.install_failures == 0) else { return INSTALL_POLL };
    let age = now - c.created_at;
    age.clamp(INSTALL_POLL, SPARSE_INSTALL_POLL).min(c.created_at + quick - INSTALL_POLL - now).max(INSTALL_POLL)
}

/// The wait after `failures` failed provisioning attempts: 1, 2, 4 … minutes, at most an hour.
pub fn install_backoff(failures: u32) -> TimeDelta {
    let doublings = failures.saturating_sub(1).min(10);
    (INSTALL_BACKOFF * 2i32.pow(doublings)).min(MAX_INSTALL_BACKOFF)
}

pub(super) fn stop_provisioning(c: &mut Cluster, why: &str, message: &str, now: Timestamp) {
    c.provision_stopped = true;
    set_condition(&mut c.conditions, condition::PROVISION_STOPPED, ConditionStatus::True, why, message, now);
}
