//! What the installer needs of the world: its pools' settings, its records, the install directories, a place to
//! run long jobs, and secrets it stores. Each has an adapter on AWS and one for a local run.

use std::time::Duration;

use apiary_ports::Result;
use async_trait::async_trait;

use crate::model::{PoolSettings, Record};

/// Each pool's settings, as an admin put them.
#[async_trait]
pub trait Pools: Send + Sync {
    /// The settings of `pool`, if it has any. `Err` for settings that cannot be read or are malformed (naming the
    /// field).
    async fn settings(&self, pool: &str) -> Result<Option<PoolSettings>>;
    /// The install-config template kept under `name` (`templates/<name>.yaml`), if there is one. `name` is checked
    /// by [`crate::config::template_name`] first.
    async fn template(&self, name: &str) -> Result<Option<String>>;
}

/// The installer's records, one per cluster, every write conditional on the revision read.
#[async_trait]
pub trait Records: Send + Sync {
    /// The record of cluster `id`.
    async fn get(&self, id: &str) -> Result<Option<Record>>;
    /// Writes `record` if the stored one is at revision `expected` (`None`: if there is none). `false`: the
    /// condition was lost (someone else wrote first); re-read.
    async fn put(&self, record: &Record, expected: Option<u64>) -> Result<bool>;
    /// Removes the record of `id` if it is at revision `expected`; `false` when the condition was lost.
    async fn delete(&self, id: &str, expected: u64) -> Result<bool>;
    /// Every record of `pool` (the reaper's look).
    async fn list(&self, pool: &str) -> Result<Vec<Record>>;
}

/// The signed requests the installer accepted, by `webhook-id`, for as long as their signature may be replayed.
#[async_trait]
pub trait Replays: Send + Sync {
    /// Remembers that request `id` (its `digest`: method, path and body) was accepted, until `expires` (Unix
    /// seconds). `false` when `id` was accepted before, unexpired, for another request: a replay to refuse. The same
    /// request again (Apiary's retries, its looks every minute) is `true`.
    async fn accept(&self, id: &str, digest: &str, now: i64, expires: i64) -> Result<bool>;
}

/// Install directories, one per cluster: install-config.yaml in, metadata.json, auth/ and the log out.
#[async_trait]
pub trait Dirs: Send + Sync {
    /// Writes `file` (a path inside the directory) of cluster `id`.
    async fn write(&self, id: &str, file: &str, bytes: &[u8]) -> Result<()>;
    /// Reads `file` of cluster `id`, if it is there.
    async fn read(&self, id: &str, file: &str) -> Result<Option<Vec<u8>>>;
    /// Removes cluster `id`'s directory, whatever is in it.
    async fn clear(&self, id: &str) -> Result<()>;
}

/// What a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// `openshift-install create cluster`.
    Install,
    /// `openshift-install destroy cluster`.
    Destroy,
}

impl JobKind {
    /// The command's arguments after `openshift-install`, for the directory `dir`.
    pub fn args(self, dir: &str) -> Vec<String> {
        let verb = match self {
            JobKind::Install => "create",
            JobKind::Destroy => "destroy",
        };
        [verb, "cluster", "--dir", dir, "--log-level", "info"].map(str::to_owned).to_vec()
    }

    /// `install` or `destroy`.
    pub fn name(self) -> &'static str {
        match self {
            JobKind::Install => "install",
            JobKind::Destroy => "destroy",
        }
    }
}

/// One job to start.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// What it runs.
    pub kind: JobKind,
    /// The cluster (its install directory).
    pub cluster: String,
    /// The pool.
    pub pool: String,
    /// The cluster's how-manyeth job this is (unique per cluster).
    pub run: u32,
    /// The release image openshift-install comes from.
    pub release_image: String,
    /// How long it may run before it is stopped and counted failed.
    pub timeout: Duration,
    /// The role the job assumes to install in another account, if the pool names one.
    pub role_arn: Option<String>,
}

/// Where a job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Queued or running.
    Running,
    /// Done, exit status 0.
    Succeeded,
    /// Done otherwise: why (the exit status, a timeout, a stop).
    Failed(String),
}

/// Where long jobs run: CodeBuild on AWS, processes locally.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Starts `spec`, and answers the job's id.
    async fn start(&self, spec: &JobSpec) -> Result<String>;
    /// Where job `id` stands. A job the runner does not know is `Failed`.
    async fn state(&self, id: &str) -> Result<JobState>;
    /// Asks job `id` to stop (done or unknown: nothing to do).
    async fn stop(&self, id: &str) -> Result<()>;
}

/// Secrets the installer stores for a cluster (its kubeconfig and kubeadmin password).
#[async_trait]
pub trait Vault: Send + Sync {
    /// Stores `value` as secret `name`, tagged `apiary=true` and `apiary:pools=<pool>` so the pool's readiness check
    /// and its claimants may read it; answers its ARN. Storing again replaces the value.
    async fn store(&self, name: &str, value: &str, pool: &str) -> Result<String>;
    /// Removes the secret `arn` at once (gone: nothing to do).
    async fn remove(&self, arn: &str) -> Result<()>;
}
