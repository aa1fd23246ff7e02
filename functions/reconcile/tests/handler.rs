//! The reconcile handler on in-memory ports: what it writes, what it sends, and how it takes lost races and
//! failures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use apiary_planner::reaper::REAP_EVERY;
use apiary_planner::{DesiredPower, Inventory, InventoryEntry, Timestamp};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::Error;
use apiary_testkit::fixtures::{aws_spec, pool};
use apiary_testkit::hook::{Gate, Hook, Op, Refuse};
use apiary_testkit::queue::QueueName;
use apiary_testkit::World;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use chrono::{TimeDelta, TimeZone, Utc};

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn event(bodies: &[&str]) -> SqsEvent {
    SqsEvent {
        records: bodies
            .iter()
            .enumerate()
            .map(|(i, b)| SqsMessage {
                message_id: Some(format!("m{i}")),
                body: Some((*b).to_owned()),
                ..Default::default()
            })
            .collect(),
    }
}

#[tokio::test]
async fn an_empty_pool_gets_its_clusters_the_oldest_running_and_each_a_power_message() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(3, 1), t0()));
    let deps = w.default_deps(900);
    let out = reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(out.attempts, 1);
    let snap = w.snapshot("ci").expect("pool");
    assert_eq!(snap.clusters.len(), 3);
    let running = snap.clusters.iter().filter(|c| c.spec_power_state == Some(DesiredPower::Running)).count();
    assert_eq!(running, 1);
    assert_eq!(snap.pool.status.installing, 3, "the status was written");
    let nudges: Vec<PowerMessage> = w.queue.take_power().into_iter().filter(|m| !m.reap).collect();
    let mut sent: Vec<String> = nudges.iter().map(|m| m.cluster.clone()).collect();
    sent.sort();
    let mut ids: Vec<String> = snap.clusters.iter().map(|c| c.id.clone()).collect();
    ids.sort();
    assert_eq!(sent, ids, "one power message per new cluster");
    let gauges = w.metrics.documents();
    assert!(gauges.iter().any(|d| d["ClustersInstalling"] == 3.0), "{gauges:?}");
    // The nudges and the reaper's pass it asked for are made; planned again with nothing changed: nothing to
    // write, nothing to send (the installs' looks are the pool's tick's, live since the nudges).
    for nudge in &nudges {
        power::power(&deps, nudge, None).await.expect("the nudge");
    }
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the reaper's pass");
    let again = reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!((again.writes, again.power_messages), (0, 0));
}

#[tokio::test]
async fn a_missing_pool_is_gone_and_writes_nothing() {
    let w = World::new(t0());
    let out = reconcile::reconcile(&w.default_deps(900), "nope").await.expect("reconcile");
    assert!(out.gone);
    assert!(w.store.tables().pools.is_empty());
}

/// Loses the first `n` writes' conditions (someone else wrote first).
struct LoseWrites(AtomicU32);

impl Hook for LoseWrites {
    fn before(&self, op: Op) -> Gate {
        if op == Op::Write && self.0.load(Ordering::SeqCst) > 0 {
            self.0.fetch_sub(1, Ordering::SeqCst);
            return Gate::Fail(Error::Conflict("someone else wrote first".into()));
        }
        Gate::Proceed
    }
}

#[tokio::test]
async fn a_lost_condition_is_re_read_and_re_planned() {
    let w = World::with_hook(t0(), Arc::new(LoseWrites(AtomicU32::new(1))), 1);
    w.put_pool(pool("ci", aws_spec(2, 0), t0()));
    let out = reconcile::reconcile(&w.default_deps(900), "ci").await.expect("reconcile");
    assert_eq!(out.attempts, 2);
    assert_eq!(w.snapshot("ci").expect("pool").clusters.len(), 2);
}

/// Lets the first write through and loses the second's condition.
struct LoseSecondWrite(AtomicU32);

impl Hook for LoseSecondWrite {
    fn before(&self, op: Op) -> Gate {
        if op == Op::Write && self.0.fetch_add(1, Ordering::SeqCst) == 1 {
            return Gate::Fail(Error::Conflict("the pool changed meanwhile".into()));
        }
        Gate::Proceed
    }
}

#[tokio::test]
async fn a_name_is_reserved_with_its_cluster_or_not_at_all() {
    // One name, one cluster. Had the name's lease been written alone and the cluster's create lost its condition
    // (another reconcile wrote the pool meanwhile), the lease would hold the name for a cluster that does not
    // exist, and the pool would stay without it for the lease's grace period.
    let w = World::with_hook(t0(), Arc::new(LoseSecondWrite(AtomicU32::new(0))), 1);
    let mut spec = aws_spec(1, 0);
    spec.inventory = Some(Inventory {
        cluster_deployments: vec![InventoryEntry { name: Some("foo".into()), parameters: Default::default() }],
    });
    w.put_pool(pool("inv", spec, t0()));
    let out = reconcile::reconcile(&w.default_deps(900), "inv").await.expect("reconcile");
    assert_eq!(out.attempts, 2, "the lost write was re-planned");
    let snap = w.snapshot("inv").expect("pool");
    let names: Vec<&str> = snap.clusters.iter().map(|c| c.cluster_name.as_str()).collect();
    assert_eq!(names, ["foo"], "the name is used at once, not held for a cluster that never came");
    assert_eq!(snap.leases.len(), 1);
    assert_eq!(snap.leases[0].holder, snap.clusters[0].id);
}

#[tokio::test]
async fn losing_every_race_gives_the_message_back_and_other_pools_proceed() {
    let w = World::with_hook(t0(), Arc::new(LoseWrites(AtomicU32::new(reconcile::MAX_ATTEMPTS))), 1);
    w.put_pool(pool("a", aws_spec(1, 0), t0()));
    w.put_pool(pool("b", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    let a = serde_json::to_string(&ReconcileMessage::new("a", "claim")).expect("json");
    let b = serde_json::to_string(&ReconcileMessage::new("b", "sweep")).expect("json");
    // The event an SQS event source mapping hands Lambda (AWS's sample document, Apiary's messages as its bodies).
    let queue = "arn:aws:sqs:us-east-1:123456789012:apiary-reconcile.fifo";
    let response = reconcile::handle(&deps, apiary_testkit::events::sqs_event(queue, &[&a, &a, &b, "not json"])).await;
    // Pool a lost all its attempts: both of its messages go back, in the partial batch response Lambda reads. Pool b
    // (after a's losses ran out) is done; the unreadable message is dropped, not retried forever.
    let sent = apiary_testkit::events::batch_response_json(&response);
    assert_eq!(sent, serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m0"}, {"itemIdentifier": "m1"}]}));
    assert_eq!(w.snapshot("b").expect("b").clusters.len(), 1);
    assert!(w.snapshot("a").expect("a").clusters.is_empty());
}

/// Fails every table read with a throttle.
struct Throttled;

impl Hook for Throttled {
    fn before(&self, op: Op) -> Gate {
        match op {
            Op::Read => Gate::Fail(Error::service("dynamodb:Query", "ThrottlingException", true)),
            _ => Gate::Proceed,
        }
    }
}

#[tokio::test]
async fn a_throttled_read_is_a_retryable_failure_of_that_pools_messages() {
    let w = World::with_hook(t0(), Arc::new(Throttled), 1);
    let deps = w.default_deps(900);
    let m = serde_json::to_string(&ReconcileMessage::new("a", "claim")).expect("json");
    let err = reconcile::reconcile(&deps, "a").await.expect_err("throttled");
    assert!(err.is_retryable(), "{err}");
    let response = reconcile::handle(&deps, event(&[&m])).await;
    assert_eq!(response.batch_item_failures.len(), 1);
    assert!(w.queue.messages(QueueName::Power).is_empty());
}

/// A throttled read or write is a moment's load, not a failure of the message: the reconcile backs off and plans
/// again in the same invocation, instead of leaving the pool's messages to come back after the queue's
/// visibility timeout (six minutes, with every later reconcile of the pool held behind them in its FIFO group).
#[tokio::test]
async fn a_throttled_read_or_write_is_tried_again_in_the_same_reconcile() {
    for op in [Op::Read, Op::Write] {
        let throttle = Refuse::of(op);
        throttle.first(2);
        let w = World::with_hook(t0(), throttle, 1);
        w.put_pool(pool("ci", aws_spec(1, 1), t0()));
        w.put_cluster("ci", apiary_testkit::fixtures::installed("ci-1", DesiredPower::Running, t0()));
        let claim = apiary_planner::Claim::new("k", "arn:aws:iam::123456789012:user/ci", t0());
        w.store.put("ci", apiary_ports::store::Item::Claim(Box::new(claim)));
        let deps = w.default_deps(900);
        let out = reconcile::reconcile(&deps, "ci").await.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        assert_eq!(out.attempts, 3, "{op:?}");
        assert_eq!(w.cluster("ci", "ci-1").expect("cluster").claim.as_deref(), Some("k"), "{op:?}");
        assert!(w.time.now() > t0(), "{op:?}: it backed off");
    }
}

/// A reconcile that fails all the same (here, its nudges not sent) puts its pool's messages back to come again
/// 10 s later, then a minute, then at the queue's visibility timeout (six minutes), instead of at once leaving
/// them hidden for that timeout with the pool's later messages held behind them in its FIFO group.
#[tokio::test]
async fn a_failed_reconcile_comes_back_in_seconds_then_less_and_less_often() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    apiary_ports::queue::Queue::reconcile(deps.queue.as_ref(), &ReconcileMessage::new("ci", "claim"))
        .await
        .expect("asked");
    let visibility = TimeDelta::seconds(360);
    for back in [10, 60, 360] {
        hook.first(1);
        let event = w.queue.receive(QueueName::Reconcile, 10, visibility, &mut |_| 0);
        assert_eq!(event.records.len(), 1);
        let response = reconcile::handle(&deps, event.clone()).await;
        assert_eq!(response.batch_item_failures.len(), 1, "the nudges were not sent");
        w.queue.settle(&event, &response);
        assert_eq!(w.queue.next_visible(), Some(w.time.now() + TimeDelta::seconds(back)));
        w.time.advance(TimeDelta::seconds(back));
    }
    // Well again: the pool is reconciled, its message done.
    let event = w.queue.receive(QueueName::Reconcile, 10, visibility, &mut |_| 0);
    let response = reconcile::handle(&deps, event.clone()).await;
    assert!(response.batch_item_failures.is_empty());
    w.queue.settle(&event, &response);
    assert!(w.queue.messages(QueueName::Reconcile).is_empty());
    assert_eq!(w.snapshot("ci").expect("pool").clusters.len(), 1);
}

/// The reaper's pass is made by the power function (it reaches the pool's cloud): a reconcile sends it a reap
/// message when a pass is due, and none while the last is recent.
#[tokio::test]
async fn a_reconcile_asks_the_power_function_for_the_reapers_pass_when_one_is_due() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    let reaps = |w: &World| w.queue.take_power().into_iter().filter(|m| m.reap).count();
    assert_eq!(reaps(&w), 1, "never looked: due");
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the pass");
    w.time.advance(REAP_EVERY / 2);
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(reaps(&w), 0, "looked a quarter of an hour ago");
    w.time.advance(REAP_EVERY / 2);
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(reaps(&w), 1);
}

/// A pool deleted while machines of it no cluster owns are still up: they are reaped at once (a deleting pool
/// makes no cluster a pass could take for one), and the pool item goes only once a pass finds nothing left.
#[tokio::test]
async fn a_deleted_pool_goes_only_once_the_reaper_finds_nothing_of_it_left() {
    let w = World::new(t0());
    let mut ci = pool("ci", aws_spec(0, 0), t0());
    ci.deletion_requested_at = Some(t0());
    w.put_pool(ci.clone());
    let forgotten = apiary_planner::Cluster::new("ci-old", "ci-old", "ci-old-infra", t0());
    let target = apiary_ports::platform::Target { pool: "ci", spec: &ci.spec, cluster: &forgotten, now: t0() };
    apiary_ports::platform::Provisioner::provision(w.cloud.as_ref(), target).await.expect("machines");
    let deps = w.default_deps(900);
    let reap = |w: &World| w.queue.take_power().into_iter().any(|m| m.reap);
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(w.snapshot("ci").is_some(), "not before the reaper looked");
    assert!(reap(&w));
    let out = power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the pass");
    assert_eq!(out.reaped, ["ci-old-infra"], "at once: no grace for a deleting pool");
    assert!(w.queue.take_reconcile().iter().any(|m| m.reason == "reaped"), "the pool is told");
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(w.snapshot("ci").is_some(), "not while an orphan was seen");
    w.time.advance(apiary_planner::reaper::WHILE_DELETING);
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(reap(&w), "looked at again");
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the pass");
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(w.snapshot("ci").is_none(), "nothing left: the pool is gone");
}

/// Claims that begin to wait while clusters are in motion hurry the pool's tick: its next run looks at each of
/// them at once, not at the pool's pace (an install looked at minutes apart may be the one they wait on). Claims
/// that went on waiting do not hurry it again: the looks are every poll since.
#[tokio::test]
async fn claims_that_begin_to_wait_hurry_the_tick_over_the_clusters_in_motion() {
    use apiary_planner::power::{tick::Tick, INSTALL_POLL};
    use apiary_planner::{Claim, Cluster, Pace};
    use apiary_ports::store::Item;
    let w = World::new(t0());
    w.cloud.set_timings(apiary_testkit::cloud::Timings { launch: TimeDelta::minutes(30), ..Default::default() });
    let mut p = pool("ci", aws_spec(1, 0), t0());
    p.status.pace = Some(Pace { install_seconds: Some(40 * 60), ..Default::default() });
    w.put_pool(p);
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Hibernating);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    let tick = |w: &World| match w.store.tables().pools.get("ci").and_then(|p| p.get("TICK")).cloned() {
        Some(Item::Tick(t)) => *t,
        _ => Tick::default(),
    };
    // Provisioned, then looked at by the tick at the pool's pace until its looks are minutes apart.
    power::power(&deps, &PowerMessage::nudge("ci", "ci-1"), None).await.expect("provision");
    while let Some(link) = tick(&w).check.filter(|l| l.due < t0() + TimeDelta::minutes(8)) {
        w.time.set(link.due);
        power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    }
    w.queue.take_power();
    let now = w.time.now();
    let sparse = tick(&w).due["ci-1"];
    assert!(sparse > now + INSTALL_POLL, "looked at sparsely: next at {sparse}, now {now}");
    // A claim comes, and nothing runs: it waits.
    w.store.put("ci", Item::Claim(Box::new(Claim::new("k", "arn:aws:iam::123456789012:user/ci", now))));
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    let sent = w.queue.take_power();
    let hurried: Vec<&PowerMessage> = sent.iter().filter(|m| m.tick && m.check.is_none()).collect();
    assert_eq!(hurried.len(), 1, "{sent:?}");
    let out = power::power(&deps, hurried[0], None).await.expect("the hurried tick");
    assert!(out.looked.contains(&"ci-1".to_string()), "{out:?}");
    assert!(tick(&w).due["ci-1"] <= now + INSTALL_POLL, "every poll while the claim waits");
    // Still waiting at the next reconcile: no second hurry.
    w.time.advance(TimeDelta::seconds(30));
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(!w.queue.take_power().iter().any(|m| m.tick && m.check.is_none()));
}

/// Every reconcile sent each cluster still being deprovisioned a power message again, each a call to its cloud to
/// terminate machines already going, while the pool's tick was looking at it anyway: at a few reconciles a
/// minute, a busy pool's deprovisions took several times the power runs they need. The plan that deletes a
/// cluster nudges it; the tick carries its looks from then on (and any reconcile starts a tick that was lost).
#[tokio::test]
async fn a_deleting_cluster_is_nudged_by_the_plan_that_deletes_it_and_not_by_each_reconcile_after() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(0, 0), t0()));
    let mut extra = apiary_planner::Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    extra.installed_at = Some(t0());
    extra.spec_power_state = Some(DesiredPower::Hibernating);
    w.put_cluster("ci", extra);
    let deps = w.default_deps(900);
    let nudged = |w: &World| -> Vec<String> {
        w.queue.take_power().into_iter().filter(|m| !m.reap && !m.tick).map(|m| m.cluster).collect()
    };
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert!(w.snapshot("ci").expect("pool").clusters[0].deleting, "the pool has no room for it");
    assert_eq!(nudged(&w), ["ci-1"], "the plan that deletes it nudges it");
    for _ in 0..3 {
        w.time.advance(TimeDelta::seconds(20));
        reconcile::reconcile(&deps, "ci").await.expect("reconcile");
        assert!(w.snapshot("ci").expect("pool").clusters[0].deleting, "still deprovisioning");
        assert_eq!(nudged(&w), Vec::<String>::new(), "its looks are the tick's");
    }
}

/// The pool's tick carries the looks at its clusters in motion from one delayed message to the next: a lost link
/// stalls them. Any reconcile that finds clusters in motion and no live tick starts it again, not only the
/// sweep's full pass every ten minutes; one that finds the tick live sends nothing.
#[tokio::test]
async fn a_reconcile_that_finds_clusters_in_motion_without_a_live_tick_starts_it() {
    use apiary_planner::power::tick::Tick;
    use apiary_planner::Recheck;
    use apiary_ports::store::Item;
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let mut installing = apiary_planner::Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    installing.spec_power_state = Some(DesiredPower::Hibernating);
    w.put_cluster("ci", installing);
    let deps = w.default_deps(900);
    let ticks = |w: &World| w.queue.take_power().into_iter().filter(|m| m.tick && m.check.is_none()).count();
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(ticks(&w), 1, "no tick item at all: the install's looks were lost");
    let live = Tick { check: Some(Recheck { token: 7, due: t0() + TimeDelta::seconds(30) }), ..Tick::default() };
    w.store.put("ci", Item::Tick(Box::new(live)));
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(ticks(&w), 0, "the tick is live");
    w.time.advance(TimeDelta::minutes(10));
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!(ticks(&w), 1, "its link is long overdue: presumed lost");
    // The tick item is read with the partition, in the one read of it: a reconcile that finds clusters in motion
    // reads the table once, as one that finds none does.
    let before = w.store.stats();
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    assert_eq!((w.store.stats() - before).reads, 1);
}

/// Counts the sends to the queues (each a request to SQS).
#[derive(Default)]
struct Sends(AtomicU32);

impl Hook for Sends {
    fn before(&self, op: Op) -> Gate {
        if op == Op::Send {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Gate::Proceed
    }
}

#[tokio::test]
async fn a_plans_nudges_go_to_the_power_queue_in_one_request_for_up_to_ten() {
    // A pool of twelve made at once: twelve nudges, in two requests (ten and two), where each was one; the
    // reaper's pass it asks for is a message of its own.
    let sends = Arc::new(Sends::default());
    let w = World::with_hook(t0(), sends.clone(), 1);
    w.put_pool(pool("ci", aws_spec(12, 1), t0()));
    let deps = w.default_deps(900);
    let out = reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    let power = w.queue.take_power();
    let nudges = power.iter().filter(|m| !m.reap && !m.tick).count();
    assert_eq!(nudges, 12);
    assert_eq!(out.power_messages, power.len());
    assert_eq!(w.queue.batches(), 2);
    assert_eq!(sends.0.load(Ordering::SeqCst) as usize, 2 + (power.len() - nudges), "{power:?}");
}

/// Issue 59: a reconcile that assigns several waiting claims sends their notifications once its plan is written,
/// together, ten to a request, rather than a request for each assignment.
#[tokio::test]
async fn a_reconcile_assigning_claims_sends_their_notifications_together() {
    use apiary_planner::notify::NotifyHook;
    use apiary_planner::Claim;
    use apiary_ports::store::Item;
    let w = World::new(t0());
    let mut spec = aws_spec(3, 3);
    spec.notify = vec![NotifyHook {
        url: "https://hooks.example.com/apiary".into(),
        secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook".into(),
        events: vec![],
    }];
    w.put_pool(pool("ci", spec, t0()));
    for i in 0..3 {
        w.put_cluster("ci", apiary_testkit::fixtures::installed(&format!("ci-{i}"), DesiredPower::Running, t0()));
        let claim = Claim::new(format!("k{i}"), "arn:aws:iam::123456789012:user/ci", t0());
        w.store.put("ci", Item::Claim(Box::new(claim)));
    }
    let deps = w.default_deps(900);
    let batches = w.queue.batches();
    reconcile::reconcile(&deps, "ci").await.expect("reconcile");
    let notices: Vec<String> =
        w.queue.take_power().into_iter().filter_map(|m| m.notice).filter_map(|n| n.event.claim).collect();
    assert_eq!(notices.len(), 3, "one an assignment: {notices:?}");
    assert_eq!(w.queue.batches() - batches, 2, "the nudges in one request, the notifications in another");
}
