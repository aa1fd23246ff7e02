//! The sweep on in-memory ports: which pools it enqueues.

use apiary_planner::Timestamp;
use apiary_testkit::fixtures::{aws_spec, pool};
use apiary_testkit::World;
use chrono::{TimeDelta, TimeZone, Utc};

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 3, 0).single().expect("time")
}

#[tokio::test]
async fn a_sweep_enqueues_the_pools_that_are_due_and_a_full_one_every_pool() {
    let w = World::new(t0());
    let mut quiet = pool("quiet", aws_spec(1, 0), t0());
    quiet.status.pool_version = "v".into();
    quiet.next_wake_at = Some(t0() + TimeDelta::hours(1));
    let mut due = pool("due", aws_spec(1, 0), t0());
    due.status.pool_version = "v".into();
    due.next_wake_at = Some(t0() - TimeDelta::seconds(1));
    let fresh = pool("fresh", aws_spec(1, 0), t0());
    for p in [quiet, due, fresh] {
        w.put_pool(p);
    }
    let deps = w.default_deps(900);
    let out = timeouts::sweep(&deps, false).await.expect("sweep");
    assert_eq!((out.pools, out.enqueued, out.full), (3, 2, false));
    let mut woken: Vec<String> = w.queue.take_reconcile().into_iter().map(|m| m.pool).collect();
    woken.sort();
    assert_eq!(woken, ["due", "fresh"]);
    let out = timeouts::sweep(&deps, true).await.expect("sweep");
    assert_eq!(out.enqueued, 3);
    assert!(w.queue.take_reconcile().iter().all(|m| m.reason == reconcile::FULL_SWEEP));
}

/// Bug: the full pass ran only when the sweep fired at a minute divisible by ten, so a sweep every five minutes
/// that fired at :03, :08, :13, … never made one, and a lost power message stalled its cluster for good.
#[tokio::test]
async fn a_sweep_every_five_minutes_off_the_tens_still_makes_a_full_pass_every_ten_minutes() {
    let w = World::new(t0());
    let mut p = pool("quiet", aws_spec(1, 0), t0());
    p.status.pool_version = "v".into();
    w.put_pool(p);
    let deps = w.default_deps(900);
    let mut full_at = vec![];
    for i in 0..13 {
        w.time.set(t0() + TimeDelta::minutes(5 * i));
        timeouts::run(&deps).await.expect("sweep");
        if w.queue.take_reconcile().iter().any(|m| m.reason == reconcile::FULL_SWEEP) {
            full_at.push(5 * i);
        }
    }
    assert_eq!(full_at, [0, 10, 20, 30, 40, 50, 60], "minutes (from :03) of the full passes");
}

/// Between full passes, a pool is swept for its deadlines and for claims that wait. A busy pool installs and
/// deletes nearly all the time, and each of those ends with a message from the power function: reconciling it
/// every minute as well cost more than all of its claims' messages, for nothing a message does not bring (the
/// full pass still catches a lost one, as the simulation's invariants expect).
#[tokio::test]
async fn between_full_passes_installs_and_deletions_under_way_wait_for_their_messages_and_waiting_claims_do_not() {
    let w = World::new(t0());
    let mut busy = pool("busy", aws_spec(4, 0), t0());
    busy.status.pool_version = "v".into();
    (busy.status.installing, busy.status.deleting) = (3, 1);
    busy.next_wake_at = Some(t0() + TimeDelta::hours(1));
    let mut waiting = pool("waiting", aws_spec(4, 0), t0());
    waiting.status.pool_version = "v".into();
    (waiting.status.installing, waiting.status.pending_claims) = (1, 1);
    waiting.next_wake_at = Some(t0() + TimeDelta::hours(1));
    for p in [busy, waiting] {
        w.put_pool(p);
    }
    let deps = w.default_deps(900);
    let out = timeouts::sweep(&deps, false).await.expect("sweep");
    assert_eq!((out.pools, out.enqueued), (2, 1));
    let woken: Vec<String> = w.queue.take_reconcile().into_iter().map(|m| m.pool).collect();
    assert_eq!(woken, ["waiting"]);
    assert_eq!(timeouts::sweep(&deps, true).await.expect("sweep").enqueued, 2);
}

/// A full pass that fails part way (the queue refused a pool's message) is not recorded as made: the next sweep, a
/// minute later, makes it again and enqueues every pool, instead of leaving the pools it missed to the pass after
/// next, ten minutes on (a lost tick or a reaper's pass waiting on it that much longer).
#[tokio::test]
async fn a_full_pass_that_fails_part_way_is_made_again_by_the_next_sweep() {
    use apiary_testkit::hook::{Op, Refuse};
    let refuse = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), refuse.clone(), 1);
    for name in ["a", "b", "c"] {
        let mut p = pool(name, aws_spec(1, 0), t0());
        p.status.pool_version = "v".into();
        w.put_pool(p);
    }
    let deps = w.default_deps(900);
    refuse.nth(2);
    timeouts::run(&deps).await.expect_err("the second pool's message refused");
    assert_eq!(w.queue.take_reconcile().len(), 1, "one pool enqueued");
    w.time.advance(TimeDelta::minutes(1));
    let out = timeouts::run(&deps).await.expect("sweep");
    assert_eq!((out.full, out.enqueued), (true, 3), "the full pass again");
    assert!(w.queue.take_reconcile().iter().all(|m| m.reason == reconcile::FULL_SWEEP));
    w.time.advance(TimeDelta::minutes(1));
    let out = timeouts::run(&deps).await.expect("sweep");
    assert_eq!((out.full, out.enqueued), (false, 0), "made: the next is ten minutes on");
}

/// Issue 59: every run asks for the notifications' pass of each pool with `notify` webhooks, and of no other.
#[tokio::test]
async fn every_sweep_asks_for_the_notifications_pass_of_each_pool_with_webhooks() {
    let w = World::new(t0());
    let mut hooked = aws_spec(1, 0);
    hooked.notify = vec![apiary_planner::notify::NotifyHook {
        url: "https://hooks.example.com/apiary".into(),
        secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf".into(),
        events: vec![],
    }];
    for p in [pool("hooked", hooked, t0()), pool("plain", aws_spec(1, 0), t0())] {
        w.put_pool(p);
    }
    let deps = w.default_deps(900);
    for minute in 0..2 {
        w.time.set(t0() + TimeDelta::minutes(minute));
        let out = timeouts::sweep(&deps, false).await.expect("sweep");
        assert_eq!(out.notices, 1);
        let passes: Vec<String> = w.queue.take_power().into_iter().filter(|m| m.notices).map(|m| m.pool).collect();
        assert_eq!(passes, ["hooked"]);
    }
}

/// Invoked as the sweep's schedule invokes it: EventBridge Scheduler hands the function the target's input from the
/// template, and the answer is a JSON document Lambda returns as the invocation's result.
#[tokio::test]
async fn the_schedules_target_input_runs_a_sweep_and_answers_its_figures() {
    let template = include_str!("../../../infra/template.yaml");
    let sweep = &template[template.find("\n  Sweep:\n").expect("the sweep's schedule")..];
    let input = sweep.lines().find_map(|l| l.trim().strip_prefix("Input: ")).expect("the target's input");
    let event: apiary_ports::messages::SweepEvent =
        serde_json::from_str(input.trim_matches('\'')).expect("the input is a JSON document");
    let w = World::new(t0());
    w.put_pool(pool("fresh", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    let answer = timeouts::handle(&deps, event).await.expect("a sweep");
    assert_eq!(answer, serde_json::json!({"pools": 1, "enqueued": 1, "full": true}));
}
