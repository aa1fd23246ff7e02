//! The claim API on in-memory ports: routes, authorization, validation, and claims served at once or later.

use apiary_planner::{DesiredPower, Timestamp};
use apiary_ports::Deps;
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::{World, ADMIN};
use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

const ALICE: &str = "arn:aws:iam::123456789012:user/alice";
const BOB: &str = "arn:aws:iam::123456789012:user/bob";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

async fn call(deps: &Deps, method: &str, uri: &str, who: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let req = claim_api::api_request(method, uri, who, body.unwrap_or_default().as_bytes().to_vec());
    let res = claim_api::handle(deps, req).await;
    let status = res.status().as_u16();
    let text = match res.into_body() {
        lambda_http::Body::Text(t) => t,
        lambda_http::Body::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
        lambda_http::Body::Empty => String::new(),
    };
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn admins_create_pools_others_are_refused_and_bad_specs_name_their_fields() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let spec = json!({"size": 2, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3.large"}}});
    let (status, _) = call(&deps, "PUT", "/pools/ci", Some(ALICE), Some(&spec.to_string())).await;
    assert_eq!(status, 403);
    let (status, _) = call(&deps, "PUT", "/pools/ci", None, Some(&spec.to_string())).await;
    assert_eq!(status, 403, "unsigned");
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec.to_string())).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "the new pool is reconciled");
    let (status, body) =
        call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(r#"{"size": -1, "runningCount": -2}"#)).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call(
        &deps,
        "PUT",
        "/pools/ci",
        Some(ADMIN),
        Some(r#"{"size": -1, "runningCount": -2, "platform": {"fake": {}}}"#),
    )
    .await;
    assert_eq!(status, 400);
    let fields: Vec<&str> =
        body["fields"].as_array().expect("fields").iter().filter_map(|f| f["field"].as_str()).collect();
    assert_eq!(fields, ["size", "runningCount"]);
    let (status, body) = call(&deps, "GET", "/pools", Some(ALICE), None).await;
    assert_eq!((status, body["pools"][0]["name"].as_str()), (200, Some("ci")));
    let (status, _) = call(&deps, "DELETE", "/pools/ci", Some(ALICE), None).await;
    assert_eq!(status, 403);
    let (status, body) = call(&deps, "DELETE", "/pools/ci", Some(ADMIN), None).await;
    assert_eq!(status, 202, "{body}");
    assert!(body["deletionRequestedAt"].is_string());
}

#[tokio::test]
async fn a_claim_takes_the_oldest_running_spare_at_once_and_waits_when_there_is_none() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(2, 1), t0()));
    w.put_cluster("ci", installed("ci-old", DesiredPower::Running, t0()));
    w.put_cluster("ci", installed("ci-new", DesiredPower::Hibernating, t0() + chrono::TimeDelta::seconds(1)));
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job1", Some(ALICE), Some(r#"{"lifetime": "2h"}"#)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!((body["phase"].as_str(), body["cluster"]["id"].as_str()), (Some("Ready"), Some("ci-old")));
    assert_eq!(w.cluster("ci", "ci-old").expect("cluster").claim.as_deref(), Some("job1"));
    // Idempotent: the same claim again answers the same.
    let (status, again) = call(&deps, "PUT", "/pools/ci/claims/job1", Some(ALICE), None).await;
    assert_eq!((status, again["cluster"]["id"].as_str()), (201, Some("ci-old")));
    // No Running spare left: the next claim waits.
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job2", Some(BOB), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "{body}");
    let (status, _) = call(&deps, "PUT", "/pools/ci/claims/job2", Some(ALICE), None).await;
    assert_eq!(status, 409, "a claim name belongs to its owner");
    let docs = w.metrics.documents();
    assert_eq!(docs.iter().filter(|d| d["ClaimAssignmentSeconds"].is_number()).count(), 1);
}

#[tokio::test]
async fn only_the_owner_or_an_admin_reads_powers_and_releases_a_claim() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let (status, _) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 201);
    for (method, uri) in [
        ("GET", "/pools/ci/claims/job"),
        ("POST", "/pools/ci/claims/job/hibernate"),
        ("DELETE", "/pools/ci/claims/job"),
    ] {
        let (status, body) = call(&deps, method, uri, Some(BOB), None).await;
        assert_eq!(status, 403, "{method} {uri}: {body}");
    }
    let (status, body) = call(&deps, "GET", "/pools/ci/claims/job?wait=1s", Some(ADMIN), None).await;
    assert_eq!((status, body["phase"].as_str()), (200, Some("Ready")));
    let (status, _) = call(&deps, "POST", "/pools/ci/claims/job/hibernate", Some(ALICE), None).await;
    assert_eq!(status, 202);
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").spec_power_state, Some(DesiredPower::Hibernating));
    assert_eq!(w.queue.take_power().len(), 1, "the power function is asked");
    let (status, body) = call(&deps, "DELETE", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Releasing")));
    let (status, _) = call(&deps, "GET", "/pools/ci/claims/nope", Some(ALICE), None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&deps, "GET", "/pools/ci/claims/job?wait=forever", Some(ALICE), None).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_named() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let (status, _) = call(&deps, "GET", "/nowhere", Some(ALICE), None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&deps, "PATCH", "/pools/ci", Some(ADMIN), None).await;
    assert_eq!(status, 405);
    let (status, doc) = call(&deps, "GET", "/openapi.json", None, None).await;
    assert_eq!((status, doc["openapi"].as_str().map(|v| v.starts_with('3'))), (200, Some(true)));
}

/// Section 4: a lifetime of 200 000 "1ns" was a valid duration, stored a 600 KB claim and answered 500.
#[tokio::test]
async fn an_enormous_lifetime_is_refused_by_name_and_nothing_is_stored() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 0), t0()));
    let deps = w.default_deps(900);
    let body = json!({ "lifetime": "1ns".repeat(200_000) }).to_string();
    let (status, answer) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), Some(&body)).await;
    assert_eq!(
        (status, answer["fields"][0]["field"].as_str()),
        (400, Some("lifetime")),
        "{}",
        answer.to_string().chars().take(200).collect::<String>()
    );
    assert!(w.snapshot("ci").expect("pool").claims.is_empty());
}

/// Section 4: `{"size": 1000000000}` without maxConcurrent made every plan allocate a billion clusters; every
/// count has a ceiling and every string a length limit, each refused by name.
#[tokio::test]
async fn counts_have_ceilings_and_strings_have_lengths_each_refused_by_name() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let aws = json!({"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3.large"});
    let long = "x".repeat(300);
    let cases = [
        (json!({"size": 1_000_000_000, "platform": {"aws": aws}}), "size"),
        (json!({"size": 1, "runningCount": 20_000, "platform": {"aws": aws}}), "runningCount"),
        (json!({"size": 1, "maxSize": 20_000, "platform": {"aws": aws}}), "maxSize"),
        (json!({"size": 1, "maxConcurrent": 20_000, "platform": {"aws": aws}}), "maxConcurrent"),
        (json!({"size": 1, "hibernateAfter": "1ns".repeat(100), "platform": {"aws": aws}}), "hibernateAfter"),
        (json!({"size": 1, "labels": {"team": long}, "platform": {"aws": aws}}), "labels.team"),
        (
            json!({"size": 1, "platform": {"aws": {"region": long, "imageId": "ami-1", "instanceType": "t3"}}}),
            "platform.aws.region",
        ),
        (
            json!({"size": 1, "platform": {"aws": {"region": "r", "imageId": long, "instanceType": "t3"}}}),
            "platform.aws.imageId",
        ),
        (
            json!({"size": 1, "platform": {"aws": {"region": "r", "imageId": "a", "instanceType": "t3", "tags": {"k": long}}}}),
            "platform.aws.tags.k",
        ),
        (
            json!({"size": 1, "platform": {"aws": aws}, "schedules": [{"name": "Work Day!", "cron": "0 8 * * 1-5", "duration": "8h", "size": 2}]}),
            "schedules[0].name",
        ),
        (
            json!({"size": 1, "platform": {"aws": aws}, "inventory": {"clusterDeployments": (0..3000).map(|i| json!({"name": format!("n{i}")})).collect::<Vec<_>>()}}),
            "inventory.clusterDeployments",
        ),
    ];
    for (spec, field) in cases {
        let (status, answer) = call(&deps, "PUT", "/pools/p", Some(ADMIN), Some(&spec.to_string())).await;
        let fields: Vec<&str> =
            answer["fields"].as_array().into_iter().flatten().filter_map(|f| f["field"].as_str()).collect();
        assert_eq!(status, 400, "{field}: {answer}");
        assert!(fields.contains(&field), "want {field}, got {fields:?}");
    }
    assert!(w.store.tables().pools.is_empty(), "nothing was stored");
}

/// Section 4: a re-PUT of an unchanged spec answered at once without touching the scheduler, so schedules lost
/// on the scheduler's side were never restored.
#[tokio::test]
async fn a_re_put_of_an_unchanged_spec_re_syncs_its_schedules() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let spec = json!({"size": 1, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3"}},
        "schedules": [{"name": "office", "cron": "0 8 * * 1-5", "timeZone": "Europe/Berlin", "duration": "10h", "runningCount": 1}]});
    let (status, _) = call(&deps, "PUT", "/pools/p", Some(ADMIN), Some(&spec.to_string())).await;
    assert_eq!(status, 201);
    assert_eq!(w.schedules.of("p").len(), 1);
    futures::executor::block_on(apiary_ports::schedules::Schedules::sync(w.schedules.as_ref(), "p", &[]))
        .expect("lost");
    let (status, _) = call(&deps, "PUT", "/pools/p", Some(ADMIN), Some(&spec.to_string())).await;
    assert_eq!(status, 200);
    assert_eq!(w.schedules.of("p").len(), 1, "the unchanged spec's schedules are synced again");
}

/// A pool's machines are found through its spec: a spec that moved them (another region, project, subscription,
/// resource-group pattern, vCenter or platform) would look for the old clusters where they are not, find
/// nothing, call them deprovisioned and leak their machines. The fields that say where machines live cannot
/// change; everything else can (a new poolVersion replaces the clusters there).
#[tokio::test]
async fn a_pools_machines_cannot_be_moved_by_editing_where_they_live() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let spec = |region: &str, instance: &str| {
        json!({"size": 1, "platform": {"aws": {"region": region, "imageId": "ami-1", "instanceType": instance}}})
            .to_string()
    };
    let (status, _) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec("us-east-1", "t3.large"))).await;
    assert_eq!(status, 201);
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec("eu-west-1", "t3.large"))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["fields"][0]["field"], "platform.aws.region", "{body}");
    assert!(body["fields"][0]["message"].as_str().is_some_and(|m| m.contains("us-east-1")), "{body}");
    let fake = json!({"size": 1, "platform": {"fake": {}}}).to_string();
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&fake)).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("platform")), "{body}");
    // What shapes the clusters may change: they are replaced where they live.
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec("us-east-1", "m5.large"))).await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = call(&deps, "GET", "/pools/ci", Some(ADMIN), None).await;
    assert_eq!(body["spec"]["platform"]["aws"]["region"], "us-east-1");
}

/// Seed 004's PowerStatePaused: an admin pauses one cluster's power management; it is not assigned while paused,
/// and the unpause hands it back to the power function.
#[tokio::test]
async fn an_admin_pauses_and_unpauses_one_clusters_power_management() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "POST", "/pools/ci/clusters/ci-1/pause", Some(ALICE), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(!w.cluster("ci", "ci-1").expect("cluster").power_paused, "a refused pause changes nothing");
    let (status, body) = call(&deps, "POST", "/pools/ci/clusters/ci-1/pause", Some(ADMIN), None).await;
    assert_eq!((status, body["powerPaused"].as_bool()), (200, Some(true)), "{body}");
    let reasons: Vec<&str> =
        body["conditions"].as_array().expect("conditions").iter().filter_map(|k| k["reason"].as_str()).collect();
    assert_eq!(reasons, ["PowerStatePaused", "PowerStatePaused"], "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "the pool counts its spares again");
    let (status, again) = call(&deps, "POST", "/pools/ci/clusters/ci-1/pause", Some(ADMIN), None).await;
    assert_eq!((status, &again), (200, &body), "pausing twice is the same pause");

    let (status, claim) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, claim["phase"].as_str()), (202, Some("Pending")), "a paused cluster is not assigned: {claim}");
    w.queue.take_reconcile();

    let (status, body) = call(&deps, "POST", "/pools/ci/clusters/ci-1/unpause", Some(ADMIN), None).await;
    assert_eq!((status, body["powerPaused"].as_bool()), (200, None), "{body}");
    let ready = body["conditions"].as_array().expect("conditions").iter().find(|k| k["type"] == "Ready").cloned();
    assert_eq!(ready.map(|k| k["reason"].clone()), Some(json!("Running")), "{body}");
    let nudges = w.queue.take_power();
    assert_eq!(
        nudges.iter().map(|m| m.cluster.as_str()).collect::<Vec<_>>(),
        ["ci-1"],
        "the power function carries on"
    );
    assert_eq!(w.queue.take_reconcile().len(), 1, "and the pool assigns it");

    let (status, _) = call(&deps, "POST", "/pools/ci/clusters/nope/pause", Some(ADMIN), None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&deps, "POST", "/pools/other/clusters/ci-1/pause", Some(ADMIN), None).await;
    assert_eq!(status, 404);
    let (status, _) = call(&deps, "GET", "/pools/ci/clusters/ci-1/pause", Some(ADMIN), None).await;
    assert_eq!(status, 405);
    let (status, body) = call(&deps, "POST", "/pools/ci/clusters/Not_A_Name/pause", Some(ADMIN), None).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("cluster")), "{body}");
}

/// The OpenAPI document's example claim has the shape of a real answer: the same fields, and the same in its
/// cluster.
#[tokio::test]
async fn the_documents_example_claim_has_the_fields_of_a_real_answer() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let (status, real) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 201, "{real}");
    let (_, doc) = call(&deps, "GET", "/openapi.json", None, None).await;
    let example = &doc["components"]["schemas"]["Claim"]["example"];
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("an object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(example), keys(&real));
    assert_eq!(keys(&example["cluster"]), keys(&real["cluster"]));
}
