//! What openshift-install leaves in its directory, read: `metadata.json`, the admin kubeconfig's server, and the
//! part of `.openshift_install.log` that says why an install failed.

use serde::Deserialize;

/// The files the installer reads back.
pub mod files {
    /// What the installer is given.
    pub const INSTALL_CONFIG: &str = "install-config.yaml";
    /// What openshift-install writes first: the cluster's ids and how to find its resources.
    pub const METADATA: &str = "metadata.json";
    /// The admin kubeconfig (`system:admin`).
    pub const KUBECONFIG: &str = "auth/kubeconfig";
    /// The console's `kubeadmin` password.
    pub const KUBEADMIN_PASSWORD: &str = "auth/kubeadmin-password";
    /// openshift-install's log.
    pub const LOG: &str = ".openshift_install.log";
    /// The pull secret, for the job to extract openshift-install from the release image with.
    pub const PULL_SECRET: &str = ".apiary/pull-secret.json";
}

/// The fields of `metadata.json` the installer uses (openshift-install's `ClusterMetadata`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// install-config's `metadata.name`.
    pub cluster_name: String,
    /// The cluster's UUID.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// What the cluster's resources carry.
    #[serde(rename = "infraID")]
    pub infra_id: String,
}

impl Metadata {
    /// Reads `metadata.json`, checking the infraId is one Apiary takes (the planner's own check of what an
    /// installer answers).
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let m: Self = serde_json::from_slice(bytes).map_err(|e| format!("metadata.json: {e}"))?;
        apiary_planner::validate::check_installed(&m.infra_id, &std::collections::BTreeMap::new())
            .map_err(|why| format!("metadata.json: infraID: {why}"))?;
        Ok(m)
    }
}

/// The API server a kubeconfig's current context names.
pub fn kubeconfig_server(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(rename = "current-context", default)]
        current: String,
        #[serde(default)]
        contexts: Vec<Named<Context>>,
        #[serde(default)]
        clusters: Vec<Named<Cluster>>,
    }
    #[derive(Deserialize)]
    struct Named<T> {
        name: String,
        #[serde(alias = "context", alias = "cluster")]
        item: T,
    }
    #[derive(Deserialize)]
    struct Context {
        cluster: String,
    }
    #[derive(Deserialize)]
    struct Cluster {
        server: String,
    }
    let config: Config = serde_saphyr::from_str(text).ok()?;
    let context = config.contexts.iter().find(|c| c.name == config.current)?;
    config.clusters.into_iter().find(|c| c.name == context.item.cluster).map(|c| c.item.server)
}

/// The longest excerpt of the log a failure's message carries.
pub const EXCERPT: usize = 1000;

/// Why an install failed, from its log: the last few `error` and `fatal` lines (else the last lines), each
/// message alone, a password never. At most [`EXCERPT`] characters.
pub fn excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let bad: Vec<&str> =
        lines.iter().copied().filter(|l| l.contains("level=error") || l.contains("level=fatal")).collect();
    let chosen =
        if bad.is_empty() { &lines[lines.len().saturating_sub(3)..] } else { &bad[bad.len().saturating_sub(3)..] };
    let text = chosen.iter().map(|l| redact(message(l))).collect::<Vec<_>>().join(" | ");
    if text.chars().count() > EXCERPT {
        format!("{}…", text.chars().take(EXCERPT - 1).collect::<String>())
    } else {
        text
    }
}

/// A logrus line's `msg`, unquoted: `time=… level=error msg="x"` is `x`.
fn message(line: &str) -> String {
    let Some(at) = line.find("msg=") else { return line.trim().to_owned() };
    let msg = &line[at + 4..];
    match msg.strip_prefix('"') {
        Some(quoted) => {
            let end = quoted.rfind('"').unwrap_or(quoted.len());
            quoted[..end].replace("\\\"", "\"").replace("\\n", " ")
        }
        None => msg.trim().to_owned(),
    }
}

/// A line with what follows `password` cut off: openshift-install logs the kubeadmin password when it is done.
/// Every line of a job's output passes through it (the local runner's here, the buildspec's `sed` on CodeBuild).
pub fn redact(line: String) -> String {
    match line.to_ascii_lowercase().find("password") {
        Some(at) => format!("{}password: (redacted)", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_gives_the_ids_and_refuses_an_infra_id_apiary_cannot_take() {
        let m = Metadata::parse(br#"{"clusterName":"ci-1","clusterID":"c0ffee","infraID":"ci-1-x7k2p","aws":{}}"#)
            .expect("metadata");
        assert_eq!((m.cluster_name.as_str(), m.infra_id.as_str()), ("ci-1", "ci-1-x7k2p"));
        let why = Metadata::parse(br#"{"clusterName":"a","clusterID":"c","infraID":"A_B"}"#).expect_err("refused");
        assert!(why.contains("infraID"), "{why}");
    }

    #[test]
    fn the_current_contexts_server_is_the_api() {
        let kc = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://api.ci-1.example.com:6443\n  name: ci-1\n\
                  - cluster:\n    server: https://other:6443\n  name: other\ncontexts:\n- context:\n    cluster: ci-1\n    \
                  user: admin\n  name: admin\ncurrent-context: admin\nusers: []\n";
        assert_eq!(kubeconfig_server(kc).as_deref(), Some("https://api.ci-1.example.com:6443"));
        assert_eq!(kubeconfig_server("not: [a kubeconfig"), None);
    }

    #[test]
    fn the_excerpt_is_the_last_errors_without_a_password() {
        let log = "time=\"t\" level=info msg=\"Creating infrastructure resources...\"\n\
                   time=\"t\" level=error msg=\"Bootstrap failed to complete: timed out waiting for the condition\"\n\
                   time=\"t\" level=info msg=\"Login to the console with user: \\\"kubeadmin\\\", and password: \\\"abc\\\"\"\n\
                   time=\"t\" level=fatal msg=\"Bootstrap failed to complete\"\n";
        assert_eq!(
            excerpt(log),
            "Bootstrap failed to complete: timed out waiting for the condition | Bootstrap failed to complete"
        );
        let quiet = "level=info msg=\"a\"\nlevel=info msg=\"Login with password: \\\"hunter2\\\"\"\n";
        let text = excerpt(quiet);
        assert!(!text.contains("hunter2") && text.starts_with("a | Login with password"), "{text}");
        assert!(excerpt(&"level=error msg=\"x\"\n".repeat(2000)).chars().count() <= EXCERPT);
    }
}
