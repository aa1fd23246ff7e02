//! Secrets Manager in memory: secret strings by ARN.

use std::collections::BTreeMap;
use std::sync::Mutex;

use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

/// Secrets by ARN.
#[derive(Default)]
pub struct MemSecrets {
    held: Mutex<BTreeMap<String, String>>,
}

impl MemSecrets {
    /// Stores `value` under `arn`.
    pub fn put(&self, arn: &str, value: &str) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).insert(arn.to_owned(), value.to_owned());
    }
}

#[async_trait]
impl Secrets for MemSecrets {
    async fn secret(&self, arn: &str) -> Result<Secret> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(arn).map(Secret::new).ok_or_else(|| {
            Error::service("secretsmanager:GetSecretValue", format!("ResourceNotFoundException: {arn}"), false)
        })
    }
}
