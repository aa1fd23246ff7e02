//! Secrets in memory, for tests: read as the pool's secrets are (only when tagged for the pool) and stored as the
//! installer stores a cluster's credentials.

use std::collections::BTreeMap;
use std::sync::Mutex;

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::ports::Vault;

/// A secret's value and tags.
type Held = (String, BTreeMap<String, String>);

/// Secrets by ARN, with their tags.
#[derive(Default)]
pub struct MemorySecrets {
    held: Mutex<BTreeMap<String, Held>>,
}

impl MemorySecrets {
    /// Adds secret `name` holding `value`, tagged for `pools`; answers its ARN.
    pub fn add(&self, name: &str, value: &str, pools: &[&str]) -> String {
        let arn = arn(name);
        let tags =
            BTreeMap::from([(APIARY_TAG.to_owned(), "true".to_owned()), (POOLS_TAG.to_owned(), pools.join(" "))]);
        self.lock().insert(arn.clone(), (value.to_owned(), tags));
        arn
    }

    /// The value of `arn`, if held.
    pub fn value(&self, arn: &str) -> Option<String> {
        self.lock().get(arn).map(|(v, _)| v.clone())
    }

    /// The ARNs held.
    pub fn arns(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn arn(name: &str) -> String {
    format!("arn:aws:secretsmanager:us-east-1:123456789012:secret:{name}")
}

#[async_trait]
impl Secrets for MemorySecrets {
    async fn secret(&self, arn: &str) -> Result<Secret> {
        let held = self.lock().get(arn).map(|(v, _)| Secret::new(v.clone()));
        held.ok_or_else(|| Error::service("secretsmanager:GetSecretValue", format!("no secret {arn}"), false))
    }

    async fn tags(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        let held = self.lock().get(arn).map(|(_, t)| t.clone());
        held.ok_or_else(|| Error::service("secretsmanager:DescribeSecret", format!("no secret {arn}"), false))
    }
}

#[async_trait]
impl Vault for MemorySecrets {
    async fn store(&self, name: &str, value: &str, pool: &str) -> Result<String> {
        Ok(self.add(name, value, &[pool]))
    }

    async fn remove(&self, arn: &str) -> Result<()> {
        self.lock().remove(arn);
        Ok(())
    }
}
