//! What the clouds' adapter tests share: secrets in memory, a cluster and a pool spec to aim at.

#![allow(dead_code)]

pub mod installer;

use std::collections::{BTreeMap, HashMap};

use apiary_planner::{Cluster, Platform, PoolSpec};
use apiary_ports::platform::Target;
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

/// The ARN the tests' credentials are stored under.
pub const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/cloud-AbCdEf";

/// The pools the tests aim at, which every secret of [`MemSecrets`] is tagged for (`apiary:pools`). A pool not
/// among them (`intruder`) is another team's: its reads are refused.
pub const POOLS: &str = "ci-pool gcp-ci else-pool other";

/// Secrets by ARN, in memory, each tagged `apiary=true` and `apiary:pools` with [`POOLS`].
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

    async fn tags(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        match self.0.contains_key(arn) {
            true => Ok([("apiary", "true"), ("apiary:pools", POOLS)].map(|(k, v)| (k.to_owned(), v.to_owned())).into()),
            false => Err(Error::service("secretsmanager:DescribeSecret", format!("{arn} not found"), false)),
        }
    }
}

/// Asserts that `result` is the refusal of the secret `arn` to the pool `intruder`, which its tags do not name.
pub fn refused_to_intruder<T: std::fmt::Debug>(result: Result<T>, arn: &str) {
    match result {
        Err(Error::Credentials(why)) => {
            assert!(why.contains(arn) && why.contains("intruder") && why.contains("apiary:pools"), "{why}")
        }
        other => panic!("the secret was read for a pool its tags do not name: {other:?}"),
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
