//! The installer's ports in memory, for tests and the whole-system simulation: secrets read as the pool's secrets
//! are (only when tagged for the pool) and stored as the installer stores a cluster's credentials; pools' settings,
//! records (every write conditional on the revision, as DynamoDB's), accepted requests and install directories.

use std::collections::BTreeMap;
use std::sync::Mutex;

use apiary_planner::secret_tags::{APIARY_TAG, POOLS_TAG};
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::model::{PoolSettings, Record};
use crate::ports::{Dirs, Pools, Records, Replays, Vault};

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

/// Pools' settings in memory.
#[derive(Default)]
pub struct MemoryPools {
    settings: Mutex<BTreeMap<String, PoolSettings>>,
    templates: Mutex<BTreeMap<String, String>>,
}

impl MemoryPools {
    /// Sets `pool`'s settings.
    pub fn put(&self, pool: &str, settings: PoolSettings) {
        self.settings.lock().unwrap_or_else(|e| e.into_inner()).insert(pool.to_owned(), settings);
    }

    /// Keeps install-config template `text` under `name`.
    pub fn put_template(&self, name: &str, text: &str) {
        self.templates.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_owned(), text.to_owned());
    }
}

#[async_trait]
impl Pools for MemoryPools {
    async fn settings(&self, pool: &str) -> Result<Option<PoolSettings>> {
        crate::service::pool_name(pool).map_err(Error::Config)?;
        Ok(self.settings.lock().unwrap_or_else(|e| e.into_inner()).get(pool).cloned())
    }

    async fn template(&self, name: &str) -> Result<Option<String>> {
        crate::config::template_name(name).map_err(Error::Config)?;
        Ok(self.templates.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned())
    }
}

/// Records in memory, each write conditional on the revision read.
#[derive(Default)]
pub struct MemoryRecords(Mutex<BTreeMap<String, Record>>);

impl MemoryRecords {
    /// Every record held, by id.
    pub fn all(&self) -> BTreeMap<String, Record> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[async_trait]
impl Records for MemoryRecords {
    async fn get(&self, id: &str) -> Result<Option<Record>> {
        Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned())
    }

    async fn put(&self, record: &Record, expected: Option<u64>) -> Result<bool> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(&record.id).map(|r| r.revision) != expected {
            return Ok(false);
        }
        held.insert(record.id.clone(), record.clone());
        Ok(true)
    }

    async fn delete(&self, id: &str, expected: u64) -> Result<bool> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(id).map(|r| r.revision) != Some(expected) {
            return Ok(false);
        }
        held.remove(id);
        Ok(true)
    }

    async fn list(&self, pool: &str) -> Result<Vec<Record>> {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Ok(held.values().filter(|r| r.pool == pool).cloned().collect())
    }
}

/// Accepted requests in memory: each id's digest and expiry.
#[derive(Default)]
pub struct MemoryReplays(Mutex<BTreeMap<String, (String, i64)>>);

#[async_trait]
impl Replays for MemoryReplays {
    async fn accept(&self, id: &str, digest: &str, now: i64, expires: i64) -> Result<bool> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if held.get(id).is_some_and(|(seen, until)| *until >= now && seen != digest) {
            return Ok(false);
        }
        held.retain(|_, (_, until)| *until >= now);
        held.insert(id.to_owned(), (digest.to_owned(), expires));
        Ok(true)
    }
}

/// Install directories in memory: each cluster's files by path.
#[derive(Default)]
pub struct MemoryDirs(Mutex<BTreeMap<String, BTreeMap<String, Vec<u8>>>>);

impl MemoryDirs {
    /// The clusters that have a directory.
    pub fn clusters(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }
}

#[async_trait]
impl Dirs for MemoryDirs {
    async fn write(&self, id: &str, file: &str, bytes: &[u8]) -> Result<()> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.entry(id.to_owned()).or_default().insert(file.to_owned(), bytes.to_vec());
        Ok(())
    }

    async fn read(&self, id: &str, file: &str) -> Result<Option<Vec<u8>>> {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Ok(held.get(id).and_then(|files| files.get(file)).cloned())
    }

    async fn clear(&self, id: &str) -> Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        Ok(())
    }
}
