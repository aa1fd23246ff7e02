//! Reading requests: names in the path, JSON bodies with every misfit named by its field.

use apiary_planner::validate::validate_name;
use lambda_http::Body;
use serde::Deserialize;

use crate::error::ApiError;

/// `value` as the name of a pool or claim (a DNS label), or 400 naming `field`.
pub(crate) fn name(field: &str, value: &str) -> Result<(), ApiError> {
    validate_name(field, value).map_err(|e| ApiError::field(&e.field, e.message))
}

fn body_bytes(body: &Body) -> &[u8] {
    match body {
        Body::Empty => b"",
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
    }
}

/// Parses a JSON body, naming the field that does not fit; an empty body is `empty`, or 400 if that is `None`.
pub(crate) fn parse_body<T: for<'de> Deserialize<'de>>(body: &Body, empty: Option<T>) -> Result<T, ApiError> {
    let bytes = body_bytes(body);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return empty.ok_or_else(|| ApiError::field("body", "a JSON body is required"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let root = path == "." || path.is_empty();
        let inner = e.into_inner().to_string();
        // serde_json adds the position; the field path says more.
        let message = inner.split(" at line ").next().unwrap_or(&inner).to_owned();
        // A missing field is named by the message, not the path (which stops at its parent).
        let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next());
        let field = match (root, missing) {
            (true, Some(m)) => m.to_owned(),
            (false, Some(m)) => format!("{path}.{m}"),
            (true, None) => "body".to_owned(),
            (false, None) => path,
        };
        ApiError::field(&field, message)
    })
}
