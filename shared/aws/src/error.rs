//! The adapters' one error type.

use std::error::Error as StdError;

/// What an adapter call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A conditional write lost: someone else acted first. Re-read and re-plan; never retry blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    /// An AWS call failed.
    #[error("{op}: {message}")]
    Aws {
        /// The operation, as `service:Action`.
        op: &'static str,
        /// The SDK's error with its context, for logs.
        message: String,
        /// Whether trying again later may succeed (throttling, 5xx, timeouts).
        retryable: bool,
        /// The SDK error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A stored item could not be read back as a domain type.
    #[error("item {key} does not decode: {source}")]
    Decode {
        /// The item's key.
        key: String,
        /// Why.
        #[source]
        source: serde_dynamo::Error,
    },
    /// A message body is not one of [`crate::messages`].
    #[error("message does not decode: {0}")]
    Message(#[from] serde_json::Error),
    /// The environment lacks a setting.
    #[error("configuration: {0}")]
    Config(String),
}

impl Error {
    /// Whether the operation may succeed if tried again (the message goes back to its queue).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Aws { retryable, .. } => *retryable,
            Error::Conflict(_) => true,
            Error::Decode { .. } | Error::Message(_) | Error::Config(_) => false,
        }
    }

    /// Wraps an SDK error of operation `op`.
    pub(crate) fn aws<E, R>(op: &'static str, err: aws_smithy_runtime_api::client::result::SdkError<E, R>) -> Self
    where
        E: StdError + Send + Sync + 'static + aws_smithy_types::error::metadata::ProvideErrorMetadata,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        use aws_smithy_runtime_api::client::result::SdkError;
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
        Error::Aws { op, message, retryable, source: Box::new(err) }
    }
}

/// Results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
