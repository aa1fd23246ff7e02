//! What the claim API's tests share: a request through the handler, as API Gateway would pass it.

use apiary_ports::Deps;
use serde_json::Value;

/// `method uri` signed by `who` (none: unsigned) with `body`, through the handler: the status and the JSON answer
/// (a body that is not JSON comes back as a string).
pub async fn call(deps: &Deps, method: &str, uri: &str, who: Option<&str>, body: Option<&str>) -> (u16, Value) {
    let req = claim_api::api_request(method, uri, who, body.unwrap_or_default().as_bytes().to_vec());
    handle(deps, req).await
}

/// `req` through the handler: the status and the JSON answer (a body that is not JSON comes back as a string).
pub async fn handle(deps: &Deps, req: lambda_http::Request) -> (u16, Value) {
    let res = claim_api::handle(deps, req).await;
    let status = res.status().as_u16();
    let text = match res.into_body() {
        lambda_http::Body::Text(t) => t,
        lambda_http::Body::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
        lambda_http::Body::Empty => String::new(),
    };
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}
