//! The claim API on in-memory ports: routes, authorization, validation, claims served at once or later, and what
//! a claim costs the table (flat as the pool grows, and under a burst of concurrent claims).

use std::collections::BTreeSet;
use std::sync::Arc;

use apiary_planner::{Claim, DesiredPower, Timestamp};
use apiary_ports::store::Item;
use apiary_ports::Deps;
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::hook::{Gate, Hook, Op, Refuse};
use apiary_testkit::store::StoreStats;
use apiary_testkit::{World, ADMIN};
use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::{json, Value};
use support::call;

mod support;

const ALICE: &str = "arn:aws:iam::123456789012:user/alice";
const BOB: &str = "arn:aws:iam::123456789012:user/bob";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

/// The host of a function URL (`ClaimEndpoint=function-url`).
const URL_HOST: &str = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6.lambda-url.us-east-1.on.aws";

/// `method path` with `body` as Lambda hands it to the function at its URL with IAM authorization (the request
/// payload of Lambda's documentation, version 2.0), signed by `who` (none: no authorizer, as without IAM).
fn at_function_url(method: &str, path: &str, who: Option<&str>, body: &str) -> lambda_http::Request {
    let authorizer = who.map(|arn| {
        json!({"iam": {"accessKey": "AKIAIOSFODNN7EXAMPLE", "accountId": "123456789012", "callerId": "AIDAEXAMPLE",
            "cognitoIdentity": null, "principalOrgId": null, "userArn": arn, "userId": "AIDAEXAMPLE"}})
    });
    let event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "host": URL_HOST, "x-amz-date": "20261123T090000Z"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
            "authorizer": authorizer,
            "domainName": URL_HOST,
            "domainPrefix": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7",
                "userAgent": "apiary-cli"},
            "requestId": "c0ffee00-0000-4000-8000-000000000001",
            "routeKey": "$default",
            "stage": "$default",
            "time": "23/Nov/2026:09:00:00 +0000",
            "timeEpoch": 1795424400000u64
        },
        "body": body,
        "isBase64Encoded": false
    });
    lambda_http::request::from_str(&event.to_string()).expect("a function URL's request")
}

#[tokio::test]
async fn at_its_function_url_the_api_knows_the_signer_and_refuses_its_own_host_as_a_pool_url() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let (status, body) = support::handle(&deps, at_function_url("GET", "/me", Some(ADMIN), "")).await;
    assert_eq!((status, body["principal"].as_str(), body["stackAdmin"].as_bool()), (200, Some(ADMIN), Some(true)));
    let (status, _) = support::handle(&deps, at_function_url("GET", "/me", None, "")).await;
    assert_eq!(status, 403, "no signer");
    // The URL cannot be named to the function beforehand (it is made from the function): the host each request
    // came to is the stack's own, never a pool's to call.
    let hook = |url: &str| {
        json!({"size": 1, "platform": {"fake": {}}, "provisioner": {"webhook": {"url": url,
            "secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:installer"}}})
        .to_string()
    };
    let own = format!("https://{URL_HOST}/pools/x/claims/y");
    let (status, body) = support::handle(&deps, at_function_url("PUT", "/pools/w", Some(ADMIN), &hook(&own))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("provisioner.webhook.url")), "{body}");
    assert!(body["fields"][0]["message"].as_str().unwrap_or_default().contains("this stack's own API"), "{body}");
    assert!(w.snapshot("w").is_none(), "nothing stored");
    let other = hook("https://installer.example.com/install");
    let (status, body) = support::handle(&deps, at_function_url("PUT", "/pools/w", Some(ADMIN), &other)).await;
    assert_eq!((status, body["name"].as_str()), (201, Some("w")), "{body}");
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
async fn the_stack_says_its_release_as_the_api_document_does() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "GET", "/version", Some(ALICE), None).await;
    assert_eq!((status, body["version"].as_str()), (200, Some(env!("CARGO_PKG_VERSION"))), "{body}");
    let (_, doc) = call(&deps, "GET", "/openapi.json", None, None).await;
    assert_eq!(doc["info"]["version"].as_str(), Some(env!("CARGO_PKG_VERSION")), "the document's version");
    let (status, _) = call(&deps, "DELETE", "/version", Some(ADMIN), None).await;
    assert_eq!(status, 405);
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

/// An AWS pool may name only a role the stack allows (its MemberRoleNamePattern, in its MemberAccountIds), each
/// refusal a 400 naming `platform.aws.roleArn` and why; an allowed one is stored, and the pool shows the ExternalId
/// its role must require.
#[tokio::test]
async fn a_pool_names_only_a_role_the_stack_allows_and_shows_its_external_id() {
    let w = World::new(t0());
    let spec = |role: &str| {
        json!({"size": 1, "platform": {"aws": {"region": "eu-west-1", "imageId": "ami-1", "instanceType": "m6i.large",
            "roleArn": role}}})
        .to_string()
    };
    let good = "arn:aws:iam::210987654321:role/apiary-member-ci";
    let closed = w.default_deps(900);
    let (status, body) = call(&closed, "PUT", "/pools/ci", Some(ADMIN), Some(&spec(good))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("platform.aws.roleArn")), "{body}");
    assert!(body["fields"][0]["message"].as_str().is_some_and(|m| m.contains("MemberAccountIds")), "{body}");

    let mut config = apiary_ports::Config::named("apiary", &[ADMIN]);
    config.member_roles.accounts = vec!["210987654321".into()];
    let deps = w.deps(config.clone());
    for (role, says) in [
        ("arn:aws:iam::111111111111:role/apiary-member-ci", "account 111111111111"),
        ("arn:aws:iam::210987654321:role/OrganizationAccountAccessRole", "MemberRoleNamePattern"),
        ("arn:aws:iam::210987654321:user/apiary-member-ci", "not an IAM role ARN"),
    ] {
        let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec(role))).await;
        assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("platform.aws.roleArn")), "{body}");
        assert!(body["fields"][0]["message"].as_str().is_some_and(|m| m.contains(says)), "{role}: {body}");
    }
    assert!(w.snapshot("ci").is_none(), "nothing stored");
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec(good))).await;
    assert_eq!(status, 201, "{body}");
    let expected = apiary_planner::external_id(&config.stack_id, "ci");
    assert_eq!(body["status"]["externalId"], expected.as_str());
    let (_, body) = call(&deps, "GET", "/pools/ci", Some(ALICE), None).await;
    assert_eq!(body["status"]["externalId"], expected.as_str());
    assert_eq!(body["spec"]["platform"]["aws"]["roleArn"], good);
    let (_, body) = call(&deps, "GET", "/pools", Some(ALICE), None).await;
    assert_eq!(body["pools"][0]["status"]["externalId"], expected.as_str());
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

/// A pool of `size` installed clusters, a second apart, the oldest `running` of them Running spares.
fn stocked(w: &World, name: &str, size: usize, running: usize) {
    w.put_pool(pool(name, aws_spec(size as i64, running as i64), t0()));
    for i in 0..size {
        let power = if i < running { DesiredPower::Running } else { DesiredPower::Hibernating };
        w.put_cluster(name, installed(&format!("{name}-{i:05}"), power, t0() + TimeDelta::seconds(i as i64)));
    }
}

/// Writes `name`'s status as its reconcile would: the plan's counts, and `nextSpares`, its oldest spares first.
fn planned(w: &World, name: &str) {
    let snap = w.snapshot(name).expect("pool");
    // Made from the pool's spec as it stands, as a pool's clusters are (none stale, none to replace).
    let version = apiary_planner::pool_version(&snap.pool.spec);
    for c in snap.clusters.iter().filter(|c| c.pool_version.is_none()) {
        let mut c = c.clone();
        c.pool_version = Some(version.clone());
        w.store.put(name, Item::Cluster(Box::new(c)));
    }
    let snap = w.snapshot(name).expect("pool");
    let mut pool = snap.pool.clone();
    for action in apiary_planner::plan(&snap, w.now(), 0).actions {
        if let apiary_planner::Action::UpdatePool { status, .. } = action {
            pool.status = *status;
        }
    }
    w.store.put(name, Item::Pool(Box::new(pool)));
}

/// Seed 000: "Oldest clusters will be claimed first". Claims one after another, each meeting no other, get the
/// Running spares oldest first, as the planner would assign them; a pool whose status names none (a reconcile
/// has not run yet) still serves a claim at once.
#[tokio::test]
async fn lone_claims_get_the_running_spares_oldest_first() {
    let w = World::new(t0());
    stocked(&w, "ci", 8, 8);
    planned(&w, "ci");
    let deps = w.default_deps(900);
    let names = w.snapshot("ci").expect("pool").pool.status.next_spares;
    assert_eq!(names, ["ci-00000", "ci-00001", "ci-00002", "ci-00003"]);
    // Between two reconciles the list grows old: each claim skips the spares taken since, read strongly.
    for (i, oldest) in ["ci-00000", "ci-00001", "ci-00002"].into_iter().enumerate() {
        let (status, body) = call(&deps, "PUT", &format!("/pools/ci/claims/job{i}"), Some(ALICE), None).await;
        assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some(oldest)), "{body}");
    }
    planned(&w, "ci");
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job3", Some(ALICE), None).await;
    assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some("ci-00003")), "{body}");
    // No list yet: any spare, at once.
    let w = World::new(t0());
    stocked(&w, "ci", 3, 3);
    let (status, body) = call(&w.default_deps(900), "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (201, Some("Ready")), "{body}");
}

/// What one request cost the table.
async fn cost(w: &World, deps: &Deps, method: &str, uri: &str, expect: u16) -> StoreStats {
    let before = w.store.stats();
    let (status, body) = call(deps, method, uri, Some(ALICE), None).await;
    assert_eq!(status, expect, "{method} {uri}: {body}");
    w.store.stats() - before
}

#[tokio::test]
async fn a_claim_costs_the_table_the_same_in_a_pool_of_ten_clusters_and_in_one_of_ten_thousand() {
    let mut costs = vec![];
    for size in [10, 10_000] {
        let w = World::new(t0());
        stocked(&w, "hot", size, 5);
        stocked(&w, "cold", size, 0);
        planned(&w, "hot");
        planned(&w, "cold");
        let deps = w.default_deps(900);
        let served = cost(&w, &deps, "PUT", "/pools/hot/claims/job", 201).await;
        let waiting = cost(&w, &deps, "PUT", "/pools/cold/claims/job", 202).await;
        let again = cost(&w, &deps, "PUT", "/pools/hot/claims/job", 201).await;
        let read = cost(&w, &deps, "GET", "/pools/hot/claims/job", 200).await;
        let released = cost(&w, &deps, "DELETE", "/pools/hot/claims/job", 202).await;
        costs.push([served, waiting, again, read, released]);
    }
    assert_eq!(costs[0], costs[1], "a request's cost must not grow with the pool");
    let [served, waiting, ..] = costs[0];
    // The pool item (which names the oldest spares), the oldest pending claim, the oldest spare; one transaction.
    assert!(served.reads <= 3 && served.items_read <= 3, "{served:?}");
    assert_eq!((served.write_attempts, served.conflicts), (1, 0), "{served:?}");
    assert!(waiting.reads <= 4 && waiting.items_read <= 1, "{waiting:?}");
    assert_eq!((waiting.write_attempts, waiting.conflicts), (1, 0), "{waiting:?}");
}

/// Every port call first lets the other invocations run: concurrent requests interleave call by call.
struct Interleave;

impl Hook for Interleave {
    fn before(&self, _: Op) -> Gate {
        Gate::Yield
    }
}

#[tokio::test]
async fn two_hundred_concurrent_claims_on_two_hundred_spares_each_get_their_own_at_under_three_writes_a_claim() {
    let w = World::with_hook(t0(), Arc::new(Interleave), 7);
    stocked(&w, "ci", 200, 200);
    planned(&w, "ci");
    let deps = w.default_deps(900);
    let before = w.store.stats();
    let claims = (0..200).map(|i| format!("/pools/ci/claims/job-{i}"));
    let answers = futures::future::join_all(claims.map(|uri| {
        let deps = deps.clone();
        async move { call(&deps, "PUT", &uri, Some(ALICE), None).await }
    }))
    .await;
    let cost = w.store.stats() - before;
    let mut given = BTreeSet::new();
    for (status, body) in &answers {
        assert_eq!(status, &201, "{body}");
        let id = body["cluster"]["id"].as_str().expect("a cluster");
        assert!(given.insert(id.to_owned()), "{id} given twice");
        let stored = w.cluster("ci", id).expect("cluster");
        assert_eq!(stored.claim.as_deref(), body["name"].as_str(), "the cluster names the claim it was given to");
    }
    assert_eq!(given.len(), 200);
    let per_claim = cost.write_attempts as f64 / 200.0;
    // Each claim's first try is on the oldest spare (one of them gets it), then they spread: about two a claim.
    assert!(per_claim < 3.0, "{per_claim:.2} write attempts a claim: {cost:?}");
    // The burst asked for one reconcile per second it lasted (its retries' jitter moves virtual time, each lost
    // try's in turn), not 200.
    let seconds = (w.now() - t0()).num_seconds() as usize + 1;
    let asked = w.queue.take_reconcile().len();
    assert!(asked <= seconds && seconds <= 5, "{asked} reconciles over {seconds} s");
    eprintln!("200 concurrent claims: {cost:?}, {per_claim:.2} write attempts a claim, {asked} reconciles");
}

#[tokio::test]
async fn an_older_waiting_claim_keeps_its_turn_when_a_spare_comes() {
    let w = World::new(t0());
    stocked(&w, "ci", 2, 1);
    let waiting = Claim::new("first", BOB, t0());
    w.store.put("ci", Item::Claim(Box::new(waiting)));
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/second", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "FIFO: the reconcile serves `first` first");
    assert!(w.snapshot("ci").expect("pool").clusters.iter().all(|c| c.claim.is_none()));
}

/// The FIFO promise is between waiting claims: a claim waiting in line keeps the oldest spare for the reconcile
/// to give it, and the claims behind it take the spares it does not need, at once, until none is left over.
#[tokio::test]
async fn a_waiting_claim_holds_back_only_the_spare_it_waits_for() {
    let w = World::new(t0());
    stocked(&w, "ci", 3, 3);
    planned(&w, "ci");
    w.store.put("ci", Item::Claim(Box::new(Claim::new("first", BOB, t0()))));
    let deps = w.default_deps(900);
    let mut given = BTreeSet::new();
    for claim in ["second", "third"] {
        let (status, body) = call(&deps, "PUT", &format!("/pools/ci/claims/{claim}"), Some(ALICE), None).await;
        assert_eq!(status, 201, "{claim} waited behind `first` with spares to spare: {body}");
        given.insert(body["cluster"]["id"].as_str().expect("a cluster").to_owned());
    }
    assert_eq!(given, BTreeSet::from(["ci-00001".to_owned(), "ci-00002".to_owned()]), "the oldest is first's");
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/fourth", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "ci-00000 is first's: {body}");
}

/// A CI fan-out that meets a claim already waiting: every claim of the burst still gets its spare at once, and
/// the spare the waiting claim is owed stays free for the reconcile to give it.
#[tokio::test]
async fn a_burst_behind_a_waiting_claim_is_served_at_once_from_the_spares_it_leaves() {
    let w = World::with_hook(t0(), Arc::new(Interleave), 7);
    stocked(&w, "ci", 51, 51);
    planned(&w, "ci");
    w.store.put("ci", Item::Claim(Box::new(Claim::new("early", BOB, t0() - TimeDelta::seconds(1)))));
    let deps = w.default_deps(900);
    let answers = futures::future::join_all((0..50).map(|i| {
        let deps = deps.clone();
        async move { call(&deps, "PUT", &format!("/pools/ci/claims/job-{i}"), Some(ALICE), None).await }
    }))
    .await;
    for (status, body) in &answers {
        assert_eq!(status, &201, "{body}");
    }
    let oldest = w.cluster("ci", "ci-00000").expect("cluster");
    assert_eq!(oldest.claim, None, "the oldest spare is the waiting claim's");
}

#[tokio::test]
async fn claims_in_the_same_second_ask_for_one_reconcile_and_the_next_second_for_another() {
    let w = World::new(t0());
    stocked(&w, "ci", 6, 6);
    let deps = w.default_deps(900);
    for i in 0..3 {
        call(&deps, "PUT", &format!("/pools/ci/claims/a{i}"), Some(ALICE), None).await;
    }
    w.time.advance(TimeDelta::seconds(1));
    for i in 0..3 {
        call(&deps, "PUT", &format!("/pools/ci/claims/b{i}"), Some(ALICE), None).await;
    }
    let asked = w.queue.take_reconcile();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(w.queue.deduplicated(), 4);
    // Each reads the pool only once its window has ended (and a little after, for the clocks).
    let windows: Vec<_> = asked.iter().filter_map(|m| m.not_before).collect();
    assert_eq!(windows, [t0() + TimeDelta::milliseconds(1_100), t0() + TimeDelta::milliseconds(2_100)]);
}

/// A burst past the partition's write units is throttled beyond the SDK's own retries: the claim backs off and
/// tries again within its budget instead of answering 503 while the pool has spares.
#[tokio::test]
async fn a_claim_throttled_by_the_table_tries_again_and_gets_its_spare() {
    let throttle = Refuse::of(Op::Write);
    throttle.first(5);
    let w = World::with_hook(t0(), throttle, 7);
    stocked(&w, "ci", 3, 3);
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 201, "{body}");
    let id = body["cluster"]["id"].as_str().expect("a cluster");
    assert_eq!(w.cluster("ci", id).expect("cluster").claim.as_deref(), Some("job"));
    assert_eq!(w.snapshot("ci").expect("pool").claims.len(), 1);
}

/// A page of the index whose spares are all refused (taken by other claims a moment ago, or, here, holding
/// inventory names just removed) is a lost try, not an empty pool: the claim draws another page and finds the
/// one spare left, instead of waiting in line (and making every later claim wait behind it).
#[tokio::test]
async fn a_claim_whose_page_of_spares_is_all_refused_tries_another_page() {
    let w = World::new(t0());
    let mut spec = aws_spec(41, 41);
    spec.inventory = Some(apiary_planner::Inventory::of(["kept"]));
    w.put_pool(pool("ci", spec, t0()));
    for i in 0..40 {
        let mut c = installed(&format!("ci-{i:02}"), DesiredPower::Running, t0());
        c.cluster_name = format!("removed-{i:02}");
        w.put_cluster("ci", c);
    }
    let mut kept = installed("ci-kept", DesiredPower::Running, t0());
    kept.cluster_name = "kept".into();
    w.put_cluster("ci", kept);
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some("ci-kept")), "{body}");
}

/// A pool cannot make Apiary's functions call their own neighbourhood: the URLs it names are refused by field,
/// unless the stack is the local one (whose fake clouds listen on loopback).
#[tokio::test]
async fn a_pool_naming_the_metadata_service_or_loopback_is_refused_by_field() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let hook = |url: &str| {
        json!({"size": 1, "platform": {"fake": {}}, "provisioner": {"webhook": {"url": url,
            "secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:installer"}}})
        .to_string()
    };
    for url in [
        "https://169.254.169.254/latest",
        "http://127.0.0.1:9000",
        "https://[::ffff:a9fe:a9fe]/",
        "https://2130706433/",
    ] {
        let (status, body) = call(&deps, "PUT", "/pools/w", Some(ADMIN), Some(&hook(url))).await;
        assert_eq!(
            (status, body["fields"][0]["field"].as_str()),
            (400, Some("provisioner.webhook.url")),
            "{url}: {body}"
        );
    }
    assert!(w.snapshot("w").is_none(), "nothing stored");
    let (status, body) =
        call(&deps, "PUT", "/pools/w", Some(ADMIN), Some(&hook("https://installer.example.com"))).await;
    assert_eq!(status, 201, "{body}");
    let local = w.deps(apiary_ports::Config {
        url_policy: apiary_planner::validate::UrlPolicy { local: true, ..Default::default() },
        ..apiary_ports::Config::named("apiary", &[ADMIN])
    });
    let (status, body) = call(&local, "PUT", "/pools/l", Some(ADMIN), Some(&hook("http://127.0.0.1:9000"))).await;
    assert_eq!(status, 201, "the local stack: {body}");
}

/// The pool's tick item, its next link due `due` after now, and a look that found a cluster come up at `up`.
fn tick_in(w: &World, due: i64, up: Option<Timestamp>) {
    let link = apiary_planner::Recheck { token: 1, due: w.now() + TimeDelta::seconds(due) };
    let tick = apiary_planner::power::tick::Tick { check: Some(link), up, ..Default::default() };
    w.store.put("ci", Item::Tick(Box::new(tick)));
}

#[tokio::test]
async fn a_waiting_claim_is_told_to_look_again_just_after_the_pools_next_tick() {
    let w = World::new(t0());
    let mut p = pool("ci", aws_spec(2, 1), t0());
    // The last reconcile had a claim waiting, and no Running spare to give it.
    p.status.pending_claims = 1;
    w.put_pool(p);
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "{body}");
    assert!(body.get("retryAfterSeconds").is_none(), "no tick: {body}");
    let look = || call(&deps, "GET", "/pools/ci/claims/job", Some(ALICE), None);
    let (status, body) = look().await;
    assert!(status == 200 && body.get("retryAfterSeconds").is_none(), "no tick, nothing to wait for: {body}");
    // The tick comes in 10 s: look 12 s from now, once what it finds is in the claim.
    tick_in(&w, 10, None);
    let before = w.store.stats();
    let (_, body) = look().await;
    assert_eq!(body["retryAfterSeconds"].as_f64(), Some(12.0), "{body}");
    assert_eq!((w.store.stats() - before).reads, 3, "the pool item, the claim and the tick item");
    // A look found a cluster come up a second ago: the reconcile may be giving it to this claim now.
    tick_in(&w, 10, Some(w.now() - TimeDelta::seconds(1)));
    let (_, body) = look().await;
    assert!(body.get("retryAfterSeconds").is_none(), "{body}");
    // Once a plan made since has written the pool's status (it gave the cluster to an older claim), the tick again.
    let mut p = w.snapshot("ci").expect("pool").pool;
    p.status.planned_at = Some(w.now());
    p.rev += 1;
    w.put_pool(p);
    let (_, body) = look().await;
    assert_eq!(body["retryAfterSeconds"].as_f64(), Some(12.0), "{body}");
    // A GET that waits sleeps to the hint too: one look at once, the next at its deadline.
    tick_in(&w, 10, None);
    let (start, before) = (w.now(), w.store.stats());
    let (_, body) = call(&deps, "GET", "/pools/ci/claims/job?wait=5s", Some(ALICE), None).await;
    assert_eq!((body["phase"].as_str(), body["retryAfterSeconds"].as_f64()), (Some("Pending"), Some(7.0)), "{body}");
    assert_eq!(w.now() - start, TimeDelta::seconds(5));
    assert_eq!((w.store.stats() - before).reads, 5, "the pool item, then the claim and the tick item twice");
    // A claim made while others wait for the tick is told so at once.
    tick_in(&w, 10, None);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/next", Some(BOB), None).await;
    assert_eq!((status, body["retryAfterSeconds"].as_f64()), (202, Some(12.0)), "{body}");
}

/// Pool `ci`'s one claim given a Running cluster, `ci-1`, as a reconcile would.
fn give_the_claim_a_cluster(w: &World) {
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let mut given = w.snapshot("ci").and_then(|s| s.claims.into_iter().next()).expect("the claim");
    given.cluster = Some("ci-1".into());
    given.rev += 1;
    w.store.put("ci", Item::Claim(Box::new(given)));
}

/// The hint is advice: a tick item that cannot be read costs the answer its `retryAfterSeconds` (the claimant
/// looks on its own gaps), never the answer itself, least of all for a claim already stored.
#[tokio::test]
async fn a_tick_item_that_cannot_be_read_costs_the_answer_its_hint_only() {
    let hook = Refuse::of(Op::Read);
    let w = World::with_hook(t0(), hook.clone(), 1);
    let mut p = pool("ci", aws_spec(2, 1), t0());
    p.status.pending_claims = 1;
    w.put_pool(p);
    tick_in(&w, 10, None);
    let deps = w.default_deps(900);
    call(&deps, "PUT", "/pools/ci/claims/first", Some(ALICE), None).await;
    let before = w.store.stats();
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/second", Some(ALICE), None).await;
    assert_eq!((status, body["retryAfterSeconds"].as_f64()), (202, Some(12.0)), "{body}");
    // The same claim's reads again (behind older ones waiting), the last of them (the tick item's) failing.
    hook.nth((w.store.stats() - before).reads as u32);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "stored, and told so: {body}");
    assert!(body.get("retryAfterSeconds").is_none(), "{body}");
    // A look: the pool item, the claim, then the tick item, which fails.
    hook.nth(3);
    let look = || call(&deps, "GET", "/pools/ci/claims/job", Some(ALICE), None);
    let (status, body) = look().await;
    assert_eq!((status, body["phase"].as_str()), (200, Some("Pending")), "{body}");
    assert!(body.get("retryAfterSeconds").is_none(), "{body}");
    let (_, body) = look().await;
    assert_eq!(body["retryAfterSeconds"].as_f64(), Some(12.0), "read again, the hint is back: {body}");
}

/// A claim stored whose reconcile could not be asked for is answered with an error (the queue did not take the
/// message), and the claimant's PUT again asks for it: nothing else would before the sweep's next full pass.
#[tokio::test]
async fn a_claim_put_again_while_pending_asks_for_the_reconcile_its_first_put_could_not() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    w.put_pool(pool("ci", aws_spec(2, 1), t0()));
    let deps = w.default_deps(900);
    hook.nth(1);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(w.snapshot("ci").expect("pool").claims.len(), 1, "the claim is stored");
    assert!(w.queue.take_reconcile().is_empty());
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Pending")), "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "asked for now");
}

/// The same for a claim served at once from a spare: the reconcile it asks for resumes the pool's next spare, and
/// its PUT again, answered 201, asks for it as the first did.
#[tokio::test]
async fn a_claim_served_at_once_put_again_asks_for_the_reconcile_its_first_put_could_not() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    w.put_pool(pool("ci", aws_spec(2, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    hook.nth(1);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").claim.as_deref(), Some("job"), "assigned");
    assert!(w.queue.take_reconcile().is_empty());
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some("ci-1")), "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "asked for now");
}

/// The same for a claimant's other asks: a power request or a release stored, whose message the queue did not
/// take, is answered 503, and asked again it sends the message (while the cluster has not got there, for power).
#[tokio::test]
async fn a_power_request_or_release_asked_again_sends_what_its_first_ask_could_not() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let (status, _) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 201);
    w.queue.take_reconcile();
    let hibernate = || call(&deps, "POST", "/pools/ci/claims/job/hibernate", Some(ALICE), None);
    hook.nth(1);
    let (status, body) = hibernate().await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(w.cluster("ci", "ci-1").expect("cluster").spec_power_state, Some(DesiredPower::Hibernating));
    assert!(w.queue.take_power().is_empty());
    let (status, _) = hibernate().await;
    assert_eq!(status, 202);
    assert_eq!(w.queue.take_power().len(), 1, "the power function is asked now");
    // Once the machines have stopped, asking again sends nothing.
    let mut stopped = w.cluster("ci", "ci-1").expect("cluster");
    stopped.power_state = Some(apiary_planner::PowerState::Hibernating);
    stopped.rev += 1;
    w.put_cluster("ci", stopped);
    let (status, _) = hibernate().await;
    assert_eq!(status, 202);
    assert!(w.queue.take_power().is_empty());
    // Past the claim's own ask's window (asks within one are one message).
    w.time.advance(TimeDelta::seconds(10));
    let release = || call(&deps, "DELETE", "/pools/ci/claims/job", Some(ALICE), None);
    hook.nth(1);
    let (status, body) = release().await;
    assert_eq!(status, 503, "{body}");
    assert!(w.queue.take_reconcile().is_empty());
    let (status, body) = release().await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Releasing")), "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "the reconcile is asked now");
}

/// A pool written whose reconcile the queue did not take is answered 503; the admin's PUT again of the same spec
/// asks for it, until a reconcile has planned that spec (a PUT of what is already planned asks nothing, so a
/// loop applying the same spec does not reconcile the pool at each apply).
#[tokio::test]
async fn a_pool_put_again_asks_for_the_reconcile_until_one_has_planned_its_spec() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    let deps = w.default_deps(900);
    let spec = json!({"size": 2, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1",
        "instanceType": "t3.large"}}})
    .to_string();
    let put = || call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec));
    let (status, _) = put().await;
    assert_eq!(status, 201);
    assert_eq!(w.queue.take_reconcile().len(), 1);
    let resized = spec.replace("\"size\":2", "\"size\":3");
    hook.nth(1);
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&resized)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(w.snapshot("ci").expect("pool").pool.spec.size, 3, "the new spec is stored");
    assert!(w.queue.take_reconcile().is_empty());
    let (status, _) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&resized)).await;
    assert_eq!(status, 200);
    assert_eq!(w.queue.take_reconcile().len(), 1, "asked for now");
    // Once a plan has been made for it, the same spec asks nothing.
    let mut p = w.snapshot("ci").expect("pool").pool;
    p.status.pool_version = apiary_planner::version::pool_version(&p.spec);
    p.rev += 1;
    w.put_pool(p);
    let (status, _) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&resized)).await;
    assert_eq!(status, 200);
    assert!(w.queue.take_reconcile().is_empty());
}

/// And an admin's unpause: stored, its nudge not taken, answered 503; asked again, it nudges and asks the pool's
/// reconcile (the pool counts its spares again).
#[tokio::test]
async fn an_unpause_asked_again_sends_what_its_first_ask_could_not() {
    let hook = Refuse::of(Op::Send);
    let w = World::with_hook(t0(), hook.clone(), 1);
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    let mut paused = installed("ci-1", DesiredPower::Running, t0());
    paused.power_paused = true;
    w.put_cluster("ci", paused);
    let deps = w.default_deps(900);
    let unpause = || call(&deps, "POST", "/pools/ci/clusters/ci-1/unpause", Some(ADMIN), None);
    hook.nth(1);
    let (status, body) = unpause().await;
    assert_eq!(status, 503, "{body}");
    assert!(!w.cluster("ci", "ci-1").expect("cluster").power_paused, "stored");
    assert!(w.queue.take_power().is_empty() && w.queue.take_reconcile().is_empty());
    let (status, body) = unpause().await;
    assert_eq!((status, body["powerPaused"].as_bool()), (200, None), "{body}");
    assert_eq!(w.queue.take_power().len(), 1, "the power function carries on");
    assert_eq!(w.queue.take_reconcile().len(), 1, "and the pool counts it");
}

#[tokio::test]
async fn no_hint_where_a_spare_may_be_given_or_the_claim_has_its_cluster() {
    let w = World::new(t0());
    let mut p = pool("ci", aws_spec(2, 1), t0());
    p.status.pending_claims = 1;
    p.status.ready = 1;
    w.put_pool(p);
    let deps = w.default_deps(900);
    let (status, _) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(status, 202);
    tick_in(&w, 10, None);
    let before = w.store.stats();
    let (_, body) = call(&deps, "GET", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert!(body.get("retryAfterSeconds").is_none(), "a spare to give: {body}");
    assert_eq!((w.store.stats() - before).reads, 2, "the tick item is not read");
    // Given its cluster: nothing to wait for.
    give_the_claim_a_cluster(&w);
    let before = w.store.stats();
    let (_, body) = call(&deps, "GET", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!(body["phase"].as_str(), Some("Ready"), "{body}");
    assert!(body.get("retryAfterSeconds").is_none(), "{body}");
    assert_eq!((w.store.stats() - before).reads, 3, "the pool item, the claim and its cluster");
}

const CAROL: &str = "arn:aws:iam::123456789012:user/carol";

/// The trail of claim `job` of pool `ci`, oldest first, as (type, principal, message).
async fn trail(deps: &Deps) -> Vec<(String, String, String)> {
    let (status, body) = call(deps, "GET", "/pools/ci/events?claim=job", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{body}");
    let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
    let mut events: Vec<_> = body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| (text(e, "type"), text(e, "principal"), text(e, "message")))
        .collect();
    events.reverse();
    events
}

/// Issue 59: a claim's `subjects` read, power, extend and release it as its owner does; only the owner and the
/// pool's admins change them; the trail says who did what.
#[tokio::test]
async fn a_claims_subjects_use_it_as_its_owner_does_and_only_the_owner_or_an_admin_changes_them() {
    let w = World::new(t0());
    w.put_pool(pool("ci", aws_spec(1, 1), t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let shared = json!({"lifetime": "2h", "subjects": [BOB]}).to_string();
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), Some(&shared)).await;
    assert_eq!((status, body["subjects"].clone()), (201, json!([BOB])), "{body}");
    let (status, _) = call(&deps, "GET", "/pools/ci/claims/job", Some(CAROL), None).await;
    assert_eq!(status, 403, "someone neither owner nor subject");
    let (status, body) = call(&deps, "GET", "/pools/ci/claims/job", Some(BOB), None).await;
    assert_eq!((status, body["phase"].as_str()), (200, Some("Ready")), "{body}");
    let (status, body) = call(&deps, "GET", "/pools/ci/claims", Some(BOB), None).await;
    assert_eq!((status, body["claims"].as_array().map(Vec::len)), (200, Some(1)), "a subject lists the claim: {body}");
    let (status, _) = call(&deps, "POST", "/pools/ci/claims/job/hibernate", Some(BOB), None).await;
    assert_eq!(status, 202);
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(BOB), Some(r#"{"lifetime": "3h"}"#)).await;
    assert_eq!((status, body["lifetime"].as_str()), (200, Some("3h")), "{body}");
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(BOB), Some(r#"{"subjects": []}"#)).await;
    assert_eq!(status, 403, "a subject does not change the subjects: {body}");
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(r#"{"subjects": []}"#)).await;
    assert_eq!((status, body["subjects"].clone()), (200, json!([])), "{body}");
    let (status, _) = call(&deps, "GET", "/pools/ci/claims/job", Some(BOB), None).await;
    assert_eq!(status, 403, "shared with nobody now");
    let roles = json!({"subjects": ["arn:aws:iam::123456789012:user/b*"]}).to_string();
    let (status, _) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ADMIN), Some(&roles)).await;
    assert_eq!(status, 200, "a pool admin changes them too, to a pattern");
    let (status, body) = call(&deps, "DELETE", "/pools/ci/claims/job", Some(BOB), None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Releasing")), "{body}");
    let (status, _) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(r#"{"lifetime": "4h"}"#)).await;
    assert_eq!(status, 409, "a claim being released is not changed");
    // Every act at the same instant here: the trail's order among them is the store's, so compared as a set.
    let mut said: Vec<(String, String)> =
        trail(&deps).await.into_iter().filter(|(k, ..)| k != "ClaimAssigned").map(|(k, who, _)| (k, who)).collect();
    said.sort();
    let who = |k: &str, p: &str| (k.to_owned(), p.to_owned());
    let mut want = vec![
        who("ClaimCreated", ALICE),
        who("PowerRequested", BOB),
        who("ClaimChanged", BOB),
        who("ClaimChanged", ALICE),
        who("ClaimChanged", ADMIN),
        who("ClaimReleaseRequested", BOB),
    ];
    want.sort();
    assert_eq!(said, want);
}

/// Issue 59: a held claim's lifetime changes, longer or shorter, within the pool's maximum; its end moves, the
/// reconcile is asked to plan it, and past a shortened end the claim ends as an expired one does.
#[tokio::test]
async fn a_claims_lifetime_changes_within_the_pools_maximum_and_a_shorter_one_ends_it() {
    let w = World::new(t0());
    let mut spec = aws_spec(1, 1);
    spec.claim_lifetime = Some(apiary_planner::ClaimLifetime {
        default: Some(apiary_planner::GoDuration::new("2h")),
        maximum: Some(apiary_planner::GoDuration::new("8h")),
    });
    w.put_pool(pool("ci", spec, t0()));
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    let deps = w.default_deps(900);
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job", Some(ALICE), None).await;
    assert_eq!((status, body["expiresAt"].as_str()), (201, Some("2026-11-23T11:00:00Z")), "{body}");
    w.queue.take_reconcile();
    for (change, field) in [
        (r#"{"lifetime": "9h"}"#, "lifetime"),
        (r#"{"lifetime": "soon"}"#, "lifetime"),
        (r#"{}"#, "body"),
        (r#"{"lifetime": "4h", "owner": "me"}"#, "owner"),
        (r#"{"subjects": ["bob"]}"#, "subjects[0]"),
        // Wider than an account: every caller of the stack, or every account's principals of a name.
        (r#"{"subjects": ["*"]}"#, "subjects[0]"),
        (r#"{"subjects": ["arn:aws:iam::123456789012:user/bob", "arn:aws:iam::*:role/ci"]}"#, "subjects[1]"),
        (r#"{"subjects": ["arn:aws:sts::1234567890??:assumed-role/ci/*"]}"#, "subjects[0]"),
        (r#"{"subjects": ["arn:*:iam::123456789012:role/ci"]}"#, "subjects[0]"),
    ] {
        let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(change)).await;
        assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some(field)), "{change}: {body}");
    }
    let many = json!({"subjects": vec![BOB; 21]}).to_string();
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(&many)).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("subjects")), "{body}");
    // A second on: the claim's own reconcile request was for the second it was made in.
    w.time.advance(TimeDelta::seconds(1));
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(r#"{"lifetime": "4h"}"#)).await;
    assert_eq!((status, body["expiresAt"].as_str()), (200, Some("2026-11-23T13:00:00Z")), "{body}");
    assert_eq!(w.queue.take_reconcile().len(), 1, "the reconcile plans the claim's new end");
    w.time.advance(TimeDelta::seconds(1));
    let (status, _) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(r#"{"lifetime": "4h"}"#)).await;
    assert_eq!(status, 200);
    assert_eq!(w.queue.take_reconcile().len(), 1, "asked again, it asks the reconcile again");
    let changes = trail(&deps).await.into_iter().filter(|(k, ..)| k == "ClaimChanged").collect::<Vec<_>>();
    assert_eq!(changes.len(), 1, "the same change again changes nothing: {changes:?}");
    assert_eq!(changes[0].2, "lifetime 4h (ends 2026-11-23T13:00:00Z)");
    let (status, body) = call(&deps, "PATCH", "/pools/ci/claims/job", Some(ALICE), Some(r#"{"lifetime": "1s"}"#)).await;
    assert_eq!((status, body["expiresAt"].as_str()), (200, Some("2026-11-23T09:00:01Z")), "{body}");
    let snap = w.snapshot("ci").expect("pool");
    let ends: Vec<_> = apiary_planner::plan(&snap, t0() + TimeDelta::seconds(2), 0)
        .actions
        .into_iter()
        .filter_map(|a| match a {
            apiary_planner::Action::ReleaseClaim { claim, reason, .. } => Some((claim, reason)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [("job".to_owned(), apiary_planner::ReleaseReason::Expired)]);
}

/// Issue 59: a pool names `notify` webhooks through the API, each URL judged by the stack's policy, and a claim
/// served at once sends its notification's delivery as soon as its write landed, without waiting on it.
#[tokio::test]
async fn a_claim_served_at_once_sends_its_notification_and_a_hook_url_is_judged_by_the_policy() {
    let w = World::new(t0());
    let deps = w.default_deps(900);
    let spec = |url: &str| {
        json!({"size": 1, "runningCount": 1, "platform": {"fake": {}}, "notify": [{"url": url,
            "secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook", "events": ["claim.assigned"]}]})
        .to_string()
    };
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec("https://169.254.169.254/x"))).await;
    assert_eq!((status, body["fields"][0]["field"].as_str()), (400, Some("notify[0].url")), "{body}");
    let (status, body) = call(&deps, "PUT", "/pools/ci", Some(ADMIN), Some(&spec("https://hooks.example.com/a"))).await;
    assert_eq!(status, 201, "{body}");
    w.put_cluster("ci", installed("ci-1", DesiredPower::Running, t0()));
    w.queue.take_power();
    let (status, body) = call(&deps, "PUT", "/pools/ci/claims/job1", Some(ALICE), None).await;
    assert_eq!(status, 201, "{body}");
    let sent: Vec<_> = w.queue.take_power().into_iter().filter_map(|m| m.notice).collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let notice = sent[0].event.notice.as_ref().expect("what the hook hears");
    assert_eq!((notice.kind.as_str(), notice.owner.as_deref()), ("claim.assigned", Some(ALICE)));
    assert_eq!((sent[0].event.claim.as_deref(), sent[0].hook, sent[0].attempt), (Some("job1"), 0, 1));
    assert!(w.receiver.posts().is_empty(), "the claim's answer waited on no receiver");
}
