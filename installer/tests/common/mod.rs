//! What the installer's tests share: a request signed as Apiary signs it, and the installer's answer to it.

use apiary_installer::service::Installer;
use bytes::Bytes;
use serde_json::Value;

/// `method path` with the JSON `body` (none for `Null`), signed with `key` per Standard Webhooks.
pub fn signed(key: &str, method: &str, path: &str, body: &Value) -> http::Request<Bytes> {
    let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
    let now = chrono::Utc::now().timestamp();
    let id = format!("msg_{now}_{method}_{}", path.len());
    let signature = standardwebhooks::Webhook::new(key).expect("key").sign(&id, now, &body).expect("signed");
    http::Request::builder()
        .method(method)
        .uri(format!("https://installer.example.com/apiary{path}"))
        .header("webhook-id", id)
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(Bytes::from(body))
        .expect("request")
}

/// The installer's answer to `req`: its status and JSON body.
pub async fn answer(installer: &Installer, req: http::Request<Bytes>) -> (u16, Value) {
    let res = installer.handle(req).await;
    (res.status().as_u16(), serde_json::from_slice(res.body()).expect("a JSON answer"))
}
