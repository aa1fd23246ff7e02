//! The API's error answers: JSON `{error, message, fields?}` with the status that says what went wrong.

#[cfg(doc)]
use apiary_ports::retry;
use apiary_ports::retry::LostCondition;
use apiary_ports::Error as StoreError;
use lambda_http::{Body, Response};
use serde_json::{json, Value};

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: u16,
    pub(crate) error: &'static str,
    pub(crate) message: String,
    pub(crate) fields: Vec<(String, String)>,
    /// A conditional write lost its condition ([`retried`] tries again).
    lost: bool,
}

impl ApiError {
    pub(crate) fn new(status: u16, error: &'static str, message: impl Into<String>) -> Self {
        Self { status, error, message: message.into(), fields: vec![], lost: false }
    }

    /// 400 naming one bad field.
    pub(crate) fn field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status: 400,
            error: "InvalidRequest",
            message: format!("{field}: {message}"),
            fields: vec![(field.into(), message)],
            lost: false,
        }
    }

    /// 400 naming every bad field of a document.
    pub(crate) fn fields(error: &'static str, fields: Vec<(String, String)>) -> Self {
        let message = fields.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join("; ");
        Self { status: 400, error, message, fields, lost: false }
    }

    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        Self::new(404, "NotFound", what)
    }

    pub(crate) fn forbidden(what: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", what)
    }

    pub(crate) fn conflict(what: impl Into<String>) -> Self {
        Self::new(409, "Conflict", what)
    }

    /// 503: lost races kept coming; the caller should try again.
    pub(crate) fn busy(what: impl Into<String>) -> Self {
        Self::new(503, "Unavailable", what)
    }

    /// After [`retry::REQUEST`] tries: a write that lost its condition every time is a 503 saying that `what` kept
    /// changing; any other error as it is.
    pub(crate) fn kept_changing(self, what: &str) -> Self {
        match self.lost {
            true => ApiError::busy(format!("{what} is changing too fast; try again")),
            false => self,
        }
    }
}

impl LostCondition for ApiError {
    fn lost_condition(&self) -> bool {
        self.lost
    }
}

/// A field the planner's rules refuse: 400 naming it.
impl From<apiary_planner::FieldError> for ApiError {
    fn from(e: apiary_planner::FieldError) -> Self {
        ApiError::field(&e.field, e.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.lost_condition() {
            return ApiError { lost: true, ..ApiError::busy("the service is busy; try again") };
        }
        tracing::error!(error = %e, retryable = e.is_retryable(), "store or queue error");
        match e {
            // Validation bounds every document below the limit; reaching it anyway is the request's size.
            StoreError::TooLarge { bytes, limit, .. } => ApiError::new(
                413,
                "TooLarge",
                format!("the stored document would be {bytes} bytes, over the limit of {limit}"),
            ),
            e if e.is_retryable() => ApiError::busy("the service is busy; try again"),
            _ => ApiError::new(500, "Internal", "internal error"),
        }
    }
}

/// A route's answer: a status and a JSON body, or an error.
pub(crate) type ApiResult = Result<(u16, Value), ApiError>;

/// The HTTP response of `result`.
pub(crate) fn respond(result: ApiResult) -> Response<Body> {
    let (status, body) = match result {
        Ok(ok) => ok,
        Err(e) => {
            let mut body = json!({"error": e.error, "message": e.message});
            if !e.fields.is_empty() {
                body["fields"] = e.fields.iter().map(|(f, m)| json!({"field": f, "message": m})).collect();
            }
            (e.status, body)
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::Text(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}
