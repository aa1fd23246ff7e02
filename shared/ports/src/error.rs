//! The ports' one error type, shared by every adapter so a handler decides retryability in one place.

use std::error::Error as StdError;

/// What a port call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A conditional write lost: someone else acted first. Re-read and re-plan; never retry blindly.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A call to a cloud service failed.
    #[error("{op}: {message}")]
    Service {
        /// The operation, as `service:Action` (`dynamodb:PutItem`, `sqs:SendMessage`, …).
        op: &'static str,
        /// The service's error with its context, for logs.
        message: String,
        /// Whether trying again later may succeed (throttling, 5xx, timeouts).
        retryable: bool,
        /// The underlying error, when there is one.
        #[source]
        source: Option<Box<dyn StdError + Send + Sync>>,
    },
    /// An item would exceed the table's item size limit ([`crate::store::MAX_ITEM_BYTES`]): refused before it
    /// reaches the table, never truncated.
    #[error("item {key} is {bytes} bytes, over the table's limit of {limit} bytes")]
    TooLarge {
        /// The item's key.
        key: String,
        /// Its size as the table counts it.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A stored item could not be read back as a domain type.
    #[error("item {key} does not decode: {source}")]
    Decode {
        /// The item's key.
        key: String,
        /// Why.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A message body is not one of [`crate::messages`].
    #[error("message does not decode: {0}")]
    Message(#[from] serde_json::Error),
    /// The environment lacks a setting, or a pool names a platform this process cannot drive.
    #[error("configuration: {0}")]
    Config(String),
    /// The credentials a pool names were refused: a role that cannot be assumed (not trusting Apiary, another
    /// ExternalId, a region not enabled). Trying again soon cannot mend it; the pool's `AuthenticationFailure`
    /// condition says why. The message names what was refused and the cloud's reason, never a credential.
    #[error("{0}")]
    Credentials(String),
}

impl Error {
    /// Whether the operation may succeed if tried again (the message goes back to its queue).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Service { retryable, .. } => *retryable,
            Error::Conflict(_) => true,
            Error::TooLarge { .. }
            | Error::Decode { .. }
            | Error::Message(_)
            | Error::Config(_)
            | Error::Credentials(_) => false,
        }
    }

    /// A failed call of `op` with no underlying error value (in-memory adapters, injected faults).
    pub fn service(op: &'static str, message: impl Into<String>, retryable: bool) -> Self {
        Error::Service { op, message: message.into(), retryable, source: None }
    }
}

/// Results of the ports.
pub type Result<T, E = Error> = std::result::Result<T, E>;
