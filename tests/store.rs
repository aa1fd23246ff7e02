//! The DynamoDB store against the reference: every condition, checked against the emulator's DynamoDB, holds
//! exactly when [`Cond::holds`] (the in-memory store's meaning, and the planner's `apply`) says it does; the item
//! size limit, condition checks in transactions, and the sweep's record behave alike.

mod support;

use apiary_planner::power::tick::Tick;
use apiary_planner::{
    Action, Buckets, Claim, Cluster, Demand, DesiredPower, NameLease, Pool, PowerState, Profile, Recheck, Snapshot,
    Timestamp, BUCKETS,
};
use apiary_ports::store::{item_bytes, writes_for, ClaimName, Cond, Item, Key, LabelEntry, Store, Write};
use apiary_ports::Error;
use apiary_testkit::World;
use chrono::{TimeZone, Utc};

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

fn cluster(id: &str, rev: u64, installed: bool, power: Option<PowerState>, claim: Option<&str>) -> Item {
    let mut c = Cluster::new(id, id, format!("{id}-infra"), t0());
    c.rev = rev;
    c.installed_at = installed.then(t0);
    c.power_state = power;
    c.claim = claim.map(String::from);
    Item::Cluster(Box::new(c))
}

fn claim(name: &str, rev: u64, cluster: Option<&str>) -> Item {
    let mut k = Claim::new(name, "arn:aws:iam::123456789012:user/alice", t0());
    k.rev = rev;
    k.cluster = cluster.map(String::from);
    Item::Claim(Box::new(k))
}

fn lease(name: &str, holder: &str) -> Item {
    Item::Lease(NameLease { name: name.into(), holder: holder.into(), reserved_at: t0() })
}

fn claim_name(name: &str, holder: &str) -> Item {
    let owner = "arn:aws:iam::123456789012:user/alice".into();
    Item::ClaimName(ClaimName { name: name.into(), holder: holder.into(), owner, created_at: Some(t0()) })
}

fn label(pool: &str, key: &str, value: &str) -> Item {
    Item::Label(LabelEntry { pool: pool.into(), key: key.into(), value: value.into() })
}

/// `(what, item stored first or none, the item to write, its condition)`.
fn cases() -> Vec<(&'static str, Option<Item>, Item, Cond)> {
    let running = Some(PowerState::Running);
    vec![
        ("absent, nothing there", None, cluster("c", 0, false, None, None), Cond::Absent),
        (
            "absent, something there",
            Some(cluster("c", 0, false, None, None)),
            cluster("c", 0, false, None, None),
            Cond::Absent,
        ),
        ("rev matches", Some(cluster("c", 4, true, running, None)), cluster("c", 5, true, running, None), Cond::Rev(4)),
        ("rev differs", Some(cluster("c", 4, true, running, None)), cluster("c", 5, true, running, None), Cond::Rev(3)),
        ("rev, nothing there", None, cluster("c", 5, true, running, None), Cond::Rev(4)),
        (
            "assignable: unclaimed, installed, Running",
            Some(cluster("c", 3, true, running, None)),
            cluster("c", 4, true, running, Some("k")),
            Cond::RevUnclaimedRunning(3),
        ),
        (
            "assignable: Running but not installed",
            Some(cluster("c", 3, false, running, None)),
            cluster("c", 4, false, running, Some("k")),
            Cond::RevUnclaimedRunning(3),
        ),
        (
            "assignable: claimed",
            Some(cluster("c", 3, true, running, Some("j"))),
            cluster("c", 4, true, running, Some("k")),
            Cond::RevUnclaimedRunning(3),
        ),
        (
            "assignable: stopping",
            Some(cluster("c", 3, true, Some(PowerState::Stopping), None)),
            cluster("c", 4, true, running, Some("k")),
            Cond::RevUnclaimedRunning(3),
        ),
        (
            "assignable: another revision",
            Some(cluster("c", 2, true, running, None)),
            cluster("c", 4, true, running, Some("k")),
            Cond::RevUnclaimedRunning(3),
        ),
        ("pending claim", Some(claim("k", 1, None)), claim("k", 2, Some("c")), Cond::RevPending(1)),
        ("claim already assigned", Some(claim("k", 1, Some("c"))), claim("k", 2, Some("d")), Cond::RevPending(1)),
        ("lease held by the holder", Some(lease("foo", "foo-1")), lease("foo", "foo-2"), Cond::Holder("foo-1".into())),
        ("lease held by another", Some(lease("foo", "foo-9")), lease("foo", "foo-2"), Cond::Holder("foo-1".into())),
        // Outside the pool's partition (each case's own name: the partition is the stack's, not the pool's).
        ("claim name free", None, claim_name("n1", "a"), Cond::Absent),
        ("claim name taken", Some(claim_name("n2", "a")), claim_name("n2", "b"), Cond::Absent),
        ("claim name left by its pool", Some(claim_name("n3", "a")), claim_name("n3", "b"), Cond::Holder("a".into())),
        ("claim name another pool's", Some(claim_name("n4", "z")), claim_name("n4", "b"), Cond::Holder("a".into())),
        ("any, something there", Some(label("p", "k", "v1")), label("p", "k", "v1"), Cond::Any),
        ("any, nothing there", None, label("p", "k", "v2"), Cond::Any),
    ]
}

/// Runs every case in its own pool partition of `store`; what each write did.
async fn outcomes(store: &dyn Store, prefix: &str) -> Vec<(String, bool)> {
    let mut out = vec![];
    for (i, (what, before, item, cond)) in cases().into_iter().enumerate() {
        let pool = format!("{prefix}{i}");
        if let Some(b) = before {
            store.write(&pool, vec![Write::Put(b, Cond::Absent)]).await.expect("setup");
        }
        let result = store.write(&pool, vec![Write::Put(item, cond)]).await;
        assert!(matches!(result, Ok(()) | Err(Error::Conflict(_))), "{what}: {result:?}");
        out.push((what.to_owned(), result.is_ok()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_conditions_mean_exactly_what_the_reference_says() {
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    let want = outcomes(reference.store.as_ref(), "ref").await;
    // The reference itself: Cond::holds.
    for ((what, ok), (_, before, _, cond)) in want.iter().zip(cases()) {
        assert_eq!(*ok, cond.holds(before.as_ref()), "{what}");
    }
    let got = outcomes(s.deps.store.as_ref(), "ddb").await;
    assert_eq!(got, want);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_refuses_oversized_items_checks_conditions_in_transactions_and_records_sweeps() {
    let mut s = support::stack().await;
    s.halt().await;
    let store = s.deps.store.as_ref();
    let Item::Cluster(mut big) = cluster("big", 0, false, None, None) else { unreachable!() };
    big.cluster_name = "x".repeat(410 * 1024);
    let r = store.write("p", vec![Write::Put(Item::Cluster(big), Cond::Absent)]).await;
    assert!(matches!(r, Err(Error::TooLarge { .. })), "{r:?}");
    // A ConditionCheck that fails cancels the transaction: nothing is written.
    store.write("tx", vec![Write::Put(claim("k", 0, None), Cond::Absent)]).await.expect("setup");
    let tx = vec![
        Write::Put(cluster("c", 0, false, None, None), Cond::Absent),
        Write::Check(Key::Claim("k".into()), Cond::Rev(9)),
    ];
    assert!(matches!(store.write("tx", tx).await, Err(Error::Conflict(_))));
    assert_eq!(store.get("tx", &Key::Cluster("c".into())).await.expect("get"), None);
    let tx = vec![
        Write::Put(cluster("c", 0, false, None, None), Cond::Absent),
        Write::Check(Key::Claim("k".into()), Cond::Rev(0)),
    ];
    store.write("tx", tx).await.expect("the check holds");
    // The sweep's record (the stack's own sweep may have made the first): only over the one read.
    let last = store.last_full_sweep().await.expect("read");
    let later = last.unwrap_or(t0()) + chrono::TimeDelta::minutes(10);
    store.record_full_sweep(last, later).await.expect("over the one read");
    assert!(matches!(store.record_full_sweep(last, later).await, Err(Error::Conflict(_))), "a second sweep loses");
    assert_eq!(store.last_full_sweep().await.expect("read"), Some(later));
    assert!(store.list_pools().await.expect("pools").is_empty(), "the sweep's item is not a pool");
    s.stop().await;
}

/// The items of a partition whose index entries vary: spares, clusters that are not (installing, hibernated,
/// claimed, paused, deleting), claims pending, assigned and released, in no particular order.
fn indexed() -> Vec<Item> {
    let running = Some(PowerState::Running);
    let mut items: Vec<Item> = (0..24).map(|i| cluster(&format!("spare-{i}"), 0, true, running, None)).collect();
    items.push(cluster("installing", 0, false, running, None));
    items.push(cluster("hibernated", 0, true, Some(PowerState::Hibernating), None));
    items.push(cluster("claimed", 0, true, running, Some("k0")));
    let mut paused = Cluster::new("paused", "paused", "paused-infra", t0());
    (paused.installed_at, paused.power_state, paused.power_paused) = (Some(t0()), running, true);
    items.push(Item::Cluster(Box::new(paused)));
    let mut deleting = Cluster::new("deleting", "deleting", "deleting-infra", t0());
    (deleting.installed_at, deleting.power_state, deleting.deleting) = (Some(t0()), running, true);
    items.push(Item::Cluster(Box::new(deleting)));
    // Running, but asked to hibernate: in motion, not a spare.
    let mut stopping = Cluster::new("stopping", "stopping", "stopping-infra", t0());
    (stopping.installed_at, stopping.power_state) = (Some(t0()), running);
    stopping.spec_power_state = Some(DesiredPower::Hibernating);
    items.push(Item::Cluster(Box::new(stopping)));
    for (i, minutes) in [(3, 7), (1, 2), (2, 5)] {
        let Item::Claim(mut k) = claim(&format!("k{i}"), 0, None) else { unreachable!() };
        k.created_at = t0() + chrono::TimeDelta::minutes(minutes);
        items.push(Item::Claim(k));
    }
    items.push(claim("k0", 0, Some("claimed")));
    let Item::Claim(mut released) = claim("released", 0, None) else { unreachable!() };
    released.release_requested_at = Some(t0());
    items.push(Item::Claim(released));
    items
}

/// What the index answers for `pool` in `store`: pages of spares from several places, and the claims in line.
async fn index_answers(store: &dyn Store, pool: &str) -> Vec<String> {
    let mut out = vec![];
    for (from, limit) in [(0, 100), (0, 3), (97, 5), (200, 30), (255, 2), (511, 4)] {
        let mut page = store.spares(pool, from, limit).await.expect("spares");
        out.push(format!("{from}/{limit}: {}", page.len()));
        page.sort();
        out.push(page.join(","));
    }
    out.push(format!("moving: {:?}", store.moving(pool).await.expect("moving")));
    // In line: behind all of them, one asked for; between two; the last one itself (never counted ahead of itself).
    let mut lines = vec![];
    for (name, minutes, limit) in [("late", 60, 1), ("new", 6, 5), ("k3", 7, 5)] {
        let k = Claim::new(name, "arn:aws:iam::123456789012:user/alice", t0() + chrono::TimeDelta::minutes(minutes));
        lines.push(store.ahead(pool, &k, limit).await.expect("pending"));
    }
    out.push(format!("ahead: {lines:?}"));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_indexes_spares_clusters_in_motion_and_pending_claims_exactly_as_the_reference_does() {
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        for item in indexed() {
            store.write("idx", vec![Write::Put(item, Cond::Absent)]).await.expect("setup");
        }
    }
    let want = index_answers(reference.store.as_ref(), "idx").await;
    assert_eq!(want[0], "0/100: 24", "every spare and nothing else: {want:?}");
    assert!(want.contains(&r#"moving: ["deleting", "installing", "stopping"]"#.to_owned()), "{want:?}");
    assert_eq!(want.last().map(String::as_str), Some(r#"ahead: [["k1"], ["k1", "k2"], ["k1", "k2"]]"#));
    assert_eq!(index_answers(s.deps.store.as_ref(), "idx").await, want);
    // Written again, items leave and join the index: a spare claimed, the oldest claim assigned, a claim back.
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        let writes = vec![
            Write::Put(cluster("spare-3", 1, true, Some(PowerState::Running), Some("k1")), Cond::Rev(0)),
            Write::Put(claim("k1", 1, Some("spare-3")), Cond::Rev(0)),
        ];
        store.write("idx", writes).await.expect("assign");
        store
            .write(
                "idx",
                vec![Write::Put(cluster("hibernated", 1, true, Some(PowerState::Running), None), Cond::Rev(0))],
            )
            .await
            .expect("resumed");
    }
    let want = index_answers(reference.store.as_ref(), "idx").await;
    assert_eq!(want.last().map(String::as_str), Some(r#"ahead: [["k2"], ["k2"], ["k2"]]"#));
    assert_eq!(index_answers(s.deps.store.as_ref(), "idx").await, want);
    // The pool's tick item: written and read back whole, conditionally, and never part of the pool's snapshot.
    let tick = Tick {
        rev: 0,
        check: Some(Recheck { token: 7, due: t0() }),
        superseded: None,
        due: [("installing".to_owned(), t0())].into(),
        up: Some(t0()),
    };
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        store.write("idx", vec![Write::Put(Item::Tick(Box::new(tick.clone())), Cond::Absent)]).await.expect("tick");
        let again = store.write("idx", vec![Write::Put(Item::Tick(Box::new(tick.clone())), Cond::Absent)]).await;
        assert!(matches!(again, Err(Error::Conflict(_))), "{again:?}");
        assert_eq!(store.get("idx", &Key::Tick).await.expect("get"), Some(Item::Tick(Box::new(tick.clone()))));
        // Reading the partition reads the tick item too, and leaves it out (there is no pool item here).
        assert!(store.read_pool("idx").await.expect("read").is_none());
        // With a pool item, the same read gives the tick item beside the snapshot.
        let pool = learned_pool("idx");
        store.write("idx", vec![Write::Put(Item::Pool(Box::new(pool)), Cond::Absent)]).await.expect("pool");
        let (snap, read) = store.read_pool_and_tick("idx").await.expect("read").expect("a pool");
        assert_eq!((snap.pool.name.as_str(), read.as_ref()), ("idx", Some(&tick)));
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_reads_many_items_in_batches_as_the_reference_reads_them_one_by_one() {
    // Eventually consistently (a tick's clusters) and strongly (a claim's named spares).
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    // More than one batch of keys (100), some of them of items that are not there, and an item of each kind.
    let mut keys: Vec<Key> = (0..130).map(|i| Key::Cluster(format!("c{i}"))).collect();
    keys.extend([Key::Claim("k".into()), Key::Lease("foo".into()), Key::Claim("gone".into())]);
    let mut answers = vec![];
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        for i in (0..130).filter(|i| i % 7 != 3) {
            store
                .write("many", vec![Write::Put(cluster(&format!("c{i}"), 0, false, None, None), Cond::Absent)])
                .await
                .expect("put");
        }
        store
            .write(
                "many",
                vec![Write::Put(claim("k", 2, None), Cond::Absent), Write::Put(lease("foo", "c1"), Cond::Absent)],
            )
            .await
            .expect("put");
        let mut got: Vec<String> =
            store.get_many("many", &keys).await.expect("batch").iter().map(|i| i.key().sort_key()).collect();
        got.sort();
        let mut one_by_one = vec![];
        for key in &keys {
            one_by_one.extend(store.get("many", key).await.expect("get").map(|i| i.key().sort_key()));
        }
        one_by_one.sort();
        assert_eq!(got, one_by_one);
        // Read strongly, in batches too: the same items.
        let mut strongly: Vec<String> =
            store.get_many_strongly("many", &keys).await.expect("batch").iter().map(|i| i.key().sort_key()).collect();
        strongly.sort();
        assert_eq!(strongly, one_by_one);
        answers.push(got);
    }
    assert_eq!(answers[0].len(), 130 - 19 + 2, "{:?}", answers[0]);
    assert_eq!(answers[1], answers[0]);
    s.stop().await;
}

/// A pool whose forecast has learned a profile, held in the pool item itself as pools written before the profile
/// item were.
fn learned_pool(name: &str) -> Pool {
    let mut pool = apiary_testkit::fixtures::pool(name, apiary_testkit::fixtures::aws_spec(4, 1), t0());
    let ramp = |k: u16| Buckets((0..BUCKETS as u16).map(|b| b.wrapping_mul(k)).collect());
    pool.status.demand = Some(Demand {
        claims_per_hour: 3.5,
        at: t0(),
        counted_until: t0(),
        counted_at_edge: vec![],
        profile: Some(Profile {
            time_zone: "Europe/Berlin".into(),
            since: t0(),
            open: t0(),
            open_count: 2,
            mean: ramp(7),
            spread: ramp(3),
            worth: Some(0.4),
            kept: None,
        }),
    });
    pool
}

/// The pool's status rewritten (a count changed), its profile's buckets changed by `change` as a closing bucket
/// changes them, or the profile gone: the writes the reconcile makes of it.
fn rewrite(snap: &mut Snapshot, change: impl FnOnce(&mut Option<Profile>)) -> Vec<Write> {
    let mut status = snap.pool.status.clone();
    status.ready += 1;
    change(&mut status.demand.as_mut().expect("demand").profile);
    let action = Action::UpdatePool { expected_rev: snap.pool.rev, status: Box::new(status), next_wake_at: None };
    writes_for(snap, &action).expect("writes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_keeps_a_profiles_buckets_apart_and_reads_them_back_as_the_reference_does() {
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    let learned = learned_pool("prof");
    let buckets = |p: &Pool| p.status.profile().map(|p| (p.mean.clone(), p.spread.clone()));
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        let bytes_inline = item_bytes("prof", &Item::Pool(Box::new(learned.clone()))).expect("size");
        store.write("prof", vec![Write::Put(Item::Pool(Box::new(learned.clone())), Cond::Absent)]).await.expect("old");
        let mut snap = store.read_pool("prof").await.expect("read").expect("pool");
        assert_eq!(snap.pool, learned, "a pool item that holds its buckets is read as it is");

        // The first rewrite moves the buckets into the profile's own item.
        let writes = rewrite(&mut snap, |_| {});
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert!(matches!(&writes[1], Write::Put(Item::Profile(p), Cond::Absent) if p.rev == snap.pool.rev));
        store.write("prof", writes).await.expect("moved");
        let Some(Item::Pool(alone)) = store.get("prof", &Key::Pool).await.expect("get") else { panic!("no pool") };
        let kept = alone.status.profile().expect("profile");
        assert!(kept.mean.is_empty() && kept.spread.is_empty(), "the pool item holds no buckets");
        assert_eq!(kept.kept, Some(snap.pool.rev));
        let bytes = item_bytes("prof", &Item::Pool(alone.clone())).expect("size");
        assert!(bytes * 4 < bytes_inline && bytes < 1024, "{bytes} bytes alone, {bytes_inline} with the buckets");
        let read = store.read_pool("prof").await.expect("read").expect("pool");
        assert_eq!(read.pool, snap.pool, "the partition gives the buckets back");
        assert_eq!(buckets(&read.pool), buckets(&learned));

        // Rewritten with the same buckets: the pool item alone.
        let mut snap = read;
        let writes = rewrite(&mut snap, |_| {});
        assert!(matches!(writes.as_slice(), [Write::Put(Item::Pool(_), _)]), "{writes:?}");
        store.write("prof", writes).await.expect("pool alone");
        // Written back as read alone (an API update, a power run's condition): the buckets stay where they are.
        let Some(Item::Pool(mut alone)) = store.get("prof", &Key::Pool).await.expect("get") else { panic!() };
        let rev = alone.rev;
        alone.rev += 1;
        alone.status.ready += 1;
        store.write("prof", vec![Write::Put(Item::Pool(alone), Cond::Rev(rev))]).await.expect("alone");
        let mut snap = store.read_pool("prof").await.expect("read").expect("pool");
        assert_eq!(buckets(&snap.pool), buckets(&learned), "a pool written without buckets leaves them");

        // A bucket closes: the profile item again, on its own revision.
        let found = snap.pool.status.profile().and_then(|p| p.kept).expect("kept");
        let writes = rewrite(&mut snap, |p| p.as_mut().expect("profile").mean.0[5] += 1);
        assert!(matches!(&writes[1], Write::Put(Item::Profile(_), Cond::Rev(r)) if *r == found), "{writes:?}");
        store.write("prof", writes).await.expect("closed");
        let read = store.read_pool("prof").await.expect("read").expect("pool");
        assert_eq!(read.pool, snap.pool);
        assert_eq!(read.pool.status.profile().map(|p| p.mean.0[5]), Some(35 + 1));

        // The forecast turned off: the profile's item goes with it.
        let mut snap = read;
        let writes = rewrite(&mut snap, |p| *p = None);
        assert!(matches!(&writes[1], Write::Delete(Key::Profile, Cond::Rev(_))), "{writes:?}");
        store.write("prof", writes).await.expect("gone");
        assert_eq!(store.get("prof", &Key::Profile).await.expect("get"), None);
        assert_eq!(store.read_pool("prof").await.expect("read").expect("pool").pool, snap.pool);
    }
    s.stop().await;
}

/// What `store` answers of the label index and the claim names after pools `x` and `y` were labelled, `x`
/// relabelled and a claim named: every answer, in order.
async fn apart_answers(store: &dyn Store) -> Vec<String> {
    let mut out = vec![];
    for (name, labels) in [("x", vec![("cloud", "aws"), ("k=v", "w")]), ("y", vec![("cloud", "aws"), ("k", "v=w")])] {
        let mut pool = apiary_testkit::fixtures::pool(name, apiary_testkit::fixtures::aws_spec(0, 0), t0());
        pool.spec.labels = labels.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
        store.write(name, vec![Write::Put(Item::Pool(Box::new(pool)), Cond::Absent)]).await.expect("pool");
        let mut snap = store.read_pool(name).await.expect("read").expect("pool");
        let plan = apiary_planner::plan(&snap, t0(), 1);
        for action in plan.actions.iter().filter(|a| matches!(a, Action::UpdatePool { .. })) {
            store.write(name, writes_for(&mut snap, action).expect("writes")).await.expect("indexed");
        }
    }
    // `x` relabelled: its cloud=aws entry goes, cloud=gcp comes.
    let mut snap = store.read_pool("x").await.expect("read").expect("pool");
    snap.pool.spec.labels.insert("cloud".into(), "gcp".into());
    let mut status = snap.pool.status.clone();
    status.labels_indexed = Some(snap.pool.spec.labels.clone());
    let action = Action::UpdatePool { expected_rev: snap.pool.rev, status: Box::new(status), next_wake_at: None };
    store.write("x", writes_for(&mut snap, &action).expect("writes")).await.expect("relabelled");
    // A key and value that hold `=` never run into another pair's.
    for (k, v) in [("cloud", "aws"), ("cloud", "gcp"), ("k=v", "w"), ("k", "v=w"), ("k", "v")] {
        out.push(format!("{k}={v}: {:?}", store.labelled(k, v).await.expect("labelled")));
    }
    store.write("y", vec![Write::Put(claim_name("job", "y"), Cond::Absent)]).await.expect("named");
    out.push(format!("{:?}", store.claim_name("job").await.expect("read")));
    out.push(format!("{:?}", store.claim_name("other").await.expect("read")));
    // The pools' items in one batch read across their partitions: those that exist.
    let wanted = ["y".to_owned(), "nope".to_owned(), "x".to_owned()];
    let mut names: Vec<String> = store.get_pools(&wanted).await.expect("pools").into_iter().map(|p| p.name).collect();
    names.sort();
    out.push(format!("{names:?}"));
    // Neither is in a pool's partition, nor a pool.
    let read = store.read_pool("y").await.expect("read").expect("pool");
    out.push(format!("{} claims, {} pools", read.claims.len(), store.list_pools().await.expect("pools").len()));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_keeps_the_label_index_and_claim_names_apart_as_the_reference_does() {
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    let want = apart_answers(reference.store.as_ref()).await;
    assert_eq!(want[0], r#"cloud=aws: ["y"]"#, "{want:?}");
    assert_eq!(want[1], r#"cloud=gcp: ["x"]"#, "{want:?}");
    assert_eq!(want[4], "k=v: []", "{want:?}");
    assert!(want[5].contains(r#"holder: "y""#), "{want:?}");
    assert_eq!(want[6], "None");
    assert_eq!(want[7], r#"["x", "y"]"#);
    assert_eq!(want[8], "0 claims, 2 pools");
    assert_eq!(apart_answers(s.deps.store.as_ref()).await, want);
    s.stop().await;
}

/// Every event of `pool` that `query` asks for, page after page of `query.limit`, newest first.
async fn walk(store: &dyn Store, pool: &str, mut query: apiary_ports::store::EventQuery) -> Vec<String> {
    let mut seen = vec![];
    loop {
        let page = store.events(pool, &query).await.expect("events");
        assert!(page.events.len() <= query.limit, "a page of at most its limit");
        seen.extend(page.events.iter().map(apiary_ports::store::event_sort_key));
        match page.next {
            Some(next) => query.before = Some(next),
            None => return seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_keeps_a_pools_trail_apart_from_its_partition_and_pages_it_as_the_reference_does() {
    use apiary_planner::events::{Event, EventType};
    use apiary_ports::store::EventQuery;
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    // 900 events over ten claims and ten clusters, a hundred to a transaction: more than a filtered read of one
    // shard looks at in a page, so its pages end where the shards were read to.
    let events: Vec<Event> = (0..900u64)
        .map(|i| {
            let at = t0() + chrono::TimeDelta::seconds(i as i64 / 3);
            let e = Event::new(EventType::ClusterRunning, at, i).cluster(format!("k{}", i % 10));
            if i % 4 == 0 {
                e.claim(format!("c{}", i % 7)).by("arn:aws:iam::123456789012:user/alice")
            } else {
                e
            }
        })
        .collect();
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        store.write("ev", vec![Write::Put(cluster("k0", 0, false, None, None), Cond::Absent)]).await.expect("setup");
        for chunk in events.chunks(100) {
            store.write("ev", chunk.iter().cloned().map(Write::Append).collect()).await.expect("events");
        }
        let snap = store.read_pool("ev").await.expect("read");
        assert!(snap.is_none(), "no pool item: events are not the pool's partition");
        let pools = store.list_pools().await.expect("list");
        assert!(pools.iter().all(|p| p.name != "ev"));
    }
    let queries = [
        EventQuery { limit: 50, ..EventQuery::default() },
        EventQuery { limit: 7, claim: Some("c3".into()), ..EventQuery::default() },
        EventQuery { limit: 30, cluster: Some("k2".into()), ..EventQuery::default() },
        EventQuery { limit: 5, claim: Some("c4".into()), cluster: Some("k6".into()), ..EventQuery::default() },
    ];
    for q in queries {
        let want = walk(reference.store.as_ref(), "ev", q.clone()).await;
        assert!(!want.is_empty() && want.windows(2).all(|w| w[0] > w[1]), "newest first, each once: {q:?}");
        assert_eq!(walk(s.deps.store.as_ref(), "ev", q.clone()).await, want, "{q:?}");
    }
    assert_eq!(
        walk(reference.store.as_ref(), "ev", EventQuery { limit: 200, ..EventQuery::default() }).await.len(),
        900
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamodb_reads_a_trail_between_two_keys_and_keeps_the_notifications_cursor_apart_as_the_reference_does() {
    use apiary_planner::events::{Event, EventType};
    use apiary_ports::store::{event_shard, time_key, Notified};
    let mut s = support::stack().await;
    s.halt().await;
    let reference = World::new(t0());
    // Sixty events of one claim (one shard), a second apart.
    let events: Vec<Event> = (0..60u64)
        .map(|i| Event::new(EventType::ClaimChanged, t0() + chrono::TimeDelta::seconds(i as i64), i).claim("c1"))
        .collect();
    let shard = event_shard(&events[0]);
    let after = time_key(t0() + chrono::TimeDelta::seconds(10));
    let until = time_key(t0() + chrono::TimeDelta::seconds(40));
    let mut answers = vec![];
    for store in [reference.store.as_ref() as &dyn Store, s.deps.store.as_ref()] {
        store.write("tr", events.iter().cloned().map(Write::Append).collect()).await.expect("events");
        let page = |limit| store.trail_between("tr", shard, &after, &until, limit);
        let whole: Vec<u64> = page(100).await.expect("read").into_iter().map(|(_, e)| e.rev).collect();
        let first: Vec<u64> = page(7).await.expect("read").into_iter().map(|(_, e)| e.rev).collect();
        let other = store.trail_between("tr", (shard + 1) % 8, &after, &until, 100).await.expect("read").len();
        let cursor = Notified { pool: "tr".into(), through: vec![after.clone(); 8], rev: 1 };
        store.write("tr", vec![Write::Put(Item::Notified(cursor), Cond::Absent)]).await.expect("cursor");
        let again = Notified { pool: "tr".into(), through: vec![until.clone(); 8], rev: 2 };
        let lost = store.write("tr", vec![Write::Put(Item::Notified(again.clone()), Cond::Rev(7))]).await;
        assert!(matches!(lost, Err(Error::Conflict(_))), "{lost:?}");
        store.write("tr", vec![Write::Put(Item::Notified(again), Cond::Rev(1))]).await.expect("moved on");
        let read = store.get("tr", &Key::Notified).await.expect("read");
        let in_partition = store.read_pool("tr").await.expect("read").is_some();
        answers.push(format!("{whole:?} {first:?} {other} {read:?} {in_partition}"));
    }
    let whole: Vec<u64> = (10..40).collect();
    let want = format!("{whole:?} [10, 11, 12, 13, 14, 15, 16] 0 ");
    assert!(answers[0].starts_with(&want), "from the first key on, oldest first, to the last: {answers:?}");
    assert!(answers[0].ends_with(" false") && answers[0].contains("rev: 2"), "{answers:?}");
    assert_eq!(answers[1], answers[0]);
    s.stop().await;
}
