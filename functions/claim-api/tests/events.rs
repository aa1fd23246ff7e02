//! A pool's event trail through the API: who made, was given and released each claim, and who changed the pool,
//! newest first, filtered by claim or cluster, a page at a time; for the pool's admins only; cheap to write on the
//! claim's path and to read whatever the pool's size.
#![allow(missing_docs, clippy::unwrap_used)]

use apiary_planner::{DesiredPower, PoolAccess, Timestamp};
use apiary_ports::store::EVENT_SHARDS;
use apiary_ports::Deps;
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::{World, ADMIN};
use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::Value;

mod support;

const ANN: &str = "arn:aws:iam::111111111111:user/ann";
const CI: &str = "arn:aws:sts::111111111111:assumed-role/team-a-ci/job-17";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

async fn call(deps: &Deps, method: &str, uri: &str, who: &str, body: Option<&str>) -> (u16, Value) {
    support::call(deps, method, uri, Some(who), body).await
}

/// Team A's pool `a`, ann its admin and its CI role a claimant, with `spares` Running spares.
fn team_pool(spares: usize) -> (World, Deps) {
    let w = World::new(t0());
    let mut spec = aws_spec(spares as i64, spares as i64);
    spec.access = Some(PoolAccess {
        claimants: vec!["arn:aws:iam::111111111111:role/team-a-ci".into()],
        admins: vec![ANN.into()],
    });
    w.put_pool(pool("a", spec, t0()));
    for i in 0..spares {
        let at = t0() + TimeDelta::seconds(i as i64);
        w.put_cluster("a", installed(&format!("a-{i:05}"), DesiredPower::Running, at));
    }
    let deps = w.default_deps(900);
    (w, deps)
}

/// An event as a test compares it: (type, principal, claim, cluster).
type Seen = (String, Option<String>, Option<String>, Option<String>);

/// Each event of `body`.
fn seen(body: &Value) -> Vec<Seen> {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["type"].as_str().unwrap().to_owned(), s(&e["principal"]), s(&e["claim"]), s(&e["cluster"])))
        .collect()
}

fn ev(kind: &str, who: Option<&str>, claim: Option<&str>, cluster: Option<&str>) -> Seen {
    (kind.into(), who.map(Into::into), claim.map(Into::into), cluster.map(Into::into))
}

#[tokio::test]
async fn the_trail_tells_who_claimed_was_given_and_released_each_cluster_and_who_changed_the_pool() {
    let (w, deps) = team_pool(2);
    let (status, claim) = call(&deps, "PUT", "/pools/a/claims/job", CI, None).await;
    assert_eq!(status, 201, "{claim}");
    let cluster = claim["cluster"]["id"].as_str().unwrap().to_owned();
    w.time.advance(TimeDelta::seconds(5));
    let (status, _) = call(&deps, "POST", "/pools/a/claims/job/hibernate", CI, None).await;
    assert_eq!(status, 202);
    w.time.advance(TimeDelta::seconds(5));
    let (status, _) = call(&deps, "DELETE", "/pools/a/claims/job", CI, None).await;
    assert_eq!(status, 202);
    w.time.advance(TimeDelta::seconds(5));
    let mut spec = aws_spec(3, 2);
    spec.access = Some(PoolAccess {
        claimants: vec!["arn:aws:iam::111111111111:role/team-a-ci".into()],
        admins: vec![ANN.into()],
    });
    let (status, _) = call(&deps, "PUT", "/pools/a", ANN, Some(&serde_json::to_string(&spec).unwrap())).await;
    assert_eq!(status, 200);

    let (status, body) = call(&deps, "GET", "/pools/a/events", ANN, None).await;
    assert_eq!(status, 200, "{body}");
    let c = Some(cluster.as_str());
    assert_eq!(
        seen(&body),
        vec![
            ev("PoolChanged", Some(ANN), None, None),
            ev("ClaimReleaseRequested", Some(CI), Some("job"), c),
            ev("PowerRequested", Some(CI), Some("job"), c),
            ev("ClaimAssigned", Some(CI), Some("job"), c),
            ev("ClaimCreated", Some(CI), Some("job"), None),
        ],
        "newest first: {body}"
    );
    assert_eq!(body["events"][0]["message"], "changed size");
    assert_eq!(body["events"][2]["message"], "hibernate");
    assert!(body["nextPage"].is_null(), "{body}");
    // The stack's admins read it too.
    let (status, again) = call(&deps, "GET", "/pools/a/events", ADMIN, None).await;
    assert_eq!((status, seen(&again)), (200, seen(&body)));
}

#[tokio::test]
async fn the_trail_filters_by_claim_or_cluster_and_pages_without_gaps_or_repeats() {
    let (w, deps) = team_pool(4);
    for i in 0..4 {
        let (status, body) = call(&deps, "PUT", &format!("/pools/a/claims/job-{i}"), CI, None).await;
        assert_eq!(status, 201, "{body}");
        w.time.advance(TimeDelta::seconds(1));
    }
    let (_, all) = call(&deps, "GET", "/pools/a/events", ANN, None).await;
    assert_eq!(seen(&all).len(), 8, "{all}");
    let (_, one) = call(&deps, "GET", "/pools/a/events?claim=job-2", ANN, None).await;
    assert!(seen(&one).iter().all(|e| e.2.as_deref() == Some("job-2")) && seen(&one).len() == 2, "{one}");
    let cluster = one["events"][0]["cluster"].as_str().unwrap().to_owned();
    let (_, by_cluster) = call(&deps, "GET", &format!("/pools/a/events?cluster={cluster}"), ANN, None).await;
    assert_eq!(seen(&by_cluster), vec![ev("ClaimAssigned", Some(CI), Some("job-2"), Some(&cluster))]);
    // Three at a time: every event once, in the same order as all at once.
    let mut paged = vec![];
    let mut uri = "/pools/a/events?limit=3".to_owned();
    loop {
        let (status, page) = call(&deps, "GET", &uri, ANN, None).await;
        assert_eq!(status, 200, "{page}");
        assert!(seen(&page).len() <= 3);
        paged.extend(seen(&page));
        match page["nextPage"].as_str() {
            Some(next) => uri = format!("/pools/a/events?limit=3&page={next}"),
            None => break,
        }
    }
    assert_eq!(paged, seen(&all));
}

#[tokio::test]
async fn only_the_pools_admins_read_its_trail_and_bad_parameters_are_named() {
    let (_w, deps) = team_pool(1);
    let (status, body) = call(&deps, "GET", "/pools/a/events", CI, None).await;
    assert_eq!(status, 403, "a claimant does not read who else claimed: {body}");
    assert!(body["message"].as_str().unwrap().contains("read the events of pool a"), "{body}");
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=many", "limit"),
        ("limit=201", "limit"),
        ("claim=Not_A_Claim", "claim"),
        ("cluster=a%2Fb", "cluster"),
        ("page=not-a-page", "page"),
    ] {
        let (status, body) = call(&deps, "GET", &format!("/pools/a/events?{query}"), ANN, None).await;
        assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some(field)), "{query}: {body}");
    }
    let (status, _) = call(&deps, "GET", "/pools/nope/events", ANN, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&deps, "POST", "/pools/a/events", ANN, None).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn a_stack_admin_reads_the_trail_of_a_pool_that_is_gone() {
    let (w, deps) = team_pool(0);
    let (status, _) = call(&deps, "DELETE", "/pools/a", ANN, None).await;
    assert_eq!(status, 202);
    w.store.remove("a", &apiary_ports::store::Key::Pool);
    let (status, body) = call(&deps, "GET", "/pools/a/events", ADMIN, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(seen(&body), vec![ev("PoolDeletionRequested", Some(ANN), None, None)]);
    let (status, _) = call(&deps, "GET", "/pools/a/events", ANN, None).await;
    assert_eq!(status, 404, "a pool admin's rights went with the pool");
}

#[tokio::test]
async fn the_trail_costs_a_claim_no_more_calls_and_a_read_of_it_the_same_in_a_pool_of_ten_or_ten_thousand() {
    let mut costs = vec![];
    for size in [10, 10_000] {
        let (w, deps) = team_pool(size);
        let before = w.store.stats();
        let (status, _) = call(&deps, "PUT", "/pools/a/claims/job", CI, None).await;
        assert_eq!(status, 201);
        let claim = w.store.stats() - before;
        assert_eq!(claim.write_attempts, 1, "the events go in the claim's one transaction");
        let before = w.store.stats();
        let (status, _) = call(&deps, "GET", "/pools/a/events?limit=10", ANN, None).await;
        assert_eq!(status, 200);
        let read = w.store.stats() - before;
        // The pool item (who may read), then one query per shard of the trail.
        assert_eq!(read.reads, 1 + u64::from(EVENT_SHARDS), "{read:?}");
        let before = w.store.stats();
        let (status, _) = call(&deps, "GET", "/pools/a/events?claim=job", ANN, None).await;
        assert_eq!(status, 200);
        assert_eq!((w.store.stats() - before).reads, 2, "a claim's events are in one shard");
        costs.push(read);
    }
    assert_eq!(costs[0], costs[1], "the same at ten clusters and at ten thousand");
}
