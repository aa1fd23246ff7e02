//! An external installer behind a webhook (`provisioner.webhook` in a pool spec): Apiary asks it to install a
//! cluster and to remove it, and the pool's platform powers the machines of the infraId it names. The contract
//! is `shared/clouds/provisioner.openapi.json`; every request is keyed by the cluster's id, so every call is
//! idempotent, and signed per Standard Webhooks ([`sign`]).
//!
//! - Provision: `PUT {url}/clusters/{id}` with the cluster (pool, id, name, baseDomain, labels, attempt). `202`
//!   (installing) and `200` (already installed) are accepted; a `4xx` is the installer refusing this attempt.
//! - Install: `GET {url}/clusters/{id}`. `404`/`410`, or a record of an earlier attempt, is nothing under way;
//!   `Provisioning` is under way; `Failed` fails the attempt with the installer's message; `Ready` is installed,
//!   with the infraId and the outputs the installer names (which the planner checks before it takes them).
//! - Deprovision: `DELETE {url}/clusters/{id}` until it answers `404` or `410`.
//! - List (the reaper's look): `GET {url}/clusters?pool={pool}`, every cluster the installer holds for the pool;
//!   one that no cluster of the pool has is an orphan, removed after the pool's grace. Optional for an installer.
//!
//! 429 and 5xx answers are retried by the shared client (honouring `Retry-After`); a `401`/`403` means the
//! receiver refused the signature (a wrong or rotated key): the key is read again once, then the step fails with
//! the receiver's answer.

use std::collections::BTreeMap;

use apiary_planner::power::{Install, Termination};
use apiary_planner::{PoolSpec, Timestamp, WebhookProvisioner};
use apiary_ports::platform::{Marked, Provision, Provisioner, Target};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use base64::Engine;
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};

use crate::http::{escape, Answer, Http};
use crate::secrets::{ForPool, SecretCache};

/// The prefix of a Standard Webhooks signing key; the rest is the key in base64.
pub const KEY_PREFIX: &str = "whsec_";

/// The installer's answer about one cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAnswer {
    /// `Provisioning`, `Ready`, `Failed`, `Deprovisioning`.
    pub state: String,
    /// The attempt this record is of (absent: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Once Ready: the infraId the machines carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_id: Option<String>,
    /// Once Ready: API URL, console URL, the ARN of the kubeconfig's secret, … (never a secret itself).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// When Failed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// While Provisioning: when the installer suggests looking again (Apiary looks every minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

/// What Apiary sends with `PUT {url}/clusters/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallRequest {
    /// The pool.
    pub pool: String,
    /// The cluster's id (also in the path).
    pub cluster_id: String,
    /// The cluster's name (an inventory name, or the id).
    pub cluster_name: String,
    /// The pool's base domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_domain: Option<String>,
    /// The pool's labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The parameters of the inventory entry the cluster's name comes from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
    /// 1, then one more after each failed attempt: a PUT of a higher attempt starts the install anew.
    pub attempt: u32,
    /// The release to install (the pool's `release`): absent, the installer's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The install-config template to render, by reference (the pool's `installConfigTemplate`): absent, the
    /// installer's own for the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_config_template: Option<String>,
}

/// The webhook provisioner.
pub struct Webhook {
    http: Http,
    secrets: SecretCache,
}

impl Webhook {
    /// Calls installers through `http`, reading their signing keys through `secrets`.
    pub fn new(http: Http, secrets: std::sync::Arc<dyn Secrets>) -> Self {
        Self { http, secrets: SecretCache::new(secrets) }
    }

    /// Sends one signed request about the cluster of `t`; a refused signature reads the key again once.
    async fn send(&self, op: &'static str, method: Method, t: Target<'_>, body: Option<Vec<u8>>) -> Result<Answer> {
        let hook = webhook(t.spec, t.pool)?;
        let url = format!("{}/clusters/{}", hook.url.trim_end_matches('/'), escape(&t.cluster.id));
        // Stable across retries of one request (a receiver may de-duplicate by it), different for each attempt.
        let id = format!("{}.{}.{}", t.cluster.id, op.rsplit('.').next().unwrap_or(op), t.attempt());
        self.signed(op, method, hook, &url, &id, t.now.timestamp(), body.unwrap_or_default()).await
    }

    /// Sends one request signed as `id` at `timestamp`; a refused signature reads the key again once.
    #[allow(clippy::too_many_arguments)]
    async fn signed(
        &self,
        op: &'static str,
        method: Method,
        hook: ForPool<'_, WebhookProvisioner>,
        url: &str,
        id: &str,
        timestamp: i64,
        body: Vec<u8>,
    ) -> Result<Answer> {
        // A key that cannot sign is named (by its secret's ARN) before anything is sent.
        let key = || async {
            let key = self.secrets.get(&hook.secret, hook.pool).await?.expose().to_owned();
            match sign(&key, id, timestamp, &body) {
                Ok(_) => Ok(key),
                Err(why) => Err(Error::service(op, format!("the signing key in {} {why}", hook.secret), false)),
            }
        };
        let answer = self
            .http
            .send_with(
                op,
                key,
                || self.secrets.forget(&hook.secret),
                |c, key| {
                    let mut request = c
                        .request(method.clone(), url)
                        .header("content-type", "application/json")
                        .header("webhook-id", id)
                        .header("webhook-timestamp", timestamp.to_string());
                    if let Ok(signature) = sign(key, id, timestamp, &body) {
                        request = request.header("webhook-signature", signature);
                    }
                    request.body(body.clone())
                },
            )
            .await?;
        if matches!(answer.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            let why = format!("the installer refused the request ({}): {}", answer.status, answer.text());
            return Err(Error::service(op, why, false));
        }
        Ok(answer)
    }
}

/// The pool's webhook.
fn webhook<'a>(spec: &'a PoolSpec, pool: &'a str) -> Result<ForPool<'a, WebhookProvisioner>> {
    spec.provisioner
        .as_ref()
        .and_then(|p| p.webhook.as_ref())
        .map(|settings| ForPool { pool, settings })
        .ok_or_else(|| Error::Config(format!("pool {pool} names no webhook provisioner")))
}

/// The installer's answer to `GET {url}/clusters?pool=`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterList {
    /// Every cluster the installer holds for the pool, being removed ones included.
    #[serde(default)]
    pub clusters: Vec<ListedCluster>,
}

/// One cluster of a [`ClusterList`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedCluster {
    /// The cluster's id, as Apiary named it in `PUT {url}/clusters/{id}`.
    pub id: String,
    /// `Provisioning`, `Ready`, `Failed`, `Deprovisioning`.
    #[serde(default)]
    pub state: String,
}

/// The Standard Webhooks signature of one request: `v1,` and the base64 of HMAC-SHA256 over
/// `{id}.{timestamp}.{body}` with the key `whsec_<base64>`. `Err` says what is wrong with the key.
pub fn sign(key: &str, id: &str, timestamp: i64, body: &[u8]) -> std::result::Result<String, String> {
    let encoded = key.strip_prefix(KEY_PREFIX).ok_or_else(|| format!("does not start with {KEY_PREFIX}"))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| format!("is not {KEY_PREFIX} and base64: {e}"))?;
    if raw.is_empty() {
        return Err("is empty".to_owned());
    }
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &raw);
    let mut ctx = aws_lc_rs::hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    Ok(format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(ctx.sign().as_ref())))
}

/// The installer's record, or `None` when it has none (404 or 410).
fn record(op: &'static str, answer: &Answer) -> Result<Option<ClusterAnswer>> {
    match answer.status {
        StatusCode::NOT_FOUND | StatusCode::GONE => Ok(None),
        s if s.is_success() || s.is_client_error() => answer.json(op).map(Some),
        s => Err(Error::service(op, format!("unexpected answer {s}: {}", answer.text()), false)),
    }
}

#[async_trait]
impl Provisioner for Webhook {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        let op = "webhook.GetCluster";
        let answer = self.send(op, Method::GET, t, None).await?;
        let Some(record) = record(op, &answer)? else { return Ok(Install::Absent) };
        if record.attempt.unwrap_or(1) < t.attempt() {
            // An earlier, failed attempt's record: this attempt has not been asked for yet.
            return Ok(Install::Absent);
        }
        Ok(match record.state.as_str() {
            // The planner checks what it names before it takes it.
            "Ready" => Install::Installed { infra_id: record.infra_id.unwrap_or_default(), outputs: record.outputs },
            "Failed" => Install::Failed {
                message: record.message.map_or_else(
                    || format!("the installer said Failed ({})", answer.status),
                    |m| crate::http::excerpt(&m),
                ),
            },
            "Provisioning" => Install::UnderWay,
            other => {
                let why = format!("the installer answered state {other:?} for an install ({})", answer.status);
                return Err(Error::service(op, why, false));
            }
        })
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let op = "webhook.PutCluster";
        let request = InstallRequest {
            pool: t.pool.to_owned(),
            cluster_id: t.cluster.id.clone(),
            cluster_name: t.cluster.cluster_name.clone(),
            base_domain: t.spec.base_domain.clone(),
            labels: t.spec.labels.clone(),
            parameters: t.cluster.parameters.clone(),
            attempt: t.attempt(),
            release: t.cluster.release.clone(),
            install_config_template: t.spec.install_config_template.clone(),
        };
        let body = serde_json::to_vec(&request).map_err(|e| Error::service(op, e.to_string(), false))?;
        let answer = self.send(op, Method::PUT, t, Some(body)).await?;
        if answer.is_success() {
            return Ok(Provision::Accepted { handle: None });
        }
        let message = match record(op, &answer) {
            Ok(Some(ClusterAnswer { message: Some(m), .. })) => crate::http::excerpt(&m),
            _ => answer.text(),
        };
        Ok(Provision::Refused(format!("the installer refused the install ({}): {message}", answer.status)))
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let op = "webhook.DeleteCluster";
        let answer = self.send(op, Method::DELETE, t, None).await?;
        Ok(match answer.status {
            StatusCode::NOT_FOUND | StatusCode::GONE => Termination { remaining: 0, refused: vec![] },
            s if s.is_success() => Termination { remaining: 1, refused: vec![] },
            s => {
                let why = format!("the installer refused the removal ({s}): {}", answer.text());
                Termination { remaining: 1, refused: vec![("installer".to_owned(), why)] }
            }
        })
    }
    /// The clusters the installer holds for the pool (`GET {url}/clusters?pool=`), each by the cluster id Apiary
    /// gave it: the reaper takes one that no cluster of the pool has for an orphan, and removes it with
    /// `DELETE {url}/clusters/{id}`. An installer that does not list (404, 405, 501) has nothing to look at.
    async fn marked(&self, pool: &str, spec: &PoolSpec, now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let op = "webhook.ListClusters";
        let hook = webhook(spec, pool)?;
        let url = format!("{}/clusters?pool={}", hook.url.trim_end_matches('/'), escape(pool));
        let answer = self
            .signed(op, Method::GET, hook, &url, &format!("{pool}.list.{}", now.timestamp()), now.timestamp(), vec![])
            .await?;
        if matches!(answer.status, StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED)
        {
            tracing::debug!(pool, status = %answer.status, "the installer does not list its clusters");
            return Ok(None);
        }
        if !answer.is_success() {
            return Err(Error::service(op, format!("unexpected answer {}: {}", answer.status, answer.text()), false));
        }
        let list: ClusterList = answer.json(op)?;
        Ok(Some(list.clusters.into_iter().map(|c| Marked { infra_id: c.id.clone(), machine: c.id }).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks reference libraries' example.
    #[test]
    fn the_signature_is_the_standard_webhooks_one() {
        let key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let signature = sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#);
        assert_eq!(signature.as_deref(), Ok("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
    }

    #[test]
    fn a_key_that_is_not_whsec_and_base64_is_named() {
        assert!(sign("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "m", 1, b"").expect_err("refused").contains("whsec_"));
        assert!(sign("whsec_***", "m", 1, b"").expect_err("refused").contains("base64"));
        assert!(sign("whsec_", "m", 1, b"").expect_err("refused").contains("empty"));
    }
}
