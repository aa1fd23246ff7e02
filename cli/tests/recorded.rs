//! `apiary stack check` against AWS's answers rather than the emulator's: a server replays the services' answers as
//! AWS's API references give them (`tests/fixtures/recorded`, README there), each in its own protocol (CloudFormation
//! and IAM in XML, SQS and DynamoDB in JSON, CloudWatch in CBOR), and the check must read them as a team's account
//! would answer: one role lacking one call, dead letters waiting, an alarm in ALARM, each a problem named.
#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/recorded");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// What the replaying server saw: each service's operations, in order.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

/// IAM's answer to one simulation: each action asked, allowed but for the power role's StartInstances.
fn simulation(form: &HashMap<String, String>) -> String {
    let role = form.get("PolicySourceArn").cloned().unwrap_or_default();
    let resource = form.get("ResourceArns.member.1").cloned().unwrap_or_else(|| "*".into());
    let mut members = String::new();
    for n in 1.. {
        let Some(action) = form.get(&format!("ActionNames.member.{n}")) else { break };
        let denied = role.contains("-PowerRole-") && action == "ec2:StartInstances";
        let matched = if denied {
            String::new()
        } else {
            "<member><SourcePolicyId>power</SourcePolicyId><SourcePolicyType>IAM Policy</SourcePolicyType>\
             <StartPosition><Line>1</Line><Column>109</Column></StartPosition>\
             <EndPosition><Line>1</Line><Column>330</Column></EndPosition></member>"
                .to_owned()
        };
        members += &fixture("member.xml")
            .replace("{matched}", &matched)
            .replace("{resource}", &resource)
            .replace("{decision}", if denied { "implicitDeny" } else { "allowed" })
            .replace("{action}", action);
    }
    fixture("simulate-principal-policy.xml").replace("{members}", &members)
}

fn cbor(json: &Value) -> Vec<u8> {
    let value: ciborium::Value = ciborium::Value::serialized(json).unwrap();
    let mut out = vec![];
    ciborium::into_writer(&value, &mut out).unwrap();
    out
}

async fn replay(
    endpoint: String,
    seen: Arc<Seen>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let target = req.headers().get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let service = auth.split("Credential=").nth(1).and_then(|c| c.split('/').nth(3)).unwrap_or("api").to_owned();
    let (content_type, answer): (&str, Vec<u8>) = match service.as_str() {
        "cloudformation" => ("text/xml", fixture("describe-stacks.xml").replace("{endpoint}", &endpoint).into()),
        "iam" => ("text/xml", simulation(&form).into()),
        "sqs" => {
            let url = serde_json::from_slice::<Value>(&body).unwrap()["QueueUrl"].as_str().unwrap_or("").to_owned();
            let waiting = if url.ends_with("-power-dlq") { "2" } else { "0" };
            ("application/x-amz-json-1.0", fixture("get-queue-attributes.json").replace("{waiting}", waiting).into())
        }
        "dynamodb" => {
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            ("application/x-amz-json-1.0", fixture("get-item.json").replace("{now}", &now).into())
        }
        "monitoring" => ("application/cbor", cbor(&serde_json::from_str(&fixture("describe-alarms.json")).unwrap())),
        _ if path == "/version" => ("application/json", br#"{"version":"0.3.0"}"#.to_vec()),
        _ => ("text/plain", b"not recorded".to_vec()),
    };
    let operation = match service.as_str() {
        "cloudformation" | "iam" => form.get("Action").cloned().unwrap_or_default(),
        "monitoring" => path.rsplit('/').next().unwrap_or_default().to_owned(),
        "api" | "execute-api" => path.clone(),
        _ => target.rsplit('.').next().unwrap_or_default().to_owned(),
    };
    seen.0.lock().unwrap().push(format!("{service} {operation}"));
    let mut res = Response::builder().header("content-type", content_type).header("x-amzn-requestid", "rec-1");
    if service == "monitoring" {
        res = res.header("smithy-protocol", "rpc-v2-cbor");
    }
    Ok(res.body(Full::new(Bytes::from(answer))).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_check_reads_aws_own_answers_and_names_each_problem_they_tell() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let (served, at) = (seen.clone(), endpoint.clone());
    let server = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (seen, at) = (served.clone(), at.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| replay(at.clone(), seen.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_apiary"));
    command
        .args(["-o", "json", "--auth", "sigv4", "--stack", "apiary", "stack", "check", "apiary"])
        .env_clear()
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    let out = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    server.abort();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_ne!(out.status.code(), Some(0), "problems fail the command: {report}");

    let findings = report["findings"].as_array().unwrap();
    let problems: Vec<String> = findings
        .iter()
        .filter(|f| f["ok"] == false)
        .map(|f| format!("{}: {}", f["what"].as_str().unwrap(), f["said"].as_str().unwrap()))
        .collect();
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert_eq!(report["problems"], 3);
    assert!(problems[0].starts_with("power: ec2:StartInstances, ec2:StopInstances, ec2:TerminateInstances on instance: ec2:StartInstances implicitDeny"), "{problems:#?}");
    assert!(problems[1].starts_with("queue power dead letters: 2 messages"), "{problems:#?}");
    assert!(
        problems[2].contains("apiary-reconcile-errors") && problems[2].contains("Threshold Crossed"),
        "{problems:#?}"
    );
    let said = |what: &str| findings.iter().find(|f| f["what"] == what).map(|f| f["said"].as_str().unwrap().to_owned());
    assert!(said("API /version").is_some_and(|s| s.starts_with("0.3.0")), "{report}");
    assert!(said("sweep").is_some_and(|s| s.starts_with("last full pass")), "{report}");

    // Every service was asked, IAM once for each listed call.
    let seen = seen.0.lock().unwrap().clone();
    let listed: Value = serde_json::from_str(apiary_cli::check::CALLS).unwrap();
    let entries: usize =
        ["claim-api", "reconcile", "power", "timeouts"].iter().map(|f| listed[f].as_array().map_or(0, Vec::len)).sum();
    // (The member accounts' roles are not asked of a stack that names none.)
    let simulations = seen.iter().filter(|s| *s == "iam SimulatePrincipalPolicy").count();
    assert_eq!(simulations, entries - 1, "{seen:?}");
    assert!(said("power: sts:AssumeRole on member-role").is_some_and(|s| s.starts_with("not asked")), "{report}");
    for asked in [
        "cloudformation DescribeStacks",
        "sqs GetQueueAttributes",
        "dynamodb GetItem",
        "monitoring DescribeAlarms",
        "execute-api /version",
    ] {
        assert!(seen.iter().any(|s| s == asked), "{asked} was not asked: {seen:?}");
    }
}
