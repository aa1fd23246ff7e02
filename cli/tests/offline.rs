//! The command line without the emulator: its outputs against golden files in `tests/golden/` (tables, `export`
//! lines, the watch view, an imported Hive pool, the help), and a signed request as a server receives it.
//! `APIARY_BLESS=1 cargo test -p apiary-cli --test offline` rewrites the golden files after an intended change
//! (then read the diff).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

use apiary_cli::render::{self, ClaimView};
use apiary_planner::{Cluster, Timestamp};
use serde_json::{json, Value};

fn golden(name: &str, actual: &str) {
    // The directory cargo runs the test from, not the one it was built in: a build cache shared by two checkouts
    // would otherwise compare against the other checkout's files.
    let dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let path = dir.join("tests/golden").join(name);
    if std::env::var_os("APIARY_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (APIARY_BLESS=1 writes it)", path.display()));
    assert!(actual == expected, "{name} differs from its golden file:\n--- expected\n{expected}\n--- actual\n{actual}");
}

fn now() -> Timestamp {
    "2026-11-24T12:00:00Z".parse().expect("time")
}

fn pool() -> Value {
    json!({
        "name": "ci",
        "spec": {"size": 3, "runningCount": 1, "maxSize": 6, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "m5.xlarge"}}},
        "status": {"poolVersion": "v1", "size": 3, "runningCount": 1, "ready": 1, "standby": 1, "installing": 0,
            "broken": 1, "stale": 0, "claimed": 1, "deleting": 0, "pendingClaims": 2,
            "conditions": [{"type": "CapacityAvailable", "status": "False", "reason": "MaxSizeReached",
                "message": "6 clusters, maxSize 6", "lastTransitionTime": "2026-11-24T11:00:00Z"}]},
        "createdAt": "2026-11-20T09:30:00Z",
        "rev": 7
    })
}

fn clusters() -> Vec<Cluster> {
    serde_json::from_value(json!([
        {"id": "ci-a1b2c", "clusterName": "ci-a1b2c", "infraId": "ci-a1b2c-x7k2p", "createdAt": "2026-11-24T09:00:00Z",
         "installedAt": "2026-11-24T09:40:00Z", "powerState": "Running", "specPowerState": "Running",
         "claim": "build-41", "claimedAt": "2026-11-24T11:50:00Z"},
        {"id": "ci-d3e4f", "clusterName": "foo", "infraId": "foo-q9w8e", "createdAt": "2026-11-24T11:15:00Z",
         "installedAt": "2026-11-24T11:55:00Z", "powerState": "Hibernating", "specPowerState": "Hibernating"},
        {"id": "ci-g5h6i", "clusterName": "ci-g5h6i", "infraId": "ci-g5h6i-r4t5y", "createdAt": "2026-11-23T08:00:00Z",
         "installedAt": "2026-11-23T08:40:00Z", "powerState": "WaitingForNodes", "specPowerState": "Running",
         "brokenAt": "2026-11-24T11:58:00Z", "conditions": [{"type": "Hibernating", "status": "False",
         "reason": "FailedToStart", "message": "timed out after 10m", "lastTransitionTime": "2026-11-24T11:58:00Z"}]},
        {"id": "ci-j7k8l", "clusterName": "ci-j7k8l", "infraId": "ci-j7k8l-u6i7o", "createdAt": "2026-11-24T11:59:30Z"}
    ]))
    .expect("clusters")
}

fn claim() -> Value {
    json!({
        "pool": "ci", "name": "build-41", "owner": "arn:aws:iam::123456789012:role/ci-runner", "phase": "Ready",
        "createdAt": "2026-11-24T11:50:00Z", "assignedAt": "2026-11-24T11:50:01Z", "lifetime": "2h",
        "expiresAt": "2026-11-24T13:50:01Z",
        "cluster": {"id": "ci-a1b2c", "clusterName": "ci-a1b2c", "infraId": "ci-a1b2c-x7k2p", "powerState": "Running",
            "outputs": {"apiUrl": "https://api.ci-a1b2c.ci.example.com:6443", "kubeconfigSecretArn":
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci-a1b2c-kubeconfig-AbCdEf"},
            "machines": [{"id": "i-0a1", "privateIp": "10.0.1.10", "publicIp": "54.1.2.3"},
                {"id": "i-0a2", "privateIp": "10.0.1.11"}]},
        "conditions": []
    })
}

fn claims() -> Vec<ClaimView> {
    let pending = json!({"pool": "ci", "name": "build-42", "owner": "arn:aws:iam::123456789012:role/ci-runner",
        "phase": "Pending", "createdAt": "2026-11-24T11:59:00Z"});
    let resuming = json!({"pool": "ci", "name": "nightly", "owner": "arn:aws:iam::123456789012:user/alice",
        "phase": "Assigned", "createdAt": "2026-11-24T11:57:00Z",
        "cluster": {"id": "ci-d3e4f", "clusterName": "foo", "infraId": "foo-q9w8e", "powerState": "StartingMachines"}});
    [claim(), pending, resuming].into_iter().map(|v| serde_json::from_value(v).expect("claim")).collect()
}

#[test]
fn pool_list_table() {
    let mut deleting = pool();
    deleting["name"] = json!("old");
    deleting["spec"]["platform"] = json!({"gcp": {}});
    deleting["deletionRequestedAt"] = json!("2026-11-24T11:00:00Z");
    golden("pool-list.txt", &render::pools_table(&[pool(), deleting]));
}

#[test]
fn pool_get_table() {
    golden("pool-get.txt", &render::pool_table(&pool(), now()));
}

/// A team's pool shows who may claim from it and who administers it.
#[test]
fn pool_get_table_of_a_pool_with_an_access_list() {
    let mut p = pool();
    p["spec"]["access"] = json!({"claimants": ["arn:aws:iam::111111111111:role/team-a-ci", "222222222222"],
        "admins": ["arn:aws:iam::111111111111:user/ann"]});
    golden("pool-get-access.txt", &render::pool_table(&p, now()));
}

/// `pool events`: newest first, with who caused each and why.
#[test]
fn pool_events_table() {
    let events = vec![
        json!({"time": "2026-11-24T11:58:00Z", "type": "ClusterRemoved", "cluster": "ci-7fk2q",
            "message": "its machines are gone and its item deleted"}),
        json!({"time": "2026-11-24T11:50:00Z", "type": "ClusterDeleting", "cluster": "ci-7fk2q",
            "message": "broken (FailedToStart: machines did not start within 15m), to be replaced"}),
        json!({"time": "2026-11-24T10:00:00Z", "type": "ClaimCreated", "claim": "build-42",
            "principal": "arn:aws:sts::111111111111:assumed-role/team-a-ci/job-42", "message": "lifetime 2h"}),
        json!({"time": "2026-11-24T09:00:00Z", "type": "PoolChanged", "principal": "arn:aws:iam::111111111111:user/ann",
            "message": "changed runningCount, size"}),
    ];
    golden("pool-events.txt", &render::events_table(&events, now()));
}

/// `whoami`: the caller, whether it is a stack admin, and the pools it may use.
#[test]
fn whoami_table() {
    let me = json!({"principal": "arn:aws:sts::111111111111:assumed-role/team-a-ci/job-17", "stackAdmin": false,
        "defaultPoolAccess": "open", "claim": ["shared", "team-a"], "administer": []});
    golden("whoami.txt", &render::me_table(&me));
}

/// A pool in another account shows its role and the ExternalId the role must require, and why it was refused.
#[test]
fn pool_get_table_of_a_pool_in_another_account() {
    let mut p = pool();
    p["spec"]["platform"]["aws"]["roleArn"] = json!("arn:aws:iam::210987654321:role/apiary-member-ci");
    p["status"]["externalId"] = json!("apiary-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ci");
    p["status"]["conditions"] = json!([{"type": "AuthenticationFailure", "status": "True",
        "reason": "AuthenticationFailed", "lastTransitionTime": "2026-11-24T11:00:00Z", "message":
        "cannot assume role arn:aws:iam::210987654321:role/apiary-member-ci with ExternalId apiary-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ci in us-east-1: AccessDenied: not authorized"}]);
    golden("pool-get-member.txt", &render::pool_table(&p, now()));
}

#[test]
fn pool_clusters_table() {
    golden("pool-clusters.txt", &render::clusters_table(&clusters(), now()));
}

#[test]
fn claim_list_table() {
    golden("claim-list.txt", &render::claims_table(&claims(), now()));
}

#[test]
fn claim_get_table() {
    golden("claim-get.txt", &render::claim_table(&claims()[0], now()));
}

#[test]
fn claim_env_lines() {
    golden("claim-env.txt", &render::claim_env(&claims()[0]));
    // A claim still waiting has no cluster variables.
    golden("claim-env-pending.txt", &render::claim_env(&claims()[1]));
}

#[test]
fn claim_env_lines_survive_the_shell() {
    // Every line, evaluated by a real shell, gives back the value it quoted (outputs are the installer's text).
    let mut view = claims()[0].clone();
    if let Some(c) = view.cluster.as_mut() {
        c.outputs.insert("note".into(), "it's $HOME `date` \"x\"".into());
    }
    let script = format!("{}printf '%s' \"$APIARY_OUTPUT_NOTE\"", render::claim_env(&view));
    let out = std::process::Command::new("sh").arg("-c").arg(&script).output().expect("sh");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $HOME `date` \"x\"");
}

#[test]
fn pool_watch_view() {
    golden("pool-watch.txt", &render::watch_view(&pool(), &clusters(), &claims(), now()));
}

#[test]
fn an_imported_hive_pool_as_yaml() {
    let manifest: Value = serde_saphyr::from_str(HIVE).expect("manifest");
    let import = apiary_cli::hive::translate(&manifest, None, None).expect("translated");
    let mut text =
        render::document(render::Format::Yaml, &json!({"name": import.name, "spec": import.spec})).expect("yaml");
    text.push_str("# not carried over\n");
    for (field, why) in &import.dropped {
        text.push_str(&format!("# {field}: {why}\n"));
    }
    text.push_str("# still needed\n");
    for (field, why) in &import.needed {
        text.push_str(&format!("# {field}: {why}\n"));
    }
    text.push_str("# Apiary options left unset\n");
    for (field, what) in &import.notes {
        text.push_str(&format!("# {field}: {what}\n"));
    }
    golden("import-hive.txt", &text);
}

#[test]
fn an_import_names_the_sizing_options_hive_has_not_unless_the_base_sets_them() {
    let manifest: Value = serde_saphyr::from_str(HIVE).expect("manifest");
    let noted = |base: Option<&Value>| -> Vec<String> {
        let import = apiary_cli::hive::translate(&manifest, base, None).expect("translated");
        import.notes.into_iter().map(|(field, _)| field).collect()
    };
    assert_eq!(noted(None), ["adaptiveRunningCount", "adaptiveRunningCount.keepFresh", "resumeCanaries"]);
    let base = json!({"adaptiveRunningCount": {"instantShare": 0.95, "keepFresh": true}});
    assert_eq!(noted(Some(&base)), ["resumeCanaries"]);
    let base = json!({"adaptiveRunningCount": {"instantShare": 0.95}});
    assert_eq!(noted(Some(&base)), ["adaptiveRunningCount.keepFresh", "resumeCanaries"]);
}

#[test]
fn an_import_is_converted_without_an_api_or_credentials() {
    let dir = std::env::temp_dir().join(format!("apiary-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("clusterpool.yaml");
    std::fs::write(&file, HIVE).expect("manifest");
    let out = bare_apiary().args(["pool", "import"]).arg(&file).output().expect("apiary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let manifest: Value = serde_saphyr::from_str(HIVE).expect("manifest");
    let import = apiary_cli::hive::translate(&manifest, None, None).expect("translated");
    let yaml =
        render::document(render::Format::Yaml, &json!({"name": import.name, "spec": import.spec})).expect("yaml");
    assert_eq!(String::from_utf8_lossy(&out.stdout), yaml);
    assert!(stderr.starts_with("not carried over from the ClusterPool:\n"), "{stderr}");
    // Applying it is what needs the API.
    let out = bare_apiary().args(["pool", "import", "--apply"]).arg(&file).output().expect("apiary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("say where the API is"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_help_lists_the_commands_and_the_exit_codes() {
    // The help shows the values of the environment variables it names: none here.
    let out = bare_apiary().arg("--help").output().expect("apiary");
    assert!(out.status.success());
    golden("help.txt", &String::from_utf8_lossy(&out.stdout));
}

/// A ClusterPool as a platform team's repository holds one (Hive's v1 fields, including ones that do not map).
pub const HIVE: &str = include_str!("golden/clusterpool.yaml");

/// One request as a server received it: the request line, the headers (names in lower case) and the body.
struct Received {
    line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }
}

/// Serves one request on a loopback port, answering `answer` with `status`.
fn serve_one(status: u16, answer: &'static str) -> (u16, std::thread::JoinHandle<Received>) {
    let (port, server) = serve(vec![(status, answer)]);
    (port, std::thread::spawn(move || server.join().expect("served").remove(0).0))
}

/// Serves one request for each of `answers` on a loopback port, in turn, each answered with its status and body
/// on a connection of its own: each request as received, and when it was.
fn serve(answers: Vec<(u16, &'static str)>) -> (u16, std::thread::JoinHandle<Vec<(Received, std::time::Instant)>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let server = std::thread::spawn(move || {
        let mut received = vec![];
        for (status, answer) in answers {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            let at = std::time::Instant::now();
            let mut headers = vec![];
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).expect("header");
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                let (k, v) = h.split_once(':').expect("header");
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
            let length =
                headers.iter().find(|(k, _)| k == "content-length").map_or(0, |(_, v)| v.parse().expect("length"));
            let mut body = vec![0; length];
            reader.read_exact(&mut body).expect("body");
            let response = format!(
                "HTTP/1.1 {status} OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            reader.get_mut().write_all(response.as_bytes()).expect("answer");
            received.push((Received { line: line.trim_end().to_owned(), headers, body }, at));
        }
        received
    });
    (port, server)
}

/// `apiary args…` with static AWS credentials in its environment and no other AWS configuration.
fn run_signed(args: &[&str]) -> std::process::Output {
    bare_apiary()
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        .env("AWS_SESSION_TOKEN", "session-token-example")
        .output()
        .expect("apiary")
}

#[test]
fn a_signed_claim_request_carries_the_signature_of_exactly_what_it_sends() {
    let claim = r#"{"pool":"ci","name":"build-7","owner":"arn:aws:iam::123456789012:role/ci","phase":"Pending"}"#;
    let (port, server) = serve_one(202, claim);
    let api = format!("http://127.0.0.1:{port}/v1");
    // A loopback address is signed when asked (an API Gateway reached through a tunnel).
    let out = run_signed(&[
        "--api",
        &api,
        "--auth",
        "sigv4",
        "--region",
        "eu-west-1",
        "claim",
        "ci",
        "build-7",
        "--lifetime",
        "2h",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = server.join().expect("served");
    assert_eq!(got.line, "PUT /v1/pools/ci/claims/build-7 HTTP/1.1");
    assert_eq!(got.body, br#"{"lifetime":"2h"}"#);
    assert_eq!(got.header("host"), format!("127.0.0.1:{port}"));
    assert_eq!(got.header("x-amz-security-token"), "session-token-example");
    assert_eq!(got.header("x-apiary-principal"), "", "a signed request names no local caller");
    let date = got.header("x-amz-date");
    let authorization = got.header("authorization");
    assert!(
        authorization.starts_with(&format!("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/eu-west-1/execute-api/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=", &date[..8])),
        "{authorization}"
    );
    // Signing what the server received, at the time the request says, gives the signature it carries: the method,
    // path, host and body were sent as they were signed.
    let time = chrono::NaiveDateTime::parse_from_str(date, "%Y%m%dT%H%M%SZ").expect("x-amz-date").and_utc();
    let credentials = aws_credential_types::Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some("session-token-example".into()),
        None,
        "test",
    );
    let expected = apiary_cli::sign::signature_headers(
        "PUT",
        &format!("http://127.0.0.1:{port}/v1/pools/ci/claims/build-7"),
        &got.body,
        &credentials,
        "eu-west-1",
        "execute-api",
        time.into(),
    )
    .expect("signed");
    let expected = expected.iter().find(|(k, _)| k == "authorization").map(|(_, v)| v.as_str());
    assert_eq!(Some(authorization), expected);
}

/// `apiary claim ci NAME --wait 1m` against a server answering `answers` in turn: the requests it made, each with
/// when it came.
fn waited_on(name: &str, answers: Vec<(u16, &'static str)>) -> Vec<(Received, std::time::Instant)> {
    let (port, server) = serve(answers);
    let api = format!("http://127.0.0.1:{port}");
    let out = bare_apiary()
        .args(["--api", &api, "--as", "arn:aws:iam::123456789012:role/ci", "claim", "ci", name, "--wait", "1m"])
        .args(["-o", "json"])
        .output()
        .expect("apiary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    server.join().expect("served")
}

/// The gaps between the requests `got`.
fn gaps(got: &[(Received, std::time::Instant)]) -> Vec<std::time::Duration> {
    got.windows(2).map(|w| w[1].1 - w[0].1).collect()
}

#[test]
fn a_claim_waited_on_is_looked_at_with_requests_answered_at_once_soon_then_less_often() {
    let pending = r#"{"pool":"ci","name":"build-7","owner":"arn:aws:iam::123456789012:role/ci","phase":"Pending"}"#;
    let ready = r#"{"pool":"ci","name":"build-7","owner":"arn:aws:iam::123456789012:role/ci","phase":"Ready"}"#;
    let got = waited_on("build-7", vec![(202, pending), (200, pending), (200, pending), (200, pending), (200, ready)]);
    let lines: Vec<&str> = got.iter().map(|(r, _)| r.line.as_str()).collect();
    // No `?wait=`: a request that waited would hold the claim API function, billed by the second.
    assert_eq!(
        lines,
        [
            "PUT /pools/ci/claims/build-7 HTTP/1.1",
            "GET /pools/ci/claims/build-7 HTTP/1.1",
            "GET /pools/ci/claims/build-7 HTTP/1.1",
            "GET /pools/ci/claims/build-7 HTTP/1.1",
            "GET /pools/ci/claims/build-7 HTTP/1.1",
        ]
    );
    // Each look after its gap (apiary_planner::waiting): 0.25, 0.5, 1, then 2 s. A gap is never shorter.
    let gaps = gaps(&got);
    for (gap, least) in gaps.iter().zip([250, 500, 1000, 2000]) {
        assert!(gap.as_millis() >= least - 20, "{gaps:?}");
    }
}

#[test]
fn a_claim_waited_on_is_looked_at_again_when_the_api_says() {
    let pending = r#"{"pool":"ci","name":"build-8","owner":"arn:aws:iam::123456789012:role/ci","phase":"Pending"}"#;
    let told = r#"{"pool":"ci","name":"build-8","owner":"arn:aws:iam::123456789012:role/ci","phase":"Pending",
        "retryAfterSeconds":1.5}"#;
    let ready = r#"{"pool":"ci","name":"build-8","owner":"arn:aws:iam::123456789012:role/ci","phase":"Ready"}"#;
    let got = waited_on("build-8", vec![(202, pending), (200, told), (200, ready)]);
    assert_eq!(got.len(), 3);
    // The first look after its own gap (0.25 s); the next when the answer said (1.5 s), not its own 0.5 s.
    let gaps = gaps(&got);
    assert!(gaps[0].as_millis() >= 230 && gaps[1].as_millis() >= 1480, "{gaps:?}");
}

#[test]
fn a_function_url_is_signed_for_lambda_in_its_own_region() {
    // The stack's ApiUrl with ClaimEndpoint=function-url, as Lambda gives it (with its closing slash).
    let out =
        run_signed(&["--api", "https://a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6.lambda-url.ap-south-1.on.aws/", "endpoint"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout.trim_end(),
        "https://a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6.lambda-url.ap-south-1.on.aws\n\
         signed with the caller's AWS credentials (SigV4, lambda, ap-south-1)"
    );
}

#[test]
fn without_credentials_a_signed_request_is_not_sent_and_exits_3() {
    let out = bare_apiary()
        .args(["--api", "https://a1b2c3.execute-api.us-east-1.amazonaws.com/v1", "pool", "list"])
        .output()
        .expect("apiary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.starts_with("apiary: no AWS credentials"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
}

/// The binary with none of Apiary's settings and no AWS configuration from this machine: no credentials, no
/// profiles, no region, no instance metadata.
fn bare_apiary() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
    for (var, _) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if name.starts_with("APIARY_") || name.starts_with("AWS_") {
            command.env_remove(&var);
        }
    }
    command
        .env("AWS_CONFIG_FILE", "/nonexistent/config")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    command
}

/// `-o kubeconfig` prints a Ready claim's kubeconfig as the claim API hands it out (`GET …/credentials`); `-o env`
/// never holds a credential. A claim not Ready has none to print.
#[test]
fn a_ready_claims_kubeconfig_and_credentials_come_from_the_claim_api() {
    let ready = r#"{"pool":"ocp","name":"job","owner":"arn:aws:iam::123456789012:user/alice","phase":"Ready",
        "cluster":{"id":"ocp-1","clusterName":"ocp-1","infraId":"ocp-1-x","outputs":{"kubeconfigSecretArn":"arn:x"}}}"#;
    let credentials = r#"{"pool":"ocp","claim":"job","cluster":"ocp-1",
        "credentials":{"kubeconfig":"apiVersion: v1\nkind: Config\n","kubeadminPassword":"aaaaa-bbbbb"}}"#;
    let (port, server) = serve(vec![(200, ready), (200, credentials)]);
    let api = format!("http://127.0.0.1:{port}");
    let who = "arn:aws:iam::123456789012:user/alice";
    let out = run_signed(&["--api", &api, "--as", who, "-o", "kubeconfig", "claim", "get", "ocp", "job"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "apiVersion: v1\nkind: Config\n");
    let asked: Vec<String> = server.join().expect("served").into_iter().map(|(r, _)| r.line).collect();
    assert_eq!(asked, ["GET /pools/ocp/claims/job HTTP/1.1", "GET /pools/ocp/claims/job/credentials HTTP/1.1"]);

    // `-o env` keeps credentials out of the `export` lines a job's shell traces may print: one request only.
    let (port, server) = serve_one(200, ready);
    let api = format!("http://127.0.0.1:{port}");
    let out = run_signed(&["--api", &api, "--as", who, "-o", "env", "claim", "get", "ocp", "job"]);
    let env = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(env.contains("export APIARY_OUTPUT_KUBECONFIG_SECRET_ARN='arn:x'") && !env.contains("aaaaa"), "{env}");
    server.join().expect("served");

    let pending = r#"{"pool":"ocp","name":"job","owner":"arn:aws:iam::123456789012:user/alice","phase":"Pending"}"#;
    let (port, server) = serve_one(200, pending);
    let api = format!("http://127.0.0.1:{port}");
    let out = run_signed(&["--api", &api, "--as", who, "-o", "kubeconfig", "claim", "get", "ocp", "job"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("come once it is Ready"), "{out:?}");
    server.join().expect("served");
}

/// `pool apply --diff` of a team's pools: a release bump that replaces two unclaimed clusters, a new pool, one
/// unchanged, one pruned.
#[test]
fn pool_apply_diff_report() {
    let release = |tag: &str| json!(format!("quay.io/openshift-release-dev/ocp-release:{tag}-x86_64"));
    let reports = [
        json!({"name": "ocp-aws", "said": "would change", "fields": [
            {"field": "release", "before": release("4.18.1"), "after": release("4.18.2")},
            {"field": "labels.owner", "before": null, "after": "ci"},
        ], "replaced": [{"cluster": "ocp-blue", "reason": "Stale"}, {"cluster": "ocp-green", "reason": "Stale"}]}),
        json!({"name": "ocp-gcp", "said": "would be created", "fields": [], "replaced": []}),
        json!({"name": "ocp-azure", "said": "unchanged", "fields": [], "replaced": []}),
        json!({"name": "ocp-old", "said": "would be deleted", "fields": [], "replaced": []}),
    ];
    golden("pool-apply-diff.txt", &render::apply_report(&reports));
}
