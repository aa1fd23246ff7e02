//! SDK errors as the ports' [`Error`]: the operation, its retry class and the SDK's own error kept as the source.

use std::error::Error as StdError;

use apiary_ports::Error;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// Wraps an SDK error of operation `op`: timeouts, dispatch failures, throttling and 5xx are retryable.
pub fn aws<E, R>(op: &'static str, err: SdkError<E, R>) -> Error
where
    E: StdError + Send + Sync + 'static + ProvideErrorMetadata,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let retryable = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => true,
        SdkError::ServiceError(e) => {
            let code = e.err().code().unwrap_or_default();
            code.contains("Throttl")
                || code.contains("RequestLimitExceeded")
                || code.contains("InternalServer")
                || code.contains("ServiceUnavailable")
                || code == "ProvisionedThroughputExceededException"
                || code == "InsufficientInstanceCapacity"
        }
        _ => false,
    };
    let message = aws_smithy_types::error::display::DisplayErrorContext(&err).to_string();
    Error::Service { op, message, retryable, source: Some(Box::new(err)) }
}

/// An SDK request that could not be built (a missing required field): a bug, never retried.
pub fn build(op: &'static str, err: impl std::fmt::Display) -> Error {
    Error::service(op, format!("request could not be built: {err}"), false)
}
