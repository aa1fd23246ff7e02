//! Claims by labels (`/claims/{claim}`): the matching pool with a Running spare first, else the one that serves
//! the claim soonest; one name across the stack, found by it alone afterwards; the label index the reconcile keeps
//! as pools are labelled, relabelled and deleted; and a claim's cost flat in the stack's pools.

use apiary_planner::{pool_version, DesiredPower, PoolAccess, Timestamp};
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::{World, ADMIN};
use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::json;
use support::call;

mod support;

const ALICE: &str = "arn:aws:iam::123456789012:user/alice";
const BOB: &str = "arn:aws:iam::123456789012:user/bob";
const CAROL: &str = "arn:aws:iam::210987654321:user/carol";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

/// Pool `name` labelled `labels`, holding `running` Running spares and `standby` hibernated ones of its current
/// version, planned once (its status and label index as its reconcile leaves them).
async fn labelled(w: &World, name: &str, labels: &[(&str, &str)], running: usize, standby: usize) {
    let size = running + standby;
    let mut spec = aws_spec(size as i64, running as i64);
    spec.labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let version = pool_version(&spec);
    w.put_pool(pool(name, spec, t0()));
    for i in 0..size {
        let power = if i < running { DesiredPower::Running } else { DesiredPower::Hibernating };
        let mut c = installed(&format!("{name}-{i}"), power, t0() + TimeDelta::seconds(i as i64));
        c.pool_version = Some(version.clone());
        w.put_cluster(name, c);
    }
    w.planned(name).await;
}

fn selector(labels: serde_json::Value) -> String {
    json!({ "selector": { "matchLabels": labels } }).to_string()
}

#[tokio::test]
async fn a_claim_by_labels_takes_a_spare_of_a_matching_pool_and_is_found_by_its_name_alone() {
    let w = World::new(t0());
    labelled(&w, "east", &[("cloud", "aws"), ("region", "east")], 0, 1).await;
    labelled(&w, "west", &[("cloud", "aws"), ("region", "west")], 1, 0).await;
    labelled(&w, "gcp", &[("cloud", "gcp")], 2, 0).await;
    let deps = w.default_deps(900);

    let body = json!({"selector": {"matchLabels": {"cloud": "aws"}}, "lifetime": "2h", "subjects": [BOB]});
    let (status, made) = call(&deps, "PUT", "/claims/job1", Some(ALICE), Some(&body.to_string())).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!((made["pool"].as_str(), made["cluster"]["id"].as_str()), (Some("west"), Some("west-0")));
    assert_eq!(made["selector"]["matchLabels"], json!({"cloud": "aws"}));
    assert_eq!(w.cluster("west", "west-0").expect("cluster").claim.as_deref(), Some("job1"));

    // The same PUT again is the same claim; another principal's is refused; the name is the stack's.
    let (status, again) = call(&deps, "PUT", "/claims/job1", Some(ALICE), Some(&body.to_string())).await;
    assert_eq!((status, again["cluster"]["id"].as_str()), (201, Some("west-0")), "{again}");
    let (status, _) = call(&deps, "PUT", "/claims/job1", Some(CAROL), Some(&body.to_string())).await;
    assert_eq!(status, 409);
    let (status, read) = call(&deps, "GET", "/claims/job1", Some(ALICE), None).await;
    assert_eq!((status, read["pool"].as_str(), read["phase"].as_str()), (200, Some("west"), Some("Ready")));
    // The claim is also its pool's, at its pool's path.
    let (status, _) = call(&deps, "GET", "/pools/west/claims/job1", Some(ALICE), None).await;
    assert_eq!(status, 200);

    // No Running spare left among the matching pools (west's status still names one, its index none): the claim
    // waits where it is served soonest, the pool with a standby, not the one whose spare was just taken.
    let (status, waiting) =
        call(&deps, "PUT", "/claims/job2", Some(BOB), Some(&selector(json!({"cloud": "aws"})))).await;
    assert_eq!((status, waiting["pool"].as_str(), waiting["phase"].as_str()), (202, Some("east"), Some("Pending")));

    // A subject extends it and releases it by name; the owner's other calls find it the same way.
    let (status, changed) = call(&deps, "PATCH", "/claims/job1", Some(BOB), Some(r#"{"lifetime": "3h"}"#)).await;
    assert_eq!((status, changed["lifetime"].as_str()), (200, Some("3h")), "{changed}");
    let (status, _) = call(&deps, "POST", "/claims/job1/hibernate", Some(ALICE), None).await;
    assert_eq!(status, 202);
    let (status, released) = call(&deps, "DELETE", "/claims/job1", Some(BOB), None).await;
    assert_eq!((status, released["phase"].as_str()), (202, Some("Releasing")), "{released}");
    let (status, _) = call(&deps, "DELETE", "/claims/job1", Some(CAROL), None).await;
    assert_eq!(status, 403);

    // The release is done by the pool's reconcile, which takes the name's entry with the claim: the name is free.
    w.planned("west").await;
    assert!(deps.store.claim_name("job1").await.expect("read").is_none(), "the name's entry went with the claim");
    let (status, _) = call(&deps, "GET", "/claims/job1", Some(ALICE), None).await;
    assert_eq!(status, 404);
    let (status, again) =
        call(&deps, "PUT", "/claims/job1", Some(CAROL), Some(&selector(json!({"cloud": "gcp"})))).await;
    assert_eq!((status, again["pool"].as_str(), again["owner"].as_str()), (201, Some("gcp"), Some(CAROL)));
}

#[tokio::test]
async fn a_selector_no_pool_answers_is_refused_naming_why() {
    let w = World::new(t0());
    labelled(&w, "ci", &[("cloud", "aws"), ("team", "x")], 1, 0).await;
    let mut restricted = w.snapshot("ci").expect("pool").pool;
    restricted.spec.access = Some(PoolAccess { claimants: vec![ALICE.into()], admins: vec![] });
    w.put_pool(restricted);
    let deps = w.default_deps(900);
    let put = |who: &'static str, body: String| {
        let deps = deps.clone();
        async move { call(&deps, "PUT", "/claims/job", Some(who), Some(&body)).await }
    };
    let (status, body) = put(ALICE, selector(json!({"cloud": "aws", "team": "y"}))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("selector.matchLabels")), "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("cloud=aws,team=y"), "{body}");
    let (status, body) = put(BOB, selector(json!({"cloud": "aws"}))).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("1 pool(s) carry cloud=aws"), "{body}");
    let (status, body) = put(ALICE, selector(json!({}))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("selector.matchLabels")), "{body}");
    let (status, body) = put(ALICE, json!({"selector": {"matchLabel": {"cloud": "aws"}}}).to_string()).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("selector.matchLabel")), "{body}");
    let (status, body) = put(ALICE, json!({"lifetime": "1h"}).to_string()).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("selector")), "{body}");
    let (status, body) = call(&deps, "PUT", "/claims/Job", Some(ALICE), Some(&selector(json!({"cloud": "aws"})))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("claim")), "{body}");
    let (status, body) = call(&deps, "GET", "/claims/nobody", Some(ALICE), None).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("/pools/{pool}/claims/nobody"), "{body}");
    // Nothing was stored by any of them.
    assert!(w.snapshot("ci").expect("pool").claims.is_empty());
    let (status, _) = put(ALICE, selector(json!({"cloud": "aws"}))).await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn a_claim_by_labels_whose_name_a_pools_own_claim_holds_there_is_refused_not_retried_in_a_loop() {
    let w = World::new(t0());
    labelled(&w, "ci", &[("cloud", "aws")], 1, 0).await;
    let deps = w.default_deps(900);
    let (status, _) = call(&deps, "PUT", "/pools/ci/claims/job", Some(BOB), None).await;
    assert_eq!(status, 201, "made at the pool's path, it takes the spare");
    // The only matching pool holds a claim of that name: the claim by labels cannot be stored there.
    let body = selector(json!({"cloud": "aws"}));
    let (status, body) = call(&deps, "PUT", "/claims/job", Some(ALICE), Some(&body)).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().unwrap_or_default().contains("pool ci holds a claim job"), "{body}");
    assert!(deps.store.claim_name("job").await.expect("read").is_none(), "no name entry was written");
}

#[tokio::test]
async fn the_label_index_follows_a_pools_labels_through_its_reconciles_and_its_deletion() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let spec = |labels: serde_json::Value| json!({"size": 0, "platform": {"fake": {}}, "labels": labels}).to_string();
    let (status, body) =
        call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec(json!({"cloud": "aws", "team": "x"})))).await;
    assert_eq!(status, 201, "{body}");
    let under = |k: &'static str, v: &'static str| {
        let store = deps.store.clone();
        async move { store.labelled(k, v).await.expect("index") }
    };
    assert!(under("cloud", "aws").await.is_empty(), "indexed by the pool's reconcile, not before");
    w.planned("ci").await;
    assert_eq!((under("cloud", "aws").await, under("team", "x").await), (vec!["ci".to_owned()], vec!["ci".to_owned()]));
    let status = w.snapshot("ci").expect("pool").pool.status;
    assert_eq!(status.labels_indexed.expect("recorded").len(), 2);

    // Relabelled: the changed and the removed labels' entries go, the new ones come, in the reconcile's write.
    let (status, _) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec(json!({"cloud": "gcp"})))).await;
    assert_eq!(status, 200);
    w.planned("ci").await;
    assert!(under("cloud", "aws").await.is_empty() && under("team", "x").await.is_empty());
    assert_eq!(under("cloud", "gcp").await, ["ci"]);
    // A status written by a release without the index (its record lost) is indexed afresh.
    let mut lost = w.snapshot("ci").expect("pool").pool;
    lost.status.labels_indexed = None;
    w.put_pool(lost);
    w.planned("ci").await;
    assert_eq!(under("cloud", "gcp").await, ["ci"]);
    assert!(w.snapshot("ci").expect("pool").pool.status.labels_indexed.is_some());

    // Deleted: the pool's entries go with its item.
    let (status, _) = call(&deps, "DELETE", "/pools/ci", Some(ADMIN), None).await;
    assert_eq!(status, 202);
    // The reaper's pass since then found nothing of it (as the power function records it).
    let mut reaped = w.snapshot("ci").expect("pool").pool;
    reaped.status.orphans =
        Some(apiary_planner::reaper::Orphans { checked_at: Some(w.now()), drained: true, ..Default::default() });
    w.put_pool(reaped);
    w.planned("ci").await;
    assert!(w.snapshot("ci").is_none(), "the empty pool is gone");
    assert!(under("cloud", "gcp").await.is_empty(), "and so are its index entries");
    assert!(w.store.tables().pools.is_empty(), "nothing of it is left: {:?}", w.store.tables().pools.keys());
}

#[tokio::test]
async fn a_claim_by_labels_costs_the_same_among_three_pools_and_among_three_hundred() {
    let mut costs = vec![];
    for others in [0, 297] {
        let w = World::new(t0());
        labelled(&w, "a", &[("cloud", "aws"), ("version", "4.16")], 2, 0).await;
        labelled(&w, "b", &[("cloud", "aws"), ("version", "4.16")], 0, 2).await;
        labelled(&w, "c", &[("cloud", "aws"), ("version", "4.15")], 2, 0).await;
        for i in 0..others {
            // Pools sharing one of the selector's labels, and pools sharing none.
            let labels: &[(&str, &str)] = if i % 2 == 0 { &[("cloud", "gcp")] } else { &[("version", "4.16")] };
            labelled(&w, &format!("other-{i}"), labels, 0, 0).await;
        }
        let deps = w.default_deps(900);
        let before = w.store.stats();
        let body = selector(json!({"cloud": "aws", "version": "4.16"}));
        let (status, made) = call(&deps, "PUT", "/claims/job", Some(ALICE), Some(&body)).await;
        assert_eq!((status, made["pool"].as_str()), (201, Some("a")), "{made}");
        let cost = w.store.stats() - before;
        let before = w.store.stats();
        let (status, _) = call(&deps, "GET", "/claims/job", Some(ALICE), None).await;
        assert_eq!(status, 200);
        costs.push((cost, w.store.stats() - before));
    }
    eprintln!("a claim by labels: {:?}", costs[0]);
    // The index's reads return the pools labelled cloud=aws, then version=4.16 (more of them among more pools:
    // entries only); the pool items read are the two matching, whatever the stack holds.
    let (few, many) = (costs[0].0, costs[1].0);
    assert_eq!((few.reads, few.write_attempts), (many.reads, many.write_attempts), "{few:?} {many:?}");
    assert_eq!((few.write_attempts, few.conflicts), (1, 0), "{few:?}");
    assert_eq!(costs[0].1, costs[1].1, "a read by name costs the same");
}

/// During an update, a reconcile of the release before (which keeps only the fields it knows) rewrites a claim by
/// labels without its `selector`. The name's entry is the authority: the claim keeps its name, a retried PUT is the
/// same claim, and no second claim of that name is made in another pool.
#[tokio::test]
async fn a_claim_by_labels_keeps_its_name_however_an_older_reconcile_rewrote_it() {
    let w = World::new(t0());
    labelled(&w, "west", &[("cloud", "aws")], 1, 0).await;
    labelled(&w, "east", &[("cloud", "aws")], 1, 0).await;
    let deps = w.default_deps(900);
    let body = selector(json!({"cloud": "aws"}));
    let (status, made) = call(&deps, "PUT", "/claims/job1", Some(ALICE), Some(&body)).await;
    assert_eq!(status, 201, "{made}");
    let pool = made["pool"].as_str().expect("pool").to_owned();

    // The older reconcile's rewrite: the claim as it was, less what that release did not know.
    let mut rewritten = deps.store.get_claim(&pool, "job1").await.expect("read").expect("the claim");
    rewritten.selector = None;
    w.store.put(&pool, apiary_ports::store::Item::Claim(Box::new(rewritten)));

    for _ in 0..2 {
        let (status, again) = call(&deps, "PUT", "/claims/job1", Some(ALICE), Some(&body)).await;
        assert_eq!((status, again["pool"].as_str()), (201, Some(pool.as_str())), "{again}");
        assert_eq!(again["cluster"]["id"], made["cluster"]["id"]);
    }
    let (status, read) = call(&deps, "GET", "/claims/job1", Some(ALICE), None).await;
    assert_eq!((status, read["pool"].as_str()), (200, Some(pool.as_str())));
    let other = if pool == "west" { "east" } else { "west" };
    assert!(deps.store.get_claim(other, "job1").await.expect("read").is_none(), "no second claim of the name");
    assert_eq!(deps.store.claim_name("job1").await.expect("read").map(|e| e.holder), Some(pool.clone()));

    // A claim made at the pool's path after a stale entry (an older release released the claim by labels and left
    // its entry) is not the name's: the name is free for a claim by labels, as before.
    let (status, _) = call(&deps, "DELETE", &format!("/pools/{pool}/claims/job1"), Some(ALICE), None).await;
    assert_eq!(status, 202);
    w.planned(&pool).await;
    let entry = apiary_ports::store::ClaimName {
        name: "job1".into(),
        holder: pool.clone(),
        owner: ALICE.into(),
        created_at: None,
    };
    w.store.put("", apiary_ports::store::Item::ClaimName(entry));
    let (status, _) = call(&deps, "PUT", &format!("/pools/{pool}/claims/job1"), Some(BOB), None).await;
    assert!(matches!(status, 201 | 202), "{status}");
    let (status, mine) = call(&deps, "PUT", "/claims/job1", Some(ALICE), Some(&body)).await;
    assert!(matches!(status, 201 | 202) && mine["owner"] == ALICE, "{status}: {mine}");
}
