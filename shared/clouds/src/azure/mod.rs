//! Azure: a cluster's machines are the virtual machines of its resource group (`platform.azure.resourceGroupName`,
//! openshift-install's `<infraId>-rg` by default), found with one list of the group, each VM's instance view (its
//! `PowerState/…` and `ProvisioningState/…`) expanded in it (`$expand=instanceView`): one ARM read a page
//! (following `nextLink`), however many VMs the cluster has.
//!
//! - Start: `POST …/start` on deallocated and stopped VMs. A start that failed after it was accepted
//!   (`ProvisioningState/failed/AllocationFailed` in the instance view) is re-issued and reported as that VM's
//!   refusal, with Azure's message, so the resume backs off and says why.
//! - Stop: `POST …/deallocate` on running VMs and on stopped ones (powered off but still allocated, so still
//!   billed): hibernation releases the compute. A VM with an ephemeral OS disk cannot be deallocated: such a
//!   cluster's hibernation is unsupported (seed 004), said before any VM is touched.
//! - Actions answer 202 with `Azure-AsyncOperation`: the VM's power state at the next look says how it went.
//!   A 409 (another operation under way) is "not yet": the action is re-issued at the next look.
//! - Provision: `PUT` the resource group (in `location`, tagged `kubernetes.io_cluster.<infraId>=owned`,
//!   `apiary-pool`, `apiary-cluster` and the pool's tags), then `PUT` the template deployment `apiary-<attempt>`
//!   with the parameter `infraId`; its `Azure-AsyncOperation` is kept as the provisioning handle and followed at
//!   the next looks. The install is done once the deployment succeeded and every VM runs; a failed deployment is a
//!   failed attempt (its error and details), and the next attempt is a new deployment.
//! - Deprovision: `DELETE` the resource group, asked again at each look until it answers 404.
//!
//! Power states map onto [`MachineState`]: running is running; starting (and a VM still being created) is
//! pending; stopping and deallocating are stopping; deallocated is stopped; stopped (powered off, allocated) is
//! stopped for a start and not yet stopped for a hibernation. VMs being deleted are gone.

pub mod auth;

use std::sync::Arc;

use apiary_planner::machines::MachineState;
use apiary_planner::power::{Install, Termination};
use apiary_planner::{AzurePlatform, Machine, Platform, PoolSpec, Timestamp};
use apiary_ports::platform::{Actuator, Machines, Marked, Nodes, Provision, Provisioner, Refused, Target};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::fanout::{self, Outcome};
use crate::http::{escape, Answer, Http};
use crate::secrets::{ForPool, SecretCache};
use crate::tokens::TokenCache;
use auth::{ClientSecret, Issuer};

/// Azure Resource Manager's root (`APIARY_AZURE_ENDPOINT` overrides it: sovereign clouds, the fake).
pub const DEFAULT_ENDPOINT: &str = "https://management.azure.com";
/// Entra ID's root (`APIARY_AZURE_AUTHORITY` overrides it).
pub const DEFAULT_AUTHORITY: &str = "https://login.microsoftonline.com";
/// The Compute API version Apiary speaks.
pub const COMPUTE_API: &str = "2024-07-01";
/// The Resources API version Apiary speaks (resource groups, deployments).
pub const RESOURCES_API: &str = "2021-04-01";
/// The Network resource provider's API version (network interfaces, public IP addresses).
pub const NETWORK_API: &str = "2024-05-01";

/// The tag openshift-install puts on a cluster's resources.
pub fn cluster_tag(infra_id: &str) -> String {
    format!("kubernetes.io_cluster.{infra_id}")
}

/// The name of a cluster's deployment for provisioning attempt `attempt`.
pub fn deployment_name(attempt: u32) -> String {
    format!("apiary-{attempt}")
}

/// The Azure platform.
pub struct Azure {
    http: Http,
    endpoint: String,
    authority: String,
    secrets: SecretCache,
    tokens: TokenCache,
}

/// A pool's Azure settings, with the pool's name its credentials are read for.
type Settings<'a> = ForPool<'a, AzurePlatform>;

/// One VM with what its instance view says.
#[derive(Debug, Clone)]
struct Vm {
    name: String,
    /// `running`, `deallocated`, … or `unknown` (no power state yet).
    power: String,
    /// `succeeded`, `updating`, `deleting`, `failed/<code>`, …
    provisioning: String,
    /// The message of a failed provisioning state.
    failure: Option<String>,
    ephemeral_os_disk: bool,
    agent_ready: bool,
}

impl Vm {
    /// The VM's state for a start (`for_stop` false) or a hibernation (`for_stop` true).
    fn state(&self, for_stop: bool) -> MachineState {
        if self.provisioning == "deleting" {
            return MachineState::ShuttingDown;
        }
        state(&self.power, for_stop)
    }
}

/// An ARM power state (`PowerState/<state>`) as a [`MachineState`], for a hibernation when `for_stop`.
pub fn state(power: &str, for_stop: bool) -> MachineState {
    match power {
        "running" => MachineState::Running,
        "stopping" | "deallocating" => MachineState::Stopping,
        "deallocated" => MachineState::Stopped,
        // Powered off but still allocated (and billed): a hibernation deallocates it.
        "stopped" if for_stop => MachineState::Running,
        "stopped" => MachineState::Stopped,
        _ => MachineState::Pending,
    }
}

#[derive(Deserialize)]
struct VmList {
    #[serde(default)]
    value: Vec<Value>,
    #[serde(default, rename = "nextLink")]
    next_link: Option<String>,
}

/// ARM's error answer as `STATUS Code: message`, and its code.
fn arm_error(answer: &Answer) -> (String, String) {
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let code = body["error"]["code"].as_str().unwrap_or_default().to_owned();
    let message = body["error"]["message"].as_str().map(str::to_owned).unwrap_or_else(|| answer.text());
    (code.clone(), format!("{} {code}: {message}", answer.status.as_u16()))
}

/// A failed operation's or deployment's error, with its details: `Code: message (Detail: message; …)`.
fn describe(error: &Value) -> String {
    let code = error["code"].as_str().unwrap_or("Failed");
    let message = error["message"].as_str().unwrap_or_default();
    let details: Vec<String> = error["details"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| format!("{}: {}", d["code"].as_str().unwrap_or_default(), d["message"].as_str().unwrap_or_default()))
        .collect();
    if details.is_empty() {
        format!("{code}: {message}")
    } else {
        format!("{code}: {message} ({})", details.join("; "))
    }
}

impl Azure {
    /// The platform, reading credentials through `secrets`, calling ARM at `endpoint` and Entra ID at `authority`
    /// (None: the public cloud's).
    pub fn new(http: Http, secrets: Arc<dyn Secrets>, endpoint: Option<String>, authority: Option<String>) -> Self {
        let root = |url: Option<String>, default: &str| {
            url.unwrap_or_else(|| default.to_owned()).trim_end_matches('/').to_owned()
        };
        Self {
            http,
            endpoint: root(endpoint, DEFAULT_ENDPOINT),
            authority: root(authority, DEFAULT_AUTHORITY),
            secrets: SecretCache::new(secrets),
            tokens: TokenCache::default(),
        }
    }

    fn platform<'a>(pool: &'a str, spec: &'a PoolSpec) -> Result<Settings<'a>> {
        match &spec.platform {
            Platform::Azure(az) => Ok(ForPool { pool, settings: az }),
            other => Err(Error::Config(format!("the Azure platform was given a {} pool", other.kind()))),
        }
    }

    fn issuer<'a>(&'a self, az: &'a AzurePlatform) -> Issuer<'a> {
        Issuer { authority: &self.authority, tenant: &az.tenant_id, resource: &self.endpoint }
    }

    async fn credentials(&self, az: Settings<'_>) -> Result<ClientSecret> {
        let secret = self.secrets.get(&az.credentials_secret, az.pool).await?;
        ClientSecret::parse(&az.credentials_secret, secret.expose())
    }

    /// Sends an authorized request to ARM; a 401 renews the token (and re-reads the secret) and tries once more.
    async fn call(
        &self,
        op: &'static str,
        az: Settings<'_>,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Answer> {
        let first = self.credentials(az).await?;
        let forget = || {
            self.tokens.forget(&auth::cache_key(self.issuer(az.settings), &first));
            self.secrets.forget(&az.credentials_secret);
        };
        let token = || async {
            auth::token(&self.tokens, &self.http, self.issuer(az.settings), &self.credentials(az).await?).await
        };
        self.http.send_with(op, token, forget, |c, token| build(c).bearer_auth(token)).await
    }

    /// `url` when it is on ARM (links ARM answers with are followed, and the token sent, nowhere else).
    fn on_arm(&self, url: &str) -> Result<String> {
        let ours = url.strip_prefix(&self.endpoint).is_some_and(|rest| rest.starts_with('/'));
        if ours {
            Ok(url.to_owned())
        } else {
            Err(Error::service("azure:link", format!("ARM answered with a link off {}: {url}", self.endpoint), false))
        }
    }

    fn group_url(&self, az: &AzurePlatform, group: &str) -> String {
        format!("{}/subscriptions/{}/resourcegroups/{}", self.endpoint, escape(&az.subscription_id), escape(group))
    }

    fn vms_url(&self, az: &AzurePlatform, group: &str) -> String {
        format!("{}/providers/Microsoft.Compute/virtualMachines", self.group_url(az, group))
    }

    /// Every resource an ARM list at `first` gives, page by page; none when the group does not exist.
    async fn list(&self, op: &'static str, az: Settings<'_>, first: String) -> Result<Vec<Value>> {
        let mut listed = vec![];
        let mut next = Some(first);
        while let Some(url) = next.take() {
            let answer = self.call(op, az, |c| c.get(&url)).await?;
            if answer.status == StatusCode::NOT_FOUND {
                return Ok(vec![]);
            }
            if !answer.is_success() {
                return Err(Error::service(op, arm_error(&answer).1, false));
            }
            let page: VmList = answer.json(op)?;
            listed.extend(page.value);
            next = page.next_link.filter(|l| !l.is_empty()).map(|l| self.on_arm(&l)).transpose()?;
        }
        Ok(listed)
    }

    /// The VMs of `group` with their instance views, expanded in the list: one ARM read a page, however many VMs.
    /// None when the group does not exist. A VM listed without a view has no power state yet (pending).
    async fn vms(&self, az: Settings<'_>, group: &str) -> Result<Vec<Vm>> {
        let first = format!("{}?api-version={COMPUTE_API}&$expand=instanceView", self.vms_url(az.settings, group));
        let listed = self.list("compute:virtualMachines.list", az, first).await?;
        Ok(listed.iter().map(|vm| vm_of(vm, &vm["properties"]["instanceView"])).collect())
    }

    async fn listed<'a>(&self, t: &Target<'a>) -> Result<(Settings<'a>, String, Vec<Vm>)> {
        let az = Self::platform(t.pool, t.spec)?;
        let group = az.resource_group(&t.cluster.infra_id);
        let vms = self.vms(az, &group).await?;
        Ok((az, group, vms))
    }

    /// One action (`start`, `deallocate`) on each VM `pick` selects.
    async fn act(&self, az: Settings<'_>, group: &str, vms: &[Vm], action: &'static str) -> Result<Refused> {
        let op = if action == "start" { "compute:virtualMachines.start" } else { "compute:virtualMachines.deallocate" };
        let calls: Vec<(String, String)> = vms
            .iter()
            .map(|vm| {
                let url = format!(
                    "{}/{}/{action}?api-version={COMPUTE_API}",
                    self.vms_url(az.settings, group),
                    escape(&vm.name)
                );
                (vm.name.clone(), url)
            })
            .collect();
        fanout::each(calls, |url| async move {
            let answer = self.call(op, az, |c| c.post(&url).header("content-length", "0")).await?;
            if answer.is_success() || answer.status == StatusCode::NOT_FOUND || answer.status == StatusCode::CONFLICT {
                // Accepted; gone; or another operation under way: the next look re-issues it.
                return Ok(Outcome::Done);
            }
            Ok(Outcome::Refused(arm_error(&answer).1))
        })
        .await
    }

    async fn deployment(&self, az: Settings<'_>, t: &Target<'_>, group: &str) -> Result<Install> {
        if let Some(link) = &t.cluster.provision_ref {
            // The deployment's Azure-AsyncOperation, kept when it was accepted.
            let url = self.on_arm(link)?;
            let answer = self.call("resources:deployments.operationStatus", az, |c| c.get(&url)).await?;
            if answer.is_success() {
                let status: Value = answer.json("resources:deployments.operationStatus")?;
                return Ok(match status["status"].as_str().unwrap_or_default() {
                    "Succeeded" => self.all_running(az, group).await?,
                    "Failed" | "Canceled" => Install::Failed { message: describe(&status["error"]) },
                    _ => Install::UnderWay,
                });
            }
            if answer.status != StatusCode::NOT_FOUND {
                return Err(Error::service("resources:deployments.operationStatus", arm_error(&answer).1, false));
            }
        }
        let url = format!(
            "{}/providers/Microsoft.Resources/deployments/{}?api-version={RESOURCES_API}",
            self.group_url(az.settings, group),
            deployment_name(t.attempt())
        );
        let answer = self.call("resources:deployments.get", az, |c| c.get(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(Install::Absent);
        }
        if !answer.is_success() {
            return Err(Error::service("resources:deployments.get", arm_error(&answer).1, false));
        }
        let d: Value = answer.json("resources:deployments.get")?;
        Ok(match d["properties"]["provisioningState"].as_str().unwrap_or_default() {
            "Succeeded" => self.all_running(az, group).await?,
            "Failed" | "Canceled" => Install::Failed { message: describe(&d["properties"]["error"]) },
            _ => Install::UnderWay,
        })
    }

    /// After a deployment succeeded: done once every VM of the group runs.
    async fn all_running(&self, az: Settings<'_>, group: &str) -> Result<Install> {
        let vms = self.vms(az, group).await?;
        if vms.is_empty() {
            return Ok(Install::Failed {
                message: format!("the deployment succeeded but {group} holds no virtual machine"),
            });
        }
        Ok(if vms.iter().all(|vm| vm.state(false) == MachineState::Running) {
            Install::Done
        } else {
            Install::UnderWay
        })
    }

    fn tags(az: &AzurePlatform, t: &Target<'_>) -> Value {
        let mut tags = serde_json::Map::new();
        for (k, v) in &az.tags {
            tags.insert(k.clone(), json!(v));
        }
        tags.insert(cluster_tag(&t.cluster.infra_id), json!("owned"));
        tags.insert("apiary-pool".into(), json!(t.pool));
        tags.insert("apiary-cluster".into(), json!(t.cluster.id));
        Value::Object(tags)
    }
}

/// A listed VM and its instance view, as Apiary reads them.
/// Each VM's addresses: its primary network interface's primary IP configuration gives the private address, and
/// the public IP address resource it names (when it has been allocated one) the public address. ARM ids are
/// compared without regard to case, as ARM compares them.
fn addresses(vms: &[Value], nics: &[Value], ips: &[Value]) -> Vec<Machine> {
    let by_id = |list: &[Value], id: &str| -> Option<Value> {
        list.iter().find(|r| r["id"].as_str().is_some_and(|i| i.eq_ignore_ascii_case(id))).cloned()
    };
    let primary = |list: &Value| -> Option<Value> {
        let list = list.as_array()?;
        list.iter().find(|x| x["properties"]["primary"] == true).or_else(|| list.first()).cloned()
    };
    vms.iter()
        .map(|vm| {
            let nic = primary(&vm["properties"]["networkProfile"]["networkInterfaces"])
                .and_then(|n| n["id"].as_str().and_then(|id| by_id(nics, id)));
            let config = nic.as_ref().and_then(|n| primary(&n["properties"]["ipConfigurations"]));
            let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
            let private_ip = config.as_ref().and_then(|c| text(&c["properties"]["privateIPAddress"]));
            let public_ip = config
                .as_ref()
                .and_then(|c| c["properties"]["publicIPAddress"]["id"].as_str().and_then(|id| by_id(ips, id)))
                .and_then(|ip| text(&ip["properties"]["ipAddress"]));
            Machine { id: vm["name"].as_str().unwrap_or_default().to_owned(), private_ip, public_ip }
        })
        .collect()
}

fn vm_of(vm: &Value, view: &Value) -> Vm {
    let statuses = view["statuses"].as_array().cloned().unwrap_or_default();
    let code = |prefix: &str| {
        statuses.iter().find_map(|s| s["code"].as_str().and_then(|c| c.strip_prefix(prefix)).map(str::to_owned))
    };
    let failure = statuses
        .iter()
        .find(|s| s["code"].as_str().is_some_and(|c| c.starts_with("ProvisioningState/failed")))
        .map(|s| {
            let code = s["code"].as_str().unwrap_or_default().trim_start_matches("ProvisioningState/failed/");
            format!("{code}: {}", s["message"].as_str().unwrap_or("the last operation failed"))
        });
    let listed_state = vm["properties"]["provisioningState"].as_str().unwrap_or_default().to_ascii_lowercase();
    let agent_ready = view["vmAgent"]["statuses"]
        .as_array()
        .is_none_or(|s| s.iter().all(|a| a["displayStatus"].as_str().is_none_or(|d| d == "Ready")));
    Vm {
        name: vm["name"].as_str().unwrap_or_default().to_owned(),
        power: code("PowerState/").unwrap_or_else(|| "unknown".into()),
        provisioning: if listed_state == "deleting" {
            listed_state
        } else {
            code("ProvisioningState/").unwrap_or_default()
        },
        failure,
        ephemeral_os_disk: vm["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"]["option"] == "Local",
        agent_ready,
    }
}

#[async_trait]
impl Actuator for Azure {
    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        let (_, _, vms) = self.listed(&t).await?;
        let live: Vec<&Vm> = vms.iter().filter(|vm| !vm.state(false).is_gone()).collect();
        Ok(Machines::of(
            live.iter().map(|vm| (vm.name.as_str(), vm.state(false))),
            MachineState::Running,
            MachineState::start_acts,
        ))
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        let (_, _, vms) = self.listed(&t).await?;
        let live: Vec<&Vm> = vms.iter().filter(|vm| !vm.state(true).is_gone()).collect();
        let mut m = Machines::of(
            live.iter().map(|vm| (vm.name.as_str(), vm.state(true))),
            MachineState::Stopped,
            MachineState::stop_acts,
        );
        m.unsupported = live
            .iter()
            .filter(|vm| vm.ephemeral_os_disk && vm.state(true) != MachineState::Stopped)
            .map(|vm| (vm.name.clone(), "its OS disk is ephemeral, and Azure cannot deallocate such a VM".to_owned()))
            .collect();
        Ok(m)
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        let (_, _, vms) = self.listed(&t).await?;
        let live: Vec<&Vm> = vms.iter().filter(|vm| !vm.state(false).is_gone()).collect();
        let m = Machines::of(
            live.iter().map(|vm| (vm.name.as_str(), vm.state(false))),
            MachineState::Running,
            MachineState::start_acts,
        );
        if m.total == 0 || !m.not_ready.is_empty() {
            return Ok(Nodes::Machines(m));
        }
        let waiting = live.iter().filter(|vm| !vm.agent_ready).count();
        Ok(if waiting == 0 {
            Nodes::Ready
        } else {
            Nodes::NotReady(format!("the VM agent is not ready yet on {waiting} of {} VMs", live.len()))
        })
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        let az = Self::platform(t.pool, t.spec)?;
        let group = az.resource_group(&t.cluster.infra_id);
        let vms = self.list(
            "compute:virtualMachines.list",
            az,
            format!("{}?api-version={COMPUTE_API}", self.vms_url(az.settings, &group)),
        );
        let network = format!("{}/providers/Microsoft.Network", self.group_url(az.settings, &group));
        let nics = self.list(
            "network:networkInterfaces.list",
            az,
            format!("{network}/networkInterfaces?api-version={NETWORK_API}"),
        );
        let ips = self.list(
            "network:publicIPAddresses.list",
            az,
            format!("{network}/publicIPAddresses?api-version={NETWORK_API}"),
        );
        let (vms, nics, ips) = futures::try_join!(vms, nics, ips)?;
        Ok(addresses(&vms, &nics, &ips))
    }

    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        let (az, group, vms) = self.listed(&t).await?;
        let stopped: Vec<Vm> = vms.into_iter().filter(|vm| vm.state(false).start_acts()).collect();
        let mut refused = self.act(az, &group, &stopped, "start").await?;
        // A start that failed after it was accepted (no capacity) is retried above and said here.
        for vm in &stopped {
            if let Some(failure) = &vm.failure {
                if !refused.machines.iter().any(|(name, _)| name == &vm.name) {
                    refused.machines.push((vm.name.clone(), format!("the last start failed: {failure}")));
                }
            }
        }
        refused.machines.sort();
        Ok(refused)
    }

    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        let (az, group, vms) = self.listed(&t).await?;
        let running: Vec<Vm> =
            vms.into_iter().filter(|vm| vm.state(true).stop_acts() && !vm.ephemeral_os_disk).collect();
        self.act(az, &group, &running, "deallocate").await
    }
}

#[async_trait]
impl Provisioner for Azure {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        let az = Self::platform(t.pool, t.spec)?;
        let group = az.resource_group(&t.cluster.infra_id);
        self.deployment(az, &t, &group).await
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let az = Self::platform(t.pool, t.spec)?;
        let group = az.resource_group(&t.cluster.infra_id);
        let tags = Self::tags(az.settings, &t);
        let url = format!("{}?api-version={RESOURCES_API}", self.group_url(az.settings, &group));
        let body = json!({"location": az.location, "tags": tags});
        let answer = self.call("resources:resourceGroups.createOrUpdate", az, |c| c.put(&url).json(&body)).await?;
        if !answer.is_success() {
            let (code, message) = arm_error(&answer);
            if code == "ResourceGroupBeingDeleted" {
                return Err(Error::service("resources:resourceGroups.createOrUpdate", message, true));
            }
            return Ok(Provision::Refused(format!("resource group {group}: {message}")));
        }
        let mut parameters = serde_json::Map::new();
        for (k, v) in &az.parameters {
            parameters.insert(k.clone(), json!({ "value": v }));
        }
        parameters.insert("infraId".into(), json!({ "value": t.cluster.infra_id }));
        let mut properties = json!({"mode": "Incremental", "parameters": parameters});
        match (&az.template, &az.template_uri) {
            (Some(template), _) => properties["template"] = template.clone(),
            (None, Some(uri)) => properties["templateLink"] = json!({ "uri": uri }),
            (None, None) => return Ok(Provision::Refused("the pool gives no template".into())),
        }
        let name = deployment_name(t.attempt());
        let url = format!(
            "{}/providers/Microsoft.Resources/deployments/{name}?api-version={RESOURCES_API}",
            self.group_url(az.settings, &group)
        );
        let body = json!({"properties": properties, "tags": tags});
        let answer = self.call("resources:deployments.createOrUpdate", az, |c| c.put(&url).json(&body)).await?;
        if answer.is_success() {
            let handle = answer
                .headers
                .get("azure-asyncoperation")
                .and_then(|h| h.to_str().ok())
                .filter(|link| self.on_arm(link).is_ok())
                .map(str::to_owned);
            return Ok(Provision::Accepted { handle });
        }
        let (code, message) = arm_error(&answer);
        if code == "DeploymentActive" {
            return Ok(Provision::Accepted { handle: None });
        }
        Ok(Provision::Refused(format!("deployment {name} in {group}: {message}")))
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let az = Self::platform(t.pool, t.spec)?;
        let group = az.resource_group(&t.cluster.infra_id);
        let url = format!("{}?api-version={RESOURCES_API}", self.group_url(az.settings, &group));
        // Asked again at every look: 202 while the deletion runs, 404 once the group is gone.
        let answer = self.call("resources:resourceGroups.delete", az, |c| c.delete(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(Termination { remaining: 0, refused: vec![] });
        }
        if answer.is_success() {
            return Ok(Termination { remaining: 1, refused: vec![] });
        }
        let (code, message) = arm_error(&answer);
        if code == "ResourceGroupBeingDeleted" {
            return Ok(Termination { remaining: 1, refused: vec![] });
        }
        Ok(Termination { remaining: 1, refused: vec![(group, message)] })
    }

    /// The resource groups tagged `apiary-pool = <pool>` (one filtered list of the subscription's groups, every
    /// page), by the infraId of their cluster tag; groups already being deleted are left out.
    async fn marked(&self, pool: &str, spec: &PoolSpec, _now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let az = Self::platform(pool, spec)?;
        let filter = format!("tagName eq 'apiary-pool' and tagValue eq '{}'", pool.replace('\'', "''"));
        let first = format!(
            "{}/subscriptions/{}/resourcegroups?api-version={RESOURCES_API}&$filter={}",
            self.endpoint,
            escape(&az.subscription_id),
            escape(&filter)
        );
        let groups = self.list("resources:resourceGroups.list", az, first).await?;
        let prefix = cluster_tag("");
        Ok(Some(
            groups
                .into_iter()
                .filter(|g| g["properties"]["provisioningState"] != "Deleting")
                .filter_map(|g| {
                    let tags = g["tags"].as_object()?;
                    let infra_id = tags.iter().find_map(|(k, v)| {
                        (v == "owned").then(|| k.strip_prefix(&prefix)).flatten().map(str::to_owned)
                    })?;
                    Some(Marked { infra_id, machine: g["name"].as_str()?.to_owned() })
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_states_map_onto_ec2s_and_a_stopped_vm_is_not_hibernated() {
        assert_eq!(state("running", false), MachineState::Running);
        assert_eq!(state("deallocated", true), MachineState::Stopped);
        assert_eq!(state("stopped", false), MachineState::Stopped);
        assert_eq!(state("stopped", true), MachineState::Running, "still billed: deallocate it");
        for s in ["stopping", "deallocating"] {
            assert_eq!(state(s, true), MachineState::Stopping, "{s}");
        }
        assert_eq!(state("starting", false), MachineState::Pending);
        assert_eq!(state("unknown", false), MachineState::Pending);
    }

    #[test]
    fn a_failed_deployment_says_its_details() {
        let e = json!({"code": "DeploymentFailed", "message": "At least one failed.", "details": [{"code": "QuotaExceeded", "message": "cores"}]});
        assert_eq!(describe(&e), "DeploymentFailed: At least one failed. (QuotaExceeded: cores)");
    }
}
