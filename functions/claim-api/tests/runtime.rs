//! The claim API's Lambda binary as Lambda runs it: it asks the Runtime API for each invocation, is handed AWS's own
//! event documents (API Gateway's REST proxy event with IAM authorization, a function URL's request with IAM
//! authorization, and without), and posts its answer back; the answer is held to what API Gateway's Lambda proxy
//! integration and a function URL accept. A field either does not know, or one of the wrong type, is API Gateway's
//! 502 "Malformed Lambda proxy response", and the handler's own tests never see it: they call the handler, not the
//! runtime's encoding of its answer.
#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{json, Map, Value};

/// Lambda's Runtime API, as far as a function's runtime uses it: events handed out one at a time, answers kept.
#[derive(Default)]
struct RuntimeApi {
    events: Mutex<VecDeque<(String, Value)>>,
    answers: Mutex<Vec<(String, Result<Value, String>)>>,
}

async fn runtime_api(api: Arc<RuntimeApi>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, hyper::Error> {
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await?.to_bytes();
    let ok = |status: u16, body: Bytes| Response::builder().status(status).body(Full::new(body)).unwrap();
    if path == "/2018-06-01/runtime/invocation/next" {
        loop {
            let next = api.events.lock().unwrap().pop_front();
            if let Some((id, event)) = next {
                let deadline = chrono::Utc::now().timestamp_millis() + 30_000;
                let res = Response::builder()
                    .header("lambda-runtime-aws-request-id", &id)
                    .header("lambda-runtime-deadline-ms", deadline.to_string())
                    .header(
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:claim-api",
                    )
                    .header(
                        "lambda-runtime-trace-id",
                        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
                    )
                    .body(Full::new(Bytes::from(event.to_string())))
                    .unwrap();
                return Ok(res);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let parts: Vec<&str> = path.trim_start_matches("/2018-06-01/runtime/invocation/").split('/').collect();
    let answer = match parts.as_slice() {
        [id, "response"] => (id.to_string(), Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))),
        [id, "error"] => (id.to_string(), Err(String::from_utf8_lossy(&body).into_owned())),
        _ => ("init".to_owned(), Err(format!("{path}: {}", String::from_utf8_lossy(&body)))),
    };
    api.answers.lock().unwrap().push(answer);
    Ok(ok(202, Bytes::from_static(b"{\"status\":\"OK\"}")))
}

/// The claim API's binary, run against a Runtime API handing it `events`; the answer to each, by request id.
async fn invoke(events: Vec<(&str, Value)>) -> Vec<(String, Result<Value, String>)> {
    let api = Arc::new(RuntimeApi::default());
    let count = events.len();
    api.events.lock().unwrap().extend(events.into_iter().map(|(id, e)| (id.to_owned(), e)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = api.clone();
    let server = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let api = served.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| runtime_api(api.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    // Lambda's environment, and a deployment's settings, with an endpoint that answers nothing: a request that reads
    // the table is answered as a store outage is.
    let mut function = std::process::Command::new(env!("CARGO_BIN_EXE_claim-api"))
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "claim-api")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/claim-api")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/29/[$LATEST]0123456789abcdef")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "ASIAEXAMPLEKEY123456")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("AWS_SESSION_TOKEN", "token")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("APIARY_STACK", "apiary")
        .env("APIARY_TABLE", "apiary-table")
        .env("APIARY_RECONCILE_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/apiary-reconcile.fifo")
        .env("APIARY_RECONCILE_QUEUE_ARN", "arn:aws:sqs:us-east-1:123456789012:apiary-reconcile.fifo")
        .env("APIARY_POWER_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/apiary-power")
        .env("APIARY_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/apiary-scheduler")
        .env("APIARY_SCHEDULE_PREFIX", "apiary-")
        .env("APIARY_ADMINS", "arn:aws:iam::111122223333:role/platform-admin")
        .env("APIARY_STACK_ID", "arn:aws:cloudformation:us-east-1:123456789012:stack/apiary/0f1e2d3c")
        .env("APIARY_METRICS", "off")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the claim API's binary");
    for _ in 0..500 {
        if api.answers.lock().unwrap().len() >= count {
            break;
        }
        if let Ok(Some(status)) = function.try_wait() {
            panic!("the function exited ({status}): {:?}", api.answers.lock().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = function.kill();
    let _ = function.wait();
    server.abort();
    let answers = api.answers.lock().unwrap().clone();
    answers
}

/// The fields a proxy answer may have, for API Gateway's REST proxy integration (payload 1.0: any other field is a
/// malformed answer, a 502) and a function URL (payload 2.0; a URL reads an answer with a `statusCode` by these fields
/// and passes over others, such as the empty `multiValueHeaders` lambda_http writes in both formats).
const REST_FIELDS: &[&str] = &["statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded"];
const URL_FIELDS: &[&str] = &["statusCode", "headers", "body", "isBase64Encoded", "cookies", "multiValueHeaders"];

/// `answer` held to the proxy response format `fields` allows; its status, and its body as JSON.
fn accepted(answer: &Value, fields: &[&str]) -> (u16, Value) {
    let object: &Map<String, Value> = answer.as_object().unwrap_or_else(|| panic!("not an object: {answer}"));
    for key in object.keys() {
        assert!(fields.contains(&key.as_str()), "{key} is no field of the proxy response: {answer}");
    }
    let status = object["statusCode"].as_u64().unwrap_or_else(|| panic!("statusCode is not an integer: {answer}"));
    assert!((100..600).contains(&status), "{answer}");
    let strings = |v: &Value| v.as_object().is_some_and(|m| m.values().all(Value::is_string));
    assert!(object.get("headers").is_none_or(strings), "headers are strings: {answer}");
    if let Some(many) = object.get("multiValueHeaders") {
        let lists =
            many.as_object().unwrap().values().all(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
        assert!(lists, "multiValueHeaders are lists of strings: {answer}");
    }
    if let Some(cookies) = object.get("cookies") {
        assert!(cookies.as_array().is_some_and(|a| a.iter().all(Value::is_string)), "{answer}");
    }
    let encoded =
        object.get("isBase64Encoded").map_or(Some(false), Value::as_bool).expect("isBase64Encoded is a boolean");
    let body = object.get("body").map_or(Some(""), Value::as_str).expect("body is a string");
    let bytes =
        if encoded { base64::engine::general_purpose::STANDARD.decode(body).expect("base64") } else { body.into() };
    let content_type = object
        .get("headers")
        .and_then(|h| h.as_object())
        .and_then(|h| h.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-type")))
        .and_then(|(_, v)| v.as_str())
        .or_else(|| object.get("multiValueHeaders").and_then(|h| h["content-type"][0].as_str()))
        .unwrap_or_default();
    assert!(content_type.starts_with("application/json"), "content-type {content_type:?}: {answer}");
    (status as u16, serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("body is not JSON ({e}): {answer}")))
}

fn rest_event(method: &str, path: &str, body: Option<&str>) -> Value {
    let text = include_str!("fixtures/apigw-rest-iam-assumed-role.json");
    let mut event: Value = serde_json::from_str(text).unwrap();
    event["httpMethod"] = json!(method);
    event["path"] = json!(path);
    event["requestContext"]["httpMethod"] = json!(method);
    event["requestContext"]["path"] = json!(format!("/prod{path}"));
    event["body"] = body.map_or(Value::Null, |b| json!(b));
    event
}

fn url_event(method: &str, path: &str, who: Option<&str>) -> Value {
    let text = include_str!("fixtures/function-url-iam.json");
    let mut event: Value = serde_json::from_str(text).unwrap();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["method"] = json!(method);
    event["requestContext"]["http"]["path"] = json!(path);
    match who {
        Some(arn) => event["requestContext"]["authorizer"]["iam"]["userArn"] = json!(arn),
        None => event["requestContext"]["authorizer"] = Value::Null,
    }
    event["body"] = Value::Null;
    event
}

#[tokio::test]
async fn the_runtime_hands_aws_events_to_the_api_and_its_answers_are_what_api_gateway_and_urls_accept() {
    let answers = invoke(vec![
        ("rest-version", rest_event("GET", "/version", None)),
        // The stack's admin (a session of the role APIARY_ADMINS names) making a pool while the table cannot be
        // reached: an error's answer is a proxy answer too.
        ("rest-unavailable", rest_event("PUT", "/pools/ci", Some(r#"{"size": -1, "platform": {"fake": {}}}"#))),
        ("rest-unknown", rest_event("GET", "/nothing/here", None)),
        ("url-version", url_event("GET", "/version", Some("arn:aws:iam::123456789012:user/alice"))),
        ("url-unsigned", url_event("GET", "/me", None)),
    ])
    .await;
    let answer = |id: &str| -> &Value {
        let (_, a) = answers.iter().find(|(i, _)| i == id).unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"));
        a.as_ref().unwrap_or_else(|e| panic!("{id}: the runtime was told an error: {e}"))
    };
    let (status, body) = accepted(answer("rest-version"), REST_FIELDS);
    assert_eq!((status, body["version"].as_str()), (200, Some(apiary_ports::VERSION)));
    let (status, body) = accepted(answer("rest-unavailable"), REST_FIELDS);
    assert_eq!((status, body["error"].as_str()), (503, Some("Unavailable")), "{body}");
    let (status, body) = accepted(answer("rest-unknown"), REST_FIELDS);
    assert_eq!(status, 404, "{body}");
    let (status, _) = accepted(answer("url-version"), URL_FIELDS);
    assert_eq!(status, 200);
    let (status, body) = accepted(answer("url-unsigned"), URL_FIELDS);
    assert_eq!(status, 403, "{body}");
}
