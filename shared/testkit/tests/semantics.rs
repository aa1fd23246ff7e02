//! The in-memory services behave as the real ones do, where the functions depend on it.

use apiary_planner::machines::MachineState;
use apiary_planner::{AwsPlatform, Claim, Cluster, Platform, Pool, PoolSpec, PowerState, Timestamp};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::platform::{Actuator, Provision, Provisioner, Target};
use apiary_ports::queue::{batch_response, Queue};
use apiary_ports::store::{Cond, Item, Key, Store, Write};
use apiary_ports::Error;
use apiary_testkit::queue::{QueueName, MAX_RECEIVES};
use apiary_testkit::World;
use chrono::{TimeDelta, TimeZone, Utc};
use futures::executor::block_on;

const ACCEPTED: Provision = Provision::Accepted { handle: None };

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn aws() -> PoolSpec {
    PoolSpec::new(
        1,
        Platform::Aws(AwsPlatform {
            region: "us-east-1".into(),
            launch_template: None,
            image_id: Some("ami-1".into()),
            instance_type: Some("t3.large".into()),
            machine_count: 2,
            subnet_id: None,
            tags: Default::default(),
            role_arn: None,
        }),
    )
}

fn pool(rev: u64) -> Item {
    Item::Pool(Box::new(Pool {
        name: "p".into(),
        spec: aws(),
        status: Default::default(),
        next_wake_at: None,
        deletion_requested_at: None,
        created_at: t0(),
        rev,
        later: Default::default(),
    }))
}

fn cluster(id: &str, rev: u64) -> Cluster {
    let mut c = Cluster::new(id, id, format!("{id}-infra"), t0());
    c.rev = rev;
    c
}

#[test]
fn writes_hold_on_their_conditions_and_transactions_are_all_or_nothing() {
    let w = World::new(t0());
    let s = &w.store;
    block_on(s.write("p", vec![Write::Put(pool(0), Cond::Absent)])).expect("create");
    let again = block_on(s.write("p", vec![Write::Put(pool(0), Cond::Absent)]));
    assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
    block_on(s.write("p", vec![Write::Put(pool(1), Cond::Rev(0))])).expect("rev 0 → 1");
    let stale = block_on(s.write("p", vec![Write::Put(pool(2), Cond::Rev(0))]));
    assert!(matches!(stale, Err(Error::Conflict(_))), "{stale:?}");
    // A transaction whose second condition fails writes nothing.
    let c = Item::Cluster(Box::new(cluster("c1", 0)));
    let tx = block_on(s.write("p", vec![Write::Put(c.clone(), Cond::Absent), Write::Check(Key::Pool, Cond::Rev(7))]));
    assert!(matches!(tx, Err(Error::Conflict(_))), "{tx:?}");
    assert_eq!(block_on(s.get("p", &Key::Cluster("c1".into()))).expect("get"), None);
    block_on(s.write("p", vec![Write::Put(c, Cond::Absent), Write::Check(Key::Pool, Cond::Rev(1))])).expect("tx");
    assert_eq!(block_on(s.read_pool("p")).expect("read").expect("pool").clusters.len(), 1);
    // Two operations on one item in a transaction are refused, as DynamoDB refuses them.
    let two = block_on(s.write("p", vec![Write::Check(Key::Pool, Cond::Rev(1)), Write::Put(pool(2), Cond::Rev(1))]));
    assert!(matches!(two, Err(Error::Service { retryable: false, .. })), "{two:?}");
}

#[test]
fn assignment_needs_an_unclaimed_installed_running_cluster_at_its_revision() {
    let mut c = cluster("c1", 3);
    let holds = |c: &Cluster| Cond::RevUnclaimedRunning(3).holds(Some(&Item::Cluster(Box::new(c.clone()))));
    c.power_state = Some(PowerState::Running);
    assert!(!holds(&c), "not installed");
    c.installed_at = Some(t0());
    assert!(holds(&c));
    c.claim = Some("k".into());
    assert!(!holds(&c), "claimed");
    c.claim = None;
    c.power_state = Some(PowerState::Stopping);
    assert!(!holds(&c), "not Running");
    let mut k = Claim::new("k", "me", t0());
    k.rev = 2;
    assert!(Cond::RevPending(2).holds(Some(&Item::Claim(Box::new(k.clone())))));
    k.cluster = Some("c1".into());
    assert!(!Cond::RevPending(2).holds(Some(&Item::Claim(Box::new(k)))));
}

#[test]
fn an_item_over_400_kb_is_refused_and_nothing_is_written() {
    let w = World::new(t0());
    let mut big = cluster("big", 0);
    big.cluster_name = "x".repeat(410 * 1024);
    let r = block_on(w.store.write("p", vec![Write::Put(Item::Cluster(Box::new(big)), Cond::Absent)]));
    assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
    assert!(w.store.tables().pools.is_empty());
}

#[test]
fn of_two_sweeps_deciding_at_once_one_records_the_full_pass() {
    let w = World::new(t0());
    block_on(w.store.record_full_sweep(None, t0())).expect("first");
    let late = block_on(w.store.record_full_sweep(None, t0()));
    assert!(matches!(late, Err(Error::Conflict(_))), "{late:?}");
    assert_eq!(block_on(w.store.last_full_sweep()).expect("read"), Some(t0()));
}

fn power(cluster: &str) -> PowerMessage {
    PowerMessage::nudge("p", cluster)
}

#[test]
fn undeleted_messages_come_back_after_the_visibility_timeout_and_die_after_five_receives() {
    let w = World::new(t0());
    block_on(w.queue.power(&power("c1"), std::time::Duration::from_secs(30))).expect("send");
    let vis = TimeDelta::seconds(60);
    assert!(w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0).records.is_empty(), "delayed");
    w.time.advance(TimeDelta::seconds(30));
    let mut received = 0;
    for _ in 0..10 {
        let e = w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0);
        received += e.records.len();
        // Never deleted: the handler was killed.
        w.time.advance(vis);
    }
    assert_eq!(received, MAX_RECEIVES as usize);
    assert_eq!(w.queue.dead_letters().len(), 1);
    assert!(w.queue.messages(QueueName::Power).is_empty());
}

#[test]
fn a_batch_item_failure_is_redelivered_and_the_rest_deleted() {
    let w = World::new(t0());
    for c in ["a", "b"] {
        block_on(w.queue.power(&power(c), std::time::Duration::ZERO)).expect("send");
    }
    let e = w.queue.receive(QueueName::Power, 10, TimeDelta::seconds(60), &mut |_| 0);
    assert_eq!(e.records.len(), 2);
    let failed = e.records[1].message_id.clone().expect("id");
    w.queue.settle(&e, &batch_response([failed]));
    let left = w.queue.messages(QueueName::Power);
    assert_eq!(left.len(), 1);
    assert!(left[0].body.contains("\"b\""));
}

#[test]
fn a_message_put_back_comes_again_when_its_new_visibility_ends_one_receive_more() {
    let w = World::new(t0());
    block_on(w.queue.power(&power("c1"), std::time::Duration::ZERO)).expect("send");
    let vis = TimeDelta::seconds(360);
    let e = w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0);
    assert_eq!(e.records.iter().map(apiary_ports::queue::receives).collect::<Vec<_>>(), [1]);
    let receipt = e.records[0].receipt_handle.clone().expect("receipt");
    block_on(w.queue.return_power(&receipt, std::time::Duration::from_secs(15))).expect("put back");
    // Reported as a failure, the mapping leaves it; it is hidden for 15 s, not the queue's 360.
    w.queue.settle(&e, &batch_response(e.records.iter().filter_map(|r| r.message_id.clone())));
    w.time.advance(TimeDelta::seconds(14));
    assert!(w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0).records.is_empty(), "hidden");
    w.time.advance(TimeDelta::seconds(1));
    let again = w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0);
    assert_eq!(again.records.iter().map(apiary_ports::queue::receives).collect::<Vec<_>>(), [2]);
    // The first receive's receipt is stale: putting the message back with it changes nothing.
    block_on(w.queue.return_power(&receipt, std::time::Duration::ZERO)).expect("stale receipt");
    assert!(w.queue.receive(QueueName::Power, 10, vis, &mut |_| 0).records.is_empty(), "still held");
    w.queue.settle(&again, &batch_response([]));
    assert!(w.queue.messages(QueueName::Power).is_empty());
}

#[test]
fn a_fifo_group_is_delivered_in_order_one_batch_at_a_time() {
    let w = World::new(t0());
    for (pool, reason) in [("p", "1"), ("q", "1"), ("p", "2")] {
        let m = ReconcileMessage::new(pool, reason);
        block_on(w.queue.reconcile(&m)).expect("send");
    }
    let vis = TimeDelta::seconds(60);
    // Pick the last candidate each time: still only group heads, and only one group per batch.
    let first = w.queue.receive(QueueName::Reconcile, 10, vis, &mut |n| n - 1);
    let bodies: Vec<&str> = first.records.iter().filter_map(|r| r.body.as_deref()).collect();
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert!(bodies[0].contains("\"q\""), "{bodies:?}");
    let second = w.queue.receive(QueueName::Reconcile, 10, vis, &mut |_| 0);
    let bodies: Vec<&str> = second.records.iter().filter_map(|r| r.body.as_deref()).collect();
    assert_eq!(bodies.len(), 2, "p's two messages, in order: {bodies:?}");
    assert!(bodies[0].contains("\"1\"") && bodies[1].contains("\"2\""));
    // Group p is in flight: nothing more until it is settled or times out.
    block_on(w.queue.reconcile(&ReconcileMessage::new("p", "3"))).expect("send");
    assert!(w.queue.receive(QueueName::Reconcile, 10, vis, &mut |_| 0).records.is_empty());
    w.queue.settle(&second, &batch_response([]));
    assert_eq!(w.queue.receive(QueueName::Reconcile, 10, vis, &mut |_| 0).records.len(), 1);
}

fn target<'a>(spec: &'a PoolSpec, c: &'a Cluster, now: Timestamp) -> Target<'a> {
    Target { pool: "p", spec, cluster: c, now }
}

#[test]
fn machines_follow_ec2s_lifecycle_and_a_stopping_machine_starts_only_once_stopped() {
    let w = World::new(t0());
    let spec = aws();
    let c = cluster("c1", 0);
    assert_eq!(block_on(w.cloud.provision(target(&spec, &c, w.now()))).expect("call"), ACCEPTED);
    let m = block_on(w.cloud.machines_running(target(&spec, &c, w.now()))).expect("describe");
    assert_eq!((m.total, m.not_ready.len()), (2, 2), "pending");
    w.time.advance(TimeDelta::seconds(30));
    let m = block_on(w.cloud.machines_running(target(&spec, &c, w.now()))).expect("describe");
    assert_eq!(m.not_ready.len(), 0, "running");
    block_on(w.cloud.stop_machines(target(&spec, &c, w.now()))).expect("stop");
    // A start while stopping acts on nothing; the machines finish stopping.
    let refused = block_on(w.cloud.start_machines(target(&spec, &c, w.now()))).expect("start");
    assert!(refused.machines.is_empty());
    assert!(w.cloud.machines().iter().all(|m| m.state == MachineState::Stopping));
    w.time.advance(TimeDelta::seconds(20));
    assert!(w.cloud.machines().iter().all(|m| m.state == MachineState::Stopped));
    // Re-issued once they are stopped, it starts them.
    block_on(w.cloud.start_machines(target(&spec, &c, w.now()))).expect("start");
    w.time.advance(TimeDelta::seconds(20));
    assert!(w.cloud.machines().iter().all(|m| m.state == MachineState::Running));
}

#[test]
fn a_repeated_provision_with_the_same_token_launches_nothing_even_after_termination() {
    let w = World::new(t0());
    let spec = aws();
    let c = cluster("c1", 0);
    assert_eq!(block_on(w.cloud.provision(target(&spec, &c, w.now()))).expect("call"), ACCEPTED);
    assert_eq!(block_on(w.cloud.provision(target(&spec, &c, w.now()))).expect("call"), ACCEPTED);
    assert_eq!(w.cloud.machines().len(), 2);
    w.time.advance(TimeDelta::seconds(30));
    // Shutting down is gone from the cluster's machines at once, as on EC2.
    let gone = block_on(w.cloud.deprovision(target(&spec, &c, w.now()))).expect("terminate");
    assert_eq!((gone.remaining, gone.refused.len()), (0, 0), "gone");
    w.time.advance(TimeDelta::seconds(10));
    assert!(w.cloud.machines().iter().all(|m| m.state == MachineState::Terminated));
    assert_eq!(block_on(w.cloud.provision(target(&spec, &c, w.now()))).expect("call"), ACCEPTED);
    let m = block_on(w.cloud.machines_running(target(&spec, &c, w.now()))).expect("describe");
    assert_eq!(m.total, 0, "the token's machines are terminated; none were launched");
}
