//! What an operator asks of a pool: the spec, its platforms, and the options' settings (the policies that
//! read them live in their own modules).

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use super::cluster::Cluster;
use super::readiness::ReadinessSpec;
use crate::duration::GoDuration;

/// What an operator asks of a pool (docs/clouds.md, "Pool spec").
///
/// Counts are signed so a negative value reaches validation (`validate_spec`) and is reported with
/// its field instead of failing deserialization. The planner treats anything below zero as zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    /// Which classes of install failure are tried again ([`crate::failure::FailureReason`]'s names); a failure of
    /// another class stops the cluster's provisioning at once. Unset: the transient ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_retry_reasons: Option<Vec<String>>,
    /// Longest a cluster may take to install before it is broken and replaced. Unset: wait forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_timeout: Option<GoDuration>,
    /// Admin-provided cluster names (seed 003).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// DNS domain the clusters' names live under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_domain: Option<String>,
    /// The release the pool's clusters are installed from (an image by tag or digest, as Hive's ClusterImageSet
    /// names it), sent to its installer and part of the pool version. Unset: the installer's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The install-config template the pool's installer renders for its clusters, by reference: a name the
    /// installer keeps it under, pinned to its content by `@sha256:<digest>` if wished (Hive's
    /// `installConfigSecretTemplateRef`). Part of the pool version. Unset: the installer's settings' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_config_template: Option<String>,
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
    pub resume_canaries: Option<ResumeCanaries>,
    /// How often the pool's machines are listed for orphans (machines Apiary made whose cluster is gone), and how
    /// long an orphan is left alone before it is deleted ([`crate::reaper`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaper: Option<ReaperSpec>,
    /// Who may claim from the pool and who may administer it ([`crate::access`]). Unset: the stack's
    /// `DefaultPoolAccess`. Never an input of `poolVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<PoolAccess>,
    /// Webhooks told when a claim gets its cluster or ends and when a cluster breaks ([`crate::notify`]), at most
    /// [`MAX_HOOKS`](super::notice::MAX_HOOKS). Never an input of `poolVersion`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<super::notice::NotifyHook>,
    /// Options of a later release, kept as read ([`super::Later`]); a caller may not send them.
    #[serde(flatten, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub later: super::Later,
}

/// The pool option (`access`): principal patterns, as [`crate::access`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolAccess {
    /// Who may claim from the pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claimants: Vec<String>,
    /// Who may change and delete the pool, pause its clusters, and read, power and release every claim of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admins: Vec<String>,
}

/// The pool option (`reaper`): both fields optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReaperSpec {
    /// How often the pool's machines are listed (default 30m, at least 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<GoDuration>,
    /// How long a machine whose cluster is gone is left alone before it is deleted (default 1h, at least 30m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<GoDuration>,
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
            install_retry_reasons: None,
            install_timeout: None,
            inventory: None,
            base_domain: None,
            release: None,
            install_config_template: None,
            labels: BTreeMap::new(),
            platform,
            readiness: None,
            provisioner: None,
            schedules: Vec::new(),
            adaptive_running_count: None,
            resume_canaries: None,
            reaper: None,
            later: BTreeMap::new(),
            access: None,
            notify: Vec::new(),
        }
    }

    /// The inventory's names, in order, when an inventory is present.
    pub fn inventory_names(&self) -> Option<Vec<&str>> {
        self.inventory.as_ref().map(|inv| {
            inv.cluster_deployments.iter().filter_map(|e| e.name.as_deref()).filter(|n| !n.is_empty()).collect()
        })
    }

    /// The parameters of the inventory entry named `name`, when the pool has an inventory that names it.
    pub fn inventory_parameters(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        let entries = &self.inventory.as_ref()?.cluster_deployments;
        entries.iter().find(|e| e.name.as_deref() == Some(name)).map(|e| &e.parameters)
    }

    /// Whether a claim may take `cluster` of this pool now: it [`Cluster::is_assignable`], and the inventory entry
    /// of the name it holds, if any, is still in the inventory as the cluster was made from it (seed 003: a
    /// cluster whose name was removed, or whose entry changed, is on its way out). The claim API asks this of the
    /// spare it picks; the reconcile classifies by the same rules.
    pub fn may_assign(&self, cluster: &Cluster) -> bool {
        let entry_gone = cluster.cluster_name != cluster.id
            && self.inventory.is_some()
            && self.inventory_parameters(&cluster.cluster_name) != Some(&cluster.parameters);
        cluster.is_assignable() && !entry_gone
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
            retried: crate::failure::Retried::from_names(self.install_retry_reasons.as_deref()),
            readiness: self
                .readiness
                .as_ref()
                .map(|r| r.settle_pause.as_ref().and_then(GoDuration::get).unwrap_or_else(TimeDelta::zero)),
            pace: crate::pace::Pace::default(),
            sleep_is_news: self.resume_canaries.is_some(),
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
    /// The classes of install failure tried again.
    pub retried: crate::failure::Retried,
    /// The pool checks readiness beyond the nodes: with how long a settle pause (zero: none).
    pub readiness: Option<TimeDelta>,
    /// How soon the pool's transitions finish when they are quick (from its status): what the looks are paced by.
    pub pace: crate::pace::Pace,
    /// A cluster's stop ending wakes the pool: its resume canaries rank the standbys asleep. Elsewhere a stopping
    /// cluster is a standby to the plan already, and nothing the plan decides waits on the machines being down.
    pub sleep_is_news: bool,
}

impl Default for PowerLimits {
    fn default() -> Self {
        Self {
            to_running: None,
            to_hibernating: None,
            install: None,
            install_attempts: DEFAULT_INSTALL_ATTEMPTS,
            retried: crate::failure::Retried::TRANSIENT,
            readiness: None,
            pace: crate::pace::Pace::default(),
            sleep_is_news: false,
        }
    }
}

/// Claim lifetime bounds: a claim lives `min(maximum, its own lifetime or default)` from assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// One entry per cluster the pool may make.
    #[serde(default)]
    pub cluster_deployments: Vec<InventoryEntry>,
}

impl Inventory {
    /// An inventory of these names.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let entry = |n: &str| InventoryEntry { name: Some(n.to_string()), parameters: BTreeMap::new() };
        Self { cluster_deployments: names.into_iter().map(entry).collect() }
    }
}

/// One inventory entry. `name` is optional only so that a missing name can be reported by validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    /// The cluster's (short) name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What else the cluster of this name needs of its own (an on-premises cluster's API and ingress VIPs, its
    /// network), sent to the installer with its request: names and values as labels take them. A cluster made
    /// with other parameters than its entry's now is replaced, unless a claim holds it (as when its name is
    /// removed, seed 003).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// An external provisioner (`provisioner` in a pool spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisionerSpec {
    /// An installer behind a signed HTTP webhook (the contract is `provisioner.openapi.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookProvisioner>,
}

/// An installer behind a webhook: Apiary asks it to install (`PUT {url}/clusters/{id}`), reads how the install
/// stands (`GET`), and asks it to remove the cluster (`DELETE`), every request signed (Standard Webhooks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookProvisioner {
    /// The receiver's base URL: `https://…` (plain `http://` only to a loopback address, for local use).
    pub url: String,
    /// ARN of the Secrets Manager secret holding the signing key (`whsec_<base64>`).
    pub secret: String,
}

/// Where clusters are made. Exactly one platform per pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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
    /// A role in the account where the pool's clusters live, assumed (with the pool's [`external_id`]) for every
    /// EC2 call of the pool; unset, the power function's own role drives EC2 in the stack's account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
}

/// The parts of an IAM role ARN, `arn:PARTITION:iam::ACCOUNT:role/[PATH/]NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleArn<'a> {
    /// `aws`, `aws-cn`, `aws-us-gov`.
    pub partition: &'a str,
    /// The 12-digit account id.
    pub account: &'a str,
    /// The role's name, without its path.
    pub name: &'a str,
}

impl<'a> RoleArn<'a> {
    /// `arn` as a role ARN, or why it is not one.
    pub fn parse(arn: &'a str) -> Result<Self, String> {
        let malformed = || format!("{arn:?} is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)");
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let ["arn", partition, "iam", "", account, resource] = parts.as_slice() else { return Err(malformed()) };
        let Some(path_and_name) = resource.strip_prefix("role/") else { return Err(malformed()) };
        let name = path_and_name.rsplit('/').next().unwrap_or_default();
        let name_ok = (1..=64).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b));
        let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
        let partition_ok = partition.starts_with("aws") && !partition.contains(char::is_whitespace);
        if !(name_ok && account_ok && partition_ok) {
            return Err(malformed());
        }
        Ok(RoleArn { partition, account, name })
    }
}

/// The ExternalId Apiary passes when it assumes the role of `pool` in the stack `stack_id` (CloudFormation's
/// `AWS::StackId`, whose last segment is unique to the stack): a member account's role trusts it for that one
/// pool, so a pool admin who names another team's role cannot have Apiary assume it for their own pool.
pub fn external_id(stack_id: &str, pool: &str) -> String {
    let stack = stack_id.rsplit('/').next().unwrap_or(stack_id);
    let stack: String =
        stack.chars().map(|c| if c.is_ascii_alphanumeric() || "+=,.@:_-".contains(c) { c } else { '-' }).collect();
    format!("apiary-{stack}-{pool}")
}

fn one() -> i64 {
    1
}

/// Compute Engine clusters: `machineCount` instances from an instance template, spread over the zones.
///
/// A cluster's machines are the instances labelled `kubernetes-io-cluster-<infraId>=owned` (the label
/// openshift-install sets), wherever they are in the project, so a cluster installed by other means is powered too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    /// `projects/p/regions/r/instanceTemplates/apiary-node`). Empty when the pool's installer makes the machines.
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
pub struct LaunchTemplate {
    /// `lt-…` id.
    pub id: String,
    /// Version number, `$Latest` or `$Default`; unset means `$Default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Simulated clusters: how long things take and how often they fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
#[serde(rename_all = "camelCase")]
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

/// The pool spec option (`adaptiveRunningCount`). Exactly one target is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveRunningCount {
    /// Share of claims to serve with a Running cluster at once, in (0, 1), e.g. 0.95.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instant_share: Option<f64>,
    /// Claim wait p95 to stay under, e.g. `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_p95: Option<GoDuration>,
    /// Time constant of the arrival-rate estimate: how far back "recent" reaches. Default 30m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<GoDuration>,
    /// Resume time to assume until the pool has measured one. Default 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_estimate: Option<GoDuration>,
    /// Learn the week's pattern of claims and have spares Running before the demand it has seen before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<Forecast>,
    /// Keep a just-installed cluster Running, beyond the running count, while a claim is expected sooner than a
    /// stop and a resume would take; it hibernates once that long has passed with none. A cluster that is up
    /// then counts toward the running count before an older one asleep. Off by default: a departure from seed
    /// 000, which hibernates the newest clusters beyond the running count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_fresh: Option<bool>,
}

/// The forecast option (`adaptiveRunningCount.forecast`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// IANA time zone the week is counted in (its days and hours, daylight saving included). Default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// After how many weeks a week's weight in the profile halves. Default 1; at most 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_life_weeks: Option<f64>,
}

/// The pool option (`resumeCanaries`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeCanaries {
    /// A standby that has not run for this long is resumed to check that it still can, e.g. `72h`.
    pub after: GoDuration,
    /// How many canaries may be resuming at once. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_a_time: Option<i64>,
    /// The local hours canaries start in, `HH:MM-HH:MM` (past midnight allowed, e.g. `22:00-06:00`). Default:
    /// any time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<String>,
    /// IANA time zone of `hours`. Default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_external_id_is_the_stacks_and_the_pools() {
        let stack = "arn:aws:cloudformation:eu-west-1:123456789012:stack/apiary/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        assert_eq!(external_id(stack, "ci"), "apiary-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-ci");
        // Another stack of the same name, or another pool, is another ExternalId.
        let again = "arn:aws:cloudformation:eu-west-1:123456789012:stack/apiary/11111111-2222-3333-4444-555555555555";
        assert_ne!(external_id(again, "ci"), external_id(stack, "ci"));
        assert_ne!(external_id(stack, "ci-2"), external_id(stack, "ci"));
        // Whatever a stack id holds, the ExternalId keeps to STS's characters.
        assert_eq!(external_id("my stack", "ci"), "apiary-my-stack-ci");
    }
}
