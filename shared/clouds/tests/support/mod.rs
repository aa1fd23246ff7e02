//! What the clouds' adapter tests share: secrets in memory, a cluster and a pool spec to aim at.

#![allow(dead_code)]

pub mod installer;

use std::collections::HashMap;

use apiary_planner::{Cluster, Platform, PoolSpec};
use apiary_ports::platform::Target;
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

/// The ARN the tests' credentials are stored under.
pub const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/cloud-AbCdEf";

/// Secrets by ARN, in memory.
pub struct MemSecrets(pub HashMap<String, String>);

impl MemSecrets {
    /// `value` under [`ARN`].
    pub fn one(value: String) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self([(ARN.to_owned(), value)].into_iter().collect()))
    }
}

#[async_trait]
impl Secrets for MemSecrets {
    async fn secret(&self, arn: &str) -> Result<Secret> {
        self.0
            .get(arn)
            .map(Secret::new)
            .ok_or_else(|| Error::service("secretsmanager:GetSecretValue", format!("{arn} not found"), false))
    }
}

/// One cluster of a pool on `platform`, to aim the adapter at.
pub struct Aim {
    pub spec: PoolSpec,
    pub cluster: Cluster,
}

impl Aim {
    /// The cluster `ci-abcde` (infraId `ci-x7k2p`) of a pool on `platform`.
    pub fn new(platform: Platform) -> Self {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        Self { spec: PoolSpec::new(1, platform), cluster: Cluster::new("ci-abcde", "ci", "ci-x7k2p", now) }
    }

    /// What the adapter is asked about.
    pub fn target(&self) -> Target<'_> {
        Target { pool: "ci-pool", spec: &self.spec, cluster: &self.cluster, now: self.cluster.created_at }
    }
}
