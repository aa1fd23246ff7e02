//! The power handler on in-memory ports and the in-memory cloud: installs, resumes, hibernations and
//! deprovisioning, step by step as the power queue delivers its messages.

use apiary_planner::machines::MachineState;
use apiary_planner::power::ActuatorCall;
use apiary_planner::reaper::{REAP_EVERY, REAP_GRACE};
use apiary_planner::{Cluster, DesiredPower, PendingCall, PowerState, Timestamp};
use apiary_ports::messages::PowerMessage;
use apiary_ports::platform::{Provisioner, Target};
use apiary_ports::store::{Cond, EventQuery, Key, Store, Write};
use apiary_ports::Deps;
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::queue::QueueName;
use apiary_testkit::World;
use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use chrono::{TimeDelta, TimeZone, Utc};

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn nudge(cluster: &str) -> PowerMessage {
    PowerMessage::nudge("ci", cluster)
}

/// Delivers power messages as Lambda would, moving time to each next one, until none is left or `until` passes:
/// how many messages were delivered. Fails the test unless exactly `failures` deliveries failed (each scenario
/// says how many it expects), naming the errors.
async fn drive(w: &World, deps: &Deps, until: Timestamp, failures: usize) -> usize {
    let (mut failed, mut runs) = (vec![], 0);
    loop {
        let event = w.queue.receive(QueueName::Power, 10, TimeDelta::seconds(360), &mut |_| 0);
        if event.records.is_empty() {
            match w.queue.next_visible() {
                Some(t) if t <= until => w.time.set(t),
                _ => break,
            }
            continue;
        }
        runs += event.records.len();
        let results = power::handle_each(deps, event.clone()).await;
        failed.extend(results.iter().filter_map(|(_, r)| r.as_ref().err().map(ToString::to_string)));
        w.queue.settle(&event, &power::respond(&results));
    }
    assert_eq!(failed.len(), failures, "failed deliveries: {failed:?}");
    runs
}

/// A pool `ci` with one installed cluster, `ci-1`, Running as stored, whose machines were launched and then stopped
/// behind Apiary's back; the cluster as stored.
async fn with_stopped_machines(w: &World) -> Cluster {
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let c = w.cluster("ci", "ci-1").expect("cluster");
    let spec = aws_spec(1, 0);
    let t = Target { pool: "ci", spec: &spec, cluster: &c, now: w.now() };
    let launched = Provisioner::provision(w.cloud.as_ref(), t).await.expect("call");
    assert_eq!(launched, apiary_ports::platform::Provision::Accepted { handle: None });
    for m in w.cloud.machines() {
        w.cloud.force(&m.id, MachineState::Stopped);
    }
    c
}

/// `ci-1` of [`with_stopped_machines`], stored Hibernating as its machines are; the cluster as stored.
async fn hibernated(w: &World) -> Cluster {
    let mut c = with_stopped_machines(w).await;
    c.power_state = Some(PowerState::Hibernating);
    c.rev += 1;
    w.put_cluster("ci", c.clone());
    c
}

fn machines(w: &World) -> Vec<MachineState> {
    w.cloud.machines().iter().map(|m| m.state).collect()
}

#[tokio::test]
async fn a_new_cluster_is_provisioned_and_becomes_running_once_its_machines_run() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    let out = power::power(&deps, &nudge("ci-1"), None).await.expect("step");
    assert!(out.recheck.is_some(), "installing: look again");
    assert_eq!(machines(&w), [MachineState::Pending, MachineState::Pending]);
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert!(c.installed_at.is_some());
    assert_eq!(c.power_state, Some(PowerState::Running));
    assert_eq!(machines(&w), [MachineState::Running, MachineState::Running]);
    let ids: Vec<String> = w.cloud.machines().into_iter().map(|m| m.id).collect();
    let recorded: Vec<(&str, bool, bool)> =
        c.machines.iter().map(|m| (m.id.as_str(), m.private_ip.is_some(), m.public_ip.is_some())).collect();
    assert_eq!(recorded, [(ids[0].as_str(), true, true), (ids[1].as_str(), true, true)], "its machines, addressed");
    let wakes: Vec<_> = w.queue.take_reconcile().into_iter().map(|m| m.reason).collect();
    assert!(wakes.contains(&"power".to_owned()), "installed: the pool is told: {wakes:?}");
}

#[tokio::test]
async fn a_running_cluster_asked_to_hibernate_stops_its_machines_and_settles_hibernating() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    power::power(&deps, &nudge("ci-1"), None).await.expect("provision");
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    let mut c = w.cluster("ci", "ci-1").expect("cluster");
    c.spec_power_state = Some(DesiredPower::Hibernating);
    c.rev += 1;
    w.put_cluster("ci", c);
    let start = w.now();
    power::power(&deps, &nudge("ci-1"), None).await.expect("step");
    assert!(machines(&w).iter().all(|m| *m == MachineState::Stopping));
    drive(&w, &deps, start + TimeDelta::minutes(10), 0).await;
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Hibernating));
    assert!(machines(&w).iter().all(|m| *m == MachineState::Stopped));
}

#[tokio::test]
async fn a_resume_walks_through_waiting_for_nodes_to_running_and_records_its_duration() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    hibernated(&w).await;
    power::power(&deps, &nudge("ci-1"), None).await.expect("step");
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::WaitingForMachines));
    drive(&w, &deps, w.now() + TimeDelta::minutes(10), 0).await;
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Running));
    assert!(c.last_resume_seconds.is_some_and(|s| s >= 20), "{c:?}");
    assert_eq!(c.machines.len(), 2, "a resume records the machines' addresses anew: {c:?}");
    assert!(c.machines.iter().all(|m| m.public_ip.as_deref().is_some_and(|ip| ip.starts_with("203.0.113."))));
    let docs = w.metrics.documents();
    assert!(docs.iter().any(|d| d["Transition"] == "Resume"), "{docs:?}");
}

/// A resume of `ci-1` (stored Hibernating, its machines stopped) carried through to Running on `deps`, every
/// delivery done.
async fn resumed(w: &World, deps: &Deps) {
    hibernated(w).await;
    power::power(deps, &nudge("ci-1"), None).await.expect("step");
    drive(w, deps, w.now() + TimeDelta::minutes(10), 0).await;
    assert_eq!(w.cluster("ci", "ci-1").and_then(|c| c.power_state), Some(PowerState::Running));
}

/// The kinds of the events in `writes`.
fn told(writes: &[Write]) -> Vec<apiary_planner::events::EventType> {
    writes.iter().filter_map(|w| if let Write::Append(e) = w { Some(e.kind) } else { None }).collect()
}

#[tokio::test]
async fn a_clusters_progress_is_written_alone_and_told_after_it() {
    use apiary_planner::events::EventType;
    // Each step of a resume writes the cluster alone, one conditional put (a transaction would bill every item in
    // it twice), and then its event, alone: the intent before the start, then its end.
    let w = World::new(t0());
    let racing = std::sync::Arc::new(Racing::new(w.store.clone(), vec![]));
    let deps = Deps { store: racing.clone(), ..w.default_deps(900) };
    resumed(&w, &deps).await;
    let sent = racing.sent.lock().expect("racing").clone();
    let puts: Vec<&Vec<Write>> = sent
        .iter()
        .filter(|ws| ws.iter().any(|w| matches!(w, Write::Put(apiary_ports::store::Item::Cluster(_), _))))
        .collect();
    assert!(puts.len() >= 3, "the intent, the call's outcome and the end: {sent:?}");
    assert!(puts.iter().all(|ws| ws.len() == 1), "each cluster put alone: {puts:?}");
    let events: Vec<Vec<EventType>> =
        sent.iter().filter(|ws| ws.iter().all(|w| matches!(w, Write::Append(_)))).map(|ws| told(ws)).collect();
    assert_eq!(events, [vec![EventType::PowerTransitionStarted], vec![EventType::ClusterRunning]], "{sent:?}");
    let trail = w.store.events("ci", &EventQuery { limit: 50, ..EventQuery::default() }).await.expect("trail");
    let kinds: Vec<EventType> = trail.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [EventType::ClusterRunning, EventType::PowerTransitionStarted], "newest first");
}

#[tokio::test]
async fn a_progress_event_the_trail_refuses_leaves_the_change_standing() {
    use apiary_planner::events::EventType;
    // The change is written; its event, told after, fails (say the trail's partition is throttled): the run goes
    // on, the message is done, and the event is logged instead of retried by the queue (the change, once written,
    // tells nothing more on a second delivery).
    let w = World::new(t0());
    let racing = std::sync::Arc::new(Racing { refuse_events: true, ..Racing::new(w.store.clone(), vec![]) });
    let deps = Deps { store: racing.clone(), ..w.default_deps(900) };
    resumed(&w, &deps).await;
    let trail = w.store.events("ci", &EventQuery { limit: 50, ..EventQuery::default() }).await.expect("trail");
    assert!(trail.events.iter().all(|e| e.kind != EventType::ClusterRunning), "{trail:?}");
}

/// A cluster's removal is news to its pool only where it frees room the pool is held to (here maxConcurrent):
/// elsewhere the plan counted the cluster out when it began deleting it.
#[tokio::test]
async fn a_deleting_cluster_loses_its_machines_then_its_item_and_a_pool_held_to_a_bound_is_told() {
    for bounded in [false, true] {
        let w = World::new(t0());
        let mut spec = aws_spec(1, 0);
        spec.max_concurrent = bounded.then_some(2);
        w.put_pool(pool("ci", spec, t0()));
        let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
        c.spec_power_state = Some(DesiredPower::Running);
        w.put_cluster("ci", c);
        let deps = w.default_deps(900);
        power::power(&deps, &nudge("ci-1"), None).await.expect("provision");
        w.queue.take_reconcile();
        let mut c = w.cluster("ci", "ci-1").expect("cluster");
        c.deleting = true;
        c.rev += 1;
        w.put_cluster("ci", c);
        let out = power::power(&deps, &nudge("ci-1"), None).await.expect("deprovision");
        assert!(out.removed);
        assert!(w.cluster("ci", "ci-1").is_none());
        w.time.advance(TimeDelta::minutes(1));
        assert!(machines(&w).iter().all(|m| *m == MachineState::Terminated));
        let told = w.queue.take_reconcile().iter().any(|m| m.reason == "deprovisioned");
        assert_eq!(told, bounded, "maxConcurrent set: {bounded}");
    }
}

/// The deprovision used to run while another invocation's provisioning call was still under way (its intent
/// recorded, then the reconcile marked the cluster deleting): it found no machine, deleted the item, and what the
/// call then made belonged to no cluster. On any cloud: the item stays, and the machines are looked for again,
/// until the call's fence has passed; then what it made is terminated.
#[tokio::test]
async fn a_cluster_deleted_while_its_provisioning_call_is_under_way_outlives_the_call() {
    let w = World::new(t0());
    let ci = pool("ci", aws_spec(1, 0), t0());
    w.put_pool(ci.clone());
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    c.pending_call = Some(PendingCall { call: ActuatorCall::Provision, at: t0() });
    c.deleting = true;
    w.put_cluster("ci", c.clone());
    let deps = w.default_deps(900);
    let out = power::power(&deps, &nudge("ci-1"), None).await.expect("deprovision");
    assert!(!out.removed && out.recheck.is_some(), "the call may still land: {out:?}");
    // It lands, a moment later.
    w.time.advance(TimeDelta::seconds(5));
    let target = Target { pool: "ci", spec: &ci.spec, cluster: &c, now: w.now() };
    w.cloud.provision(target).await.expect("the call");
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    assert!(w.cluster("ci", "ci-1").is_none(), "deprovisioned once the call is over");
    w.time.advance(TimeDelta::minutes(1));
    assert!(machines(&w).iter().all(|m| *m == MachineState::Terminated), "{:?}", machines(&w));
}

#[tokio::test]
async fn messages_for_nothing_do_nothing_and_unreadable_ones_are_dropped() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    assert_eq!(power::power(&deps, &nudge("ghost"), None).await.expect("no pool"), Default::default());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    assert_eq!(power::power(&deps, &nudge("ghost"), None).await.expect("no cluster"), Default::default());
    let event = SqsEvent {
        records: vec![SqsMessage { message_id: Some("m0".into()), body: Some("{".into()), ..Default::default() }],
    };
    assert!(power::handle(&deps, event).await.batch_item_failures.is_empty());
}

/// The event an SQS event source mapping hands Lambda (AWS's sample document): nothing failed is answered with an
/// empty list of batch item failures, which Lambda reads as every message done.
#[tokio::test]
async fn an_sqs_event_as_aws_sends_it_is_read_and_answered_as_lambda_reads_it() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    let ghost = serde_json::to_string(&nudge("ghost")).expect("json");
    let queue = "arn:aws:sqs:us-east-1:123456789012:apiary-power";
    let response = power::handle(&deps, apiary_testkit::events::sqs_event(queue, &[&ghost, "{"])).await;
    let sent = apiary_testkit::events::batch_response_json(&response);
    assert_eq!(sent, serde_json::json!({"batchItemFailures": []}));
}

/// Bug 2: every nudge (a reconcile that touched the cluster, the sweep's full pass) started a new re-check chain
/// and nothing retired the old ones, so a cluster in a long transition gathered chains, each polling the cloud.
#[tokio::test]
async fn nudges_do_not_multiply_re_check_chains() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Hibernating);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    for _ in 0..5 {
        power::power(&deps, &nudge("ci-1"), None).await.expect("step");
        w.time.advance(TimeDelta::seconds(1));
    }
    let chains = w.queue.messages(QueueName::Power).len();
    assert!(chains <= 2, "{chains} re-checks in flight for a pool with one installing cluster");
    // Driven for an hour, the cluster installs and hibernates, and the cloud was asked a bounded number of times.
    drive(&w, &deps, t0() + TimeDelta::hours(1), 0).await;
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").power_state, Some(PowerState::Hibernating));
    let describes = w.cloud.calls().get("describe").copied().unwrap_or_default();
    assert!(describes <= 20, "{describes} looks at one cluster");
}

/// Records, at each start or stop call, what the table said of the cluster's power state at that moment.
struct Spy {
    store: std::sync::OnceLock<std::sync::Arc<apiary_testkit::store::MemStore>>,
    seen: std::sync::Mutex<Vec<Option<PowerState>>>,
}

impl apiary_testkit::hook::Hook for Spy {
    fn before(&self, op: apiary_testkit::hook::Op) -> apiary_testkit::hook::Gate {
        if op == apiary_testkit::hook::Op::Change {
            let state = self
                .store
                .get()
                .and_then(|s| s.tables().snapshot("ci"))
                .and_then(|snap| snap.clusters.iter().find(|c| c.id == "ci-1").and_then(|c| c.power_state));
            self.seen.lock().expect("spy").push(state);
        }
        apiary_testkit::hook::Gate::Proceed
    }
}

/// Bug 3: the power function stopped the machines before it recorded the new state, so while the stop was under
/// way the table still said Running and a claim could be given a cluster whose machines were stopping.
#[tokio::test]
async fn a_stop_is_recorded_before_the_machines_are_stopped() {
    let spy = std::sync::Arc::new(Spy { store: Default::default(), seen: Default::default() });
    let w = World::with_hook(t0(), spy.clone(), 1);
    let _ = spy.store.set(w.store.clone());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    power::power(&deps, &nudge("ci-1"), None).await.expect("provision");
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").power_state, Some(PowerState::Running));
    let mut c = w.cluster("ci", "ci-1").expect("cluster");
    c.spec_power_state = Some(DesiredPower::Hibernating);
    c.rev += 1;
    w.put_cluster("ci", c);
    spy.seen.lock().expect("spy").clear();
    power::power(&deps, &nudge("ci-1"), None).await.expect("stop");
    let seen = spy.seen.lock().expect("spy").clone();
    assert!(!seen.is_empty(), "a stop was made");
    assert!(seen.iter().all(|s| *s != Some(PowerState::Running)), "the table said {seen:?} while stopping");
}

/// Seed 004: a cluster whose machines the platform cannot stop keeps running, says Unsupported, stops nothing, and
/// is not looked at again until its spec changes.
#[tokio::test]
async fn a_cluster_that_cannot_be_stopped_stays_running_with_hibernation_unsupported() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    w.cloud.unstoppable("ci-1-infra");
    let deps = w.default_deps(900);
    power::power(&deps, &nudge("ci-1"), None).await.expect("provision");
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    let mut c = w.cluster("ci", "ci-1").expect("cluster");
    c.spec_power_state = Some(DesiredPower::Hibernating);
    c.rev += 1;
    w.put_cluster("ci", c);
    let out = power::power(&deps, &nudge("ci-1"), None).await.expect("asked to hibernate");
    assert_eq!(out.recheck, None, "nothing left to look at");
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Running));
    let hib = c.conditions.iter().find(|c| c.type_ == "Hibernating").expect("Hibernating condition");
    assert_eq!((hib.status, hib.reason.as_str()), (apiary_planner::ConditionStatus::False, "Unsupported"));
    assert!(hib.message.contains("instance store"), "{}", hib.message);
    assert_eq!(machines(&w), [MachineState::Running, MachineState::Running]);
    assert_eq!(w.cloud.calls().get("stop"), None, "no machine was asked to stop");
    assert!(!apiary_planner::power::needs_tick(&[c], None, w.now()), "the sweep leaves it alone");
}

/// Fails every look at the machines with an error that trying again cannot mend (a credential the cloud refuses).
struct Refusing;

impl apiary_testkit::hook::Hook for Refusing {
    fn before(&self, op: apiary_testkit::hook::Op) -> apiary_testkit::hook::Gate {
        match op {
            apiary_testkit::hook::Op::Describe => apiary_testkit::hook::Gate::Fail(apiary_ports::Error::service(
                "gcp:token",
                "https://oauth2.googleapis.com/token refused the service account: 400 invalid_grant",
                false,
            )),
            _ => apiary_testkit::hook::Gate::Proceed,
        }
    }
}

/// A cloud error that trying again cannot mend used to fail the message until the queue dropped it, with nothing
/// said anywhere. It is now the resume's failure: FailedToStartMachines with the cloud's message, retried after a
/// backoff, and the message itself succeeds.
#[tokio::test]
async fn a_refused_credential_is_surfaced_on_the_cluster_and_backed_off() {
    let w = World::with_hook(t0(), std::sync::Arc::new(Refusing), 1);
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let mut c = w.cluster("ci", "ci-1").expect("cluster");
    c.power_state = Some(PowerState::Hibernating);
    c.rev += 1;
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    let out = power::power(&deps, &nudge("ci-1"), None).await.expect("the message is handled, not failed");
    assert_eq!(out.recheck, Some(std::time::Duration::from_secs(15)), "backed off");
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::FailedToStartMachines));
    let ready = c.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready condition");
    assert_eq!(ready.reason, "FailedToStartMachines");
    assert!(ready.message.contains("invalid_grant"), "{}", ready.message);
}

/// A cluster item removed behind Apiary's back (by hand, by a bug) leaves machines that no cluster owns. The
/// reaper finds them by the pool's mark, leaves them alone for the grace period, then terminates them, and says
/// so in a metric; the machines of another pool are never touched.
#[tokio::test]
async fn the_reaper_finds_the_machines_of_a_cluster_removed_behind_apiarys_back() {
    let w = World::new(t0());
    let ci = pool("ci", aws_spec(1, 0), t0());
    w.put_pool(ci.clone());
    let deps = w.default_deps(900);
    let lost = installed("ci-1", DesiredPower::Hibernating, t0());
    w.put_cluster("ci", lost.clone());
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the first pass");
    let stranger = Cluster::new("x", "x", "x-infra", t0());
    for (pool, cluster) in [("ci", &lost), ("other", &stranger)] {
        let target = Target { pool, spec: &ci.spec, cluster, now: w.now() };
        w.cloud.provision(target).await.expect("machines");
    }
    let gone = Write::Delete(Key::Cluster(lost.id.clone()), Cond::Rev(lost.rev));
    deps.store.write("ci", vec![gone]).await.expect("removed behind Apiary's back");

    w.time.advance(REAP_EVERY);
    let out = power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("a pass");
    assert!(out.reaped.is_empty(), "a new orphan is left alone");
    let seen = w.snapshot("ci").expect("pool").pool.status.orphans.expect("looked").seen;
    assert_eq!(seen.keys().collect::<Vec<_>>(), [&lost.infra_id]);
    let docs = w.metrics.documents();
    assert!(docs.iter().any(|d| d["OrphansFound"] == 1.0 && d["OrphansReaped"] == 0.0), "{docs:?}");

    w.time.advance(REAP_GRACE);
    let out = power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("a pass");
    assert_eq!(out.reaped, std::slice::from_ref(&lost.infra_id));
    w.time.advance(chrono::TimeDelta::minutes(5));
    let states = |infra: &str| -> Vec<MachineState> {
        w.cloud.machines().into_iter().filter(|m| m.infra_id == infra).map(|m| m.state).collect()
    };
    assert!(states(&lost.infra_id).iter().all(|s| *s == MachineState::Terminated), "{:?}", states(&lost.infra_id));
    assert!(states("x-infra").iter().all(|s| *s == MachineState::Running), "another pool's machines stay");
    assert!(w.metrics.documents().iter().any(|d| d["OrphansReaped"] == 1.0));
}

/// A reap message repeated (each reconcile while a pass is due sends one) costs one GetItem of the pool item,
/// never a read of the whole partition, once the pass is made.
#[tokio::test]
async fn a_repeated_reap_message_reads_the_pool_item_only() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    for n in 0..50 {
        w.put_cluster("ci", installed(&format!("ci-{n}"), DesiredPower::Hibernating, t0()));
    }
    let deps = w.default_deps(900);
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("the pass");
    let before = w.store.stats();
    power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("again");
    let cost = w.store.stats() - before;
    assert_eq!((cost.reads, cost.items_read, cost.write_attempts), (1, 1, 0), "{cost:?}");
}

fn authentication(w: &World, pool: &str) -> Option<(apiary_planner::ConditionStatus, String, String)> {
    let p = w.snapshot(pool).expect("pool").pool;
    p.status
        .conditions
        .iter()
        .find(|c| c.type_ == "AuthenticationFailure")
        .map(|c| (c.status, c.reason.clone(), c.message.clone()))
}

/// A pool whose role cannot be assumed says so on its pool, from the first call refused, naming the role and the
/// cloud's reason; its clusters back off; the pool item is written once for the refusal, not once per call;
/// another pool is untouched; once the role can be assumed again the condition turns False.
#[tokio::test]
async fn a_role_that_cannot_be_assumed_is_a_condition_on_its_pool_until_it_can() {
    use apiary_planner::ConditionStatus;
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    w.put_pool(pool("other", aws_spec(1, 0), t0()));
    for (pool, id) in [("ci", "ci-1"), ("ci", "ci-2"), ("other", "other-1")] {
        let mut c = Cluster::new(id, id, format!("{id}-infra"), t0());
        c.spec_power_state = Some(DesiredPower::Running);
        w.put_cluster(pool, c);
    }
    let why =
        "AccessDenied: not authorized to perform sts:AssumeRole on arn:aws:iam::210987654321:role/apiary-member-ci";
    w.cloud.refuse_credentials("ci", why);
    let deps = w.default_deps(900);

    power::power(&deps, &nudge("ci-1"), None).await.expect("the message is handled, not failed");
    let (status, reason, message) = authentication(&w, "ci").expect("the pool says why");
    assert_eq!((status, reason.as_str()), (ConditionStatus::True, "AuthenticationFailed"));
    assert!(message.contains("arn:aws:iam::210987654321:role/apiary-member-ci") && message.contains("AccessDenied"));
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert!(c.conditions.iter().any(|c| c.type_ == "ProvisionFailed"), "the cluster backs off: {:?}", c.conditions);

    let rev = w.snapshot("ci").expect("pool").pool.rev;
    power::power(&deps, &nudge("ci-2"), None).await.expect("handled");
    assert_eq!(w.snapshot("ci").expect("pool").pool.rev, rev, "the same refusal does not write the pool again");

    power::power(&deps, &PowerMessage::nudge("other", "other-1"), None).await.expect("handled");
    assert_eq!(authentication(&w, "other"), None, "another pool is untouched");
    assert_eq!(w.cloud.machines().iter().filter(|m| m.pool == "other").count(), 2, "and provisions");
    assert!(w.cloud.machines().iter().all(|m| m.pool != "ci"), "nothing was made with refused credentials");

    w.cloud.accept_credentials("ci");
    drive(&w, &deps, t0() + TimeDelta::minutes(30), 0).await;
    let (status, reason, _) = authentication(&w, "ci").expect("still there, now False");
    assert_eq!((status, reason.as_str()), (ConditionStatus::False, "AuthenticationSucceeded"));
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").power_state, Some(PowerState::Running));
}

/// A reaper pass that cannot list (the role refused) is not a pass: a deleting pool is not found clear, and the
/// pool says why.
#[tokio::test]
async fn a_reaper_pass_with_a_refused_role_lists_nothing_and_clears_nothing() {
    let w = World::new(t0());
    let mut ci = pool("ci", aws_spec(1, 0), t0());
    ci.deletion_requested_at = Some(t0());
    w.put_pool(ci);
    w.cloud.refuse_credentials("ci", "AccessDenied");
    let deps = w.default_deps(900);
    let out = power::power(&deps, &PowerMessage::reap("ci"), None).await.expect("handled");
    assert!(out.reaped.is_empty());
    let p = w.snapshot("ci").expect("pool").pool;
    assert_eq!(p.status.orphans, None, "no pass recorded");
    assert!(authentication(&w, "ci").is_some_and(|(s, _, _)| s == apiary_planner::ConditionStatus::True));
}

/// Installs one cluster whose machines take 20 minutes to launch, in a pool whose status says `pace`; the power
/// runs it took and when the install was found done.
async fn install_with(pace: Option<apiary_planner::Pace>) -> (usize, Timestamp) {
    let w = World::new(t0());
    w.cloud.set_timings(apiary_testkit::cloud::Timings { launch: TimeDelta::minutes(20), ..Default::default() });
    let mut p = pool("ci", aws_spec(1, 1), t0());
    p.status.pace = pace;
    w.put_pool(p);
    let mut c = Cluster::new("ci-1", "ci-1", "ci-1-infra", t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    let deps = w.default_deps(900);
    power::power(&deps, &nudge("ci-1"), None).await.expect("provision");
    let runs = 1 + drive(&w, &deps, t0() + TimeDelta::minutes(40), 0).await;
    let installed = w.cluster("ci", "ci-1").and_then(|c| c.installed_at).expect("installed");
    (runs, installed)
}

#[tokio::test]
async fn a_pool_whose_pace_is_known_looks_at_an_install_less_often_and_finds_it_done_as_soon() {
    let (every_minute, found) = install_with(None).await;
    let pace = apiary_planner::Pace { install_seconds: Some(20 * 60), ..Default::default() };
    let (paced, found_paced) = install_with(Some(pace)).await;
    assert!(found >= t0() + TimeDelta::minutes(20) && found_paced <= found, "{found} vs {found_paced}");
    // Every minute: some twenty looks. Paced: at 1, 2, 4, 8, 13, 18 and 19 minutes, then done at 20.
    assert!(every_minute >= 20 && paced <= every_minute / 2, "{every_minute} runs every minute, {paced} paced");
}

/// The pool's tick item as stored.
fn tick_of(w: &World) -> apiary_planner::power::tick::Tick {
    match w.store.tables().pools.get("ci").and_then(|p| p.get("TICK")).cloned() {
        Some(apiary_ports::store::Item::Tick(t)) => *t,
        other => panic!("no tick: {other:?}"),
    }
}

/// The tick links in the power queue that can still act: the live one and the one it replaced.
fn acting_links(w: &World) -> usize {
    let tick = tick_of(w);
    let tokens: Vec<u64> = [tick.check, tick.superseded].iter().flatten().map(|l| l.token).collect();
    w.queue
        .messages(QueueName::Power)
        .iter()
        .filter_map(|m| serde_json::from_str::<PowerMessage>(&m.body).ok())
        .filter(|m| m.tick && m.check.is_some_and(|t| tokens.contains(&t)))
        .count()
}

/// `messages` as one batch from the power queue.
fn batch(messages: &[PowerMessage]) -> SqsEvent {
    let records = messages
        .iter()
        .enumerate()
        .map(|(i, m)| SqsMessage {
            message_id: Some(format!("m{i}")),
            body: Some(serde_json::to_string(m).expect("json")),
            ..Default::default()
        })
        .collect();
    SqsEvent { records }
}

/// `n` installing clusters in pool `ci`, each nudged once (as the reconcile that created them does); their
/// machines take five minutes to launch.
async fn installing(w: &World, deps: &Deps, n: usize) {
    w.cloud.set_timings(apiary_testkit::cloud::Timings { launch: TimeDelta::minutes(5), ..Default::default() });
    w.put_pool(pool("ci", aws_spec(n as i64, n as i64), t0()));
    for i in 0..n {
        let id = format!("ci-{i}");
        let mut c = Cluster::new(&id, &id, format!("{id}-infra"), t0());
        c.spec_power_state = Some(DesiredPower::Running);
        w.put_cluster("ci", c);
        power::power(deps, &nudge(&id), None).await.expect("provision");
    }
}

#[tokio::test]
async fn one_tick_looks_at_every_cluster_in_motion_and_a_look_that_finds_nothing_writes_nothing() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    installing(&w, &deps, 6).await;
    assert_eq!(w.queue.messages(QueueName::Power).len(), 1, "six nudges, one tick");
    let revs: Vec<u64> = (0..6).map(|i| w.cluster("ci", &format!("ci-{i}")).expect("cluster").rev).collect();
    // The tick comes: it looks at all six (their machines are still pending) and writes none of them.
    let t = tick_of(&w).check.expect("a live tick").due;
    w.time.set(t);
    let msg = PowerMessage::tick("ci", tick_of(&w).check.map(|c| c.token));
    let describes = || w.cloud.calls().get("describe").copied().unwrap_or_default();
    let before = describes();
    let out = power::power(&deps, &msg, None).await.expect("tick");
    assert_eq!(out.looked.len(), 6, "{out:?}");
    assert_eq!(describes() - before, 1, "one describe for the six clusters");
    assert!(!out.written && out.recheck.is_some(), "{out:?}");
    let after: Vec<u64> = (0..6).map(|i| w.cluster("ci", &format!("ci-{i}")).expect("cluster").rev).collect();
    assert_eq!(after, revs, "nothing new: no cluster written");
    assert_eq!(tick_of(&w).due.len(), 6, "each cluster's next look recorded on the tick");
    // Driven on, all six install, with far fewer power runs than six chains would take.
    let runs = 1 + drive(&w, &deps, t0() + TimeDelta::minutes(20), 0).await;
    for i in 0..6 {
        let c = w.cluster("ci", &format!("ci-{i}")).expect("cluster");
        assert_eq!(c.power_state, Some(PowerState::Running), "ci-{i}");
    }
    assert!(runs <= 12, "{runs} power runs for six installs of a few minutes");
    assert!(tick_of(&w).check.is_none() && tick_of(&w).due.is_empty(), "nothing moves: the tick ends");
}

/// Every port call lets other invocations run first: concurrent runs interleave between any two calls.
struct YieldAlways;

impl apiary_testkit::hook::Hook for YieldAlways {
    fn before(&self, _: apiary_testkit::hook::Op) -> apiary_testkit::hook::Gate {
        apiary_testkit::hook::Gate::Yield
    }
}

/// A burst's replacements finish installing together: the nudges whose looks find them come up all succeed. The
/// tick need only say that a cluster came up since its look; the first nudge to write that says it for the others.
/// They used to race to write it each, and a nudge that lost three times failed its delivery, to come again for a
/// second look.
#[tokio::test]
async fn nudges_that_find_many_clusters_come_up_together_all_succeed() {
    let w = World::with_hook(t0(), std::sync::Arc::new(YieldAlways), 7);
    let deps = w.default_deps(900);
    installing(&w, &deps, 12).await;
    let mut up = 0;
    for minute in [10, 20, 30] {
        w.time.set(t0() + TimeDelta::minutes(minute));
        let runs = (0..12).map(|i| {
            let deps = deps.clone();
            async move { (i, power::power(&deps, &nudge(&format!("ci-{i}")), None).await) }
        });
        for (i, out) in futures::future::join_all(runs).await {
            let out = out.unwrap_or_else(|e| panic!("ci-{i}'s nudge at {minute} min failed: {e}"));
            up += usize::from(out.came_up);
        }
    }
    assert_eq!(up, 12, "each found come up once");
    assert!(tick_of(&w).up.is_some_and(|at| at > t0() && at <= w.now()), "{:?}", tick_of(&w));
}

/// What one tick at `n` installing clusters asks of the table: its reads, and the clusters it looked at.
async fn tick_reads(n: usize) -> (u64, usize) {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    installing(&w, &deps, n).await;
    let link = tick_of(&w).check.expect("a live tick");
    w.time.set(link.due);
    let before = w.store.stats();
    let out = power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    ((w.store.stats() - before).reads, out.looked.len())
}

#[tokio::test]
async fn a_ticks_reads_stay_flat_as_the_clusters_it_looks_at_grow() {
    let (few, looked_few) = tick_reads(2).await;
    let (many, looked_many) = tick_reads(40).await;
    assert_eq!((looked_few, looked_many), (2, 40));
    assert_eq!(few, many, "{few} reads for 2 looks, {many} for 40: the clusters are read with one request");
}

/// Fails every look at machines while `on`, as a cloud that is down would (an error worth trying again).
struct DescribeDown(std::sync::atomic::AtomicBool);

impl apiary_testkit::hook::Hook for DescribeDown {
    fn before(&self, op: apiary_testkit::hook::Op) -> apiary_testkit::hook::Gate {
        if op == apiary_testkit::hook::Op::Describe && self.0.load(std::sync::atomic::Ordering::SeqCst) {
            return apiary_testkit::hook::Gate::Fail(apiary_ports::Error::service(
                "ec2:DescribeInstances",
                "RequestLimitExceeded",
                true,
            ));
        }
        apiary_testkit::hook::Gate::Proceed
    }
}

#[tokio::test]
async fn a_describe_that_fails_touches_no_cluster_and_the_tick_looks_again_soon() {
    let down = std::sync::Arc::new(DescribeDown(false.into()));
    let w = World::with_hook(t0(), down.clone(), 1);
    let deps = w.default_deps(900);
    installing(&w, &deps, 3).await;
    let before: Vec<Cluster> = (0..3).map(|i| w.cluster("ci", &format!("ci-{i}")).expect("cluster")).collect();
    down.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    let out = power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("the tick survives");
    assert_eq!(out.looked.len(), 3);
    let after: Vec<Cluster> = (0..3).map(|i| w.cluster("ci", &format!("ci-{i}")).expect("cluster")).collect();
    assert_eq!(after, before, "a failed look changes no cluster");
    let next = tick_of(&w);
    assert!(next.due.values().all(|at| *at == link.due + apiary_planner::power::POLL), "{next:?}");
    assert_eq!(out.recheck, Some(std::time::Duration::from_secs(15)), "looked at again after the short poll");
    // The cloud answers again: the installs go on and finish.
    down.0.store(false, std::sync::atomic::Ordering::SeqCst);
    drive(&w, &deps, t0() + TimeDelta::minutes(20), 0).await;
    assert!((0..3).all(|i| w.cluster("ci", &format!("ci-{i}")).is_some_and(|c| c.installed_at.is_some())));
}

#[tokio::test]
async fn a_cluster_that_vanishes_between_looks_leaves_the_tick_and_the_others_go_on() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    installing(&w, &deps, 2).await;
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    assert_eq!(tick_of(&w).due.len(), 2);
    // Removed behind the tick's back (an admin, a bug, a table restored): the next tick finds it gone.
    let gone = w.cluster("ci", "ci-0").expect("cluster");
    let store: &dyn apiary_ports::store::Store = w.store.as_ref();
    store.write("ci", vec![Write::Delete(Key::Cluster(gone.id.clone()), Cond::Rev(gone.rev))]).await.expect("gone");
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    let out = power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    assert!(!out.looked.contains(&"ci-0".to_owned()), "{out:?}");
    assert_eq!(tick_of(&w).due.keys().cloned().collect::<Vec<_>>(), ["ci-1"]);
    drive(&w, &deps, t0() + TimeDelta::minutes(20), 0).await;
    assert_eq!(w.cluster("ci", "ci-1").and_then(|c| c.power_state), Some(PowerState::Running));
}

/// While `on`, every table read lets other invocations run first: two handlings of one message interleave.
struct Interleave(std::sync::atomic::AtomicBool);

impl apiary_testkit::hook::Hook for Interleave {
    fn before(&self, op: apiary_testkit::hook::Op) -> apiary_testkit::hook::Gate {
        if op == apiary_testkit::hook::Op::Read && self.0.load(std::sync::atomic::Ordering::SeqCst) {
            return apiary_testkit::hook::Gate::Yield;
        }
        apiary_testkit::hook::Gate::Proceed
    }
}

#[tokio::test]
async fn a_tick_delivered_twice_looks_once_and_never_forks_the_chain() {
    let interleave = std::sync::Arc::new(Interleave(false.into()));
    let w = World::with_hook(t0(), interleave.clone(), 1);
    let deps = w.default_deps(900);
    installing(&w, &deps, 2).await;
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    let msg = PowerMessage::tick("ci", Some(link.token));
    let first = power::power(&deps, &msg, None).await.expect("tick");
    assert_eq!(first.looked.len(), 2);
    let again = power::power(&deps, &msg, None).await.expect("the copy");
    assert!(again.dropped && again.looked.is_empty() && again.recheck.is_none(), "{again:?}");
    // Both copies in one batch, handled at once and interleaved (both read the tick before either writes it): one
    // carries the chain on, the other loses the tick's condition, finds its link stale and ends.
    interleave.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    let copy = PowerMessage::tick("ci", Some(link.token));
    let sent = w.queue.sent();
    let response = power::handle(&deps, batch(&[copy.clone(), copy])).await;
    assert!(response.batch_item_failures.len() <= 1, "{response:?}");
    assert_eq!(w.queue.sent() - sent, 1, "one next link");
    assert!(tick_of(&w).superseded.is_none());
    let acting = acting_links(&w);
    assert_eq!(acting, 1, "one live link in flight");
}

#[tokio::test]
async fn a_burst_of_nudges_handled_at_once_starts_one_tick_and_none_fails() {
    // Thirty Running clusters asked to hibernate, their nudges in three batches of ten handled at once, every table
    // read letting the others run first: all race to start the tick, one wins, the rest find it live.
    let interleave = std::sync::Arc::new(Interleave(false.into()));
    let w = World::with_hook(t0(), interleave.clone(), 1);
    let deps = w.default_deps(900);
    w.put_pool(pool("ci", aws_spec(30, 0), t0()));
    let mut ids = Vec::new();
    for i in 0..30 {
        let id = format!("ci-{i:02}");
        let mut c = Cluster::new(&id, &id, format!("{id}-infra"), t0());
        c.spec_power_state = Some(DesiredPower::Running);
        w.put_cluster("ci", c);
        ids.push(id);
    }
    // Installed and Running first (one tick does it all), then asked to hibernate.
    for id in &ids {
        power::power(&deps, &nudge(id), None).await.expect("provision");
    }
    drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
    for id in &ids {
        let mut c = w.cluster("ci", id).expect("cluster");
        assert_eq!(c.power_state, Some(PowerState::Running), "{id}");
        c.spec_power_state = Some(DesiredPower::Hibernating);
        c.rev += 1;
        w.put_cluster("ci", c);
    }
    interleave.0.store(true, std::sync::atomic::Ordering::SeqCst);
    for chunk in ids.chunks(10) {
        let nudges: Vec<PowerMessage> = chunk.iter().map(|id| nudge(id)).collect();
        let response = power::handle(&deps, batch(&nudges)).await;
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
    }
    let acting = acting_links(&w);
    assert!((1..=2).contains(&acting), "{acting} acting tick links");
    interleave.0.store(false, std::sync::atomic::Ordering::SeqCst);
    drive(&w, &deps, t0() + TimeDelta::minutes(30), 0).await;
    for id in &ids {
        assert_eq!(w.cluster("ci", id).and_then(|c| c.power_state), Some(PowerState::Hibernating), "{id}");
    }
}

/// The table, with two races staged:
/// - when a tick writes its item ending its chain, a nudge's write lands first: `cluster`, put in motion (asked to
///   hibernate). The nudge read the tick before, found it live, and left it;
/// - a tick's batch read of its clusters (eventually consistent) gives the copies in `stale`, from before writes
///   it has not seen yet.
///
/// It also keeps every write call as sent (`sent`), and can refuse the calls that append events alone
/// (`refuse_events`).
struct Racing {
    inner: std::sync::Arc<apiary_testkit::store::MemStore>,
    cluster: std::sync::Mutex<Option<Cluster>>,
    stale: Vec<Cluster>,
    /// Every write call sent, as sent.
    sent: std::sync::Mutex<Vec<Vec<Write>>>,
    /// A call of events alone fails (the trail's partition throttled, say).
    refuse_events: bool,
}

impl Racing {
    fn new(inner: std::sync::Arc<apiary_testkit::store::MemStore>, stale: Vec<Cluster>) -> Self {
        Self { inner, cluster: std::sync::Mutex::new(None), stale, sent: Default::default(), refuse_events: false }
    }
}

#[async_trait::async_trait]
impl apiary_ports::store::Store for Racing {
    async fn read_pool(&self, pool: &str) -> apiary_ports::Result<Option<apiary_planner::Snapshot>> {
        self.inner.read_pool(pool).await
    }
    async fn get(&self, pool: &str, key: &Key) -> apiary_ports::Result<Option<apiary_ports::store::Item>> {
        self.inner.get(pool, key).await
    }
    async fn get_many(&self, pool: &str, keys: &[Key]) -> apiary_ports::Result<Vec<apiary_ports::store::Item>> {
        let mut found = vec![];
        for key in keys {
            match self.stale.iter().find(|c| Key::Cluster(c.id.clone()) == *key) {
                Some(c) => found.push(apiary_ports::store::Item::Cluster(Box::new(c.clone()))),
                None => found.extend(self.inner.get(pool, key).await?),
            }
        }
        Ok(found)
    }
    async fn spares(&self, pool: &str, from: u16, limit: usize) -> apiary_ports::Result<Vec<String>> {
        self.inner.spares(pool, from, limit).await
    }
    async fn ahead(
        &self,
        pool: &str,
        claim: &apiary_planner::Claim,
        limit: usize,
    ) -> apiary_ports::Result<Vec<String>> {
        self.inner.ahead(pool, claim, limit).await
    }
    async fn moving(&self, pool: &str) -> apiary_ports::Result<Vec<String>> {
        self.inner.moving(pool).await
    }
    async fn list_pools(&self) -> apiary_ports::Result<Vec<apiary_planner::Pool>> {
        self.inner.list_pools().await
    }
    async fn labelled(&self, key: &str, value: &str) -> apiary_ports::Result<Vec<String>> {
        self.inner.labelled(key, value).await
    }
    async fn write(&self, pool: &str, writes: Vec<Write>) -> apiary_ports::Result<()> {
        self.sent.lock().expect("racing").push(writes.clone());
        if self.refuse_events && writes.iter().all(|w| matches!(w, Write::Append(_))) {
            return Err(apiary_ports::Error::Service {
                op: "dynamodb:PutItem",
                message: "throughput exceeded".into(),
                retryable: true,
                source: None,
            });
        }
        let ends =
            writes.iter().any(|w| matches!(w, Write::Put(apiary_ports::store::Item::Tick(t), _) if t.check.is_none()));
        let taken = self.cluster.lock().expect("racing").take();
        if let (true, Some(mut c)) = (ends, taken) {
            let rev = c.rev;
            c.spec_power_state = Some(DesiredPower::Hibernating);
            c.rev += 1;
            let put = Write::Put(apiary_ports::store::Item::Cluster(Box::new(c)), Cond::Rev(rev));
            self.inner.write(pool, vec![put]).await?;
        }
        self.inner.write(pool, writes).await
    }
    async fn last_full_sweep(&self) -> apiary_ports::Result<Option<Timestamp>> {
        self.inner.last_full_sweep().await
    }
    async fn record_full_sweep(&self, previous: Option<Timestamp>, at: Timestamp) -> apiary_ports::Result<()> {
        self.inner.record_full_sweep(previous, at).await
    }
    async fn trail_between(
        &self,
        pool: &str,
        shard: u8,
        after: &str,
        until: &str,
        limit: usize,
    ) -> apiary_ports::Result<Vec<(String, apiary_planner::events::Event)>> {
        self.inner.trail_between(pool, shard, after, until, limit).await
    }

    async fn events(
        &self,
        pool: &str,
        query: &apiary_ports::store::EventQuery,
    ) -> apiary_ports::Result<apiary_ports::store::EventPage> {
        self.inner.events(pool, query).await
    }
}

#[tokio::test]
async fn a_cluster_that_begins_moving_while_the_tick_ends_is_not_left_without_one() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    installing(&w, &deps, 1).await;
    // The install's last look: the tick finds it done, then (nothing in motion) ends; a nudge's write lands between
    // its read of the index and its ending write.
    let c = w.cluster("ci", "ci-0").expect("cluster");
    let racing = Racing::new(w.store.clone(), vec![]);
    let racing = std::sync::Arc::new(racing);
    let raced = Deps { store: racing.clone(), ..deps.clone() };
    w.time.set(t0() + TimeDelta::minutes(6));
    let mut ticks = 0;
    while let Some(link) = tick_of(&w).check {
        w.time.set(w.now().max(link.due));
        if w.cluster("ci", "ci-0").is_some_and(|c| c.power_state == Some(PowerState::Running)) {
            break;
        }
        power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
        ticks += 1;
        assert!(ticks < 20, "never installed");
    }
    // Running, nothing in motion; the next tick ends the chain, and the race puts the cluster in motion.
    let running = w.cluster("ci", "ci-0").expect("cluster");
    assert_eq!(running.power_state, Some(PowerState::Running), "{c:?}");
    *racing.cluster.lock().expect("racing") = Some(running);
    let link = tick_of(&w).check.expect("a live tick");
    w.time.set(w.now().max(link.due));
    power::power(&raced, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    let c = w.cluster("ci", "ci-0").expect("cluster");
    assert!(apiary_planner::power::in_progress(&c), "asked to hibernate: {:?}", c.spec_power_state);
    assert!(!apiary_planner::power::needs_tick(&[c], Some(&tick_of(&w)), w.now()), "no live tick: {:?}", tick_of(&w));
    drive(&w, &deps, w.now() + TimeDelta::minutes(30), 0).await;
    assert_eq!(w.cluster("ci", "ci-0").and_then(|c| c.power_state), Some(PowerState::Hibernating));
}

#[tokio::test]
async fn a_look_at_a_stale_copy_makes_no_call_and_reads_the_cluster_again() {
    // A tick reads its clusters eventually consistently: a copy may miss a write made a moment before. Here another
    // invocation has just recorded a start it is making (the call fenced); the tick's copy still shows the cluster
    // hibernated with a resume wanted, its machines stopped. Acting on the copy would start them a second time:
    // the intent, written on the copy's revision, loses its condition first, and the look reads the cluster again
    // and finds the call fenced.
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let copy = hibernated(&w).await;
    let mut starting = copy.clone();
    starting.power_state = Some(PowerState::StartingMachines);
    starting.transition_started_at = Some(w.now());
    starting.pending_call = Some(PendingCall { call: ActuatorCall::Start, at: w.now() });
    starting.rev += 1;
    w.put_cluster("ci", starting.clone());
    let starts = || w.cloud.calls().get("start").copied().unwrap_or_default();
    let racing = Racing::new(w.store.clone(), vec![copy]);
    let raced = Deps { store: std::sync::Arc::new(racing), ..deps.clone() };
    w.time.set(w.now() + TimeDelta::seconds(5));
    let before = w.store.stats();
    let out = power::power(&raced, &PowerMessage::tick("ci", None), None).await.expect("tick");
    assert_eq!(out.looked, vec!["ci-1".to_string()], "{out:?}");
    assert_eq!(starts(), 0, "no call made on the stale copy");
    assert_eq!((w.store.stats() - before).conflicts, 1, "the copy's intent lost its condition");
    assert_eq!(w.cluster("ci", "ci-1"), Some(starting), "the cluster as the other invocation wrote it");
    let next = tick_of(&w).due.get("ci-1").copied();
    assert!(next.is_some_and(|at| at > w.now() + TimeDelta::seconds(60)), "looked at again once the fence passes");
}

/// A standard queue that delivers the next receive of a power message twice, once asked to.
#[derive(Debug, Default)]
struct TwiceOnce(std::sync::atomic::AtomicBool);

impl apiary_testkit::hook::Hook for TwiceOnce {
    fn duplicate(&self) -> bool {
        self.0.swap(false, std::sync::atomic::Ordering::SeqCst)
    }
}

/// Pool `ci` of one cluster, `id`, whose install begins now and takes 20 minutes; the pool knows no pace.
async fn twenty_minute_install(w: &World, deps: &Deps, id: &str) {
    w.cloud.set_timings(apiary_testkit::cloud::Timings { launch: TimeDelta::minutes(20), ..Default::default() });
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    let mut c = Cluster::new(id, id, format!("{id}-infra"), t0());
    c.spec_power_state = Some(DesiredPower::Running);
    w.put_cluster("ci", c);
    power::power(deps, &nudge(id), None).await.expect("provision");
}

/// One cluster installing for 20 minutes in a pool that does not know its pace (its tick looks every minute),
/// its power messages delivered through the queue as Lambda would; with `twice`, the queue delivers the third
/// link twice. The runs, the messages sent, the most receives of one message, and when the install was found done.
async fn a_twenty_minute_install(twice: bool) -> (usize, u64, u32, Timestamp) {
    let hook = std::sync::Arc::new(TwiceOnce::default());
    let w = World::with_hook(t0(), hook.clone(), 1);
    let deps = w.default_deps(900);
    twenty_minute_install(&w, &deps, "ci-1").await;
    let (mut runs, sent, mut receives) = (0, w.queue.sent(), 0);
    loop {
        let event = w.queue.receive(QueueName::Power, 10, TimeDelta::seconds(360), &mut |_| 0);
        if event.records.is_empty() {
            match w.queue.next_visible() {
                Some(t) if t <= t0() + TimeDelta::minutes(40) => w.time.set(t),
                _ => break,
            }
            continue;
        }
        runs += event.records.len();
        receives = event.records.iter().map(apiary_ports::queue::receives).fold(receives, u32::max);
        if twice && runs == 2 {
            hook.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let results = power::handle_each(&deps, event.clone()).await;
        assert!(results.iter().all(|(_, r)| r.is_ok()), "{results:?}");
        w.queue.settle(&event, &power::respond(&results));
        assert!(acting_links(&w) <= 2, "the chain never forks");
    }
    assert!(w.queue.dead_letters().is_empty(), "no link dead-lettered: {:?}", w.queue.dead_letters());
    assert!(w.queue.messages(QueueName::Power).is_empty(), "every copy ended");
    let installed = w.cluster("ci", "ci-1").and_then(|c| c.installed_at).expect("installed");
    (runs, w.queue.sent() - sent, receives, installed)
}

#[tokio::test]
async fn a_tick_link_goes_on_in_its_own_message_while_it_has_receives_to_spare_then_in_a_new_one() {
    let (runs, sent, receives, found) = a_twenty_minute_install(false).await;
    // Some twenty links, a minute apart: each message carries three of them and its fourth receive sends the next
    // (before, each link was a new message: a delete and a send besides its own delete).
    assert!(runs >= 20, "{runs} runs");
    assert!(sent as usize <= runs / 4 + 1, "{sent} messages sent for {runs} links");
    assert_eq!(receives, apiary_planner::power::chain::MAX_RECEIVES - 1, "one receive kept for a failure");
    assert!(found >= t0() + TimeDelta::minutes(20) && found <= t0() + TimeDelta::minutes(21), "found at {found}");
    // A link delivered twice: the copy goes round with the live one until the chain's next new message ends it.
    let (runs_twice, _, receives, found_twice) = a_twenty_minute_install(true).await;
    assert_eq!(found_twice, found, "found as soon");
    assert!(runs_twice > runs && runs_twice <= runs + 4, "{runs_twice} runs against {runs}");
    assert!(receives < apiary_planner::power::chain::MAX_RECEIVES);
}

#[tokio::test]
async fn a_tick_that_comes_at_any_moment_records_its_looks_on_the_quarter_minutes() {
    // An install looked at every minute (the pool knows no pace). Its tick comes 7 s past a quarter minute (late,
    // or started by a nudge at that moment): the next look, a minute on, is brought forward to the quarter minute
    // before it, so the looks of clusters whose transitions began at other moments fall on the same points.
    let w = World::new(t0());
    let deps = w.default_deps(900);
    twenty_minute_install(&w, &deps, "ci-0").await;
    let link = tick_of(&w).check.expect("a live tick");
    w.time.set(t0() + TimeDelta::seconds(67));
    let out = power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    assert_eq!(out.looked, ["ci-0"]);
    let tick = tick_of(&w);
    assert_eq!(tick.due["ci-0"], t0() + TimeDelta::seconds(120), "a minute on, brought forward 7 s");
    assert_eq!(tick.check.map(|c| c.due), Some(t0() + TimeDelta::seconds(120)));
    assert_eq!(out.recheck, Some(std::time::Duration::from_secs(53)), "sent to come on the quarter minute");
}

#[tokio::test]
async fn a_look_that_finds_a_cluster_come_up_says_so_on_the_pools_tick() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    hibernated(&w).await;
    power::power(&deps, &nudge("ci-1"), None).await.expect("start");
    assert!(tick_of(&w).check.is_some() && tick_of(&w).up.is_none(), "{:?}", tick_of(&w));
    // The tick's looks find nothing come up until the machines run; the one that does says when.
    let link = tick_of(&w).check.expect("live");
    w.time.set(link.due);
    let out = power::power(&deps, &PowerMessage::tick("ci", Some(link.token)), None).await.expect("tick");
    assert!(!out.came_up && tick_of(&w).up.is_none(), "{out:?}");
    drive(&w, &deps, w.now() + TimeDelta::minutes(10), 0).await;
    assert_eq!(w.cluster("ci", "ci-1").and_then(|c| c.power_state), Some(PowerState::Running));
    let up = tick_of(&w).up.expect("said when");
    assert!(up > link.due && up <= w.now(), "{:?}", tick_of(&w));
    let c = w.cluster("ci", "ci-1").expect("cluster");
    let resumed = c.last_resume_seconds.expect("a resume's duration");
    assert!((up - t0()).num_seconds().abs_diff(i64::from(resumed)) <= 1, "{up} against a resume of {resumed} s");

    // A nudge whose look finds it come up says so on the live tick too.
    let w = World::new(t0());
    let deps = w.default_deps(900);
    hibernated(&w).await;
    power::power(&deps, &nudge("ci-1"), None).await.expect("start");
    // Nudged every few seconds, its tick's links left undelivered: the machines, their status checks, Running.
    let mut out = power::Outcome::default();
    for k in 1..=20 {
        w.time.set(t0() + TimeDelta::seconds(3 * k));
        out = power::power(&deps, &nudge("ci-1"), None).await.expect("look");
        if out.came_up {
            break;
        }
        assert_eq!(tick_of(&w).up, None, "not up yet");
    }
    assert!(out.came_up && out.woke_pool, "{out:?}");
    assert_eq!(w.cluster("ci", "ci-1").and_then(|c| c.power_state), Some(PowerState::Running));
    assert!(tick_of(&w).check.is_some(), "the tick is still live: {:?}", tick_of(&w));
    assert_eq!(tick_of(&w).up, Some(w.now()), "{:?}", tick_of(&w));
}

/// A power step that fails (the table refused its write for a moment, past the SDK's retries) comes again in 10 s,
/// then a minute, then at the queue's visibility timeout, as a failed reconcile does, instead of at once leaving
/// its message hidden for six minutes: for a tick link, every cluster in motion in its pool waits on it.
#[tokio::test]
async fn a_power_step_that_fails_comes_again_in_seconds_then_less_and_less_often() {
    use apiary_testkit::hook::{Op, Refuse};
    let refuse = Refuse::of(Op::Write);
    let w = World::with_hook(t0(), refuse.clone(), 1);
    let deps = w.default_deps(900);
    with_stopped_machines(&w).await;
    deps.queue.power(&nudge("ci-1"), std::time::Duration::ZERO).await.expect("sent");
    for back in [10, 60] {
        refuse.first(100);
        let event = w.queue.receive(QueueName::Power, 10, TimeDelta::seconds(360), &mut |_| 0);
        assert_eq!(event.records.len(), 1);
        let results = power::handle_each(&deps, event.clone()).await;
        assert!(results[0].1.is_err(), "{results:?}");
        w.queue.settle(&event, &power::respond(&results));
        assert_eq!(w.queue.next_visible(), Some(w.time.now() + TimeDelta::seconds(back)));
        w.time.advance(TimeDelta::seconds(back));
    }
    refuse.first(0);
    drive(&w, &deps, w.time.now() + TimeDelta::minutes(5), 0).await;
    let c = w.cluster("ci", "ci-1").expect("cluster");
    assert_eq!(c.power_state, Some(PowerState::Running), "started again once the table took its writes: {c:?}");
}

/// Claim notifications (issue 59): a pool's `notify` webhook hears its claims through the power queue.
mod notifications {
    use super::*;
    use apiary_planner::events::{Event, EventType};
    use apiary_planner::notify::{NoticeKind, NotifyHook, ATTEMPTS};
    use apiary_planner::plan::Action;
    use apiary_planner::{Claim, Snapshot};
    use apiary_ports::notify::{after_write, to_notify};
    use apiary_ports::queue::Queue;
    use apiary_ports::store::{event_sort_key, writes_with_events, Item};

    const HOOK: &str = "https://hooks.example.com/apiary";

    fn hooked(events: Vec<NoticeKind>) -> apiary_planner::PoolSpec {
        let mut spec = aws_spec(1, 1);
        spec.notify = vec![NotifyHook {
            url: HOOK.into(),
            secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf".into(),
            events,
        }];
        spec
    }

    /// Pool `ci` with a Running spare `ci-1` (its outputs named) and claim `job-1` of Alice's, shared with Bob,
    /// waiting; the writes of the reconcile's assignment of one to the other, with their events.
    async fn assignment(w: &World, spec: apiary_planner::PoolSpec) -> Vec<Write> {
        let p = pool("ci", spec, t0());
        let mut cluster = installed("ci-1", DesiredPower::Running, t0());
        cluster.outputs.insert("apiUrl".into(), "https://api.ci-1.example.com:6443".into());
        let mut claim = Claim::new("job-1", "arn:aws:iam::123456789012:role/alice", t0());
        claim.subjects = vec!["arn:aws:iam::123456789012:user/bob".into()];
        w.put_pool(p.clone());
        w.put_cluster("ci", cluster.clone());
        let waiting = Write::Put(Item::Claim(Box::new(claim.clone())), Cond::Absent);
        w.store.write("ci", vec![waiting]).await.expect("the claim waits");
        let mut snap = Snapshot { pool: p, clusters: vec![cluster], claims: vec![claim], leases: vec![] };
        let action = Action::AssignClaim {
            claim: "job-1".into(),
            claim_rev: 0,
            cluster: "ci-1".into(),
            cluster_rev: 0,
            at: w.now(),
        };
        writes_with_events(&mut snap, &action, w.now()).expect("writes")
    }

    /// The trail's entries of `kind`, oldest first.
    async fn entries(deps: &Deps, kind: EventType) -> Vec<Event> {
        let query = EventQuery { limit: 200, ..EventQuery::default() };
        let mut found: Vec<Event> = deps
            .store
            .events("ci", &query)
            .await
            .expect("trail")
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .collect();
        found.reverse();
        found
    }

    #[tokio::test]
    async fn an_assignment_is_posted_once_with_its_owner_subjects_and_outputs_and_told_in_the_trail() {
        let w = World::new(t0());
        let deps = w.default_deps(900);
        let writes = assignment(&w, hooked(vec![])).await;
        let events = to_notify(&writes);
        assert_eq!(events.len(), 1, "the assignment, with its notice");
        deps.store.write("ci", writes).await.expect("assigned");
        after_write(&deps, "ci", &hooked(vec![]), &events).await;
        drive(&w, &deps, t0() + TimeDelta::minutes(5), 0).await;

        let posts = w.receiver.posts();
        assert_eq!(posts.len(), 1, "{posts:?}");
        let (post, data) = (&posts[0], &posts[0].body["data"]);
        assert_eq!((post.url.as_str(), post.id.clone()), (HOOK, event_sort_key(&events[0])));
        assert_eq!(post.body["type"], "claim.assigned");
        assert_eq!(
            (data["pool"].as_str(), data["claim"].as_str(), data["cluster"].as_str()),
            (Some("ci"), Some("job-1"), Some("ci-1"))
        );
        assert_eq!(data["owner"], "arn:aws:iam::123456789012:role/alice");
        assert_eq!(data["subjects"][0], "arn:aws:iam::123456789012:user/bob");
        assert_eq!(data["outputs"]["apiUrl"], "https://api.ci-1.example.com:6443");
        let delivered = entries(&deps, EventType::NotificationDelivered).await;
        assert_eq!(delivered.len(), 1);
        let account = delivered[0].delivery.as_ref().expect("a delivery");
        assert_eq!((account.of.as_str(), account.hook, account.attempt), (post.id.as_str(), 0, 1));
        assert_eq!(delivered[0].claim.as_deref(), Some("job-1"), "in the claim's own shard of the trail");

        // The pass a few minutes on finds it delivered: nothing is sent again.
        w.time.set(t0() + TimeDelta::minutes(3));
        w.queue.power(&PowerMessage::notices("ci"), std::time::Duration::ZERO).await.expect("sent");
        drive(&w, &deps, t0() + TimeDelta::minutes(10), 0).await;
        assert_eq!(w.receiver.posts().len(), 1, "nothing twice");
    }

    #[tokio::test]
    async fn a_receiver_that_stays_down_is_tried_with_a_growing_wait_then_dead_lettered_in_the_trail() {
        let w = World::new(t0());
        let deps = w.default_deps(900);
        let writes = assignment(&w, hooked(vec![NoticeKind::ClaimAssigned])).await;
        let events = to_notify(&writes);
        deps.store.write("ci", writes).await.expect("assigned");
        w.receiver.down(503);
        after_write(&deps, "ci", &hooked(vec![NoticeKind::ClaimAssigned]), &events).await;
        drive(&w, &deps, t0() + TimeDelta::hours(3), 0).await;

        assert_eq!(w.receiver.posts().len(), usize::from(ATTEMPTS), "every attempt, and no more");
        let failed = entries(&deps, EventType::NotificationFailed).await;
        assert_eq!(failed.len(), usize::from(ATTEMPTS) - 1);
        let waits: Vec<i64> = failed.windows(2).map(|p| (p[1].time - p[0].time).num_seconds()).collect();
        assert_eq!(waits, [10, 60, 300, 900], "attempt to attempt");
        assert!(
            failed[0].message.as_deref().is_some_and(|m| m.contains("answered 503") && m.contains("in 10s")),
            "{failed:?}"
        );
        let dead = entries(&deps, EventType::NotificationDeadLettered).await;
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].time - failed[4].time).num_seconds(), 3600, "an hour after the fifth");
        assert_eq!(dead[0].notice, events[0].notice, "the dead-letter record keeps the notification whole");
        assert!(w.queue.messages(QueueName::Power).is_empty(), "nothing more is tried");
    }

    #[tokio::test]
    async fn the_pass_sends_what_a_writer_stopped_before_sending_and_a_hook_hears_only_its_kinds() {
        let w = World::new(t0());
        let deps = w.default_deps(900);
        // Two hooks: one hears every kind, the other only broken clusters.
        let mut spec = hooked(vec![]);
        let broken_only = NotifyHook {
            url: "https://chat.example.com/x".into(),
            events: vec![NoticeKind::ClusterBroken],
            ..spec.notify[0].clone()
        };
        spec.notify.push(broken_only);
        let writes = assignment(&w, spec.clone()).await;
        // The writer stopped between its write and its send.
        deps.store.write("ci", writes).await.expect("assigned");
        w.time.set(t0() + TimeDelta::seconds(30));
        w.queue.power(&PowerMessage::notices("ci"), std::time::Duration::ZERO).await.expect("sent");
        drive(&w, &deps, t0() + TimeDelta::seconds(40), 0).await;
        assert!(w.receiver.posts().is_empty(), "not settled yet: a pass reads up to a minute ago");
        w.time.set(t0() + TimeDelta::minutes(2));
        w.queue.power(&PowerMessage::notices("ci"), std::time::Duration::ZERO).await.expect("sent");
        drive(&w, &deps, t0() + TimeDelta::minutes(3), 0).await;
        let posts = w.receiver.posts();
        assert_eq!(posts.iter().map(|p| p.url.as_str()).collect::<Vec<_>>(), [HOOK], "{posts:?}");
        // The cursor moved on: the next pass reads from there and sends nothing.
        let Some(Item::Notified(cursor)) = deps.store.get("ci", &Key::Notified).await.expect("read") else {
            panic!("no cursor")
        };
        assert!(cursor.through.iter().all(|k| k.as_str() > event_sort_key(&told_event(&posts[0].id)).as_str()));
        w.time.set(t0() + TimeDelta::minutes(4));
        w.queue.power(&PowerMessage::notices("ci"), std::time::Duration::ZERO).await.expect("sent");
        drive(&w, &deps, t0() + TimeDelta::minutes(5), 0).await;
        assert_eq!(w.receiver.posts().len(), 1);
    }

    #[tokio::test]
    async fn a_notification_goes_where_the_pool_said_when_it_happened_even_once_the_pool_is_gone() {
        let w = World::new(t0());
        let deps = w.default_deps(900);
        let writes = assignment(&w, hooked(vec![])).await;
        let events = to_notify(&writes);
        deps.store.write("ci", writes).await.expect("assigned");
        after_write(&deps, "ci", &hooked(vec![]), &events).await;
        // The pool's item goes (its deletion ended) before the message is handled: nothing reads it.
        w.store.remove("ci", &Key::Pool);
        let reads = w.store.stats().reads;
        drive(&w, &deps, t0() + TimeDelta::minutes(1), 0).await;
        assert_eq!(w.receiver.posts().len(), 1);
        assert_eq!(w.store.stats().reads, reads, "a delivery reads nothing of the table");
    }

    #[tokio::test]
    async fn a_claimed_cluster_that_breaks_on_its_resume_is_told_with_its_claim_owner_and_outputs() {
        let w = World::new(t0());
        let mut spec = hooked(vec![NoticeKind::ClusterBroken]);
        spec.powerstate_transition_to_running_timeout = Some(apiary_planner::duration::GoDuration::new("15m"));
        let mut c = hibernated(&w).await;
        w.put_pool(pool("ci", spec, t0()));
        let mut claim = Claim::new("job-1", "arn:aws:iam::123456789012:role/alice", t0());
        claim.subjects = vec!["arn:aws:iam::123456789012:user/bob".into()];
        claim.cluster = Some("ci-1".into());
        w.store.put("ci", Item::Claim(Box::new(claim)));
        c.claim = Some("job-1".into());
        c.spec_power_state = Some(DesiredPower::Running);
        c.outputs.insert("apiUrl".into(), "https://api.ci-1.example.com:6443".into());
        c.rev += 1;
        w.put_cluster("ci", c);
        for m in w.cloud.machines() {
            w.cloud.refuse(&m.id, apiary_testkit::hook::Change::Start);
        }
        let deps = w.default_deps(900);
        w.queue.power(&nudge("ci-1"), std::time::Duration::ZERO).await.expect("sent");
        drive(&w, &deps, t0() + TimeDelta::minutes(40), 0).await;

        assert!(w.cluster("ci", "ci-1").is_some_and(|c| c.is_broken()), "the resume timed out");
        let posts = w.receiver.posts();
        assert_eq!(posts.len(), 1, "{posts:?}");
        let (body, data) = (&posts[0].body, &posts[0].body["data"]);
        assert_eq!((body["type"].as_str(), data["cluster"].as_str()), (Some("cluster.broken"), Some("ci-1")));
        assert_eq!(
            (data["claim"].as_str(), data["owner"].as_str()),
            (Some("job-1"), Some("arn:aws:iam::123456789012:role/alice"))
        );
        assert_eq!(data["subjects"][0], "arn:aws:iam::123456789012:user/bob");
        assert_eq!(data["outputs"]["apiUrl"], "https://api.ci-1.example.com:6443");
        assert!(data["reason"].as_str().is_some_and(|r| r.contains("FailedToStart")), "{data}");
    }

    /// An event whose sort key is `id`, enough to compare keys by.
    fn told_event(id: &str) -> Event {
        let time = id.split('#').next().and_then(|t| t.parse().ok()).expect("a time");
        Event::new(EventType::ClaimAssigned, time, 0)
    }
}
