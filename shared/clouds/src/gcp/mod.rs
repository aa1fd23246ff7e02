//! Compute Engine: a cluster's machines are the instances labelled `kubernetes-io-cluster-<infraId>=owned`
//! (openshift-install's label), found with one filtered aggregated list of the project, every page. A pool's tick
//! looks at many clusters with one such list, its filter a choice of their labels ([`Actuator::look_many`]).
//!
//! - Start: `POST …/instances/{name}/start` on TERMINATED and STOPPED instances, `…/resume` on SUSPENDED ones.
//! - Stop: `POST …/instances/{name}/stop` on RUNNING ones.
//! - Provision: one `bulkInsert` per zone from the pool's instance template, with the cluster's labels and
//!   instance names (`<infraId>-<n>`), and a `requestId` derived from the cluster's provisioning token and the
//!   attempt, so a retry of one attempt is ignored by the API instead of doubling the machines, and the attempt
//!   after a failed one (a bulkInsert whose operation failed: QUOTA_EXCEEDED) is a new request.
//! - Install: done once every labelled instance runs; under way while fewer than `machineCount` are listed but
//!   some are; nothing under way when none is.
//! - Deprovision: `DELETE` every labelled instance, until the list is empty.
//!
//! States map onto [`MachineState`]: RUNNING is running; TERMINATED (a stopped instance), STOPPED and SUSPENDED
//! are stopped; STOPPING, PENDING_STOP and SUSPENDING are stopping; DEPROVISIONING is gone; every other state
//! (PROVISIONING, STAGING, PENDING, REPAIRING) is pending. A start or stop of an instance that is mid-transition
//! answers `resourceNotReady`: not a refusal, the power function re-issues it at its next check. Each instance
//! is acted on by its own call; one refusal is reported for that instance and never stops the others.

pub mod auth;

use std::collections::BTreeMap;
use std::sync::Arc;

use apiary_planner::machines::MachineState;
use apiary_planner::power::{Install, Termination};
use apiary_planner::{Cluster, GcpPlatform, Machine, Platform, PoolSpec, Timestamp};
use apiary_ports::platform::{
    client_token, Actuator, Machines, Marked, Nodes, Provision, Provisioner, Refused, Seen, Target,
};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;
use sha2::Digest;

use crate::fanout::{self, Outcome};
use crate::http::{escape, Answer, Http};
use crate::secrets::{ForPool, SecretCache};
use crate::tokens::TokenCache;
use auth::ServiceAccountKey;

/// Compute Engine's API root (`APIARY_GCP_ENDPOINT` overrides it, for the fake).
pub const DEFAULT_ENDPOINT: &str = "https://compute.googleapis.com/compute/v1";
/// Largest page the aggregated list is asked for (the API's maximum).
const PAGE: u32 = 500;
/// Clusters one filtered list looks at, at most (a filter stays well within the URL's length).
const CLUSTERS_A_LIST: usize = 20;

/// The label openshift-install puts on a cluster's instances.
pub fn cluster_label(infra_id: &str) -> String {
    format!("kubernetes-io-cluster-{infra_id}")
}

/// The Compute Engine platform.
pub struct Gcp {
    http: Http,
    endpoint: String,
    secrets: SecretCache,
    tokens: TokenCache,
}

/// One instance, as the list gives it.
#[derive(Debug, Clone, Deserialize)]
struct Instance {
    name: String,
    zone: String,
    status: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default, rename = "networkInterfaces")]
    nics: Vec<Nic>,
}

/// An instance's network interface: its private address, and its external one through an access config.
#[derive(Debug, Clone, Deserialize)]
struct Nic {
    #[serde(default, rename = "networkIP")]
    network_ip: Option<String>,
    #[serde(default, rename = "accessConfigs")]
    access: Vec<AccessConfig>,
}

#[derive(Debug, Clone, Deserialize)]
struct AccessConfig {
    #[serde(default, rename = "natIP")]
    nat_ip: Option<String>,
}

impl Instance {
    /// The zone's name (the list gives its URL).
    fn zone(&self) -> &str {
        self.zone.rsplit('/').next().unwrap_or(&self.zone)
    }

    fn state(&self) -> MachineState {
        state(&self.status)
    }
}

/// Compute Engine's instance status as a [`MachineState`].
pub fn state(status: &str) -> MachineState {
    match status {
        "RUNNING" => MachineState::Running,
        "TERMINATED" | "STOPPED" | "SUSPENDED" => MachineState::Stopped,
        "STOPPING" | "PENDING_STOP" | "SUSPENDING" => MachineState::Stopping,
        "DEPROVISIONING" => MachineState::ShuttingDown,
        _ => MachineState::Pending,
    }
}

#[derive(Deserialize)]
struct AggregatedList {
    #[serde(default)]
    items: BTreeMap<String, Scoped>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
    #[serde(default)]
    unreachables: Vec<String>,
}

#[derive(Deserialize)]
struct Scoped {
    #[serde(default)]
    instances: Vec<Instance>,
}

/// A Compute Engine error answer's first reason (`resourceNotReady`, `alreadyExists`, …) and message.
fn reason(answer: &Answer) -> (String, String) {
    #[derive(Deserialize, Default)]
    struct Body {
        #[serde(default)]
        error: Inner,
    }
    #[derive(Deserialize, Default)]
    struct Inner {
        #[serde(default)]
        message: String,
        #[serde(default)]
        errors: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        reason: String,
    }
    let body: Body = serde_json::from_slice(&answer.body).unwrap_or_default();
    let reason = body.error.errors.first().map(|e| e.reason.clone()).unwrap_or_default();
    let message = if body.error.message.is_empty() { answer.text() } else { body.error.message };
    (reason, format!("{} {message}", answer.status.as_u16()))
}

/// An operation's error, when it finished with one.
fn operation_error(answer: &Answer) -> Option<String> {
    let op: serde_json::Value = serde_json::from_slice(&answer.body).ok()?;
    let errors = op.get("error")?.get("errors")?.as_array()?;
    let text: Vec<String> = errors
        .iter()
        .map(|e| {
            let code = e.get("code").and_then(|c| c.as_str()).unwrap_or("ERROR");
            let message = e.get("message").and_then(|m| m.as_str()).unwrap_or("");
            format!("{code}: {message}")
        })
        .collect();
    (!text.is_empty()).then(|| text.join("; "))
}

/// A call on one instance.
/// A pool's GCP settings, with the pool's name its credentials are read for.
type Settings<'a> = ForPool<'a, GcpPlatform>;

struct Call {
    op: &'static str,
    method: reqwest::Method,
    url: String,
}

impl Gcp {
    /// The platform, reading credentials through `secrets`, calling `endpoint` (None: [`DEFAULT_ENDPOINT`]).
    pub fn new(http: Http, secrets: Arc<dyn Secrets>, endpoint: Option<String>) -> Self {
        let endpoint = endpoint.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned()).trim_end_matches('/').to_owned();
        Self { http, endpoint, secrets: SecretCache::new(secrets), tokens: TokenCache::default() }
    }

    fn platform<'a>(pool: &'a str, spec: &'a PoolSpec) -> Result<Settings<'a>> {
        match &spec.platform {
            Platform::Gcp(gcp) => Ok(ForPool { pool, settings: gcp }),
            other => Err(Error::Config(format!("the GCP platform was given a {} pool", other.kind()))),
        }
    }

    async fn key(&self, gcp: Settings<'_>) -> Result<ServiceAccountKey> {
        let secret = self.secrets.get(&gcp.credentials_secret, gcp.pool).await?;
        ServiceAccountKey::parse(&gcp.credentials_secret, secret.expose())
    }

    /// Sends an authorized request; a 401 renews the token (and re-reads the secret) and tries once more.
    async fn call(
        &self,
        op: &'static str,
        gcp: Settings<'_>,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Answer> {
        let key = self.key(gcp).await?;
        let forget = || {
            self.tokens.forget(&auth::cache_key(&key));
            self.secrets.forget(&gcp.credentials_secret);
        };
        let token = || async { auth::token(&self.tokens, &self.http, &self.key(gcp).await?).await };
        self.http.send_with(op, token, forget, |c, token| build(c).bearer_auth(token)).await
    }

    async fn instances(&self, gcp: Settings<'_>, infra_id: &str) -> Result<Vec<Instance>> {
        self.labelled(gcp, &cluster_label(infra_id), "owned").await
    }

    /// The instances labelled `key = value`, in every zone (one aggregated list, all pages), with their labels.
    async fn labelled(&self, gcp: Settings<'_>, key: &str, value: &str) -> Result<Vec<Instance>> {
        self.filtered(gcp, format!("labels.{key} = \"{value}\"")).await
    }

    /// The instances `filter` selects, in every zone (one aggregated list, all pages), with their labels.
    async fn filtered(&self, gcp: Settings<'_>, filter: String) -> Result<Vec<Instance>> {
        let url = format!("{}/projects/{}/aggregated/instances", self.endpoint, escape(&gcp.project));
        let mut found = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let answer = self
                .call("compute:instances.aggregatedList", gcp, |c| {
                    let mut q = vec![
                        ("filter", filter.clone()),
                        ("maxResults", PAGE.to_string()),
                        ("fields", "items/*/instances(name,zone,status,labels),nextPageToken,unreachables".to_owned()),
                    ];
                    q.extend(page.clone().map(|p| ("pageToken", p)));
                    c.get(&url).query(&q)
                })
                .await?;
            if !answer.is_success() {
                let (_, message) = reason(&answer);
                return Err(Error::service("compute:instances.aggregatedList", message, false));
            }
            let list: AggregatedList = answer.json("compute:instances.aggregatedList")?;
            if !list.unreachables.is_empty() {
                // A zone that did not answer may hold machines: no conclusion can be drawn from this list.
                return Err(Error::service(
                    "compute:instances.aggregatedList",
                    format!("zones unreachable: {}", list.unreachables.join(", ")),
                    true,
                ));
            }
            found.extend(list.items.into_values().flat_map(|s| s.instances));
            match list.next_page_token.filter(|p| !p.is_empty()) {
                Some(next) => page = Some(next),
                None => return Ok(found),
            }
        }
    }

    fn instance_url(&self, gcp: Settings<'_>, i: &Instance) -> String {
        format!(
            "{}/projects/{}/zones/{}/instances/{}",
            self.endpoint,
            escape(&gcp.project),
            escape(i.zone()),
            escape(&i.name)
        )
    }

    /// One call per instance `act` selects ([`fanout::each`]); answers whose reason is in `ok_reasons` (the
    /// instance is mid-transition) are not refusals: the call is re-issued at the next look.
    async fn each(
        &self,
        gcp: Settings<'_>,
        instances: Vec<Instance>,
        act: impl Fn(&Instance) -> Option<(&'static str, reqwest::Method, String)>,
        ok_reasons: &[&str],
    ) -> Result<Refused> {
        let calls: Vec<(String, Call)> = instances
            .iter()
            .filter_map(|i| act(i).map(|(op, method, url)| (i.name.clone(), Call { op, method, url })))
            .collect();
        fanout::each(calls, |call| async move {
            let answer = self.call(call.op, gcp, |c| c.request(call.method.clone(), &call.url)).await?;
            if answer.is_success() || answer.status == StatusCode::NOT_MODIFIED {
                return Ok(Outcome::Done);
            }
            let (why, message) = reason(&answer);
            Ok(if answer.status == StatusCode::NOT_FOUND || ok_reasons.contains(&why.as_str()) {
                Outcome::Done
            } else {
                Outcome::Refused(message)
            })
        })
        .await
    }

    /// The target's platform and the cluster's machines (instances on their way out left out).
    async fn listed<'a>(&self, t: &Target<'a>) -> Result<(Settings<'a>, Vec<Instance>)> {
        let gcp = Self::platform(t.pool, t.spec)?;
        let mut instances = self.instances(gcp, &t.cluster.infra_id).await?;
        instances.retain(|i| !i.state().is_gone());
        Ok((gcp, instances))
    }

    async fn machines(&self, t: &Target<'_>, want: MachineState, acts: fn(MachineState) -> bool) -> Result<Machines> {
        let (_, instances) = self.listed(t).await?;
        Ok(Machines::of(instances.iter().map(|i| (i.name.as_str(), i.state())), want, acts))
    }
}

/// The `requestId` of one zone's bulkInsert for a cluster: a UUID derived from its provisioning token.
pub fn request_id(token: &str, zone: &str) -> String {
    let digest = sha2::Sha256::digest(format!("{token}/{zone}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x40; // version 4 layout, so validators accept it
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The instance template as the API takes it: a path, or `global/instanceTemplates/NAME` for a bare name.
fn template_path(template: &str) -> String {
    if template.contains('/') {
        template.to_owned()
    } else {
        format!("global/instanceTemplates/{template}")
    }
}

#[async_trait]
impl Actuator for Gcp {
    async fn look_many(
        &self,
        pool: &str,
        spec: &PoolSpec,
        clusters: &[Cluster],
        _now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        let gcp = Self::platform(pool, spec)?;
        let mut found: BTreeMap<String, Vec<Instance>> = BTreeMap::new();
        for batch in clusters.chunks(CLUSTERS_A_LIST) {
            let terms: Vec<String> =
                batch.iter().map(|c| format!("(labels.{} = \"owned\")", cluster_label(&c.infra_id))).collect();
            for i in self.filtered(gcp, terms.join(" OR ")).await? {
                if i.state().is_gone() {
                    continue;
                }
                let owner =
                    batch.iter().find(|c| i.labels.get(&cluster_label(&c.infra_id)).is_some_and(|v| v == "owned"));
                if let Some(c) = owner {
                    found.entry(c.id.clone()).or_default().push(i);
                }
            }
        }
        Ok(Some(
            clusters
                .iter()
                .map(|c| {
                    let list = found.get(&c.id).map_or(&[][..], Vec::as_slice);
                    (c.id.clone(), Seen::of(list.iter().map(|i| (i.name.as_str(), i.state(), None))))
                })
                .collect(),
        ))
    }

    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        self.machines(&t, MachineState::Running, MachineState::start_acts).await
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        self.machines(&t, MachineState::Stopped, MachineState::stop_acts).await
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        // Compute Engine has no node check of its own: every instance RUNNING is ready.
        let running = self.machines(&t, MachineState::Running, MachineState::start_acts).await?;
        Ok(if running.total > 0 && running.not_ready.is_empty() { Nodes::Ready } else { Nodes::Machines(running) })
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        let (_, instances) = self.listed(&t).await?;
        // The first interface is the instance's primary one.
        Ok(instances
            .into_iter()
            .map(|i| {
                let nic = i.nics.first();
                Machine {
                    private_ip: nic.and_then(|n| n.network_ip.clone()),
                    public_ip: nic.and_then(|n| n.access.iter().find_map(|a| a.nat_ip.clone())),
                    id: i.name,
                }
            })
            .collect())
    }

    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        let (gcp, instances) = self.listed(&t).await?;
        self.each(
            gcp,
            instances,
            |i| {
                let verb = match i.status.as_str() {
                    "SUSPENDED" => "resume",
                    _ if i.state().start_acts() => "start",
                    _ => return None,
                };
                let op = if verb == "resume" { "compute:instances.resume" } else { "compute:instances.start" };
                Some((op, reqwest::Method::POST, format!("{}/{verb}", self.instance_url(gcp, i))))
            },
            &["resourceNotReady"],
        )
        .await
    }

    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        let (gcp, instances) = self.listed(&t).await?;
        self.each(
            gcp,
            instances,
            |i| {
                i.state().stop_acts().then(|| {
                    ("compute:instances.stop", reqwest::Method::POST, format!("{}/stop", self.instance_url(gcp, i)))
                })
            },
            &["resourceNotReady"],
        )
        .await
    }
}

#[async_trait]
impl Provisioner for Gcp {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        Ok(self.machines(&t, MachineState::Running, MachineState::start_acts).await?.install())
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let gcp = Self::platform(t.pool, t.spec)?;
        let c = t.cluster;
        let mut labels: BTreeMap<String, String> = gcp.labels.clone();
        labels.insert(cluster_label(&c.infra_id), "owned".into());
        labels.insert("apiary-pool".into(), t.pool.into());
        labels.insert("apiary-cluster".into(), c.id.clone());
        let zones = gcp.all_zones();
        let count = usize::try_from(gcp.machine_count).unwrap_or(1).max(1);
        let token = format!("{}/{}", client_token(t.pool, c), t.attempt());
        for (z, zone) in zones.iter().enumerate() {
            // Machine n goes to zone n mod zones, named `<infraId>-<n>`: stable across retries.
            let names: serde_json::Map<String, serde_json::Value> = (0..count)
                .filter(|n| n % zones.len() == z)
                .map(|n| (format!("{}-{n}", c.infra_id), json!({})))
                .collect();
            if names.is_empty() {
                continue;
            }
            let body = json!({
                "count": names.len(),
                "minCount": names.len(),
                "sourceInstanceTemplate": template_path(&gcp.instance_template),
                "perInstanceProperties": names,
                "instanceProperties": {"labels": labels},
            });
            let url = format!(
                "{}/projects/{}/zones/{}/instances/bulkInsert",
                self.endpoint,
                escape(&gcp.project),
                escape(zone)
            );
            let id = request_id(&token, zone);
            let answer = self
                .call("compute:instances.bulkInsert", gcp, |c| c.post(&url).query(&[("requestId", &id)]).json(&body))
                .await?;
            if answer.is_success() {
                if let Some(error) = operation_error(&answer) {
                    return Ok(Provision::Refused(format!("bulkInsert in {zone}: {error}")));
                }
                continue;
            }
            let (why, message) = reason(&answer);
            if why == "alreadyExists" {
                continue;
            }
            return Ok(Provision::Refused(format!("bulkInsert in {zone}: {message}")));
        }
        Ok(Provision::Accepted { handle: None })
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let (gcp, instances) = self.listed(&t).await?;
        let listed = instances.len() as u32;
        let refused = self
            .each(
                gcp,
                instances,
                |i| Some(("compute:instances.delete", reqwest::Method::DELETE, self.instance_url(gcp, i))),
                &["resourceNotReady", "resourceInUseByAnotherResource"],
            )
            .await?;
        // An instance being deleted stays listed until it is gone: done only when the list comes back empty.
        Ok(Termination { remaining: listed, refused: refused.machines })
    }

    /// The instances labelled `apiary-pool = <pool>` in every zone, by the infraId of their cluster label.
    async fn marked(&self, pool: &str, spec: &PoolSpec, _now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let gcp = Self::platform(pool, spec)?;
        let prefix = cluster_label("");
        let instances = self.labelled(gcp, "apiary-pool", pool).await?;
        Ok(Some(
            instances
                .into_iter()
                .filter(|i| !state(&i.status).is_gone())
                .filter_map(|i| {
                    let infra_id = i.labels.iter().find_map(|(k, v)| {
                        (v == "owned").then(|| k.strip_prefix(&prefix)).flatten().map(str::to_owned)
                    })?;
                    Some(Marked { infra_id, machine: i.name })
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_onto_ec2s() {
        assert_eq!(state("RUNNING"), MachineState::Running);
        for s in ["TERMINATED", "STOPPED", "SUSPENDED"] {
            assert_eq!(state(s), MachineState::Stopped, "{s}");
        }
        for s in ["PROVISIONING", "STAGING", "REPAIRING", "PENDING"] {
            assert_eq!(state(s), MachineState::Pending, "{s}");
        }
        assert_eq!(state("STOPPING"), MachineState::Stopping);
        assert!(state("DEPROVISIONING").is_gone());
    }

    #[test]
    fn a_request_id_is_a_stable_uuid_per_token_and_zone() {
        let a = request_id("c-1-00ff", "europe-west1-b");
        assert_eq!(a, request_id("c-1-00ff", "europe-west1-b"));
        assert_ne!(a, request_id("c-1-00ff", "europe-west1-c"));
        assert_ne!(a, request_id("c-2-00ff", "europe-west1-b"));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }

    #[test]
    fn a_bare_template_name_is_a_global_template() {
        assert_eq!(template_path("node"), "global/instanceTemplates/node");
        assert_eq!(
            template_path("projects/p/regions/r/instanceTemplates/n"),
            "projects/p/regions/r/instanceTemplates/n"
        );
    }
}
