//! How a pool proves a cluster usable (`readiness` in a pool spec): an HTTPS probe of its API or a Kubernetes
//! check, and the templates (`{clusterName}`, `{outputs.NAME}`) their URLs and credentials are filled from.

use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use crate::duration::GoDuration;

/// How a pool proves a cluster usable (`readiness` in a pool spec). Once its nodes are ready, a resuming or new
/// cluster waits `settlePause` (PausingForClusterOperatorsToSettle), then until the check passes
/// (WaitingForClusterOperators); only then is it Running, and assignable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadinessSpec {
    /// An HTTPS probe of the cluster's API (this, or `kubernetes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https: Option<HttpsProbe>,
    /// A check of the cluster's nodes and ClusterOperators through its Kubernetes API (this, or `https`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesCheck>,
    /// How long to let the cluster's operators settle after its nodes are ready, before the first check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_pause: Option<GoDuration>,
}

/// An HTTPS probe: `GET url` answers `expectedStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpsProbe {
    /// The URL, a template over `{clusterName}`, `{baseDomain}`, `{infraId}` and `{outputs.NAME}` (an external
    /// installer's outputs), for example `https://api.{clusterName}.{baseDomain}:6443/readyz`.
    pub url: String,
    /// PEM certificates to trust for it (a cluster's API serves its own CA's certificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// The status that means ready (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_status: Option<u16>,
}

impl HttpsProbe {
    /// The URL for `cluster` of a pool whose base domain is `base_domain`: the template's placeholders filled.
    /// `Err` names an unclosed placeholder, or one the cluster has no value for.
    pub fn url_for(&self, cluster: &Cluster, base_domain: Option<&str>) -> Result<String, String> {
        fill_cluster_template(&self.url, cluster, base_domain)
    }
}

/// A check through the cluster's Kubernetes API: every node Ready (while the resume waits for nodes), then every
/// ClusterOperator Available, not Progressing and not Degraded (once the operators have settled).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesCheck {
    /// ARN of the Secrets Manager secret holding a kubeconfig or a bearer token; a template over the same
    /// placeholders as `https.url`, for example `{outputs.kubeconfigSecretArn}` (each cluster its own).
    pub credentials: String,
    /// The API server's URL, a template as `https.url` (default: the kubeconfig's server; required with a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// PEM certificates to trust for the API server (default: the kubeconfig's certificate authority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// Whether a resume approves the certificate requests its nodes make (seed 004: kubelet certificates that
    /// expired while the cluster was hibernated), by the cluster machine approver's rules; `false` leaves them to
    /// something else. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_node_certificates: Option<bool>,
}

impl KubernetesCheck {
    /// The credentials' secret ARN for `cluster`; `Err` as [`HttpsProbe::url_for`].
    pub fn credentials_for(&self, cluster: &Cluster, base_domain: Option<&str>) -> Result<String, String> {
        fill_cluster_template(&self.credentials, cluster, base_domain)
    }

    /// Whether a resume approves its nodes' certificate requests (`approveNodeCertificates`, default `true`).
    pub fn approves_node_certificates(&self) -> bool {
        self.approve_node_certificates.unwrap_or(true)
    }

    /// The API server's URL for `cluster`, when the check names one; `Err` as [`HttpsProbe::url_for`].
    pub fn server_for(&self, cluster: &Cluster, base_domain: Option<&str>) -> Result<Option<String>, String> {
        self.server.as_deref().map(|s| fill_cluster_template(s, cluster, base_domain)).transpose()
    }
}

/// `template` filled for `cluster`: `{clusterName}`, `{infraId}`, `{baseDomain}` and `{outputs.NAME}`.
fn fill_cluster_template(template: &str, cluster: &Cluster, base_domain: Option<&str>) -> Result<String, String> {
    fill_template(template, |name| match name {
        "clusterName" => Some(cluster.cluster_name.as_str()),
        "infraId" => Some(cluster.infra_id.as_str()),
        "baseDomain" => base_domain,
        _ => name.strip_prefix("outputs.").and_then(|o| cluster.outputs.get(o)).map(String::as_str),
    })
}

/// `template` with each `{name}` replaced by `value(name)`; `Err` names an unclosed placeholder or a name
/// `value` has nothing for.
pub fn fill_template<'v>(template: &str, value: impl Fn(&str) -> Option<&'v str>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').ok_or_else(|| format!("{} is not closed", &rest[open..]))? + open;
        let name = &rest[open + 1..close];
        out.push_str(value(name).ok_or_else(|| format!("no value for {{{name}}}"))?);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
