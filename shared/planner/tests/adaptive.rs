//! The adaptive running count: rate estimate, clamping, reaction to a burst, decay at night.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::adaptive::AdaptiveRunningCount;
use apiary_planner::*;
use chrono::TimeDelta;
use support::*;

/// [`support::after_arrivals`], its claims kept (pending, or assigned by the plans).
fn after_arrivals(p: PoolBuilder, minutes: &[i64]) -> Snapshot {
    support::after_arrivals(p, minutes, Claims::Kept)
}

fn rate(snap: &Snapshot) -> f64 {
    snap.pool.status.demand.as_ref().unwrap().claims_per_hour
}

#[test]
fn the_rate_estimate_follows_a_steady_arrival_rate() {
    // One claim every 5 minutes for 4 hours: 12 per hour.
    let minutes: Vec<i64> = (0..48).map(|i| i * 5).collect();
    let snap = after_arrivals(pool().size(0).adaptive(0.95, "5m"), &minutes);
    let r = rate(&snap);
    assert!((11.0..13.5).contains(&r), "estimated {r} claims/h for 12/h");
}

#[test]
fn the_running_count_comes_from_the_poisson_model() {
    let a = AdaptiveRunningCount {
        instant_share: Some(0.95),
        wait_p95: None,
        window: None,
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    };
    // 12 claims/h planned as 12 + √(12 / 2τ) = 15.5/h; 5-minute resumes: mu = 1.29.
    // P(N ≤ 2) = 0.860, P(N ≤ 3) = 0.958 → 4 spares.
    assert_eq!(a.running_for(12.0, TimeDelta::minutes(5), 100), 4);
    assert_eq!(a.running_for(0.0, TimeDelta::minutes(5), 100), 0);
    // Slower resumes need more spares.
    assert!(a.running_for(12.0, TimeDelta::minutes(20), 100) > 4);
    // A wait target at least as long as a resume needs no spare at all.
    let w = AdaptiveRunningCount {
        instant_share: None,
        wait_p95: Some(GoDuration::new("5m")),
        window: None,
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    };
    assert_eq!(w.running_for(120.0, TimeDelta::minutes(5), 100), 0);
    assert!(w.running_for(120.0, TimeDelta::minutes(10), 100) > 0);
}

#[test]
fn the_adaptive_running_count_is_clamped_to_size_and_max_size() {
    let burst: Vec<i64> = vec![0; 60];
    let snap = after_arrivals(pool().size(3).adaptive(0.99, "10m"), &burst);
    assert_eq!(snap.pool.status.running_count, 3, "clamped to size");
    let snap = after_arrivals(pool().size(6).max_size(2).adaptive(0.99, "10m"), &burst);
    assert_eq!(snap.pool.status.running_count, 2, "clamped to maxSize");
}

#[test]
fn runningcount_is_the_floor_of_the_adaptive_running_count() {
    let snap = after_arrivals(pool().size(5).running_count(2).adaptive(0.95, "5m"), &[]);
    let plan = plan(&snap, at(600), 1);
    assert_eq!(plan.status.running_count, 2);
}

#[test]
fn the_adaptive_running_count_reacts_to_a_burst() {
    let quiet = after_arrivals(pool().size(10).adaptive(0.95, "5m"), &[0]);
    let before = plan(&quiet, at(120), 1).status.running_count;
    let burst: Vec<i64> = std::iter::once(0).chain(std::iter::repeat_n(120, 10)).collect();
    let busy = after_arrivals(pool().size(10).adaptive(0.95, "5m"), &burst);
    assert_eq!(before, 0);
    assert!(busy.pool.status.running_count >= 3, "ten claims in a minute: {}", busy.pool.status.running_count);
}

#[test]
fn the_adaptive_running_count_decays_at_night_and_wakes_exactly_when_it_drops() {
    let day: Vec<i64> = (0..120).map(|i| i * 3).collect(); // 20 claims/h from 00:00 to 06:00
    let evening = after_arrivals(pool().size(10).adaptive(0.95, "5m"), &day);
    let busy = evening.pool.status.running_count;
    assert!(busy >= 3, "{busy}");

    // No more claims. Each plan says when the next drop comes, and the count is lower right after it.
    let mut snap = evening;
    let mut now = at(360);
    let mut drops = Vec::new();
    while let Some(t) = plan(&snap, now, 1).wake_at {
        let before = plan(&snap, t - TimeDelta::seconds(2), 1).status.running_count;
        let after = plan(&snap, t, 1);
        assert!(after.status.running_count < before, "at {t}: {before} → {}", after.status.running_count);
        snap = apply(&snap, &after).unwrap().unwrap();
        drops.push(after.status.running_count);
        now = t;
    }
    assert_eq!(drops.last(), Some(&0), "night brings it down to zero: {drops:?}");
    assert!(now - at(360) < TimeDelta::hours(6), "within a few windows, not days");
}

#[test]
fn a_measured_resume_time_replaces_the_estimate() {
    let mut snap = after_arrivals(pool().size(10).adaptive(0.95, "1m"), &(0..24).map(|i| i * 5).collect::<Vec<_>>());
    let guessed = plan(&snap, at(120), 1).status.running_count;
    let mut slow = cluster("slow").c;
    slow.last_resume_seconds = Some(20 * 60);
    snap.clusters.push(slow);
    let measured = plan(&snap, at(120), 1).status.running_count;
    assert!(measured > guessed, "20-minute resumes need more spares than 1-minute ones: {measured} vs {guessed}");
}

#[test]
fn the_power_step_records_how_long_a_resume_took() {
    use apiary_planner::power::{step, Readiness, Report};
    let c = cluster("c").hibernating().spec(DesiredPower::Running).c;
    let t = PowerLimits::default();
    let c = step(&c, &Report::Machines { not_ready: 3, total: 3, actionable: 3 }, at(0), t).cluster;
    let c = step(&c, &Report::CallAccepted, at(0), t).cluster;
    let c = step(&c, &Report::Machines { not_ready: 0, total: 3, actionable: 0 }, at(3), t).cluster;
    let c = step(&c, &Report::Nodes(Readiness::Ready), at(4), t).cluster;
    assert_eq!(c.last_resume_seconds, Some(240));
}

#[test]
fn an_adaptive_spec_needs_exactly_one_valid_target() {
    let mut spec = pool().size(3).spec;
    spec.adaptive_running_count = Some(AdaptiveRunningCount {
        instant_share: None,
        wait_p95: None,
        window: None,
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    });
    let fields =
        |s: &PoolSpec| validate_spec(s).err().unwrap_or_default().into_iter().map(|e| e.field).collect::<Vec<_>>();
    assert_eq!(fields(&spec), ["adaptiveRunningCount"]);
    spec.adaptive_running_count = Some(AdaptiveRunningCount {
        instant_share: Some(1.5),
        wait_p95: None,
        window: Some(GoDuration::new("0s")),
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    });
    assert_eq!(fields(&spec), ["adaptiveRunningCount.instantShare", "adaptiveRunningCount.window"]);
    spec.adaptive_running_count = Some(AdaptiveRunningCount {
        instant_share: None,
        wait_p95: Some(GoDuration::new("90s")),
        window: Some(GoDuration::new("1h")),
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    });
    assert_eq!(validate_spec(&spec), Ok(()));
}

#[test]
fn planning_an_adaptive_pool_again_writes_nothing() {
    let snap = after_arrivals(pool().size(4).adaptive(0.9, "5m"), &[0, 1, 2, 3, 4]);
    let again = plan(&snap, at(4), 9);
    assert_eq!(again.writes().count(), 0, "{:?}", again.actions);
}

#[test]
fn claims_made_in_the_same_instant_are_each_counted_once() {
    let together = after_arrivals(pool().size(0).adaptive(0.95, "5m"), &[7, 7, 7, 7]);
    let apart = after_arrivals(pool().size(0).adaptive(0.95, "5m"), &[7]);
    assert!((rate(&together) - 4.0 * rate(&apart)).abs() < 1e-9, "{} vs 4 × {}", rate(&together), rate(&apart));
    // And planning again counts none of them twice.
    let again = plan(&together, at(7), 5);
    assert_eq!(again.writes().count(), 0);
}
