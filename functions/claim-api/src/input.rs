//! Reading requests: names in the path, JSON bodies with every misfit named by its field.

use apiary_planner::validate::{strictly, validate_name};
use lambda_http::Body;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `value` as the name of a pool or claim (a DNS label), or 400 naming `field`.
pub(crate) fn name(field: &str, value: &str) -> Result<(), ApiError> {
    Ok(validate_name(field, value)?)
}

fn body_bytes(body: &Body) -> &[u8] {
    match body {
        Body::Empty => b"",
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
    }
}

/// Parses a JSON body, naming each field that does not fit, and each the type does not have (the stored types
/// take unknown fields, a later release's; a caller may not send them: [`strictly`]); an empty body is `empty`,
/// or 400 if that is `None`.
pub(crate) fn parse_body<T: DeserializeOwned>(body: &Body, empty: Option<T>) -> Result<T, ApiError> {
    let bytes = body_bytes(body);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return empty.ok_or_else(|| ApiError::field("body", "a JSON body is required"));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        // serde_json adds the position; the message says enough.
        let inner = e.to_string();
        ApiError::field("body", inner.split(" at line ").next().unwrap_or(&inner).to_owned())
    })?;
    strictly(&value).map_err(|errors| match errors.as_slice() {
        [one] => ApiError::field(&one.field, one.message.clone()),
        _ => ApiError::fields("InvalidRequest", errors.into_iter().map(|e| (e.field, e.message)).collect()),
    })
}
