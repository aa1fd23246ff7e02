//! vSphere, through vCenter's Automation REST API (`/api`, vSphere 7.0U2 and later): a cluster's machines are
//! the VMs in the folder named `<infraId>` (openshift-install's folder) and the VMs tagged `<infraId>` in the
//! category `openshift-<infraId>` (openshift-install's tag, which Apiary also puts on the VMs it clones).
//!
//! - Sessions: `POST /api/session` with the user's name and password (Basic), kept per vCenter and user for the
//!   warm process and renewed once when a call answers 401.
//! - Start: `power?action=start` on powered-off and suspended VMs.
//! - Stop: a guest shutdown (`guest/power?action=shutdown`) when VMware Tools runs, else a hard power-off
//!   (`power?action=stop`); once the stop has taken longer than the pool's `shutdownGracePeriod`, a hard
//!   power-off. A guest shutdown shows as nothing until the VM is off, so it is asked again at each look (a
//!   second request while one is under way is refused as not allowed in the current state: not a refusal).
//! - Nodes ready: every VM powered on and its VMware Tools running.
//! - A pool's tick: one `list-attached-objects-on-tags` for the tags of all the clusters it looks at, then one VM
//!   list by ids; a cluster in openshift-install's folder, or whose tag is not in the answer, is looked at alone.
//! - Provision: the category `openshift-<infraId>` and its tag `<infraId>` are created, then each missing VM
//!   `<infraId>-<n>` is cloned from the pool's template into its folder (powered on) as a task; the tasks are the
//!   provisioning handle. A later call tags the clones and powers on any that is off. The install is done once
//!   every VM is there, tagged and powered on; a failed clone task is a failed attempt.
//! - Deprovision: every VM (in the folder `<infraId>`, tagged, or the cluster's own clones in the pool's
//!   folder, tagged or not yet) powered off hard and deleted, then the tag and its category; done once nothing is
//!   left and no clone task the cluster started still runs (nor, for [`CLONE_GRACE`], any a provisioning call
//!   whose outcome was never recorded may have started). openshift-install's folder is left (the REST API
//!   cannot delete folders).
//!
//! Inventory ids (datacenter, folders, template, resource pool, datastore, tag categories) are looked up by name
//! once per process. vCenter's certificate is checked against the system's roots and the pool's `caBundle`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_planner::machines::MachineState;
use apiary_planner::power::{ActuatorCall, Install, Termination};
use apiary_planner::{Cluster, Machine, Platform, PoolSpec, Timestamp, VspherePlatform};
use apiary_ports::platform::{Actuator, Machines, Marked, Nodes, Provision, Provisioner, Refused, Seen, Target};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::fanout::{self, Outcome};
use crate::http::{escape, Answer, Bundles, Http};
use crate::secrets::{ForPool, SecretCache};
use crate::tokens::TokenCache;

mod inventory;
mod provision;
mod tagging;

/// VM ids one list asks for: the query stays well under the length proxies take.
const LIST_IDS: usize = 100;
/// How long a session is reused: under vCenter's default idle timeout of 30 minutes.
const SESSION_LIFETIME: Duration = Duration::from_secs(25 * 60);
/// How long after a provisioning call whose outcome was never recorded (its invocation died) a deleted cluster
/// waits for clones that call may have started: longer than a clone takes.
pub const CLONE_GRACE: chrono::TimeDelta = chrono::TimeDelta::minutes(15);

/// The tag category openshift-install makes for a cluster.
pub fn category_name(infra_id: &str) -> String {
    format!("openshift-{infra_id}")
}

/// What a category Apiary makes says of itself: the cluster and the pool it was made for (the reaper finds a
/// pool's categories by it, [`pool_of`]).
pub fn category_description(cluster: &str, pool: &str) -> String {
    format!("Added by Apiary for cluster {cluster} of pool {pool}")
}

/// The pool a category Apiary made names in its description; `None` for any other category.
pub fn pool_of(description: &str) -> Option<&str> {
    description.strip_prefix("Added by Apiary for cluster ")?.rsplit_once(" of pool ").map(|(_, pool)| pool)
}

/// The name of machine `n` of a cluster.
pub fn vm_name(infra_id: &str, n: usize) -> String {
    format!("{infra_id}-{n}")
}

/// A vCenter user, as Secrets Manager holds it: `{"username", "password"}`.
#[derive(Clone, Deserialize)]
pub struct User {
    /// The user name (`apiary@vsphere.local`).
    #[serde(alias = "user")]
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User").field("username", &self.username).finish_non_exhaustive()
    }
}

impl User {
    /// Reads the user from the secret's text; errors name the secret, never its content.
    pub fn parse(arn: &str, text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|e| {
            let why = if e.is_data() { "username or password is missing or not a string" } else { "not JSON" };
            Error::service(
                "vsphere:credentials",
                format!("secret {arn} does not hold a vCenter user ({{\"username\", \"password\"}}): {why}"),
                false,
            )
        })
    }
}

/// A VM as the list gives it.
#[derive(Debug, Clone, Deserialize)]
struct Vm {
    vm: String,
    name: String,
    power_state: String,
}

/// A tag and the objects it is attached to (`list-attached-objects-on-tags`).
#[derive(Debug, Deserialize)]
struct TagToObjects {
    tag_id: String,
    object_ids: Vec<DynamicId>,
}

/// An object's type and id.
#[derive(Debug, Deserialize)]
struct DynamicId {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

impl Vm {
    fn state(&self) -> MachineState {
        state(&self.power_state)
    }
}

/// A vSphere power state as a [`MachineState`]: a suspended VM is stopped (a start resumes it).
pub fn state(power: &str) -> MachineState {
    match power {
        "POWERED_ON" => MachineState::Running,
        "POWERED_OFF" | "SUSPENDED" => MachineState::Stopped,
        _ => MachineState::Pending,
    }
}

/// The API's error answer: its type (`NOT_FOUND`, `ALREADY_EXISTS`, …) and `STATUS TYPE: message`.
fn api_error(answer: &Answer) -> (String, String) {
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let kind = body["error_type"].as_str().or_else(|| body["type"].as_str()).unwrap_or_default().to_owned();
    let message = body["messages"][0]["default_message"].as_str().map(str::to_owned).unwrap_or_else(|| answer.text());
    (kind.clone(), format!("{} {kind}: {message}", answer.status.as_u16()))
}

/// One pool's vCenter: its API root, the client that trusts its certificate, its user.
struct Vc<'a> {
    vs: ForPool<'a, VspherePlatform>,
    http: Http,
    root: String,
}

/// The vSphere platform.
pub struct Vsphere {
    /// Clients trusting a pool's CA bundle.
    bundles: Bundles,
    secrets: SecretCache,
    sessions: TokenCache,
    /// `root kind scope name` → id, for inventory and tag lookups.
    ids: Mutex<HashMap<String, String>>,
    /// `root category-id` → the category's name.
    categories: Mutex<HashMap<String, (String, String)>>,
}

impl Vsphere {
    /// The platform, reading credentials through `secrets`; each pool's vCenter is `https://<server>`, trusted
    /// through the system's roots and the pool's CA bundle (built into a client of its own, once per bundle).
    pub fn new(http: Http, secrets: Arc<dyn Secrets>) -> Self {
        Self {
            bundles: Bundles::new(http),
            secrets: SecretCache::new(secrets),
            sessions: TokenCache::default(),
            ids: Mutex::new(HashMap::new()),
            categories: Mutex::new(HashMap::new()),
        }
    }

    fn platform<'a>(pool: &'a str, spec: &'a PoolSpec) -> Result<ForPool<'a, VspherePlatform>> {
        match &spec.platform {
            Platform::Vsphere(vs) => Ok(ForPool { pool, settings: vs }),
            other => Err(Error::Config(format!("the vSphere platform was given a {} pool", other.kind()))),
        }
    }

    /// The vCenter of `vs`, with a client trusting its CA bundle (built once per bundle).
    fn vc<'a>(&self, vs: ForPool<'a, VspherePlatform>) -> Result<Vc<'a>> {
        let http = self.bundles.client(vs.ca_bundle.as_deref())?;
        Ok(Vc { vs, http, root: format!("https://{}", vs.server) })
    }

    async fn user(&self, vs: ForPool<'_, VspherePlatform>) -> Result<User> {
        let secret = self.secrets.get(&vs.credentials_secret, vs.pool).await?;
        User::parse(&vs.credentials_secret, secret.expose())
    }

    /// The cache key of the pool's sessions: its vCenter and the secret naming its user.
    fn session_key(vc: &Vc<'_>) -> String {
        format!("{} {}", vc.root, vc.vs.credentials_secret)
    }

    /// A session for the pool's user on its vCenter: the cached one, else a new one. The user is read first either
    /// way, so a session another pool opened is used only by a pool its secret's tags name too.
    async fn session(&self, vc: &Vc<'_>) -> Result<String> {
        let user = self.user(vc.vs).await?;
        let key = Self::session_key(vc);
        if let Some(s) = self.sessions.get(&key) {
            return Ok(s);
        }
        let url = format!("{}/api/session", vc.root);
        let answer = vc
            .http
            .send("vsphere:session.create", |c| c.post(&url).basic_auth(&user.username, Some(&user.password)))
            .await?;
        if !answer.is_success() {
            return Err(Error::service(
                "vsphere:session.create",
                format!("{} refused the user {}: {}", vc.vs.server, user.username, api_error(&answer).1),
                false,
            ));
        }
        let session: String = answer.json("vsphere:session.create")?;
        self.sessions.put(&key, &session, SESSION_LIFETIME);
        Ok(session)
    }

    /// Sends a request with the session; a 401 (the session idled out) logs in again and tries once more.
    async fn call(
        &self,
        op: &'static str,
        vc: &Vc<'_>,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Answer> {
        let forget = || {
            self.sessions.forget(&Self::session_key(vc));
            self.secrets.forget(&vc.vs.credentials_secret);
        };
        let session = || self.session(vc);
        vc.http.send_with(op, session, forget, |c, s| build(c).header("vmware-api-session-id", s)).await
    }

    /// A GET whose 2xx body is `T`; another answer is a non-retryable error naming it.
    async fn get<T: serde::de::DeserializeOwned>(&self, op: &'static str, vc: &Vc<'_>, url: &str) -> Result<T> {
        let answer = self.call(op, vc, |c| c.get(url)).await?;
        if !answer.is_success() {
            return Err(Error::service(op, api_error(&answer).1, false));
        }
        answer.json(op)
    }
}

/// What one look at many clusters found for a cluster whose VMs are `vms`: the one-cluster answers; its install is
/// the provisioner's to judge.
fn look_of(mut vms: Vec<&Vm>) -> Seen {
    vms.sort_by(|a, b| a.name.cmp(&b.name));
    let seen = Seen::of(vms.iter().map(|vm| (vm.name.as_str(), vm.state(), None)));
    Seen { install: None, ..seen }
}

fn op_of(kind: &str) -> &'static str {
    match kind {
        "datacenter" => "vsphere:datacenter.list",
        "folder" => "vsphere:folder.list",
        "resource-pool" => "vsphere:resourcePool.list",
        "datastore" => "vsphere:datastore.list",
        _ => "vsphere:vm.list",
    }
}

#[async_trait]
impl Actuator for Vsphere {
    /// The VMs of clusters Apiary cloned carry their cluster's tag and live in the pool's folder: one
    /// `list-attached-objects-on-tags` for every cluster's tag and one VM list (per [`LIST_IDS`] VMs) answer
    /// for all of them. A cluster with a folder of its own (openshift-install's), or whose tag vCenter did not
    /// answer for, is looked at alone, as [`Actuator::machines_running`] does. Installs are judged by their clone
    /// tasks, not by the VMs: the provisioner is asked.
    async fn look_many(
        &self,
        pool: &str,
        spec: &PoolSpec,
        clusters: &[Cluster],
        now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        let vc = self.vc(Self::platform(pool, spec)?)?;
        let dc = self.datacenter(&vc).await?;
        let mut seen = BTreeMap::new();
        let mut alone = Vec::new();
        let mut tagged = Vec::new();
        for c in clusters {
            let t = Target { pool, spec, cluster: c, now };
            if self.lookup(&vc, "folder", &c.infra_id, Some(&dc), true).await?.is_some() {
                alone.push(c);
            } else if let Some((_, tag)) = self.tag(&vc, &t, false).await? {
                tagged.push((c, tag));
            } else {
                // Neither a folder nor a tag: no machines.
                seen.insert(c.id.clone(), look_of(Vec::new()));
            }
        }
        let tags: Vec<String> = tagged.iter().map(|(_, tag)| tag.clone()).collect();
        let attached = if tags.is_empty() {
            BTreeMap::new()
        } else {
            let Some(attached) = self.attached_to_each(&vc, &tags).await? else { return Ok(None) };
            attached
        };
        let ids: Vec<String> =
            tagged.iter().flat_map(|(_, tag)| attached.get(tag).into_iter().flatten()).cloned().collect();
        let vms: BTreeMap<String, Vm> =
            self.listed(&vc, &ids).await?.into_iter().map(|vm| (vm.vm.clone(), vm)).collect();
        for (c, tag) in tagged {
            match attached.get(&tag) {
                Some(ids) => {
                    let own: Vec<&Vm> = ids.iter().filter_map(|id| vms.get(id)).collect();
                    seen.insert(c.id.clone(), look_of(own));
                }
                None => alone.push(c),
            }
        }
        for c in alone {
            let vms = self.members(&vc, &Target { pool, spec, cluster: c, now }).await?;
            seen.insert(c.id.clone(), look_of(vms.iter().collect()));
        }
        Ok(Some(seen))
    }

    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        let vms = self.members(&vc, &t).await?;
        Ok(Machines::of(
            vms.iter().map(|vm| (vm.name.as_str(), vm.state())),
            MachineState::Running,
            MachineState::start_acts,
        ))
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        let vms = self.members(&vc, &t).await?;
        Ok(Machines::of(
            vms.iter().map(|vm| (vm.name.as_str(), vm.state())),
            MachineState::Stopped,
            MachineState::stop_acts,
        ))
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        let vms = self.members(&vc, &t).await?;
        let m = Machines::of(
            vms.iter().map(|vm| (vm.name.as_str(), vm.state())),
            MachineState::Running,
            MachineState::start_acts,
        );
        if m.total == 0 || !m.not_ready.is_empty() {
            return Ok(Nodes::Machines(m));
        }
        let without = self.tools(&vc, &vms).await?.into_iter().filter(|running| !running).count();
        Ok(if without == 0 {
            Nodes::Ready
        } else {
            Nodes::NotReady(format!("VMware Tools are not running yet on {without} of {} VMs", vms.len()))
        })
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        let vms = self.members(&vc, &t).await?;
        // The guest's primary address, as its VMware Tools report it (they run once the nodes are ready); a VM
        // whose tools do not answer has none to give. vSphere has no public addresses of its own.
        fanout::all(vms, |vm| {
            let vc = &vc;
            async move {
                let url = format!("{}/api/vcenter/vm/{}/guest/identity", vc.root, escape(&vm.vm));
                let answer = self.call("vsphere:vm.guest.identity.get", vc, |c| c.get(&url)).await?;
                let private_ip = if answer.is_success() {
                    let identity: Value = answer.json("vsphere:vm.guest.identity.get")?;
                    identity["ip_address"].as_str().map(String::from)
                } else {
                    None
                };
                Ok(Machine { id: vm.vm, private_ip, public_ip: None })
            }
        })
        .await
    }

    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        let vms = self.members(&vc, &t).await?;
        let calls = vms
            .into_iter()
            .filter(|vm| vm.state().start_acts())
            .map(|vm| (vm, "power?action=start", "vsphere:vm.power.start"))
            .collect();
        self.power(&vc, calls).await
    }

    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        let vs = Self::platform(t.pool, t.spec)?;
        let vc = self.vc(vs)?;
        let on: Vec<Vm> = self.members(&vc, &t).await?.into_iter().filter(|vm| vm.state().stop_acts()).collect();
        let grace_over = t.cluster.transition_started_at.is_some_and(|started| t.now >= started + vs.shutdown_grace());
        let tools = if grace_over { vec![false; on.len()] } else { self.tools(&vc, &on).await? };
        let calls = on
            .into_iter()
            .zip(tools)
            .map(|(vm, tools)| match tools {
                true => (vm, "guest/power?action=shutdown", "vsphere:vm.guest.shutdown"),
                false => (vm, "power?action=stop", "vsphere:vm.power.stop"),
            })
            .collect();
        self.power(&vc, calls).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_states_map_onto_ec2s() {
        assert_eq!(state("POWERED_ON"), MachineState::Running);
        assert_eq!(state("POWERED_OFF"), MachineState::Stopped);
        assert_eq!(state("SUSPENDED"), MachineState::Stopped);
    }

    #[test]
    fn a_category_names_its_pool_and_no_other_category_does() {
        assert_eq!(pool_of(&category_description("ci-abcde", "ci")), Some("ci"));
        assert_eq!(pool_of("Added by openshift-install"), None);
    }

    #[test]
    fn a_user_never_prints_its_password() {
        let u = User::parse("arn:x", r#"{"username": "apiary@vsphere.local", "password": "hunter2"}"#).expect("user");
        assert!(!format!("{u:?}").contains("hunter2"));
        let e = User::parse("arn:x", r#"{"username": "a"}"#).expect_err("no password").to_string();
        assert!(e.contains("arn:x") && !e.contains("hunter2"), "{e}");
    }
}
