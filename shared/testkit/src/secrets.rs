//! Secrets Manager in memory: secret strings and their tags by ARN.

use std::collections::BTreeMap;
use std::sync::Mutex;

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

/// A secret's value and its tags.
type Held = (String, BTreeMap<String, String>);

/// Secrets by ARN, each with its tags.
#[derive(Default)]
pub struct MemSecrets {
    held: Mutex<BTreeMap<String, Held>>,
}

impl MemSecrets {
    /// Stores `value` under `arn`, tagged `apiary=true` and `apiary:pools` with `pools` (as a stack's operator
    /// tags a secret for the pools that may use it).
    pub fn put(&self, arn: &str, value: &str, pools: &[&str]) {
        let tags = [(APIARY_TAG, "true".to_owned()), (POOLS_TAG, pools.join(" "))];
        let tags = tags.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        self.lock().insert(arn.to_owned(), (value.to_owned(), tags));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn not_found(op: &'static str, arn: &str) -> Error {
        Error::service(op, format!("ResourceNotFoundException: {arn}"), false)
    }
}

#[async_trait]
impl Secrets for MemSecrets {
    async fn secret(&self, arn: &str) -> Result<Secret> {
        const OP: &str = "secretsmanager:GetSecretValue";
        self.lock().get(arn).map(|(value, _)| Secret::new(value)).ok_or_else(|| Self::not_found(OP, arn))
    }

    async fn tags(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        const OP: &str = "secretsmanager:DescribeSecret";
        self.lock().get(arn).map(|(_, tags)| tags.clone()).ok_or_else(|| Self::not_found(OP, arn))
    }
}
