//! What the installer keeps: each pool's settings, as an admin writes them, and a record per cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long an install job may run unless a pool says otherwise (openshift-install's own waits add up to about
/// an hour and a half on a slow cloud).
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(150 * 60);
/// How long a destroy job may run.
pub const DESTROY_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// The longest a pool may give its installs: CodeBuild's own limit is 36 hours, a day is plenty.
pub const MAX_INSTALL_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest install-config template.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;

/// A pool's settings at the installer (`pools/<pool>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolSettings {
    /// The release image openshift-install is extracted from and installs
    /// (`quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64`): Hive's ClusterImageSet.
    pub release_image: String,
    /// The install-config template ([`crate::template`]) of the pool's clusters, unless the pool names one kept
    /// apart (`installConfigTemplate`, [`crate::ports::Pools::template`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub install_config: String,
    /// The ARN of the Secrets Manager secret holding the pull secret (tagged for the pool).
    pub pull_secret: String,
    /// Extra manifests the clusters are installed with, each one YAML document templated as the install-config
    /// is ([`crate::manifests`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<String>,
    /// The ARN of the secret holding the SSH public key the machines accept, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_key: Option<String>,
    /// How long an install job may run (`2h30m`, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_timeout: Option<String>,
    /// The ARN of the secret holding the cloud credentials openshift-install uses on Azure or GCP (tagged for the
    /// pool): [`crate::credentials`]. On AWS the jobs use their role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// The IAM role the jobs assume to install in another account (its trust policy names the installer's job
    /// role); absent, they install in the installer's own account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
}

impl PoolSettings {
    /// Reads settings from JSON, checked: `Err` names the field.
    pub fn parse(text: &[u8]) -> Result<Self, String> {
        let settings: Self = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        settings.check()?;
        Ok(settings)
    }

    /// Checks the settings; `Err` names the field.
    pub fn check(&self) -> Result<(), String> {
        let image = &self.release_image;
        if image.is_empty() || image.len() > 512 || image.contains(char::is_whitespace) || !image.contains('/') {
            return Err(format!(
                "releaseImage: {image:?} is not an image reference (registry/repository:tag or @digest)"
            ));
        }
        if self.install_config.len() > MAX_TEMPLATE_BYTES {
            return Err(format!(
                "installConfig: at most {MAX_TEMPLATE_BYTES} bytes, got {}",
                self.install_config.len()
            ));
        }
        if self.manifests.len() > crate::manifests::MAX_MANIFESTS {
            return Err(format!(
                "manifests: at most {} manifests, got {}",
                crate::manifests::MAX_MANIFESTS,
                self.manifests.len()
            ));
        }
        if let Some(i) = self.manifests.iter().position(|m| m.len() > MAX_TEMPLATE_BYTES) {
            return Err(format!("manifests[{i}]: at most {MAX_TEMPLATE_BYTES} bytes, got {}", self.manifests[i].len()));
        }
        let arn = |field: &str, value: &str| {
            if value.starts_with("arn:") && value.contains(":secretsmanager:") {
                Ok(())
            } else {
                Err(format!(
                    "{field}: {value:?} is not a Secrets Manager ARN (the secret is named, never written here)"
                ))
            }
        };
        arn("pullSecret", &self.pull_secret)?;
        if let Some(key) = &self.ssh_key {
            arn("sshKey", key)?;
        }
        if let Some(credentials) = &self.credentials {
            arn("credentials", credentials)?;
        }
        if let Some(role) = &self.role_arn {
            apiary_planner::RoleArn::parse(role).map_err(|why| format!("roleArn: {why}"))?;
        }
        self.timeout().map(|_| ())
    }

    /// The install job's limit.
    pub fn timeout(&self) -> Result<Duration, String> {
        let Some(text) = &self.install_timeout else { return Ok(INSTALL_TIMEOUT) };
        let d = apiary_planner::duration::parse(text)
            .ok()
            .and_then(|d| d.to_std().ok())
            .ok_or_else(|| format!("installTimeout: {text:?} is not a duration (2h30m)"))?;
        if d < Duration::from_secs(10) || d > MAX_INSTALL_TIMEOUT {
            return Err(format!("installTimeout: {text} is not between 10s and 24h"));
        }
        Ok(d)
    }
}

/// Where a cluster's install stands at the installer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// `openshift-install create cluster` is running (or about to).
    Installing,
    /// A failed or abandoned attempt's resources are being destroyed; the attempt is Failed once they are, or the
    /// next attempt starts ([`Record::reinstall`]).
    CleaningUp,
    /// Installed: the outputs are known.
    Ready,
    /// The attempt failed, and what it made is gone.
    Failed,
    /// `openshift-install destroy cluster` is running: Apiary asked for the cluster's removal.
    Destroying,
    /// Removed: nothing of the cluster is left. The record stays as a tombstone, so that a delayed install request
    /// for the id (an attempt at or below this one) is refused rather than installing a cluster Apiary deleted;
    /// answered as no cluster (`404`).
    Removed,
}

impl Phase {
    /// The contract's state for this phase.
    pub fn state(self) -> &'static str {
        match self {
            Phase::Installing | Phase::CleaningUp => "Provisioning",
            Phase::Ready => "Ready",
            Phase::Failed => "Failed",
            Phase::Destroying => "Deprovisioning",
            Phase::Removed => "Removed",
        }
    }
}

/// One cluster at the installer. It holds no secret: the install directory (with the install-config, the pull
/// secret in it, and the credentials the install writes) is kept apart, and the credentials are stored as secrets
/// whose ARNs are here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Apiary's cluster id.
    pub id: String,
    /// The pool.
    pub pool: String,
    /// The cluster's name (install-config's `metadata.name`).
    pub cluster_name: String,
    /// The cluster's domain, `<name>.<baseDomain>`.
    pub domain: String,
    /// Apiary's attempt this record is of.
    pub attempt: u32,
    /// The release image the cluster is installed from, and destroyed with.
    pub release_image: String,
    /// How long its install job may run, in seconds.
    pub install_timeout: u64,
    /// The role its jobs assume, if its pool names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    /// The platform its install-config names (`aws`, `azure`, `gcp`, …): whether its jobs need the pool's cloud
    /// credentials ([`crate::credentials`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    /// Where it stands.
    pub phase: Phase,
    /// The job under way: the install, a clean-up or a destroy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// An install job asked to stop, waited for before the destroy starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopping: Option<String>,
    /// Jobs started for this cluster so far (names each one).
    pub runs: u32,
    /// While cleaning up: an install of this record's attempt follows.
    #[serde(default)]
    pub reinstall: bool,
    /// Once known: the infraId openshift-install chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_id: Option<String>,
    /// Once Ready: what the claimant is shown.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// The ARNs of the secrets stored for the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Why the attempt failed, or what the last job said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Bumped by every write: each write is conditional on the one it read.
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &str) -> String {
        format!(
            r#"{{"releaseImage": "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "installConfig": "x",
                "pullSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:pull"{extra}}}"#
        )
    }

    #[test]
    fn settings_are_checked_naming_the_field() {
        assert!(PoolSettings::parse(settings("").as_bytes()).is_ok());
        let why = |extra: &str| PoolSettings::parse(settings(extra).as_bytes()).expect_err(extra);
        assert!(why(r#", "sshKey": "ssh-ed25519 AAAA""#).starts_with("sshKey:"));
        assert!(why(r#", "installTimeout": "forever""#).starts_with("installTimeout:"));
        assert!(why(r#", "installTimeout": "3d""#).starts_with("installTimeout:"));
        assert!(why(r#", "pullSecrets": "x""#).contains("unknown field `pullSecrets`"));
        assert!(why(r#", "roleArn": "arn:aws:iam::12345:role/x""#).starts_with("roleArn:"));
        assert!(
            PoolSettings::parse(settings(r#", "roleArn": "arn:aws:iam::123456789012:role/ocp""#).as_bytes()).is_ok()
        );
        let bad_image = settings("").replace("quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "4.18");
        assert!(PoolSettings::parse(bad_image.as_bytes()).expect_err("image").starts_with("releaseImage:"));
        let inline =
            settings("").replace("arn:aws:secretsmanager:us-east-1:123456789012:secret:pull", "{\\\"auths\\\"}");
        assert!(PoolSettings::parse(inline.as_bytes()).expect_err("inline").starts_with("pullSecret:"));
        let many = format!(r#", "manifests": [{}]"#, vec!["\"kind: x\""; 65].join(","));
        assert!(why(&many).starts_with("manifests: at most 64"));
        let big = format!(r#", "manifests": ["a", "{}"]"#, "x".repeat(MAX_TEMPLATE_BYTES + 1));
        assert!(why(&big).starts_with("manifests[1]: at most"));
    }
}
