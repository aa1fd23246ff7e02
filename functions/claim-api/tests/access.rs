//! Per-pool access through the API: two teams on one stack, each seeing, claiming from and changing only its own
//! pools; the stack's admins keep every right; the stack's default for pools that name nobody.
#![allow(missing_docs, clippy::unwrap_used)]

use apiary_planner::access::DefaultAccess;
use apiary_planner::{DesiredPower, PoolAccess, Timestamp};
use apiary_ports::{Config, Deps};
use apiary_testkit::fixtures::{aws_spec, installed, pool};
use apiary_testkit::{World, ADMIN};
use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

mod support;

/// Team A's CI role, as API Gateway names a caller that assumed it.
const A_CI: &str = "arn:aws:sts::111111111111:assumed-role/team-a-ci/job-17";
const A_LEAD: &str = "arn:aws:iam::111111111111:user/ann";
/// Team B: every principal of its account may claim.
const B_CI: &str = "arn:aws:sts::222222222222:assumed-role/builder/job-9";
const B_LEAD: &str = "arn:aws:iam::222222222222:user/ben";

fn t0() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time")
}

/// `method uri` as `who`.
async fn call(deps: &Deps, method: &str, uri: &str, who: &str, body: Option<&str>) -> (u16, Value) {
    support::call(deps, method, uri, Some(who), body).await
}

/// Pools `a` (team A's), `b` (team B's) and `shared` (no access list), each with one Running spare and one
/// hibernating.
fn two_teams(default: DefaultAccess) -> (World, Deps) {
    let w = World::new(t0());
    let access =
        |claimants: &str, admin: &str| PoolAccess { claimants: vec![claimants.into()], admins: vec![admin.into()] };
    for (name, access) in [
        ("a", Some(access("arn:aws:iam::111111111111:role/team-a-ci", A_LEAD))),
        ("b", Some(access("222222222222", B_LEAD))),
        ("shared", None),
    ] {
        let mut spec = aws_spec(2, 1);
        spec.access = access;
        w.put_pool(pool(name, spec, t0()));
        w.put_cluster(name, installed(&format!("{name}-1"), DesiredPower::Running, t0()));
        w.put_cluster(name, installed(&format!("{name}-2"), DesiredPower::Hibernating, t0()));
    }
    let deps = w.deps(Config { default_pool_access: default, ..Config::named("apiary", &[ADMIN]) });
    (w, deps)
}

fn names(body: &Value) -> Vec<String> {
    body["pools"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn two_teams_cannot_claim_from_read_or_change_each_others_pools() {
    let (w, deps) = two_teams(DefaultAccess::Open);
    for (who, visible) in [(A_CI, ["a", "shared"]), (A_LEAD, ["a", "shared"]), (B_CI, ["b", "shared"])] {
        let (status, body) = call(&deps, "GET", "/pools", who, None).await;
        assert_eq!((status, names(&body)), (200, visible.map(String::from).to_vec()), "{who}");
    }
    let (_, body) = call(&deps, "GET", "/pools", ADMIN, None).await;
    assert_eq!(names(&body), ["a", "b", "shared"]);

    // Team A's CI claims from its pool and from the shared one; team B's pool refuses it, saying why.
    let (status, body) = call(&deps, "PUT", "/pools/a/claims/job", A_CI, None).await;
    assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some("a-1")), "{body}");
    let (status, _) = call(&deps, "PUT", "/pools/shared/claims/job", A_CI, None).await;
    assert_eq!(status, 201);
    for (method, uri) in
        [("PUT", "/pools/b/claims/job"), ("GET", "/pools/b"), ("GET", "/pools/b/clusters"), ("GET", "/pools/b/claims")]
    {
        let (status, body) = call(&deps, method, uri, A_CI, None).await;
        assert_eq!(status, 403, "{method} {uri}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("pool b") && message.contains(A_CI), "{message}");
    }
    assert_eq!(w.snapshot("b").unwrap().claims.len(), 0, "a refused claim stores nothing");

    // A claimant does not administer; the pool's admin does, for its own pool only; only stack admins create.
    let mut changed = aws_spec(3, 1);
    changed.access = w.snapshot("a").unwrap().pool.spec.access;
    let changed = serde_json::to_string(&changed).unwrap();
    let (status, _) = call(&deps, "PUT", "/pools/a", A_CI, Some(&changed)).await;
    assert_eq!(status, 403);
    let (status, body) = call(&deps, "PUT", "/pools/a", A_LEAD, Some(&changed)).await;
    assert_eq!((status, body["spec"]["size"].as_i64()), (200, Some(3)), "{body}");
    let (status, _) = call(&deps, "PUT", "/pools/b", A_LEAD, Some(&changed)).await;
    assert_eq!(status, 403);
    assert_eq!(w.snapshot("b").unwrap().pool.spec.size, 2, "a refused change writes nothing");
    let (status, body) = call(&deps, "PUT", "/pools/new", A_LEAD, Some(&changed)).await;
    assert_eq!(status, 403, "{body}");
    assert!(w.snapshot("new").is_none());
    let (status, _) = call(&deps, "PUT", "/pools/shared", A_LEAD, Some(&changed)).await;
    assert_eq!(status, 403, "a pool without access is administered by stack admins only");

    // The pool's admin sees every claim of its pool and may act on them; the other team's admin may not.
    let (_, body) = call(&deps, "GET", "/pools/a/claims", A_LEAD, None).await;
    assert_eq!(body["claims"].as_array().unwrap().len(), 1, "{body}");
    let (_, body) = call(&deps, "GET", "/pools/shared/claims", B_CI, None).await;
    assert_eq!(body["claims"].as_array().unwrap().len(), 0, "a claimant sees only its own claims");
    for who in [B_LEAD, B_CI] {
        let (status, _) = call(&deps, "POST", "/pools/a/claims/job/hibernate", who, None).await;
        assert_eq!(status, 403, "{who}");
    }
    let (status, _) = call(&deps, "POST", "/pools/a/claims/job/hibernate", A_LEAD, None).await;
    assert_eq!(status, 202);
    for (who, status) in [(B_LEAD, 403), (A_CI, 403), (A_LEAD, 200)] {
        let (got, body) = call(&deps, "POST", "/pools/a/clusters/a-2/pause", who, None).await;
        assert_eq!(got, status, "{who}: {body}");
    }
    let (status, _) = call(&deps, "DELETE", "/pools/a", B_LEAD, None).await;
    assert_eq!(status, 403);
    let (status, _) = call(&deps, "DELETE", "/pools/a", A_LEAD, None).await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn me_says_who_the_caller_is_and_which_pools_it_may_claim_from_and_administer() {
    let (_, deps) = two_teams(DefaultAccess::Open);
    let (status, body) = call(&deps, "GET", "/me", A_LEAD, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "principal": A_LEAD,
            "stackAdmin": false,
            "defaultPoolAccess": "open",
            "claim": ["a", "shared"],
            "administer": ["a"],
        })
    );
    let (_, body) = call(&deps, "GET", "/me", ADMIN, None).await;
    assert_eq!((body["stackAdmin"].as_bool(), body["administer"].as_array().map(Vec::len)), (Some(true), Some(3)));
    let (status, _) = call(&deps, "POST", "/me", ADMIN, None).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn with_default_access_admins_a_pool_that_names_nobody_is_the_stack_admins_alone() {
    let (_, deps) = two_teams(DefaultAccess::Admins);
    let (_, body) = call(&deps, "GET", "/pools", B_CI, None).await;
    assert_eq!(names(&body), ["b"]);
    let (status, body) = call(&deps, "PUT", "/pools/shared/claims/job", B_CI, None).await;
    assert_eq!(status, 403);
    assert!(body["message"].as_str().unwrap().contains("DefaultPoolAccess is admins"), "{body}");
    let (_, body) = call(&deps, "GET", "/me", B_CI, None).await;
    assert_eq!((body["claim"].clone(), body["defaultPoolAccess"].clone()), (json!(["b"]), json!("admins")));
    let (status, _) = call(&deps, "PUT", "/pools/shared/claims/job", ADMIN, None).await;
    assert_eq!(status, 201);
}

/// Giving a cluster back is never refused: a claim's owner keeps reading, powering and releasing it after the
/// pool stops naming it, but makes no new claim.
#[tokio::test]
async fn an_owner_dropped_from_the_claimants_still_releases_its_claim_but_claims_no_more() {
    let (w, deps) = two_teams(DefaultAccess::Open);
    let (status, _) = call(&deps, "PUT", "/pools/a/claims/job", A_CI, None).await;
    assert_eq!(status, 201);
    let mut spec = w.snapshot("a").unwrap().pool.spec;
    spec.access = Some(PoolAccess { claimants: vec![], admins: vec![A_LEAD.into()] });
    let (status, body) = call(&deps, "PUT", "/pools/a", A_LEAD, Some(&serde_json::to_string(&spec).unwrap())).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = call(&deps, "PUT", "/pools/a/claims/another", A_CI, None).await;
    assert_eq!(status, 403);
    let (status, _) = call(&deps, "GET", "/pools/a/claims/job", A_CI, None).await;
    assert_eq!(status, 200);
    let (status, body) = call(&deps, "DELETE", "/pools/a/claims/job", A_CI, None).await;
    assert_eq!((status, body["phase"].as_str()), (202, Some("Releasing")));
}

#[tokio::test]
async fn a_malformed_access_list_is_refused_by_field_and_nothing_is_stored() {
    let (w, deps) = two_teams(DefaultAccess::Open);
    let spec = json!({
        "size": 1,
        "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3.large"}},
        "access": {"claimants": ["team-a"], "admins": ["arn:aws:iam::111111111111:role/teams/lead-*"]},
    });
    let (status, body) = call(&deps, "PUT", "/pools/c", ADMIN, Some(&spec.to_string())).await;
    assert_eq!(status, 400, "{body}");
    let fields: Vec<&str> = body["fields"].as_array().unwrap().iter().filter_map(|f| f["field"].as_str()).collect();
    assert_eq!(fields, ["access.claimants[0]", "access.admins[0]"]);
    assert!(w.snapshot("c").is_none());
    let typo = json!({
        "size": 1,
        "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3.large"}},
        "access": {"claimant": ["*"]},
    });
    let (status, body) = call(&deps, "PUT", "/pools/c", ADMIN, Some(&typo.to_string())).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("claimant"), "{body}");
}

/// The API Gateway event (REST API, IAM authorization) of a request signed by a session of `role` in account
/// 111122223333: AWS's own sample (`example-apigw-request.json` of the aws_lambda_events crate) with the identity API
/// Gateway writes for an assumed role — the session's ARN, never the role's.
fn assumed_role_event(method: &str, path: &str, body: Option<&str>) -> lambda_http::Request {
    let mut event: Value = serde_json::from_str(include_str!("fixtures/apigw-rest-iam-assumed-role.json")).unwrap();
    event["httpMethod"] = json!(method);
    event["path"] = json!(path);
    event["resource"] = json!("/{proxy+}");
    event["requestContext"]["httpMethod"] = json!(method);
    event["requestContext"]["path"] = json!(path);
    event["body"] = body.map_or(Value::Null, |b| json!(b));
    lambda_http::request::from_str(&event.to_string()).expect("API Gateway's event")
}

#[tokio::test]
async fn a_session_of_an_admin_role_is_a_stack_admin_as_the_readme_deploys_it() {
    let w = World::new(t0());
    // `make deploy ... PARAMS="AdminPrincipals=arn:aws:iam::111122223333:role/platform-admin"`, as the README says.
    let deps = w.deps(Config::named("apiary", &["arn:aws:iam::111122223333:role/platform-admin"]));
    let spec = json!({"size": 1, "platform": {"fake": {}}}).to_string();
    let answer = claim_api::handle(&deps, assumed_role_event("PUT", "/pools/made-by-admin", Some(&spec))).await;
    assert_eq!(answer.status(), 201, "{:?}", answer.body());
    // Another role of the account is not an admin.
    let mut other: Value = serde_json::from_str(include_str!("fixtures/apigw-rest-iam-assumed-role.json")).unwrap();
    other["requestContext"]["identity"]["userArn"] = json!("arn:aws:sts::111122223333:assumed-role/developer/dev");
    other["httpMethod"] = json!("PUT");
    other["path"] = json!("/pools/not-an-admin");
    other["body"] = json!(spec);
    let answer = claim_api::handle(&deps, lambda_http::request::from_str(&other.to_string()).unwrap()).await;
    assert_eq!(answer.status(), 403, "{:?}", answer.body());
}

#[tokio::test]
async fn admin_principals_take_the_access_lists_patterns() {
    let w = World::new(t0());
    for (pattern, caller, admin) in [
        ("111122223333", "arn:aws:sts::111122223333:assumed-role/anyone/s", true),
        ("arn:aws:iam::111122223333:role/platform-*", "arn:aws:sts::111122223333:assumed-role/platform-ops/s", true),
        ("arn:aws:iam::111122223333:user/root-admin", "arn:aws:iam::111122223333:user/root-admin", true),
        ("arn:aws:iam::111122223333:role/platform-*", "arn:aws:sts::444455556666:assumed-role/platform-ops/s", false),
    ] {
        let deps = w.deps(Config::named("apiary", &[pattern]));
        let (status, body) = call(&deps, "GET", "/me", caller, None).await;
        assert_eq!(status, 200);
        assert_eq!(body["stackAdmin"], json!(admin), "{pattern} for {caller}: {body}");
    }
}

/// A claim's credentials reach its owner, its subjects and its pool's admins, read by the claim API from the
/// secrets its cluster's outputs name (tagged for the pool); another claimant of the same pool is refused them.
#[tokio::test]
async fn a_claims_credentials_reach_its_owner_subjects_and_admins_and_no_other_claimant() {
    let (w, deps) = two_teams(DefaultAccess::Open);
    // Team B's account: its CI claims; a colleague of the same account may claim too, but not read this claim.
    let other = "arn:aws:iam::222222222222:user/bea";
    let kubeconfig = "arn:aws:secretsmanager:us-east-1:123456789012:secret:apiary-installer/b/b-1/kubeconfig-AbCdEf";
    let password = "arn:aws:secretsmanager:us-east-1:123456789012:secret:apiary-installer/b/b-1/password-AbCdEf";
    w.secrets.put(kubeconfig, "apiVersion: v1\nkind: Config\n", &["b"]);
    w.secrets.put(password, "aaaaa-bbbbb-ccccc-ddddd", &["b"]);
    let mut cluster = installed("b-1", DesiredPower::Running, t0());
    cluster.outputs.insert("kubeconfigSecretArn".into(), kubeconfig.into());
    cluster.outputs.insert("kubeadminPasswordSecretArn".into(), password.into());
    cluster.outputs.insert("apiUrl".into(), "https://api.b-1.example.com:6443".into());
    w.put_cluster("b", cluster);
    let (status, body) = call(&deps, "PUT", "/pools/b/claims/job", B_CI, None).await;
    assert_eq!((status, body["cluster"]["id"].as_str()), (201, Some("b-1")), "{body}");
    let (status, _) = call(
        &deps,
        "PATCH",
        "/pools/b/claims/job",
        B_CI,
        Some(r#"{"subjects": ["arn:aws:iam::333333333333:user/dev"]}"#),
    )
    .await;
    assert_eq!(status, 200);

    for who in [B_CI, "arn:aws:iam::333333333333:user/dev", B_LEAD, ADMIN] {
        let (status, body) = call(&deps, "GET", "/pools/b/claims/job/credentials", who, None).await;
        assert_eq!(status, 200, "{who}: {body}");
        assert_eq!(body["credentials"]["kubeconfig"], "apiVersion: v1\nkind: Config\n", "{who}");
        assert_eq!(body["credentials"]["kubeadminPassword"], "aaaaa-bbbbb-ccccc-ddddd", "{who}");
        assert_eq!(body["credentials"].as_object().map(|o| o.len()), Some(2), "only the secrets: {body}");
    }
    for who in [other, A_CI, A_LEAD] {
        let (status, body) = call(&deps, "GET", "/pools/b/claims/job/credentials", who, None).await;
        assert_eq!(status, 403, "{who}: {body}");
        assert!(!body.to_string().contains("aaaaa-bbbbb"), "{body}");
    }

    // A secret not tagged for the claim's pool is not read for it; a claim not Ready has none yet.
    w.secrets.put(password, "aaaaa-bbbbb-ccccc-ddddd", &["a"]);
    let (status, body) = call(&deps, "GET", "/pools/b/claims/job/credentials", B_CI, None).await;
    assert_eq!((status, body["error"].as_str()), (502, Some("CredentialsRefused")), "{body}");
    assert!(!body.to_string().contains("aaaaa-bbbbb"), "{body}");
    let (status, _) = call(&deps, "PUT", "/pools/b/claims/later", B_CI, None).await;
    assert_eq!(status, 202, "waits for the hibernated one");
    let (status, body) = call(&deps, "GET", "/pools/b/claims/later/credentials", B_CI, None).await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = call(&deps, "POST", "/pools/b/claims/job/credentials", B_CI, None).await;
    assert_eq!(status, 405);
}
