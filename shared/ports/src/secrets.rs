//! The `Secrets` port: a cloud credential, read by the ARN a pool spec names.
//!
//! Only the power function reads secrets, and only to call a cloud. A secret's value is never written to the
//! table, a log line, a metric or an API answer: errors name the ARN, never the value. Before a secret is read for
//! a pool, its tags are read and must name the pool ([`apiary_planner::secret_tags`]).

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::Result;

/// Reads secrets (AWS Secrets Manager's `GetSecretValue`) and their tags (`DescribeSecret`).
#[async_trait]
pub trait Secrets: Send + Sync {
    /// The secret string stored under `arn`. A missing secret or a denied read is not retryable; throttling is.
    async fn secret(&self, arn: &str) -> Result<Secret>;

    /// The tags of the secret under `arn`, by key; its value is not read. Errors as [`Secrets::secret`].
    async fn tags(&self, arn: &str) -> Result<BTreeMap<String, String>>;
}

/// A secret's value. Its `Debug` shows nothing, so it cannot reach a log line by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it to a cloud.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_its_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(…)");
        assert_eq!(s.expose(), "hunter2");
    }
}
