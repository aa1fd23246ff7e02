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
