//! What the installer's tests share: a request signed as Apiary signs it, and the installer's answer to it.

use apiary_installer::service::Installer;
use bytes::Bytes;
use serde_json::Value;

/// The `webhook-id` Apiary's client gives `method path` (`shared/clouds/src/webhook.rs`): the cluster, the
/// operation and the attempt (the body's, else the first), or the pool of a list and the request's time.
pub fn id_of(method: &str, path: &str, body: &Value, now: i64) -> String {
    if let Some(pool) = path.strip_prefix("/clusters?pool=") {
        return format!("{pool}.list.{now}");
    }
    let cluster = path.rsplit('/').next().unwrap_or_default();
    let op = match method {
        "PUT" => "PutCluster",
        "DELETE" => "DeleteCluster",
        _ => "GetCluster",
    };
    format!("{cluster}.{op}.{}", body["attempt"].as_u64().unwrap_or(1))
}

/// `method path` with the JSON `body` (none for `Null`), signed with `key` per Standard Webhooks as Apiary signs
/// it, at `now`, as `id`.
pub fn signed_as(key: &str, method: &str, path: &str, body: &Value, id: &str, now: i64) -> http::Request<Bytes> {
    let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
    let signature = standardwebhooks::Webhook::new(key).expect("key").sign(id, now, &body).expect("signed");
    http::Request::builder()
        .method(method)
        .uri(format!("https://installer.example.com/apiary{path}"))
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(Bytes::from(body))
        .expect("request")
}

/// `method path` with the JSON `body` (none for `Null`), signed with `key` now, as Apiary's client signs it.
pub fn signed(key: &str, method: &str, path: &str, body: &Value) -> http::Request<Bytes> {
    let now = chrono::Utc::now().timestamp();
    signed_as(key, method, path, body, &id_of(method, path, body, now), now)
}

/// The installer's answer to `req`: its status and JSON body. What it logged and each error it answered are kept
/// for the scan for leaked secrets (`apiary_fakeclouds::canary`).
pub async fn answer(installer: &Installer, req: http::Request<Bytes>) -> (u16, Value) {
    let copy = apiary_fakeclouds::canary::log_file("installer-tests")
        .and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
    apiary_aws::logging::init_with_copy("installer-tests", copy);
    let what = format!("{} {}", req.method(), req.uri().path());
    let res = installer.handle(req).await;
    let status = res.status().as_u16();
    if status >= 400 {
        let body = String::from_utf8_lossy(res.body());
        apiary_fakeclouds::canary::keep("errors", "installer-tests", &format!("{what} {status} {body}"));
    }
    (status, serde_json::from_slice(res.body()).expect("a JSON answer"))
}
