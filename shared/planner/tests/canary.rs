//! Resume canaries: long-asleep standbys are resumed in quiet hours, a few at a time, and sent back to sleep.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::*;
use support::*;

const DAY: i64 = 24 * 60;

fn power_of(plan: &Plan, id: &str) -> Option<DesiredPower> {
    plan.actions.iter().find_map(|a| match a {
        Action::SetPowerState { cluster, power_state, .. } if cluster == id => Some(*power_state),
        _ => None,
    })
}

/// One Running spare (the oldest cluster: step 7 keeps the oldest Running), and three standbys installed at day
/// 0, 1 and 2, all asleep since.
fn pool_of_sleepers(p: PoolBuilder) -> Scenario {
    given(p.size(4).running_count(1))
        .with(cluster("spare").created(at(-DAY)).running().running_since(at(3 * DAY)))
        .with(cluster("old").created(at(0)).hibernating())
        .with(cluster("mid").created(at(DAY)).hibernating())
        .with(cluster("new").created(at(2 * DAY)).hibernating())
}

#[test]
fn the_longest_asleep_standbys_are_resumed_a_few_at_a_time() {
    let snap = pool_of_sleepers(pool().canaries("36h", 2, None)).snapshot();
    let plan = plan(&snap, at(3 * DAY), 1);
    // Asleep 72 h and 48 h are past 36 h; the one asleep 24 h is not.
    assert_eq!(power_of(&plan, "old"), Some(DesiredPower::Running));
    assert_eq!(power_of(&plan, "mid"), Some(DesiredPower::Running));
    assert_eq!(power_of(&plan, "new"), None);
    // The next wake-up is when the third has slept 36 h.
    assert_eq!(plan.wake_at, Some(at(2 * DAY + 36 * 60)));
}

#[test]
fn one_at_a_time_means_one_until_it_is_back() {
    let snap = pool_of_sleepers(pool().canaries("36h", 1, None)).snapshot();
    let first = plan(&snap, at(3 * DAY), 1);
    assert_eq!(power_of(&first, "old"), Some(DesiredPower::Running));
    assert_eq!(power_of(&first, "mid"), None);
    let resuming = apply(&snap, &first).unwrap().unwrap();
    // While it resumes, no second one; re-planning writes nothing.
    assert_eq!(plan(&resuming, at(3 * DAY + 2), 2).writes().count(), 0);
    // Back and Running: it is sent back to sleep, and the next one goes.
    let mut back = resuming.clone();
    let old = back.clusters.iter_mut().find(|c| c.id == "old").unwrap();
    old.power_state = Some(PowerState::Running);
    old.running_since = Some(at(3 * DAY + 5));
    let next = plan(&back, at(3 * DAY + 5), 3);
    assert_eq!(power_of(&next, "old"), Some(DesiredPower::Hibernating));
    assert_eq!(power_of(&next, "mid"), Some(DesiredPower::Running));
}

#[test]
fn outside_their_hours_canaries_wait_for_them() {
    let snap = pool_of_sleepers(pool().canaries("36h", 2, Some("01:00-05:00"))).snapshot();
    // Day 3 at 12:00: closed; the window opens at 01:00 on day 4.
    let plan = plan(&snap, at(3 * DAY + 12 * 60), 1);
    assert_eq!(power_of(&plan, "old"), None);
    assert_eq!(plan.wake_at, Some(at(4 * DAY + 60)));
    let plan = apiary_planner::plan(&snap, at(4 * DAY + 60), 1);
    assert_eq!(power_of(&plan, "old"), Some(DesiredPower::Running));
}

#[test]
fn a_canary_that_never_comes_back_breaks_and_is_replaced() {
    let snap = pool_of_sleepers(pool().canaries("36h", 1, None).resume_timeout("15m")).snapshot();
    let first = plan(&snap, at(3 * DAY), 1);
    let mut stuck = apply(&snap, &first).unwrap().unwrap();
    let old = stuck.clusters.iter_mut().find(|c| c.id == "old").unwrap();
    old.power_state = Some(PowerState::WaitingForMachines);
    old.transition_started_at = Some(at(3 * DAY));
    old.broken_at = Some(at(3 * DAY + 15));
    let plan = plan(&stuck, at(3 * DAY + 16), 2);
    assert!(plan.actions.iter().any(|a| matches!(a, Action::DeleteCluster { cluster, .. } if cluster == "old")));
    // And the next canary goes.
    assert_eq!(power_of(&plan, "mid"), Some(DesiredPower::Running));
}

#[test]
fn bad_canary_settings_are_refused_by_field() {
    let mut spec = pool().size(3).spec;
    spec.resume_canaries = Some(ResumeCanaries {
        after: GoDuration::new("soon"),
        at_a_time: Some(0),
        hours: Some("25:00-03:00".into()),
        time_zone: Some("Nowhere/Else".into()),
    });
    let errors = validate_spec(&spec).unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    for f in ["resumeCanaries.after", "resumeCanaries.atATime", "resumeCanaries.hours", "resumeCanaries.timeZone"] {
        assert!(fields.contains(&f), "{f} in {errors:?}");
    }
    spec.resume_canaries = Some(ResumeCanaries {
        after: GoDuration::new("72h"),
        at_a_time: Some(2),
        hours: Some("22:00-06:00".into()),
        time_zone: Some("Europe/Berlin".into()),
    });
    assert_eq!(validate_spec(&spec), Ok(()));
}
