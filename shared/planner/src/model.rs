//! The domain model: what a pool asks for, and the clusters, claims and name leases it holds.
//!
//! These are the items of Apiary's single table (one partition per pool), in domain form. Field names
//! follow the seeds (Hive's names, camelCase in JSON). Every mutable item carries `rev`, the revision a
//! conditional write expects; a write sets `rev` to `expected + 1`.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::adaptive::{AdaptiveRunningCount, Demand};
use crate::duration::GoDuration;

/// A point in time. The planner never reads the clock: every `now` is an argument.
pub type Timestamp = DateTime<Utc>;

/// What an operator asks of a pool (DESIGN.md "Pool spec").
///
/// Counts are signed so a negative value reaches [`crate::validate::validate_spec`] and is reported with
/// its field instead of failing deserialization. The planner treats anything below zero as zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolSpec {
    /// How many unclaimed clusters the pool keeps.
    pub size: i64,
    /// How many of the oldest unclaimed clusters are kept Running (seed 000); effective `min(runningCount, size)`.
    #[serde(default)]
    pub running_count: i64,
    /// Upper bound on all clusters of the pool, claimed and deleting included. Unset: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i64>,
    /// Upper bound on clusters installing or deleting at once. Unset: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<i64>,
    /// A claimed cluster is hibernated this long after it was claimed or last became Running (seed 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hibernate_after: Option<GoDuration>,
    /// How long a claim keeps its cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_lifetime: Option<ClaimLifetime>,
    /// Longest a resume may take before the cluster is broken (seed 002). Unset: wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub powerstate_transition_to_running_timeout: Option<GoDuration>,
    /// Longest a hibernation may take before the cluster is broken (seed 002). Unset: wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub powerstate_transition_to_hibernating_timeout: Option<GoDuration>,
    /// How many times a cluster's provisioning is tried (backing off between tries) before the cluster is broken
    /// (Hive's `installAttemptsLimit`). Unset: [`DEFAULT_INSTALL_ATTEMPTS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_attempts_limit: Option<i64>,
    /// Longest a cluster may take to install before it is broken and replaced. Unset: wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_timeout: Option<GoDuration>,
    /// Admin-provided cluster names (seed 003).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// DNS domain the clusters' names live under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_domain: Option<String>,
    /// Free-form labels; they never change `poolVersion`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Where and how clusters are made.
    pub platform: Platform,
    /// How a cluster is proven usable before it is Running (seed 004's waiting states): without it, a cluster
    /// whose machines run and whose nodes are ready is Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ReadinessSpec>,
    /// Who installs and removes clusters when not Apiary itself: an external installer behind a webhook. The
    /// platform's actuator then powers the machines of the infraId the installer names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioner: Option<ProvisionerSpec>,
    /// Time windows that override size and runningCount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<Schedule>,
    /// Set the running count from measured demand; `runningCount` (or a schedule's) is then the floor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_running_count: Option<AdaptiveRunningCount>,
    /// Resume standbys that have slept long, in quiet hours, so that one that no longer resumes is replaced
    /// before a claim needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_canaries: Option<crate::canary::ResumeCanaries>,
}

impl PoolSpec {
    /// A spec of `size` clusters on `platform`, every other field unset.
    pub fn new(size: i64, platform: Platform) -> Self {
        Self {
            size,
            running_count: 0,
            max_size: None,
            max_concurrent: None,
            hibernate_after: None,
            claim_lifetime: None,
            powerstate_transition_to_running_timeout: None,
            powerstate_transition_to_hibernating_timeout: None,
            install_attempts_limit: None,
            install_timeout: None,
            inventory: None,
            base_domain: None,
            labels: BTreeMap::new(),
            platform,
            readiness: None,
            provisioner: None,
            schedules: Vec::new(),
            adaptive_running_count: None,
            resume_canaries: None,
        }
    }

    /// The inventory's names, in order, when an inventory is present.
    pub fn inventory_names(&self) -> Option<Vec<&str>> {
        self.inventory.as_ref().map(|inv| {
            inv.cluster_deployments.iter().filter_map(|e| e.name.as_deref()).filter(|n| !n.is_empty()).collect()
        })
    }

    /// Whether a claim may take `cluster` of this pool now: it [`Cluster::is_assignable`], and the inventory name
    /// it holds, if any, is still in the inventory (seed 003: a cluster whose name was removed is on its way out).
    /// The claim API asks this of the spare it picks; the reconcile classifies by the same two rules.
    pub fn may_assign(&self, cluster: &Cluster) -> bool {
        let name_removed = cluster.cluster_name != cluster.id
            && self.inventory_names().is_some_and(|names| !names.contains(&cluster.cluster_name.as_str()));
        cluster.is_assignable() && !name_removed
    }

    /// The limits the power state machine holds a cluster to, parsed.
    pub fn power_limits(&self) -> PowerLimits {
        PowerLimits {
            to_running: self.powerstate_transition_to_running_timeout.as_ref().and_then(GoDuration::get),
            to_hibernating: self.powerstate_transition_to_hibernating_timeout.as_ref().and_then(GoDuration::get),
            install: self.install_timeout.as_ref().and_then(GoDuration::get),
            install_attempts: self
                .install_attempts_limit
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_INSTALL_ATTEMPTS),
            readiness: self
                .readiness
                .as_ref()
                .map(|r| r.settle_pause.as_ref().and_then(GoDuration::get).unwrap_or_else(TimeDelta::zero)),
        }
    }
}

/// Provisioning attempts of a cluster when the pool does not say (`installAttemptsLimit`).
pub const DEFAULT_INSTALL_ATTEMPTS: u32 = 3;

/// What the power state machine holds a cluster to: seed 002's transition timeouts (`None` waits forever), the
/// install timeout and the provisioning attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerLimits {
    /// Longest a resume may take.
    pub to_running: Option<TimeDelta>,
    /// Longest a hibernation may take.
    pub to_hibernating: Option<TimeDelta>,
    /// Longest an install may take.
    pub install: Option<TimeDelta>,
    /// Provisioning attempts before the cluster is broken.
    pub install_attempts: u32,
    /// The pool checks readiness beyond the nodes: with how long a settle pause (zero: none).
    pub readiness: Option<TimeDelta>,
}

impl Default for PowerLimits {
    fn default() -> Self {
        Self {
            to_running: None,
            to_hibernating: None,
            install: None,
            install_attempts: DEFAULT_INSTALL_ATTEMPTS,
            readiness: None,
        }
    }
}

/// Claim lifetime bounds: a claim lives `min(maximum, its own lifetime or default)` from assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimLifetime {
    /// Lifetime of a claim that asks for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<GoDuration>,
    /// Longest lifetime any claim gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<GoDuration>,
}

/// The inventory of seed 003: a list of per-cluster entries, for now just names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    /// One entry per cluster the pool may make.
    #[serde(default)]
    pub cluster_deployments: Vec<InventoryEntry>,
}

impl Inventory {
    /// An inventory of these names.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        Self { cluster_deployments: names.into_iter().map(|n| InventoryEntry { name: Some(n.to_string()) }).collect() }
    }
}

/// One inventory entry. `name` is optional only so that a missing name can be reported by validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryEntry {
    /// The cluster's (short) name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One of a cluster's machines, as its platform names it, with its addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// The platform's id (an EC2 instance id, a Compute Engine or Azure VM name, a vSphere VM id).
    pub id: String,
    /// Its private address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_ip: Option<String>,
    /// Its public address, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_ip: Option<String>,
}

/// How a pool proves a cluster usable (`readiness` in a pool spec). Once its nodes are ready, a resuming or new
/// cluster waits `settlePause` (PausingForClusterOperatorsToSettle), then until the check passes
/// (WaitingForClusterOperators); only then is it Running, and assignable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
}

impl KubernetesCheck {
    /// The credentials' secret ARN for `cluster`; `Err` as [`HttpsProbe::url_for`].
    pub fn credentials_for(&self, cluster: &Cluster, base_domain: Option<&str>) -> Result<String, String> {
        fill_cluster_template(&self.credentials, cluster, base_domain)
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

/// An external provisioner (`provisioner` in a pool spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisionerSpec {
    /// An installer behind a signed HTTP webhook (the contract is `provisioner.openapi.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookProvisioner>,
}

/// An installer behind a webhook: Apiary asks it to install (`PUT {url}/clusters/{id}`), reads how the install
/// stands (`GET`), and asks it to remove the cluster (`DELETE`), every request signed (Standard Webhooks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookProvisioner {
    /// The receiver's base URL: `https://…` (plain `http://` only to a loopback address, for local use).
    pub url: String,
    /// ARN of the Secrets Manager secret holding the signing key (`whsec_<base64>`).
    pub secret: String,
}

/// Where clusters are made. Exactly one platform per pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Platform {
    /// EC2 instances tagged `kubernetes.io/cluster/<infraId>=owned`.
    Aws(AwsPlatform),
    /// Compute Engine instances labelled `kubernetes-io-cluster-<infraId>=owned`.
    Gcp(GcpPlatform),
    /// Azure virtual machines in the cluster's resource group (`<infraId>-rg`).
    Azure(AzurePlatform),
    /// vSphere VMs in the folder `<infraId>` or tagged `<infraId>` in category `openshift-<infraId>`.
    Vsphere(VspherePlatform),
    /// Simulated machines, for tests and demos.
    Fake(FakePlatform),
}

impl Platform {
    /// The platform's name as it appears in a pool spec (`aws`, `fake`): the key its actuator is registered under.
    pub fn kind(&self) -> &'static str {
        match self {
            Platform::Aws(_) => "aws",
            Platform::Gcp(_) => "gcp",
            Platform::Azure(_) => "azure",
            Platform::Vsphere(_) => "vsphere",
            Platform::Fake(_) => "fake",
        }
    }
}

/// EC2 clusters: N instances from a launch template, or from an image and instance type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsPlatform {
    /// AWS region of the instances.
    pub region: String,
    /// Launch template to start instances from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_template: Option<LaunchTemplate>,
    /// AMI, when no launch template is given (or to override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// Instance type, when no launch template is given (or to override it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// Machines per cluster.
    #[serde(default = "one")]
    pub machine_count: i64,
    /// Subnet to launch into; unset uses the default VPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Extra tags on every instance.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

fn one() -> i64 {
    1
}

/// Compute Engine clusters: `machineCount` instances from an instance template, spread over the zones.
///
/// A cluster's machines are the instances labelled `kubernetes-io-cluster-<infraId>=owned` (the label
/// openshift-install sets), wherever they are in the project, so a cluster installed by other means is powered too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GcpPlatform {
    /// The project id.
    pub project: String,
    /// The zone to create instances in (or `zones`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Zones to spread a cluster's instances over, in turn (or `zone`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// The instance template: a name in the project (`apiary-node`) or its path
    /// (`global/instanceTemplates/apiary-node`, `projects/p/global/instanceTemplates/apiary-node`,
    /// `projects/p/regions/r/instanceTemplates/apiary-node`).
    pub instance_template: String,
    /// Machines per cluster.
    #[serde(default = "one")]
    pub machine_count: i64,
    /// ARN of the Secrets Manager secret holding the service account's JSON key.
    pub credentials_secret: String,
    /// Extra labels on every instance.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl GcpPlatform {
    /// The zones instances are created in: `zone`, then `zones`.
    pub fn all_zones(&self) -> Vec<&str> {
        self.zone.iter().chain(&self.zones).map(String::as_str).collect()
    }
}

/// Azure clusters: a resource group per cluster, created in `location`, and an ARM template deployed into it.
///
/// A cluster's machines are the virtual machines of its resource group (openshift-install's `<infraId>-rg`),
/// so a cluster installed by other means is powered too. Hibernating deallocates them (a VM that is only
/// powered off is still billed); deleting the cluster deletes its resource group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AzurePlatform {
    /// The subscription id (a GUID).
    pub subscription_id: String,
    /// The Entra ID tenant of the service principal (a GUID).
    pub tenant_id: String,
    /// The region resource groups are created in (`westeurope`).
    pub location: String,
    /// The cluster's resource group name: `{infraId}` is replaced by the cluster's infraId.
    #[serde(default = "default_resource_group")]
    pub resource_group_name: String,
    /// The ARM template deployed into the resource group (or `templateUri`). It must declare a string parameter
    /// `infraId`, which Apiary sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<serde_json::Value>,
    /// Where ARM fetches the template from (an `https` URL), instead of `template`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_uri: Option<String>,
    /// The template's other parameters, by name (values as JSON).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// ARN of the Secrets Manager secret holding the service principal's client id and secret.
    pub credentials_secret: String,
    /// Extra tags on the resource group and the deployment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// openshift-install's name of a cluster's resource group.
pub const DEFAULT_RESOURCE_GROUP: &str = "{infraId}-rg";

fn default_resource_group() -> String {
    DEFAULT_RESOURCE_GROUP.to_owned()
}

impl AzurePlatform {
    /// The resource group of the cluster `infra_id`.
    pub fn resource_group(&self, infra_id: &str) -> String {
        self.resource_group_name.replace("{infraId}", infra_id)
    }
}

/// vSphere clusters: `machineCount` VMs cloned from a template VM into a folder, tagged as openshift-install
/// tags them.
///
/// A cluster's machines are the VMs in the folder named `<infraId>` (openshift-install's folder) and those
/// tagged `<infraId>` in the category `openshift-<infraId>`, which Apiary creates for the VMs it clones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VspherePlatform {
    /// vCenter's host name (or `host:port`); its API is `https://<server>/api`.
    pub server: String,
    /// The datacenter's name.
    pub datacenter: String,
    /// The name of the VM (or VM template) clusters are cloned from.
    pub template: String,
    /// The name of the VM folder new VMs are cloned into.
    pub folder: String,
    /// The resource pool new VMs run in; unset: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// The datastore new VMs are stored on; unset: the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
    /// Machines per cluster.
    #[serde(default = "one")]
    pub machine_count: i64,
    /// ARN of the Secrets Manager secret holding the vCenter user name and password.
    pub credentials_secret: String,
    /// PEM certificates vCenter's certificate chains to (its VMCA root), beside the system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
    /// How long a guest shutdown may take before the VM is powered off hard. Unset: five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<GoDuration>,
}

/// How long a vSphere guest shutdown may take when the pool does not say.
pub const DEFAULT_SHUTDOWN_GRACE: TimeDelta = TimeDelta::minutes(5);

impl VspherePlatform {
    /// How long a guest shutdown may take before a hard power-off.
    pub fn shutdown_grace(&self) -> TimeDelta {
        self.shutdown_grace_period.as_ref().and_then(GoDuration::get).unwrap_or(DEFAULT_SHUTDOWN_GRACE)
    }
}

/// An EC2 launch template reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaunchTemplate {
    /// `lt-…` id.
    pub id: String,
    /// Version number, `$Latest` or `$Default`; unset means `$Default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Simulated clusters: how long things take and how often they fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FakePlatform {
    /// Time from creation to installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_duration: Option<GoDuration>,
    /// Time from start to Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_duration: Option<GoDuration>,
    /// Time from stop to Hibernating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_duration: Option<GoDuration>,
    /// Probability in [0, 1] that an install fails.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub install_failure_rate: f64,
    /// Probability in [0, 1] that a resume never completes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resume_failure_rate: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Default for FakePlatform {
    fn default() -> Self {
        Self {
            install_duration: None,
            resume_duration: None,
            stop_duration: None,
            install_failure_rate: 0.0,
            resume_failure_rate: 0.0,
        }
    }
}

/// A recurring time window that overrides size and/or runningCount while it is open.
///
/// The window opens at each firing of `cron` (standard five fields, evaluated in `timeZone`) and stays open
/// for `duration`. When several windows are open, the first in spec order wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// Name, for status and logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// When the window opens: `minute hour day-of-month month day-of-week`.
    pub cron: String,
    /// IANA time zone the cron expression is read in.
    #[serde(default = "utc")]
    pub time_zone: String,
    /// How long the window stays open.
    pub duration: GoDuration,
    /// Size while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// runningCount while open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_count: Option<i64>,
}

fn utc() -> String {
    "UTC".to_string()
}

/// The power state a cluster's spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DesiredPower {
    /// All machines running.
    Running,
    /// All machines stopped.
    Hibernating,
}

/// A cluster's observed power state, named exactly as seed 004 names `ClusterPowerState`.
///
/// Apiary drives `StartingMachines → WaitingForMachines → WaitingForNodes → Running` and
/// `Stopping → WaitingForMachinesToStop → Hibernating`, with `FailedToStartMachines` / `FailedToStop` on
/// actuator errors. The remaining seed states are kept so stored items written by other tools read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PowerState {
    /// All machines are running.
    Running,
    /// The machines are stopped.
    Hibernating,
    /// Starting cloud VMs failed.
    FailedToStartMachines,
    /// Stopping machines for hibernation failed.
    FailedToStop,
    /// SyncSets have not been applied yet (Hive only).
    SyncSetsNotApplied,
    /// Listing and starting cloud VMs.
    StartingMachines,
    /// Transitioning from Running to Hibernating.
    Stopping,
    /// Waiting for cloud VMs to stop.
    WaitingForMachinesToStop,
    /// Waiting for cloud VMs to start.
    WaitingForMachines,
    /// Waiting for nodes to become Ready.
    WaitingForNodes,
    /// Pausing for ClusterOperators to settle (Hive only).
    PausingForClusterOperatorsToSettle,
    /// Waiting for ClusterOperators (Hive only).
    WaitingForClusterOperators,
    /// The machines' state cannot be discovered.
    Unknown,
}

impl PowerState {
    /// States on the way to Running (where a resume timeout applies).
    pub fn is_resuming(self) -> bool {
        matches!(
            self,
            Self::StartingMachines
                | Self::WaitingForMachines
                | Self::WaitingForNodes
                | Self::FailedToStartMachines
                | Self::PausingForClusterOperatorsToSettle
                | Self::WaitingForClusterOperators
        )
    }

    /// States on the way to Hibernating (where a hibernate timeout applies).
    pub fn is_stopping(self) -> bool {
        matches!(self, Self::Stopping | Self::WaitingForMachinesToStop | Self::FailedToStop)
    }
}

/// Status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// The item is in the condition.
    True,
    /// The item is not in the condition.
    False,
    /// It cannot be decided.
    Unknown,
}

/// A condition, Kubernetes-style: `lastTransitionTime` moves only when `status` changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type (`Hibernating`, `Ready`, `Pending`, …).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the item is in the condition.
    pub status: ConditionStatus,
    /// One CamelCase word saying why.
    pub reason: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Timestamp,
}

/// Condition types.
pub mod condition {
    /// Cluster: whether it is hibernating (seed 004).
    pub const HIBERNATING: &str = "Hibernating";
    /// Cluster: whether it is running and ready (seed 004).
    pub const READY: &str = "Ready";
    /// Cluster: provisioning gave up.
    pub const PROVISION_STOPPED: &str = "ProvisionStopped";
    /// Cluster (deleting): the cloud refused to terminate some of its machines; retried with backoff.
    pub const DEPROVISION_FAILED: &str = "DeprovisionFailed";
    /// Cluster: the last provisioning attempt failed; another follows after a backoff (Hive's ProvisionFailed).
    pub const PROVISION_FAILED: &str = "ProvisionFailed";
    /// Pool: clusters keep failing to provision, so new ones wait a growing backoff.
    pub const PROVISIONING_BACKOFF: &str = "ProvisioningBackoff";
    /// Claim: waiting for a cluster.
    pub const PENDING: &str = "Pending";
    /// Pool: every unclaimed cluster matches the current poolVersion.
    pub const ALL_CLUSTERS_CURRENT: &str = "AllClustersCurrent";
    /// Cluster: its readiness check could not reach it (seed 004's Unreachable).
    pub const UNREACHABLE: &str = "Unreachable";
    /// Pool: maxSize leaves room for more clusters.
    pub const CAPACITY_AVAILABLE: &str = "CapacityAvailable";
}

/// Condition reasons, exactly as seed 004 (and seed 002 for the timeouts) name them.
pub mod reason {
    /// Hibernating=False: the cluster is resuming or running; see Ready.
    pub const RESUMING_OR_RUNNING: &str = "ResumingOrRunning";
    /// Hibernating=False: stopping machines.
    pub const STOPPING: &str = "Stopping";
    /// Hibernating=False: waiting for cloud VMs to stop.
    pub const WAITING_FOR_MACHINES_TO_STOP: &str = "WaitingForMachinesToStop";
    /// Hibernating=True.
    pub const HIBERNATING: &str = "Hibernating";
    /// The platform cannot hibernate.
    pub const UNSUPPORTED: &str = "Unsupported";
    /// Stopping failed (actuator error, or seed 002's timeout with a "timed out" message).
    pub const FAILED_TO_STOP: &str = "FailedToStop";
    /// Seed 002: the resume timed out.
    pub const FAILED_TO_START: &str = "FailedToStart";
    /// Hive only.
    pub const SYNC_SETS_NOT_APPLIED: &str = "SyncSetsNotApplied";
    /// Hive only.
    pub const SYNC_SETS_APPLIED: &str = "SyncSetsApplied";
    /// Power state discovery is paused.
    pub const POWER_STATE_PAUSED: &str = "PowerStatePaused";
    /// The cluster is being deleted.
    pub const CLUSTER_DEPLOYMENT_DELETED: &str = "ClusterDeploymentDeleted";
    /// Ready=False: the cluster is stopping or hibernating; see Hibernating.
    pub const STOPPING_OR_HIBERNATING: &str = "StoppingOrHibernating";
    /// Ready=False: listing and starting cloud VMs.
    pub const STARTING_MACHINES: &str = "StartingMachines";
    /// Ready=False: starting cloud VMs failed.
    pub const FAILED_TO_START_MACHINES: &str = "FailedToStartMachines";
    /// Ready=False: waiting for cloud VMs to start.
    pub const WAITING_FOR_MACHINES: &str = "WaitingForMachines";
    /// Ready=False: waiting for nodes to become Ready.
    pub const WAITING_FOR_NODES: &str = "WaitingForNodes";
    /// Hive only.
    pub const PAUSING_FOR_CLUSTER_OPERATORS_TO_SETTLE: &str = "PausingForClusterOperatorsToSettle";
    /// Hive only.
    pub const WAITING_FOR_CLUSTER_OPERATORS: &str = "WaitingForClusterOperators";
    /// Ready=True.
    pub const RUNNING: &str = "Running";
    /// Unreachable=True: the readiness check cannot reach the cluster.
    pub const CLUSTER_UNREACHABLE: &str = "ClusterUnreachable";
    /// Unreachable=False: it can again.
    pub const CLUSTER_REACHABLE: &str = "ClusterReachable";
    /// ProvisionStopped=True: the install failed.
    pub const PROVISION_FAILED: &str = "ProvisionFailed";
    /// ProvisionStopped=True: every provisioning attempt the pool allows failed (Hive's reason).
    pub const INSTALL_ATTEMPTS_LIMIT_REACHED: &str = "InstallAttemptsLimitReached";
    /// ProvisionStopped=True: the install outlived the pool's installTimeout.
    pub const INSTALL_TIMED_OUT: &str = "InstallTimedOut";
    /// DeprovisionFailed=True: the cloud refused to terminate machines.
    pub const TERMINATION_REFUSED: &str = "TerminationRefused";
    /// Claim Pending=True: no Running cluster was free.
    pub const NO_CLUSTERS: &str = "NoClusters";
    /// Claim Pending=False: a cluster was assigned.
    pub const CLUSTER_ASSIGNED: &str = "ClusterAssigned";
}

/// Longest condition message kept (a cloud's error text can be long; items must stay small).
pub const MAX_CONDITION_MESSAGE: usize = 1024;

/// Sets a condition in `conditions`, keeping `lastTransitionTime` when the status is unchanged. A message longer
/// than [`MAX_CONDITION_MESSAGE`] bytes is cut. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let cut;
    let message = if message.len() > MAX_CONDITION_MESSAGE {
        let mut end = MAX_CONDITION_MESSAGE - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        cut = format!("{}…", &message[..end]);
        cut.as_str()
    } else {
        message
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message.to_string();
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status,
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now,
            });
            conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
            true
        }
    }
}

/// The condition of `type_`, if set.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// One cluster of a pool (`CLUSTER#<id>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Unique id within the pool: `<name>-<5 chars>`.
    pub id: String,
    /// The cluster's name (the inventory name, or the id).
    pub cluster_name: String,
    /// Infrastructure id: machines are tagged `kubernetes.io/cluster/<infraId>=owned`.
    pub infra_id: String,
    /// The poolVersion the cluster was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_version: Option<String>,
    /// When the cluster was created.
    pub created_at: Timestamp,
    /// When installation completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_at: Option<Timestamp>,
    /// Installation gave up: the cluster is broken.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provision_stopped: bool,
    /// The claim holding the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// When it was claimed; never changes once set (seed 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at: Option<Timestamp>,
    /// The power state asked for; unset while nobody has decided (seed 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_power_state: Option<DesiredPower>,
    /// The observed power state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// When the power transition under way began; timeouts count from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_started_at: Option<Timestamp>,
    /// When the cluster last became Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_since: Option<Timestamp>,
    /// How long the last resume took, from start to Running; the adaptive running count learns from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume_seconds: Option<u32>,
    /// When a power transition timed out (seed 002): the cluster is broken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<Timestamp>,
    /// Hibernating, Ready and ProvisionStopped conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Released by its claim: delete within budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marked_for_deletion: bool,
    /// Deprovisioning has started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
    /// What an external installer said of the cluster it made (its API and console URLs, the ARN of the secret
    /// holding its kubeconfig, …): never a secret itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// The cluster's machines and their addresses, as its platform found them when it last became Running (a
    /// public address may change with each resume).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<Machine>,
    /// An admin paused power management of this cluster (seed 004's PowerStatePaused): Apiary neither starts nor
    /// stops it, no power timeout runs, and the pool does not assign it, until it is unpaused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub power_paused: bool,
    /// Failed provisioning attempts so far.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub install_failures: u32,
    /// Termination attempts the cloud refused so far (while deleting).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub deprovision_failures: u32,
    /// What the platform answered the current provisioning attempt with, to follow it by (vSphere's clone
    /// tasks); opaque to the planner, dropped once the cluster is installed or the attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provision_ref: Option<String>,
    /// After a failed actuator call (provision, start, stop, terminate): not retried before then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Timestamp>,
    /// The actuator call an invocation recorded it is making ([`crate::power::fenced_until`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_call: Option<PendingCall>,
    /// The live re-check chain ([`crate::power::chain`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Recheck>,
    /// A superseded link of a re-check chain that may still arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<Recheck>,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// An actuator call under way: the invocation making it recorded it before calling, so that nobody else acts on
/// the cluster's machines (or declares them Running) until its outcome is written or the fence passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The call.
    pub call: crate::power::ActuatorCall,
    /// When it was recorded.
    pub at: Timestamp,
}

/// One link of a cluster's re-check chain: the token its power message carries and when it is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recheck {
    /// The token (drawn fresh for each link, never reused).
    pub token: u64,
    /// When the message is due.
    pub due: Timestamp,
}

impl Cluster {
    /// A new, uninstalled cluster.
    pub fn new(
        id: impl Into<String>,
        cluster_name: impl Into<String>,
        infra_id: impl Into<String>,
        created_at: Timestamp,
    ) -> Self {
        Self {
            id: id.into(),
            cluster_name: cluster_name.into(),
            infra_id: infra_id.into(),
            pool_version: None,
            created_at,
            installed_at: None,
            provision_stopped: false,
            claim: None,
            claimed_at: None,
            spec_power_state: None,
            power_state: None,
            transition_started_at: None,
            running_since: None,
            last_resume_seconds: None,
            broken_at: None,
            conditions: Vec::new(),
            marked_for_deletion: false,
            deleting: false,
            power_paused: false,
            outputs: BTreeMap::new(),
            machines: Vec::new(),
            install_failures: 0,
            deprovision_failures: 0,
            provision_ref: None,
            retry_at: None,
            pending_call: None,
            check: None,
            superseded: None,
            rev: 0,
        }
    }

    /// Broken: provisioning stopped, or a power transition timed out (seed 002).
    pub fn is_broken(&self) -> bool {
        self.provision_stopped || self.broken_at.is_some()
    }

    /// Why a broken cluster is broken: the reason of its `ProvisionStopped` condition (provisioning gave up), or
    /// of its `Hibernating` condition (a power transition timed out: FailedToStart, FailedToStop). `None` when it
    /// is not broken.
    pub fn broken_reason(&self) -> Option<&str> {
        let type_ = if self.provision_stopped {
            condition::PROVISION_STOPPED
        } else if self.broken_at.is_some() {
            condition::HIBERNATING
        } else {
            return None;
        };
        Some(find_condition(&self.conditions, type_).map_or("Broken", |c| c.reason.as_str()))
    }

    /// Installed and observed Running: the only clusters a claim may get (seed 002).
    pub fn is_running(&self) -> bool {
        self.installed_at.is_some() && self.power_state == Some(PowerState::Running)
    }

    /// Ready to serve a claim as far as the cluster itself can tell: not broken, installed and Running, its power
    /// not paused by an admin (seed 004). The reconcile's classification calls an unclaimed cluster that passes
    /// this assignable.
    pub fn can_serve(&self) -> bool {
        !self.is_broken() && self.is_running() && !self.power_paused
    }

    /// A spare a claim may take now: unclaimed, not on its way out (released, deleting), and [`Self::can_serve`].
    /// The pool's sparse index of spares holds exactly the clusters for which this is true; the claim API still
    /// asks [`PoolSpec::may_assign`] of the one it picks, which adds what only the pool's spec knows.
    pub fn is_assignable(&self) -> bool {
        self.claim.is_none() && !self.marked_for_deletion && !self.deleting && self.can_serve()
    }
}

/// A request for one cluster (`CLAIM#<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// Name, unique within the pool.
    pub name: String,
    /// The IAM principal that made the claim.
    pub owner: String,
    /// When the claim was made; claims are served oldest first.
    pub created_at: Timestamp,
    /// Lifetime the claimant asked for; bounded by the pool's claimLifetime.maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime: Option<GoDuration>,
    /// The assigned cluster's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// When the cluster was assigned; the lifetime counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assigned_at: Option<Timestamp>,
    /// The claimant released the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_requested_at: Option<Timestamp>,
    /// The Pending condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
}

impl Claim {
    /// A new pending claim.
    pub fn new(name: impl Into<String>, owner: impl Into<String>, created_at: Timestamp) -> Self {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            condition::PENDING,
            ConditionStatus::True,
            reason::NO_CLUSTERS,
            "waiting for a Running cluster",
            created_at,
        );
        Self {
            name: name.into(),
            owner: owner.into(),
            created_at,
            lifetime: None,
            cluster: None,
            assigned_at: None,
            release_requested_at: None,
            conditions,
            rev: 0,
        }
    }

    /// The claim's lifetime under `pool`: `min(maximum, own or default)`; `None` lives forever.
    pub fn effective_lifetime(&self, pool: Option<&ClaimLifetime>) -> Option<TimeDelta> {
        let own = self.lifetime.as_ref().and_then(GoDuration::get);
        let default = pool.and_then(|p| p.default.as_ref()).and_then(GoDuration::get);
        let maximum = pool.and_then(|p| p.maximum.as_ref()).and_then(GoDuration::get);
        match (own.or(default), maximum) {
            (Some(l), Some(m)) => Some(l.min(m)),
            (l, m) => l.or(m),
        }
    }

    /// When the claim expires, if it is assigned and has a lifetime.
    pub fn expires_at(&self, pool: Option<&ClaimLifetime>) -> Option<Timestamp> {
        Some(self.assigned_at? + self.effective_lifetime(pool)?)
    }

    /// Where the claim stands, given its cluster's item (`None` when it has none, or the item is gone).
    pub fn phase(&self, cluster: Option<&Cluster>) -> ClaimPhase {
        match (self.release_requested_at, &self.cluster, cluster) {
            (Some(_), _, _) => ClaimPhase::Releasing,
            (None, None, _) => ClaimPhase::Pending,
            (None, Some(_), Some(c)) if c.is_running() => ClaimPhase::Ready,
            (None, Some(_), _) => ClaimPhase::Assigned,
        }
    }

    /// Waiting for a cluster: not assigned, not released.
    pub fn is_pending(&self) -> bool {
        self.phase(None) == ClaimPhase::Pending
    }
}

/// Where a claim stands, as the API, the metrics and the status view show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClaimPhase {
    /// No cluster yet.
    Pending,
    /// A cluster is assigned but not Running (the claimant hibernated it, or it is resuming).
    Assigned,
    /// Its cluster is Running: ready to use.
    Ready,
    /// The claimant released it; its cluster is being removed.
    Releasing,
}

/// An inventory name held by a cluster (`NAME#<clusterName>`, seed 003's ClusterNameUsage).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NameLease {
    /// The inventory name.
    pub name: String,
    /// Id of the cluster holding it (which may not exist yet: the lease is written first).
    pub holder: String,
    /// When it was reserved.
    pub reserved_at: Timestamp,
}

/// The pool's observed state (`POOL` item status).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The poolVersion of the current spec.
    #[serde(default)]
    pub pool_version: String,
    /// The effective size in force (after schedules and the inventory cap).
    #[serde(default)]
    pub size: u32,
    /// The effective running count in force.
    #[serde(default)]
    pub running_count: u32,
    /// Unclaimed, installed, Running: assignable at once.
    #[serde(default)]
    pub ready: u32,
    /// Unclaimed, installed, not Running.
    #[serde(default)]
    pub standby: u32,
    /// Unclaimed, not yet installed.
    #[serde(default)]
    pub installing: u32,
    /// Unclaimed and broken.
    #[serde(default)]
    pub broken: u32,
    /// Unclaimed and made from an older poolVersion.
    #[serde(default)]
    pub stale: u32,
    /// Held by a claim.
    #[serde(default)]
    pub claimed: u32,
    /// Being deprovisioned, or released and waiting to be.
    #[serde(default)]
    pub deleting: u32,
    /// Claims waiting for a cluster.
    #[serde(default)]
    pub pending_claims: u32,
    /// Deleting clusters whose machines the cloud refuses to terminate.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub deprovision_failing: u32,
    /// Clusters lost to provisioning in a row (reset when one installs): new clusters wait a growing backoff.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub provision_failures: u32,
    /// The last of those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_provision_failure: Option<ProvisionFailure>,
    /// The claim arrival-rate estimate of the adaptive running count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demand: Option<Demand>,
    /// The open schedule window, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_schedule: Option<String>,
    /// The schedules' answer and until when it holds (saves re-reading the cron expressions every plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::schedule::ScheduleState>,
    /// AllClustersCurrent and CapacityAvailable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl PoolStatus {
    /// The counts in one line, as the status views show them (`make run`, `apiary pool watch`).
    pub fn counts(&self) -> String {
        format!(
            "size {} running {} | ready {} standby {} installing {} claimed {} broken {} stale {} deleting {} pending claims {}",
            self.size,
            self.running_count,
            self.ready,
            self.standby,
            self.installing,
            self.claimed,
            self.broken,
            self.stale,
            self.deleting,
            self.pending_claims
        )
    }
}

/// A cluster lost to provisioning, as the pool remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionFailure {
    /// When its provisioning stopped.
    pub at: Timestamp,
    /// The cluster.
    pub cluster: String,
    /// Why (its ProvisionStopped condition's message).
    pub message: String,
}

/// A pool (`POOL` item).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// Name, unique in the table.
    pub name: String,
    /// What the operator asked for.
    pub spec: PoolSpec,
    /// What the last reconcile saw.
    #[serde(default)]
    pub status: PoolStatus,
    /// When the pool next needs a reconcile even if nothing happens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_wake_at: Option<Timestamp>,
    /// Deletion was asked for: clusters are drained, then the item goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_requested_at: Option<Timestamp>,
    /// When the pool was created.
    pub created_at: Timestamp,
    /// Revision for conditional writes.
    #[serde(default)]
    pub rev: u64,
}

/// Everything a reconcile reads: one pool's whole partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The pool item.
    pub pool: Pool,
    /// Its clusters.
    #[serde(default)]
    pub clusters: Vec<Cluster>,
    /// Its claims.
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// Its name leases.
    #[serde(default)]
    pub leases: Vec<NameLease>,
}
