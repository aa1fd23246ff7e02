//! The power state machine (seed 004) and its timeouts (seed 002), step by step.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::failure::{FailureReason, Retried};
use apiary_planner::power::{
    deadline, deprovision_step, fenced_until, hibernation_unsupported, in_progress, pause, probe, step, unpause,
    ActuatorCall, Install, Probe, Readiness, Report, Termination, CALL_FENCE, INSTALL_POLL, MIN_BACKOFF, PACED_POLL,
    POLL, SPARSE_POLL,
};
use apiary_planner::*;
use chrono::TimeDelta;
use support::*;

/// Of three machines, `not_ready` are not in the asked-for state, and the call would act on all of those now.
fn machines(not_ready: u32) -> Report {
    Report::Machines { not_ready, total: 3, actionable: not_ready }
}

/// Of three machines, `not_ready` are not in the asked-for state but mid-transition: no call acts on them now.
fn waiting(not_ready: u32) -> Report {
    Report::Machines { not_ready, total: 3, actionable: 0 }
}

fn cond<'a>(c: &'a Cluster, type_: &str) -> &'a Condition {
    find_condition(&c.conditions, type_).unwrap()
}

fn timeouts(to_running: Option<i64>, to_hibernating: Option<i64>) -> PowerLimits {
    PowerLimits {
        to_running: to_running.map(TimeDelta::minutes),
        to_hibernating: to_hibernating.map(TimeDelta::minutes),
        ..PowerLimits::default()
    }
}

/// Drives `c` with the reports in order, each at its time; returns the cluster and every step's call.
fn drive(mut c: Cluster, reports: &[(Timestamp, Report)], t: PowerLimits) -> (Cluster, Vec<Option<ActuatorCall>>) {
    let mut calls = Vec::new();
    for (now, report) in reports {
        let s = step(&c, report, *now, t);
        calls.push(s.call);
        c = s.cluster;
    }
    (c, calls)
}

#[test]
fn a_resume_walks_starting_machines_waiting_for_machines_waiting_for_nodes_running() {
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    assert_eq!(probe(&c), Some(Probe::MachinesRunning));

    let s = step(&c, &machines(3), at(1), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Start));
    assert!(s.changed);
    let c = s.cluster;
    assert_eq!(c.power_state, Some(PowerState::StartingMachines));
    assert_eq!(c.transition_started_at, Some(at(1)));
    let hib = cond(&c, condition::HIBERNATING);
    assert_eq!(
        (hib.status, hib.reason.as_str(), hib.last_transition_time),
        (ConditionStatus::False, reason::RESUMING_OR_RUNNING, at(1))
    );
    assert_eq!(cond(&c, condition::READY).reason, reason::STARTING_MACHINES);

    let s = step(&c, &Report::CallAccepted, at(1), PowerLimits::default());
    assert_eq!((s.cluster.power_state, s.recheck_after), (Some(PowerState::WaitingForMachines), Some(POLL)));
    let c = s.cluster;

    let s = step(&c, &waiting(1), at(2), PowerLimits::default());
    assert_eq!((s.changed, s.call, s.recheck_after), (false, None, Some(POLL)), "still waiting: nothing to write");

    let c = step(&c, &machines(0), at(3), PowerLimits::default()).cluster;
    assert_eq!(c.power_state, Some(PowerState::WaitingForNodes));
    assert_eq!(probe(&c), Some(Probe::NodesReady));

    let running = step(&c, &Report::Nodes(Readiness::Ready), at(4), PowerLimits::default());
    assert!(running.wakes_pool, "a cluster that became Running may serve a pending claim");
    assert!(!s.wakes_pool, "a step along the way does not");
    let c = running.cluster;
    assert_eq!(c.power_state, Some(PowerState::Running));
    assert_eq!(c.running_since, Some(at(4)));
    assert_eq!(c.transition_started_at, None);
    let ready = cond(&c, condition::READY);
    assert_eq!(
        (ready.status, ready.reason.as_str(), ready.last_transition_time),
        (ConditionStatus::True, reason::RUNNING, at(4))
    );
    assert!(c.is_running());

    let settled = step(&c, &machines(0), at(5), PowerLimits::default());
    assert_eq!((settled.changed, settled.call, settled.recheck_after), (false, None, None));
}

#[test]
fn a_hibernation_walks_stopping_waiting_for_machines_to_stop_hibernating() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    assert_eq!(probe(&c), Some(Probe::MachinesStopped));
    let (c, calls) = drive(
        c,
        &[(at(1), machines(3)), (at(1), Report::CallAccepted), (at(2), waiting(2)), (at(3), machines(0))],
        PowerLimits::default(),
    );
    assert_eq!(calls, [Some(ActuatorCall::Stop), None, None, None]);
    assert_eq!(c.power_state, Some(PowerState::Hibernating));
    let hib = cond(&c, condition::HIBERNATING);
    assert_eq!(
        (hib.status, hib.reason.as_str(), hib.last_transition_time),
        (ConditionStatus::True, reason::HIBERNATING, at(3))
    );
    let ready = cond(&c, condition::READY);
    assert_eq!((ready.status, ready.reason.as_str()), (ConditionStatus::False, reason::STOPPING_OR_HIBERNATING));
    assert_eq!(c.transition_started_at, None);
}

/// A stop that ends is not news to the pool: a stopping cluster is a standby to the plan already, and nothing it
/// decides waits on the machines being down. A pool with resume canaries is the exception: they rank the standbys
/// asleep, so there it is news.
#[test]
fn a_cluster_settling_asleep_wakes_its_pool_only_where_resume_canaries_pick_sleepers() {
    let stopping =
        step(&cluster("c").running().spec(DesiredPower::Hibernating).c, &machines(3), at(1), PowerLimits::default())
            .cluster;
    let stopping = step(&stopping, &Report::CallAccepted, at(1), PowerLimits::default()).cluster;
    for (spec, news) in [(pool().spec, false), (pool().canaries("48h", 1, None).spec, true)] {
        let limits = spec.power_limits();
        let asleep = step(&stopping, &machines(0), at(3), limits);
        assert_eq!(asleep.cluster.power_state, Some(PowerState::Hibernating));
        assert_eq!(asleep.wakes_pool, news, "canaries: {}", spec.resume_canaries.is_some());
    }
    let resuming = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let (resuming, _) = drive(
        resuming,
        &[(at(1), machines(3)), (at(1), Report::CallAccepted), (at(3), machines(0))],
        PowerLimits::default(),
    );
    let awake = step(&resuming, &Report::Nodes(Readiness::Ready), at(4), PowerLimits::default());
    assert_eq!(awake.cluster.power_state, Some(PowerState::Running));
    assert!(awake.wakes_pool, "a Running cluster may serve a claim, canaries or not");
}

/// A cluster's removal is news to its pool only where it frees room the pool is held to, an inventory name, or
/// brings a pool being deleted closer to its end: the plan counted the cluster out when it began deleting it.
#[test]
fn a_clusters_removal_wakes_its_pool_only_where_room_or_a_name_or_the_pools_end_waits_on_it() {
    let news = |p: PoolBuilder| given(p).snapshot().pool.removal_is_news();
    assert!(!news(pool().size(3)), "nothing bounds the pool");
    assert!(!news(pool().size(3).canaries("48h", 1, None)), "nor canaries");
    assert!(news(pool().size(3).max_size(4)));
    assert!(news(pool().size(3).max_concurrent(2)));
    assert!(news(pool().size(2).inventory(&["a", "b", "c"])));
    assert!(news(pool().size(3).deleting()));
}

#[test]
fn an_actuator_error_is_retried_with_backoff_and_never_breaks_the_cluster_by_itself() {
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let c = step(&c, &machines(3), at(0), PowerLimits::default()).cluster;
    let failed =
        step(&c, &Report::CallFailed { message: "InsufficientInstanceCapacity".into() }, at(0), PowerLimits::default());
    let c = failed.cluster;
    assert_eq!(c.power_state, Some(PowerState::FailedToStartMachines));
    let ready = cond(&c, condition::READY);
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        (reason::FAILED_TO_START_MACHINES, "InsufficientInstanceCapacity")
    );
    assert!(failed.recheck_after >= Some(MIN_BACKOFF));
    assert!(!c.is_broken());

    // Hours later, with no timeout set, the start is simply tried again, from the same transition start.
    let retry = step(&c, &machines(3), at(600), PowerLimits::default());
    assert_eq!(retry.call, Some(ActuatorCall::Start));
    assert_eq!(retry.cluster.transition_started_at, Some(at(0)));
    assert!(!retry.cluster.is_broken());
}

#[test]
fn resume_timeout_marks_broken_with_failed_to_start_and_a_timed_out_message() {
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let t = timeouts(Some(10), None);
    let (c, _) = drive(c, &[(at(0), machines(3)), (at(0), Report::CallAccepted)], t);
    let still = step(&c, &waiting(3), at(10) - TimeDelta::seconds(5), t);
    assert!(!still.cluster.is_broken());
    assert_eq!(still.recheck_after, Some(TimeDelta::seconds(5)), "the next look comes no later than the deadline");

    let s = step(&c, &waiting(3), at(10), t);
    assert!(s.cluster.is_broken());
    assert_eq!((s.call, s.recheck_after), (None, None));
    let hib = cond(&s.cluster, condition::HIBERNATING);
    assert_eq!(hib.reason, reason::FAILED_TO_START);
    assert!(hib.message.contains("timed out after 10m"), "{}", hib.message);
    assert_eq!(probe(&s.cluster), None, "a broken cluster is left for the pool to replace");
    assert_eq!(s.cluster.broken_reason(), Some(reason::FAILED_TO_START));
    assert_eq!(still.cluster.broken_reason(), None);

    // The pool then replaces it.
    let mut broken = cluster("c").c;
    broken.broken_at = s.cluster.broken_at;
    let plan = given(pool().size(1)).with(ClusterBuilder { c: broken, stale: false, version: None }).plan_at(at(11));
    assert_eq!(plan.deleted_for(DeleteReason::Broken), ["c"]);
}

#[test]
fn hibernate_timeout_marks_broken_with_failed_to_stop_and_a_timed_out_message() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    let t = timeouts(None, Some(5));
    let (c, _) = drive(c, &[(at(0), machines(3)), (at(0), Report::CallAccepted), (at(4), waiting(1))], t);
    assert!(!c.is_broken());
    let s = step(&c, &waiting(1), at(5), t);
    assert!(s.cluster.is_broken());
    let hib = cond(&s.cluster, condition::HIBERNATING);
    assert_eq!(hib.reason, reason::FAILED_TO_STOP);
    assert!(hib.message.contains("timed out after 5m waiting for the cluster to stop"), "{}", hib.message);
    assert_eq!(s.cluster.broken_reason(), Some(reason::FAILED_TO_STOP));
}

/// Seeds 604469 and 604984 of the roles-denied simulation: a transition whose very first look failed (the pool's
/// role refused) entered FailedToStartMachines / FailedToStop without starting its clock, so no timeout ever ran
/// for it, and a machine that got stuck once the role came back held the cluster forever.
#[test]
fn a_transition_whose_first_look_fails_times_out_from_that_look() {
    let refused = || Report::CallFailed { message: "AccessDenied: not authorized to perform sts:AssumeRole".into() };
    for (start, spec, t, call) in [
        (cluster("c").hibernating(), DesiredPower::Running, timeouts(Some(10), None), ActuatorCall::Start),
        (cluster("c").running(), DesiredPower::Hibernating, timeouts(None, Some(10)), ActuatorCall::Stop),
    ] {
        let first = step(&start.spec(spec).c, &refused(), at(0), t);
        assert_eq!(first.cluster.transition_started_at, Some(at(0)), "{spec:?}: the failed look starts the clock");
        assert_eq!(deadline(&first.cluster, t), Some(at(10)), "{spec:?}");
        let (c, calls) = drive(first.cluster, &[(at(1), machines(3)), (at(1), Report::CallAccepted)], t);
        assert_eq!(calls[0], Some(call), "{spec:?}: the call is made once the backoff passed");
        assert_eq!(c.transition_started_at, Some(at(0)), "{spec:?}: the same transition");
        assert!(!step(&c, &waiting(1), at(9), t).cluster.is_broken(), "{spec:?}");
        assert!(step(&c, &waiting(1), at(10), t).cluster.is_broken(), "{spec:?}: a stuck machine times out");
    }

    // A resume asked for while a stop was failing: its failed first look starts the resume's own clock, not the
    // stop's.
    let t = timeouts(Some(10), Some(10));
    let stopping = step(&cluster("c").running().spec(DesiredPower::Hibernating).c, &refused(), at(0), t).cluster;
    let mut resumed = stopping.clone();
    resumed.spec_power_state = Some(DesiredPower::Running);
    let s = step(&resumed, &refused(), at(8), t);
    assert_eq!(
        (s.cluster.power_state, s.cluster.transition_started_at),
        (Some(PowerState::FailedToStartMachines), Some(at(8)))
    );
    assert!(!step(&s.cluster, &waiting(1), at(12), t).cluster.is_broken());
}

/// A cluster written in a transition without its clock (as the first-look failure above left it) gets one at its
/// next step: the timeout runs from there, instead of never.
#[test]
fn a_transition_found_without_its_clock_times_out_from_the_next_look() {
    let t = timeouts(Some(10), Some(10));
    for (state, spec) in [
        (PowerState::FailedToStartMachines, DesiredPower::Running),
        (PowerState::FailedToStop, DesiredPower::Hibernating),
    ] {
        let mut c = cluster("c").spec(spec).c;
        (c.power_state, c.transition_started_at, c.retry_at) = (Some(state), None, Some(at(0)));
        let found = step(&c, &waiting(1), at(1), t);
        assert_eq!(found.cluster.transition_started_at, Some(at(1)), "{state:?}");
        assert!(found.changed, "{state:?}: the clock is written");
        assert!(step(&found.cluster, &waiting(1), at(11), t).cluster.is_broken(), "{state:?}");
    }
}

#[test]
fn no_timeout_when_unset() {
    for spec in [DesiredPower::Running, DesiredPower::Hibernating] {
        let start = if spec == DesiredPower::Running { cluster("c").hibernating() } else { cluster("c").running() };
        let (c, _) =
            drive(start.spec(spec).c, &[(at(0), machines(3)), (at(0), Report::CallAccepted)], PowerLimits::default());
        let s = step(&c, &waiting(3), at(60 * 24 * 7), PowerLimits::default());
        assert!(!s.cluster.is_broken(), "{spec:?}");
        assert_eq!(s.recheck_after, Some(POLL), "{spec:?}: still waiting, a week later");
    }
}

#[test]
fn a_timeout_counts_from_the_start_of_the_transition_not_from_the_last_state_change() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    let t = timeouts(None, Some(10));
    // Stopping at 0, WaitingForMachinesToStop at 8: the deadline is still 10.
    let (c, _) = drive(c, &[(at(0), machines(3)), (at(8), Report::CallAccepted)], t);
    assert!(step(&c, &waiting(1), at(10), t).cluster.is_broken());
}

#[test]
fn installation_provisions_once_nothing_is_under_way_and_completes_running() {
    let mut c = cluster("c").installing().c;
    c.spec_power_state = Some(DesiredPower::Hibernating);
    assert_eq!(probe(&c), Some(Probe::Install));
    let s = step(&c, &Report::Install(Install::Absent), at(0), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Provision));
    let s = step(&s.cluster, &Report::Provisioned { handle: None }, at(0), PowerLimits::default());
    assert_eq!(s.recheck_after, Some(INSTALL_POLL), "installs are polled gently");
    let s = step(&s.cluster, &Report::Install(Install::UnderWay), at(10), PowerLimits::default());
    assert_eq!((s.call, s.recheck_after, s.cluster.installed_at), (None, Some(INSTALL_POLL), None));
    let s = step(&c, &Report::Install(Install::Done), at(30), PowerLimits::default());
    assert_eq!(s.cluster.installed_at, Some(at(30)));
    assert_eq!(s.cluster.power_state, Some(PowerState::Running));
    assert_eq!(s.recheck_after, Some(TimeDelta::zero()), "the spec (Hibernating) takes over at once");
    assert_eq!(probe(&s.cluster), Some(Probe::MachinesStopped));
}

/// A platform that must follow its provisioning (vSphere's clone tasks) gets back what it answered at the next
/// look; the handle is dropped once the cluster is installed, or when its attempt failed.
#[test]
fn a_provisioning_handle_is_kept_until_the_attempt_ends() {
    let c = cluster("c").installing().c;
    let s = step(&c, &Report::Install(Install::Absent), at(0), PowerLimits::default());
    assert!(s.cluster.pending_call.is_some(), "the call is recorded before it is made");
    let handle = Some("task-1,task-2".to_owned());
    let s = step(&s.cluster, &Report::Provisioned { handle: handle.clone() }, at(0), PowerLimits::default());
    assert_eq!(s.cluster.pending_call, None, "its outcome ends the fence: the install is looked at again soon");
    assert_eq!(s.cluster.provision_ref, handle);
    let under_way = step(&s.cluster, &Report::Install(Install::UnderWay), at(1), PowerLimits::default());
    assert_eq!(under_way.cluster.provision_ref, handle);
    let done = step(&s.cluster, &Report::Install(Install::Done), at(5), PowerLimits::default());
    assert_eq!(done.cluster.provision_ref, None);
    let failed = Report::Install(Install::Failed { message: "clone: datastore full".into() });
    let failed = step(&s.cluster, &failed, at(5), PowerLimits::default());
    assert_eq!(failed.cluster.provision_ref, None);
}

/// Bug 6: a failed provisioning broke the cluster at once. It is retried after 1, 2, 4 … minutes, up to the
/// pool's installAttemptsLimit (Hive's), and only then is the cluster broken. A provisioning that fails after it
/// was accepted (an install that fails later) counts the same as one refused at once.
#[test]
fn a_failed_install_is_retried_with_a_growing_backoff_until_the_attempts_limit() {
    let none = Report::Install(Install::Absent);
    let refused = Report::CallFailed { message: "InvalidAMIID.NotFound".into() };
    let failed_later = Report::Install(Install::Failed { message: "InvalidAMIID.NotFound".into() });
    for (how, failed) in [("refused", &refused), ("failed later", &failed_later)] {
        let limits = PowerLimits { install_attempts: 3, ..PowerLimits::default() };
        let mut c = cluster("c").installing().c;
        let mut now = at(0);
        for (attempt, wait) in [(1, 1), (2, 2)] {
            let s = step(&c, &none, now, limits);
            assert_eq!(s.call, Some(ActuatorCall::Provision), "{how}: attempt {attempt}");
            let s = step(&s.cluster, failed, now, limits);
            assert!(!s.cluster.is_broken(), "{how}: attempt {attempt}");
            assert_eq!(s.recheck_after, Some(TimeDelta::minutes(wait)));
            assert_eq!(s.cluster.install_failures, attempt);
            let pf = cond(&s.cluster, condition::PROVISION_FAILED);
            assert!(pf.message.contains(&format!("attempt {attempt} of 3")), "{}", pf.message);
            // A look before the backoff ends makes no attempt.
            let early = step(&s.cluster, &none, now + TimeDelta::seconds(30), limits);
            assert_eq!(early.call, None);
            c = s.cluster;
            now += TimeDelta::minutes(wait);
        }
        let s = step(&c, &none, now, limits);
        let s = step(&s.cluster, failed, now, limits);
        assert!(s.cluster.provision_stopped && s.cluster.is_broken(), "{how}");
        let ps = cond(&s.cluster, condition::PROVISION_STOPPED);
        assert_eq!((ps.status, ps.reason.as_str()), (ConditionStatus::True, reason::INSTALL_ATTEMPTS_LIMIT_REACHED));
        assert!(ps.message.contains("InvalidAMIID.NotFound"), "{}", ps.message);
        assert_eq!(s.cluster.broken_reason(), Some(reason::INSTALL_ATTEMPTS_LIMIT_REACHED), "{how}");
    }
}

#[test]
fn an_install_failing_for_quota_is_not_tried_again_and_says_why() {
    let quota =
        "level=fatal msg=failed to fetch Cluster: failed to fetch dependency of \"Cluster\": failed to generate \
                 asset \"Platform Quota Check\": error(MissingQuota): ec2/L-1216C47A is not available in us-east-1 \
                 because the required number of resources (36) is more than the limit of (32)";
    let failed = Report::Install(Install::Failed { message: quota.into() });
    let none = Report::Install(Install::Absent);
    let c = cluster("c").installing().c;
    let limits = PowerLimits { install_attempts: 3, ..PowerLimits::default() };
    let s = step(&step(&c, &none, at(0), limits).cluster, &failed, at(0), limits);
    assert!(s.cluster.provision_stopped && s.cluster.is_broken(), "a quota is not tried again by default");
    assert_eq!((s.cluster.install_failures, s.call, s.cluster.retry_at), (1, None, None));
    let ps = cond(&s.cluster, condition::PROVISION_STOPPED);
    assert_eq!(ps.reason, "QuotaExceeded");
    assert!(ps
        .message
        .starts_with("an account quota was exceeded, not tried again (installRetryReasons): attempt 1 of 3"));
    assert!(ps.message.contains("MissingQuota"), "{}", ps.message);
    assert_eq!(s.cluster.broken_reason(), Some("QuotaExceeded"));

    // A pool that lists Quota tries it again, saying the class in its ProvisionFailed condition.
    let retried = PowerLimits { retried: Retried::of(&[FailureReason::Quota]), ..limits };
    let s = step(&step(&c, &none, at(0), retried).cluster, &failed, at(0), retried);
    assert!(!s.cluster.is_broken());
    assert_eq!(s.recheck_after, Some(TimeDelta::minutes(1)));
    assert_eq!(cond(&s.cluster, condition::PROVISION_FAILED).reason, "QuotaExceeded");

    // A capacity failure is transient: tried again under the default.
    let capacity = Report::Install(Install::Failed {
        message: "Error: creating EC2 Instance: InsufficientInstanceCapacity: We currently do not have sufficient \
                  m6i.xlarge capacity in the Availability Zone you requested (us-east-1a)."
            .into(),
    });
    let s = step(&step(&c, &none, at(0), limits).cluster, &capacity, at(0), limits);
    assert!(!s.cluster.is_broken());
    assert_eq!(cond(&s.cluster, condition::PROVISION_FAILED).reason, "InsufficientCapacity");

    // Apiary's own call refused is not the installer's failure: tried again (a pool's role may be fixed meanwhile).
    let refused = Report::CallFailed { message: "AccessDenied: not authorized to perform sts:AssumeRole".into() };
    let s = step(&step(&c, &none, at(0), limits).cluster, &refused, at(0), limits);
    assert!(!s.cluster.is_broken());
    assert_eq!(cond(&s.cluster, condition::PROVISION_FAILED).reason, "InstallFailed");
}

#[test]
fn an_install_that_outlives_install_timeout_is_broken() {
    let limits = PowerLimits { install: Some(TimeDelta::minutes(30)), ..PowerLimits::default() };
    let c = cluster("c").installing().c;
    let launching = Report::Install(Install::UnderWay);
    let s = step(&c, &launching, at(29), limits);
    assert_eq!((s.cluster.is_broken(), s.recheck_after), (false, Some(TimeDelta::minutes(1))));
    let s = step(&c, &launching, at(30), limits);
    assert!(s.cluster.is_broken());
    assert_eq!(cond(&s.cluster, condition::PROVISION_STOPPED).reason, reason::INSTALL_TIMED_OUT);
}

/// Seed 004: a platform that cannot stop a cluster's machines sets the Hibernating condition False with reason
/// Unsupported. Nothing is stopped, the cluster stays Running (and assignable), and nothing retries it until the
/// spec changes again.
#[test]
fn a_cluster_whose_machines_cannot_be_stopped_stays_running_and_says_unsupported() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    assert_eq!(probe(&c), Some(Probe::MachinesStopped));
    let unsupported = Report::Unsupported { message: "vm-1: ephemeral OS disk cannot be deallocated".into() };
    let s = step(&c, &unsupported, at(1), PowerLimits::default());
    assert_eq!((s.call, s.recheck_after, s.wakes_pool), (None, None, false));
    let c = s.cluster;
    assert_eq!(c.power_state, Some(PowerState::Running));
    assert!(c.is_running(), "still assignable");
    let hib = cond(&c, condition::HIBERNATING);
    assert_eq!((hib.status, hib.reason.as_str()), (ConditionStatus::False, reason::UNSUPPORTED));
    assert!(hib.message.contains("ephemeral OS disk"), "{}", hib.message);
    assert!(find_condition(&c.conditions, condition::READY).is_none(), "Ready is left as it was");
    assert!(hibernation_unsupported(&c));
    assert!(!in_progress(&c), "not failing forever: nothing left to do");
    // Looked at again (a nudge): it is Running, as it is driven now.
    assert_eq!(probe(&c), Some(Probe::MachinesRunning));
    let again = step(&c, &machines(0), at(2), PowerLimits::default());
    assert!(!again.changed);

    // Asked to run: the condition says so again. Asked to hibernate once more: the platform is asked again.
    let mut running = c.clone();
    running.spec_power_state = Some(DesiredPower::Running);
    let s = step(&running, &machines(0), at(3), PowerLimits::default());
    assert_eq!(cond(&s.cluster, condition::HIBERNATING).reason, reason::RESUMING_OR_RUNNING);
    let mut hibernate = s.cluster;
    hibernate.spec_power_state = Some(DesiredPower::Hibernating);
    assert_eq!(probe(&hibernate), Some(Probe::MachinesStopped));
    assert_eq!(step(&hibernate, &machines(3), at(4), PowerLimits::default()).call, Some(ActuatorCall::Stop));
}

/// A resume under way when the spec turns to Hibernating on a platform that cannot stop: the resume carries on
/// to Running rather than stalling half way, and the timeouts still apply to it.
#[test]
fn an_unsupported_hibernation_during_a_resume_lets_the_resume_finish() {
    let c = cluster("c").resuming().spec(DesiredPower::Hibernating).c;
    let unsupported = Report::Unsupported { message: "cannot stop".into() };
    let s = step(&c, &unsupported, at(1), PowerLimits::default());
    assert_eq!(s.recheck_after, Some(TimeDelta::zero()), "look again at once, as a resume");
    assert!(in_progress(&s.cluster));
    assert_eq!(probe(&s.cluster), Some(Probe::MachinesRunning));
    let s = step(&s.cluster, &machines(0), at(2), PowerLimits::default());
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForNodes));
    let s = step(&s.cluster, &Report::Nodes(Readiness::Ready), at(3), PowerLimits::default());
    assert_eq!(s.cluster.power_state, Some(PowerState::Running));
    assert_eq!(cond(&s.cluster, condition::HIBERNATING).reason, reason::UNSUPPORTED);
    assert!(!in_progress(&s.cluster));
}

#[test]
fn no_machine_found_is_never_running() {
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let s = step(&c, &Report::Machines { not_ready: 0, total: 0, actionable: 0 }, at(0), PowerLimits::default());
    assert_ne!(s.cluster.power_state, Some(PowerState::Running));
}

/// Bug 1: a resume asked for while the machines were still stopping started nothing and then only polled. Now
/// the start is re-issued on every check while a machine can be started, so it starts them once they stop.
#[test]
fn a_resume_asked_while_the_machines_stop_starts_them_once_they_have_stopped() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    let (c, _) = drive(c, &[(at(0), machines(3)), (at(0), Report::CallAccepted)], PowerLimits::default());
    assert_eq!(c.power_state, Some(PowerState::WaitingForMachinesToStop));
    let mut c = c;
    c.spec_power_state = Some(DesiredPower::Running);
    // Still stopping: nothing can be started yet.
    let s = step(&c, &waiting(3), at(1), PowerLimits::default());
    assert_eq!((s.call, s.recheck_after), (None, Some(POLL)));
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForMachines));
    assert_eq!(s.cluster.transition_started_at, Some(at(1)), "a resume began");
    // Stopped: start them.
    let s = step(&s.cluster, &machines(3), at(2), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Start));
    // One started, two still stopped (the cloud refused them once): the start is made again.
    let s = step(&s.cluster, &Report::CallAccepted, at(2), PowerLimits::default());
    let s =
        step(&s.cluster, &Report::Machines { not_ready: 2, total: 3, actionable: 2 }, at(3), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Start));
}

/// Bug 3: a step that calls the actuator records the call on the cluster first (with the state it leads to), and
/// others keep off until its outcome clears it or the fence passes.
#[test]
fn a_call_is_recorded_before_it_is_made_and_fences_others_off() {
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    let s = step(&c, &machines(3), at(0), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Stop));
    assert_eq!(s.cluster.power_state, Some(PowerState::Stopping), "not Running: no claim takes it");
    assert_eq!(s.cluster.pending_call.map(|p| p.call), Some(ActuatorCall::Stop));
    assert!(s.changed, "the intent is written before the call");
    assert_eq!(fenced_until(&s.cluster, at(0)), Some(at(0) + CALL_FENCE));
    // The outcome clears it.
    let done = step(&s.cluster, &Report::CallAccepted, at(0), PowerLimits::default());
    assert_eq!(done.cluster.pending_call, None);
    // A call whose maker died is forgotten once the fence passes, and the machines are looked at afresh.
    let later = at(0) + CALL_FENCE;
    assert_eq!(fenced_until(&s.cluster, later), None);
    let again = step(&s.cluster, &machines(3), later, PowerLimits::default());
    assert_eq!(again.call, Some(ActuatorCall::Stop), "re-issued");
    assert_eq!(again.cluster.pending_call.map(|p| p.at), Some(later));
}

/// Bug 7: refused terminations were retried every 15 seconds forever, silently. They back off (15 s, doubling,
/// at most 15 minutes) and the DeprovisionFailed condition names the machines.
#[test]
fn refused_terminations_back_off_and_are_surfaced() {
    let c = cluster("c").deleting().c;
    let refused = Termination { remaining: 2, refused: vec![("i-1".into(), "OperationNotPermitted".into())] };
    let mut now = at(0);
    let mut c = c;
    let mut waits = vec![];
    for _ in 0..8 {
        let s = deprovision_step(&c, &refused, now);
        assert!(!s.done);
        let wait = s.recheck_after.expect("retried");
        waits.push(wait.num_seconds());
        c = s.cluster;
        now += wait;
    }
    assert_eq!(waits, [15, 30, 60, 120, 240, 480, 900, 900]);
    let k = cond(&c, condition::DEPROVISION_FAILED);
    assert_eq!((k.status, k.reason.as_str()), (ConditionStatus::True, reason::TERMINATION_REFUSED));
    assert!(k.message.contains("i-1: OperationNotPermitted"), "{}", k.message);
    let done = deprovision_step(&c, &Termination { remaining: 0, refused: vec![] }, now);
    assert!(done.done);
}

/// Machines still going after a termination were looked at every 15 seconds however long they took to go (an
/// Azure resource group's deletion, an installer's destroy: minutes), each look a call to the cloud. A deprovision
/// is looked at less often as it ages: gaps of half its age, 15 s to a minute.
#[test]
fn a_deprovision_under_way_is_looked_at_less_often_as_it_ages() {
    let mut c = cluster("c").deleting().c;
    c.deleting_since = Some(at(0));
    let going = Termination { remaining: 2, refused: vec![] };
    let mut now = at(0);
    let mut gaps = vec![];
    for _ in 0..9 {
        let s = deprovision_step(&c, &going, now);
        assert!(!s.done);
        assert_eq!(s.cluster, c, "a look that finds the machines going writes nothing");
        let gap = s.recheck_after.expect("looked at again");
        gaps.push(gap.num_seconds());
        now += gap;
    }
    assert_eq!(gaps, [15, 15, 15, 22, 33, 50, 60, 60, 60]);
    // Deleting since a time not recorded (before this was): every poll, as before.
    c.deleting_since = None;
    assert_eq!(deprovision_step(&c, &going, at(600)).recheck_after, Some(POLL));
}

#[test]
fn nothing_left_is_not_done_while_a_provisioning_call_may_still_land() {
    let mut c = cluster("c").deleting().c;
    c.pending_call = Some(PendingCall { call: ActuatorCall::Provision, at: at(0) });
    let none = Termination { remaining: 0, refused: vec![] };
    let soon = at(0) + TimeDelta::seconds(30);
    let s = deprovision_step(&c, &none, soon);
    assert!(!s.done);
    assert_eq!(s.recheck_after, Some(CALL_FENCE - TimeDelta::seconds(30)), "looked at again when the fence passes");
    assert!(deprovision_step(&c, &none, at(0) + CALL_FENCE).done);
    c.pending_call = Some(PendingCall { call: ActuatorCall::Stop, at: at(0) });
    assert!(deprovision_step(&c, &none, soon).done, "a stop makes no machine");
}

#[test]
fn machines_started_behind_a_hibernating_clusters_back_are_stopped_again() {
    let c = cluster("c").hibernating().c;
    let s = step(&c, &machines(2), at(0), PowerLimits::default());
    assert_eq!((s.cluster.power_state, s.call), (Some(PowerState::Stopping), Some(ActuatorCall::Stop)));
}

#[test]
fn deleting_and_broken_clusters_are_not_driven() {
    assert_eq!(probe(&cluster("c").deleting().c), None);
    assert_eq!(probe(&cluster("c").broken().c), None);
    let s = step(&cluster("c").broken().spec(DesiredPower::Running).c, &machines(3), at(0), PowerLimits::default());
    assert_eq!((s.changed, s.call), (false, None));
}

#[test]
fn clusters_installing_in_transition_or_deleting_are_in_progress_and_settled_or_broken_ones_are_not() {
    let cases = [
        ("settled hibernating", cluster("c").hibernating().c, false),
        ("settled running", cluster("c").running().c, false),
        ("installing", cluster("c").installing().c, true),
        ("asked to run while hibernating", cluster("c").hibernating().spec(DesiredPower::Running).c, true),
        ("resuming", cluster("c").resuming().c, true),
        ("deleting", cluster("c").deleting().c, true),
        ("broken", cluster("c").broken().spec(DesiredPower::Running).c, false),
    ];
    for (what, c, want) in cases {
        assert_eq!(in_progress(&c), want, "{what}");
    }
}

/// Found by the whole-system simulation on vSphere: a resume asked while a guest shutdown was still landing saw
/// the machines running, moved to WaitingForNodes, and the shutdown then powered them off. Waiting for nodes, only
/// "are the nodes ready?" was asked, so nothing started the machines again until the resume timed out and broke
/// the cluster. A machine found down while waiting for nodes sends the resume back to waiting for machines, and
/// a start is made again.
#[test]
fn machines_that_go_down_while_waiting_for_nodes_are_started_again() {
    let c = cluster("c").resuming().c;
    let c = step(&c, &machines(0), at(1), PowerLimits::default()).cluster;
    assert_eq!((c.power_state, probe(&c)), (Some(PowerState::WaitingForNodes), Some(Probe::NodesReady)));
    // The nodes' probe finds the machines down, still stopping: wait for them, as for machines.
    let s = step(&c, &waiting(3), at(2), PowerLimits::default());
    assert_eq!((s.cluster.power_state, s.call), (Some(PowerState::WaitingForMachines), None));
    assert_eq!(probe(&s.cluster), Some(Probe::MachinesRunning));
    assert_eq!(cond(&s.cluster, condition::READY).reason, reason::WAITING_FOR_MACHINES);
    // Stopped: started again, within the same transition (its timeout still counts from the resume).
    let s = step(&s.cluster, &machines(3), at(3), PowerLimits::default());
    assert_eq!(s.call, Some(ActuatorCall::Start));
    assert_eq!(s.cluster.transition_started_at, c.transition_started_at);
}

/// Found by the whole-system simulation on vSphere: a cluster marked for deletion while its provisioning call was
/// under way dropped the call's outcome, and with it the clone tasks to wait for; the clones landed after the
/// cluster was gone. Its outcome is kept (and its recorded call ended) whatever became of the cluster.
#[test]
fn a_provisioning_outcome_is_kept_when_the_cluster_was_marked_for_deletion_meanwhile() {
    let c = cluster("c").installing().c;
    let mut asked = step(&c, &Report::Install(Install::Absent), at(0), PowerLimits::default()).cluster;
    assert!(asked.pending_call.is_some());
    asked.deleting = true;
    let handle = Some("0=task-1".to_owned());
    let s = step(&asked, &Report::Provisioned { handle: handle.clone() }, at(0), PowerLimits::default());
    assert!(s.changed);
    assert_eq!((s.cluster.provision_ref, s.cluster.pending_call), (handle, None));
    assert_eq!((s.call, s.recheck_after), (None, None), "the deprovisioning drives it from here");
    let mut broken = asked.clone();
    broken.deleting = false;
    broken.provision_stopped = true;
    let s = step(&broken, &Report::CallFailed { message: "quota".into() }, at(0), PowerLimits::default());
    assert_eq!((s.changed, s.cluster.pending_call), (true, None));
    assert_eq!(s.cluster.install_failures, 0, "a broken cluster counts no more attempts");
}

// ── PowerStatePaused (seed 004) ─────────────────────────────────────────────────────────────────────────

#[test]
fn a_paused_cluster_is_neither_started_nor_stopped_and_both_conditions_say_power_state_paused() {
    let mut c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    assert!(pause(&mut c, at(1)));
    assert!(!pause(&mut c, at(2)), "pausing twice changes nothing");
    for kind in [condition::HIBERNATING, condition::READY] {
        let k = cond(&c, kind);
        assert_eq!(
            (k.status, k.reason.as_str(), k.last_transition_time),
            (ConditionStatus::Unknown, reason::POWER_STATE_PAUSED, at(1)),
            "{kind}"
        );
    }
    assert_eq!(probe(&c), None, "nothing is asked of the platform");
    assert!(!in_progress(&c), "the sweep does not nudge it");
    let s = step(&c, &machines(3), at(2), PowerLimits::default());
    assert_eq!((s.call, s.changed, s.recheck_after), (None, false, None), "a step on a paused cluster does nothing");
}

#[test]
fn a_paused_transition_never_times_out_and_counts_its_timeout_from_the_unpause() {
    let limits = timeouts(Some(10), None);
    let mut c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let s = step(&c, &machines(3), at(0), limits);
    c = s.cluster;
    assert_eq!(c.power_state, Some(PowerState::StartingMachines));
    assert_eq!(deadline(&c, limits), Some(at(10)));
    pause(&mut c, at(1));
    assert_eq!(deadline(&c, limits), None, "no timeout runs while paused");

    assert!(unpause(&mut c, at(60)));
    assert!(!unpause(&mut c, at(61)), "unpausing twice changes nothing");
    assert_eq!(deadline(&c, limits), Some(at(70)), "the timeout counts from the unpause");
    let ready = cond(&c, condition::READY);
    assert_eq!((ready.status, ready.reason.as_str()), (ConditionStatus::False, reason::STARTING_MACHINES));
    let hib = cond(&c, condition::HIBERNATING);
    assert_eq!((hib.status, hib.reason.as_str()), (ConditionStatus::False, reason::RESUMING_OR_RUNNING));
    assert_eq!(probe(&c), Some(Probe::MachinesRunning), "power management carries on");
    assert!(!step(&c, &machines(3), at(61), limits).cluster.is_broken());
}

#[test]
fn an_install_carries_on_while_paused_and_the_installed_cluster_stays_paused() {
    let mut c = cluster("c").installing().spec(DesiredPower::Hibernating).c;
    pause(&mut c, at(1));
    assert_eq!(probe(&c), Some(Probe::Install), "installing is not power management");
    let s = step(&c, &Report::Install(Install::Done), at(2), PowerLimits::default());
    let c = s.cluster;
    assert_eq!(c.installed_at, Some(at(2)));
    assert_eq!(s.recheck_after, None, "the spec's power state waits for the unpause");
    assert_eq!(cond(&c, condition::READY).reason, reason::POWER_STATE_PAUSED);
    assert_eq!(probe(&c), None);
}

#[test]
fn an_external_installer_names_the_cluster_it_made_and_what_it_says_of_it() {
    let c = cluster("c").installing().spec(DesiredPower::Running).c;
    let outputs: std::collections::BTreeMap<String, String> =
        [("apiUrl".to_string(), "https://api.c.example.com:6443".to_string())].into();
    let installed = Install::Installed { infra_id: "c-9k2xq".into(), outputs: outputs.clone() };
    let s = step(&c, &Report::Install(installed), at(30), PowerLimits::default());
    assert_eq!(s.cluster.installed_at, Some(at(30)));
    assert_eq!(s.cluster.infra_id, "c-9k2xq", "the platform powers the installer's machines");
    assert_eq!(s.cluster.outputs, outputs);
    assert_eq!(s.cluster.power_state, Some(PowerState::Running));
    assert!(s.wakes_pool);
}

// ── readiness (seed 004's waiting states, seed 002) ─────────────────────────────────────────────────────

fn checked(pause_minutes: i64) -> PowerLimits {
    PowerLimits { readiness: Some(TimeDelta::minutes(pause_minutes)), ..timeouts(Some(30), None) }
}

#[test]
fn with_a_readiness_check_a_resume_settles_then_waits_for_the_check_before_it_is_running() {
    let limits = checked(2);
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let (c, _) = drive(c, &[(at(0), machines(3)), (at(1), Report::CallAccepted), (at(3), machines(0))], limits);
    assert_eq!(c.power_state, Some(PowerState::WaitingForNodes));
    let s = step(&c, &Report::Nodes(Readiness::Ready), at(4), limits);
    assert_eq!(s.cluster.power_state, Some(PowerState::PausingForClusterOperatorsToSettle));
    assert_eq!(s.recheck_after, Some(TimeDelta::minutes(2)), "the operators settle first");
    assert_eq!(cond(&s.cluster, condition::READY).reason, reason::PAUSING_FOR_CLUSTER_OPERATORS_TO_SETTLE);
    let c = s.cluster;
    assert_eq!(probe(&c), Some(Probe::Readiness));
    let early = step(&c, &Report::Ready(Readiness::Ready), at(5), limits);
    assert_eq!(early.cluster.power_state, Some(PowerState::PausingForClusterOperatorsToSettle), "not before the pause");
    assert_eq!(early.recheck_after, Some(TimeDelta::minutes(1)));

    let not_yet = Report::Ready(Readiness::NotReady { message: "503: etcd is not ready".into() });
    let s = step(&c, &not_yet, at(6), limits);
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForClusterOperators));
    let ready = cond(&s.cluster, condition::READY);
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        (reason::WAITING_FOR_CLUSTER_OPERATORS, "503: etcd is not ready")
    );
    assert!(!s.cluster.is_running(), "not assignable while the check fails");
    assert_eq!(s.recheck_after, Some(POLL));
    let s = step(&s.cluster, &Report::Ready(Readiness::Ready), at(7), limits);
    assert!(s.cluster.is_running());
    assert!(s.wakes_pool, "a Running cluster can serve a claim");
    assert_eq!(s.cluster.last_resume_seconds, Some(7 * 60));
}

#[test]
fn a_cluster_the_check_cannot_reach_says_unreachable_and_is_broken_by_the_resume_timeout() {
    let limits = checked(0);
    let mut c = cluster("c").resuming().c;
    c.power_state = Some(PowerState::WaitingForNodes);
    let s = step(&c, &Report::Nodes(Readiness::Ready), at(1), limits);
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForClusterOperators), "no pause: straight to the check");
    assert_eq!(s.recheck_after, Some(TimeDelta::zero()));
    let gone = Report::Ready(Readiness::Unreachable { message: "connection refused".into() });
    let s = step(&s.cluster, &gone, at(2), limits);
    let k = cond(&s.cluster, condition::UNREACHABLE);
    assert_eq!(
        (k.status, k.reason.as_str(), k.message.as_str()),
        (ConditionStatus::True, "ClusterUnreachable", "connection refused")
    );
    let later = step(&s.cluster, &gone, at(31), limits);
    assert!(later.cluster.is_broken(), "seed 002: a cluster that never passes is replaced");
    assert_eq!(cond(&later.cluster, condition::HIBERNATING).reason, reason::FAILED_TO_START);

    let back = step(&s.cluster, &Report::Ready(Readiness::Ready), at(3), limits);
    let k = cond(&back.cluster, condition::UNREACHABLE);
    assert_eq!((k.status, k.reason.as_str()), (ConditionStatus::False, "ClusterReachable"));
    assert!(back.cluster.is_running());
}

#[test]
fn nodes_the_cluster_says_are_not_ready_hold_the_resume_in_waiting_for_nodes_and_say_why() {
    let limits = checked(2);
    let mut c = cluster("c").resuming().c;
    c.power_state = Some(PowerState::WaitingForNodes);
    let not_ready = Report::Nodes(Readiness::NotReady { message: "node master-1 is not Ready".into() });
    let s = step(&c, &not_ready, at(1), limits);
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForNodes));
    let ready = cond(&s.cluster, condition::READY);
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        (reason::WAITING_FOR_NODES, "node master-1 is not Ready")
    );
    assert_eq!(s.recheck_after, Some(POLL));
    assert_eq!(probe(&s.cluster), Some(Probe::NodesReady), "the nodes are asked again, not the operators");
    let again = step(&s.cluster, &not_ready, at(2), limits);
    assert_eq!(again.cluster, s.cluster, "the same answer changes nothing");

    let gone = Report::Nodes(Readiness::Unreachable { message: "api: connection refused".into() });
    let s = step(&s.cluster, &gone, at(3), limits);
    let k = cond(&s.cluster, condition::UNREACHABLE);
    assert_eq!((k.status, k.reason.as_str()), (ConditionStatus::True, "ClusterUnreachable"));
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForNodes));

    let s = step(&s.cluster, &Report::Nodes(Readiness::Ready), at(4), limits);
    let k = cond(&s.cluster, condition::UNREACHABLE);
    assert_eq!((k.status, k.reason.as_str()), (ConditionStatus::False, "ClusterReachable"));
    assert_eq!(s.cluster.power_state, Some(PowerState::PausingForClusterOperatorsToSettle));
    assert_eq!(cond(&s.cluster, condition::READY).message, "", "the nodes' message is not kept");
}

#[test]
fn with_a_readiness_check_a_new_cluster_is_proven_before_it_is_running() {
    let limits = checked(0);
    let c = cluster("c").installing().spec(DesiredPower::Running).c;
    let s = step(&c, &Report::Install(Install::Done), at(10), limits);
    assert_eq!(s.cluster.installed_at, Some(at(10)));
    assert_eq!(s.cluster.power_state, Some(PowerState::WaitingForNodes));
    assert!(!s.cluster.is_running(), "installed, but not yet assignable");
    assert_eq!(probe(&s.cluster), Some(Probe::NodesReady));
}

#[test]
fn an_installers_answer_that_cannot_be_used_fails_the_attempt() {
    let c = cluster("c").installing().spec(DesiredPower::Running).c;
    let bad = Install::Installed { infra_id: "Not A Label".into(), outputs: Default::default() };
    let s = step(&c, &Report::Install(bad), at(30), PowerLimits::default());
    assert_eq!(s.cluster.installed_at, None);
    assert_eq!(s.cluster.infra_id, c.infra_id, "nothing of the answer is taken");
    assert_eq!(s.cluster.install_failures, 1);
    let k = cond(&s.cluster, condition::PROVISION_FAILED);
    assert!(k.message.contains("not usable") && k.message.contains("infraId"), "{}", k.message);
}

/// A pool whose installs take about 40 minutes at the quickest, resumes 3 and stops 2.
fn paced(to_running: Option<i64>) -> PowerLimits {
    let pace = Pace { install_seconds: Some(2400), resume_seconds: Some(180), stop_seconds: Some(120) };
    PowerLimits { pace, ..timeouts(to_running, None) }
}

#[test]
fn a_paced_install_is_looked_at_more_and_more_sparsely_until_the_pools_quick_time_then_every_minute() {
    let c = cluster("c").installing().c;
    let under_way = Report::Install(Install::UnderWay);
    let look = |c: &Cluster, m: i64| step(c, &under_way, at(m), paced(None)).recheck_after.unwrap();
    // Gaps as long as the install's age, at most five minutes, ending a minute before the quick time (40 min).
    let looks: Vec<i64> = [0, 1, 2, 4, 8, 13, 33, 36, 38, 39, 45].iter().map(|m| look(&c, *m).num_seconds()).collect();
    assert_eq!(looks, [60, 60, 120, 240, 300, 300, 300, 180, 60, 60, 60]);
    let provisioned = step(&c, &Report::Provisioned { handle: None }, at(0), paced(None));
    assert_eq!(provisioned.recheck_after, Some(INSTALL_POLL), "the first look comes a minute after provisioning");
    // A second attempt, and a pool whose pace is not known yet, are looked at every minute.
    let mut again = c.clone();
    again.install_failures = 1;
    assert_eq!(look(&again, 10), INSTALL_POLL);
    assert_eq!(step(&c, &under_way, at(10), PowerLimits::default()).recheck_after, Some(INSTALL_POLL));
    // The install timeout still gets its look at the deadline.
    let limits = PowerLimits { install: Some(TimeDelta::minutes(12)), ..paced(None) };
    assert_eq!(step(&c, &under_way, at(10), limits).recheck_after, Some(TimeDelta::minutes(2)));
}

#[test]
fn a_paced_resume_is_looked_at_every_minute_until_the_pools_quick_time_then_every_paced_poll_a_stop_every_minute() {
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let started = step(&c, &machines(3), at(0), paced(None)).cluster;
    let s = step(&started, &Report::CallAccepted, at(0), paced(None));
    assert_eq!(s.recheck_after, Some(SPARSE_POLL), "a minute after the start");
    let c = s.cluster;
    let after = |secs: i64| {
        let now = at(0) + TimeDelta::seconds(secs);
        step(&c, &waiting(2), now, paced(None)).recheck_after.unwrap().num_seconds()
    };
    // The quick resume is 3 minutes: looks every 30 s from 30 s before it (every 15 s until 2026-11-27: no claim
    // waits on it, and one that comes hurries the tick).
    assert_eq!([after(60), after(120), after(150), after(165), after(240)], [60, 30, 30, 30, 30]);
    assert_eq!(PACED_POLL, POLL * 2);
    // Without a known pace (a new pool, or claims waiting: `Pool::power_limits`), every poll.
    assert_eq!(step(&c, &waiting(2), at(1), timeouts(None, None)).recheck_after, Some(POLL));
    // Seed 002's timeout is looked at when it falls: a 2-minute limit breaks the cluster on time.
    let s = step(&c, &waiting(2), at(1) + TimeDelta::seconds(30), paced(Some(2)));
    assert_eq!(s.recheck_after, Some(TimeDelta::seconds(30)));
    assert!(step(&s.cluster, &waiting(2), at(2), paced(Some(2))).cluster.is_broken());

    // A stop: every minute throughout, past the quick stop (2 minutes) too, while no claim waits: nothing waits
    // on its end. Every poll without a known pace.
    let c = cluster("c").running().spec(DesiredPower::Hibernating).c;
    let stopping = step(&c, &machines(3), at(0), paced(None)).cluster;
    let s = step(&stopping, &Report::CallAccepted, at(0), paced(None));
    assert_eq!(s.recheck_after, Some(SPARSE_POLL));
    let late = step(&s.cluster, &waiting(1), at(0) + TimeDelta::seconds(110), paced(None));
    assert_eq!(late.recheck_after, Some(SPARSE_POLL));
    let unpaced = step(&s.cluster, &waiting(1), at(0) + TimeDelta::seconds(110), timeouts(None, None));
    assert_eq!(unpaced.recheck_after, Some(POLL));
    let done = step(&late.cluster, &waiting(0), at(2) + TimeDelta::seconds(5), paced(None)).cluster;
    assert_eq!((done.power_state, done.last_stop_seconds), (Some(PowerState::Hibernating), Some(125)));
}

/// However many hostile requests a cluster holds, each is said once in a resume: the first 16 by name (in its
/// condition and the trail), the next 240 remembered by their names' hashes, and the rest in one line, once.
#[test]
fn refusals_past_sixteen_are_said_once_however_many_there_are() {
    use apiary_planner::power::certificates::{
        new_refusals, note, CertificateLook, Refusal, MAX_HASHED, MAX_NAMED, MORE,
    };
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let look = |range: std::ops::Range<usize>| CertificateLook {
        approved: vec![],
        refused: range.map(|i| Refusal { name: format!("csr-{i}"), why: "no node x in the cluster".into() }).collect(),
    };
    let first = look(0..300);
    let told = new_refusals(&c, &first);
    assert_eq!(told.len(), MAX_NAMED + MAX_HASHED + 1, "each remembered one, and the rest once");
    assert_eq!(told.last().map(|r| r.name.as_str()), Some(MORE));
    let mut after = c.clone();
    note(&mut after, &first);
    let kept = after.node_certificates.clone().expect("kept");
    assert_eq!((kept.refused.len(), kept.refused_hashes.len(), kept.more), (MAX_NAMED, MAX_HASHED, true));
    assert!(new_refusals(&after, &first).is_empty(), "the same 300 again: nothing new");
    assert!(new_refusals(&after, &look(0..400)).is_empty(), "a hundred more past the remembered: said already");
    let mut later = after.clone();
    note(&mut later, &look(0..400));
    assert_eq!(later.node_certificates, after.node_certificates, "nothing grows");
}

/// Seed 004's CSRs: what the readiness check approved and left pending at each look of a resume is kept on the
/// cluster, counted in its Ready condition, told to the trail once, and summed up when it is Running.
#[test]
fn a_resumes_certificate_requests_are_counted_in_its_condition_and_told_once_to_the_trail() {
    use apiary_planner::events::{of_cluster, EventType};
    use apiary_planner::power::certificates::{new_refusals, note, CertificateLook, Refusal};
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let c = step(&c, &machines(3), at(1), PowerLimits::default()).cluster;
    let c = step(&c, &Report::CallAccepted, at(1), PowerLimits::default()).cluster;
    let c = step(&c, &machines(0), at(2), PowerLimits::default()).cluster;
    let not_ready = |n: u32| Report::Nodes(Readiness::NotReady { message: format!("{n} of 3 nodes are not Ready") });
    let hostile = Refusal { name: "csr-9".into(), why: "no node x in the cluster".into() };
    let first = CertificateLook {
        approved: vec!["csr-1 (node a's client certificate)".into(), "csr-2 (node a's serving certificate)".into()],
        refused: vec![hostile.clone()],
    };

    let mut after = step(&c, &not_ready(3), at(3), PowerLimits::default()).cluster;
    assert!(note(&mut after, &first));
    assert_eq!(
        cond(&after, condition::READY).message,
        "2 node certificate requests approved since the resume began, 1 left pending; 3 of 3 nodes are not Ready"
    );
    let told: Vec<(EventType, Option<String>)> =
        of_cluster(&c, Some(&after), at(3)).into_iter().map(|e| (e.kind, e.message)).collect();
    assert_eq!(
        told,
        [
            (
                EventType::NodeCertificatesApproved,
                Some("approved 2: csr-1 (node a's client certificate), csr-2 (node a's serving certificate)".into())
            ),
            (EventType::NodeCertificatesLeftPending, Some("left pending: csr-9: no node x in the cluster".into())),
        ]
    );

    // The next look finds the hostile request again, and nothing else: nothing more is told, the count stays.
    assert_eq!(new_refusals(&c, &first).len(), 1, "new to the resume");
    let again = CertificateLook { approved: vec![], refused: vec![hostile] };
    assert!(new_refusals(&after, &again).is_empty(), "found again, not new");
    let mut next = step(&after, &not_ready(1), at(4), PowerLimits::default()).cluster;
    note(&mut next, &again);
    assert!(of_cluster(&after, Some(&next), at(4)).is_empty(), "told once");
    assert!(cond(&next, condition::READY).message.starts_with("2 node certificate requests approved"));

    let running = step(&next, &Report::Nodes(Readiness::Ready), at(5), PowerLimits::default()).cluster;
    let told = of_cluster(&next, Some(&running), at(5));
    assert_eq!(told[0].kind, EventType::ClusterRunning);
    assert_eq!(told[0].message.as_deref(), Some("resumed in 240s, 2 node certificate requests approved"));

    // The next resume starts counting afresh.
    let asleep = Cluster { spec_power_state: Some(DesiredPower::Hibernating), ..running };
    let stopping = step(&asleep, &machines(3), at(6), PowerLimits::default()).cluster;
    assert_eq!(stopping.node_certificates, None);
}
