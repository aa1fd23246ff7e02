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

    /// The id of the inventory object `kind` named `name` (in the datacenter `within`), looked up once. With
    /// `remember_none`, that there is none is remembered too (openshift-install's `<infraId>` folder: a cluster
    /// that has none never gets one).
    async fn lookup(
        &self,
        vc: &Vc<'_>,
        kind: &'static str,
        name: &str,
        within: Option<&str>,
        remember_none: bool,
    ) -> Result<Option<String>> {
        let key = format!("{} {kind} {} {name}", vc.root, within.unwrap_or_default());
        if let Some(id) = self.ids.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok((!id.is_empty()).then(|| id.clone()));
        }
        let mut url = format!("{}/api/vcenter/{kind}?names={}", vc.root, escape(name));
        if let Some(dc) = within {
            url.push_str(&format!("&datacenters={}", escape(dc)));
        }
        if kind == "folder" {
            url.push_str("&type=VIRTUAL_MACHINE");
        }
        let found: Vec<Value> = self.get(op_of(kind), vc, &url).await?;
        let field = if kind == "resource-pool" { "resource_pool" } else { kind };
        let id = found.first().and_then(|o| o[field].as_str()).map(str::to_owned);
        if id.is_some() || remember_none {
            self.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(key, id.clone().unwrap_or_default());
        }
        Ok(id)
    }

    async fn datacenter(&self, vc: &Vc<'_>) -> Result<String> {
        self.lookup(vc, "datacenter", &vc.vs.datacenter, None, false).await?.ok_or_else(|| {
            Error::service(
                "vsphere:datacenter.list",
                format!("no datacenter {:?} on {}", vc.vs.datacenter, vc.vs.server),
                false,
            )
        })
    }

    /// VMs by the list's filters (`names`, `folders`, `vms`).
    async fn list(&self, vc: &Vc<'_>, filters: &[(&str, String)]) -> Result<Vec<Vm>> {
        let url = format!("{}/api/vcenter/vm", vc.root);
        let answer = self.call("vsphere:vm.list", vc, |c| c.get(&url).query(filters)).await?;
        if !answer.is_success() {
            return Err(Error::service("vsphere:vm.list", api_error(&answer).1, false));
        }
        answer.json("vsphere:vm.list")
    }

    /// The tag `<infraId>` of category `openshift-<infraId>`: (category id, tag id), created when `create`.
    async fn tag(&self, vc: &Vc<'_>, t: &Target<'_>, create: bool) -> Result<Option<(String, String)>> {
        let infra_id = &t.cluster.infra_id;
        let key = format!("{} tag {infra_id}", vc.root);
        if let Some(both) = self.ids.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            if let Some((c, tag)) = both.split_once(' ') {
                return Ok(Some((c.to_owned(), tag.to_owned())));
            }
        }
        let wanted = category_name(infra_id);
        let mut category = self.find_category(vc, &wanted).await?;
        if category.is_none() && create {
            let url = format!("{}/api/cis/tagging/category", vc.root);
            let body = json!({
                "name": wanted,
                "description": category_description(&t.cluster.id, t.pool),
                "cardinality": "SINGLE",
                "associable_types": ["VirtualMachine", "ResourcePool", "Folder", "Datastore", "StoragePod"],
            });
            let answer = self.call("vsphere:category.create", vc, |c| c.post(&url).json(&body)).await?;
            category = match (answer.is_success(), api_error(&answer).0.as_str()) {
                (true, _) => Some(answer.json("vsphere:category.create")?),
                // Made meanwhile by another invocation: find it.
                (false, "ALREADY_EXISTS") => self.find_category(vc, &wanted).await?,
                _ => return Err(Error::service("vsphere:category.create", api_error(&answer).1, false)),
            };
        }
        let Some(category) = category else { return Ok(None) };
        let mut tag = self.find_tag(vc, &category, infra_id).await?;
        if tag.is_none() && create {
            let url = format!("{}/api/cis/tagging/tag", vc.root);
            let body = json!({"name": infra_id, "category_id": category, "description": format!("Apiary cluster {}", t.cluster.id)});
            let answer = self.call("vsphere:tag.create", vc, |c| c.post(&url).json(&body)).await?;
            tag = match (answer.is_success(), api_error(&answer).0.as_str()) {
                (true, _) => Some(answer.json("vsphere:tag.create")?),
                (false, "ALREADY_EXISTS") => self.find_tag(vc, &category, infra_id).await?,
                _ => return Err(Error::service("vsphere:tag.create", api_error(&answer).1, false)),
            };
        }
        let Some(tag) = tag else { return Ok(None) };
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).insert(key, format!("{category} {tag}"));
        Ok(Some((category, tag)))
    }

    /// The id of the category named `name`: the list of ids, each new id's name read once per process.
    async fn find_category(&self, vc: &Vc<'_>, name: &str) -> Result<Option<String>> {
        for id in self.category_ids(vc).await? {
            if self.category(vc, &id).await?.is_some_and(|(found, _)| found == name) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    async fn category_ids(&self, vc: &Vc<'_>) -> Result<Vec<String>> {
        self.get("vsphere:category.list", vc, &format!("{}/api/cis/tagging/category", vc.root)).await
    }

    /// The name and description of category `id`, read once per process; `None` when it is gone.
    async fn category(&self, vc: &Vc<'_>, id: &str) -> Result<Option<(String, String)>> {
        let key = format!("{} {id}", vc.root);
        if let Some(known) = self.categories.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned() {
            return Ok(Some(known));
        }
        let url = format!("{}/api/cis/tagging/category/{}", vc.root, escape(id));
        let answer = self.call("vsphere:category.get", vc, |c| c.get(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:category.get", api_error(&answer).1, false));
        }
        let c: Value = answer.json("vsphere:category.get")?;
        let field = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
        let both = (field("name"), field("description"));
        self.categories.lock().unwrap_or_else(|e| e.into_inner()).insert(key, both.clone());
        Ok(Some(both))
    }

    async fn find_tag(&self, vc: &Vc<'_>, category: &str, name: &str) -> Result<Option<String>> {
        let url = format!("{}/api/cis/tagging/tag?action=list-tags-for-category", vc.root);
        let body = json!({ "category_id": category });
        let answer = self.call("vsphere:tag.list", vc, |c| c.post(&url).json(&body)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:tag.list", api_error(&answer).1, false));
        }
        let ids: Vec<String> = answer.json("vsphere:tag.list")?;
        for id in ids {
            let tag: Value =
                self.get("vsphere:tag.get", vc, &format!("{}/api/cis/tagging/tag/{}", vc.root, escape(&id))).await?;
            if tag["name"].as_str() == Some(name) {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Ids of the VMs `tag` is attached to.
    async fn attached(&self, vc: &Vc<'_>, tag: &str) -> Result<BTreeSet<String>> {
        let url = format!("{}/api/cis/tagging/tag-association/{}?action=list-attached-objects", vc.root, escape(tag));
        let answer = self.call("vsphere:tag.listAttachedObjects", vc, |c| c.post(&url)).await?;
        if answer.status == StatusCode::NOT_FOUND {
            // Deleted meanwhile (by another process, which deprovisioned its cluster): nothing is attached to it.
            self.forget_tag(tag);
            return Ok(BTreeSet::new());
        }
        if !answer.is_success() {
            return Err(Error::service("vsphere:tag.listAttachedObjects", api_error(&answer).1, false));
        }
        let objects: Vec<Value> = answer.json("vsphere:tag.listAttachedObjects")?;
        Ok(objects
            .iter()
            .filter(|o| o["type"] == "VirtualMachine")
            .filter_map(|o| o["id"].as_str().map(str::to_owned))
            .collect())
    }

    /// Forgets the cached ids of the tag `tag` (and its category): it is gone, and is looked up again when needed.
    fn forget_tag(&self, tag: &str) {
        let suffix = format!(" {tag}");
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, both| !both.ends_with(&suffix));
    }

    /// The cluster's VMs: those in the folder `<infraId>` and those carrying its tag, by name.
    async fn members(&self, vc: &Vc<'_>, t: &Target<'_>) -> Result<Vec<Vm>> {
        let dc = self.datacenter(vc).await?;
        let mut found: BTreeMap<String, Vm> = BTreeMap::new();
        if let Some(folder) = self.lookup(vc, "folder", &t.cluster.infra_id, Some(&dc), true).await? {
            for vm in self.list(vc, &[("folders", folder)]).await? {
                found.insert(vm.vm.clone(), vm);
            }
        }
        if let Some((_, tag)) = self.tag(vc, t, false).await? {
            let ids: Vec<(&str, String)> = self
                .attached(vc, &tag)
                .await?
                .into_iter()
                .filter(|id| !found.contains_key(id))
                .map(|id| ("vms", id))
                .collect();
            if !ids.is_empty() {
                for vm in self.list(vc, &ids).await? {
                    found.insert(vm.vm.clone(), vm);
                }
            }
        }
        let mut vms: Vec<Vm> = found.into_values().collect();
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(vms)
    }

    /// The VMs each tag in `tags` is attached to, by tag, with one call; a tag vCenter does not answer for (it is
    /// gone, or not readable) is not there. `None` when vCenter refuses the call as a whole (a tag among them it
    /// will not read, say): each cluster is then looked at alone, where a tag gone is forgotten.
    async fn attached_to_each(&self, vc: &Vc<'_>, tags: &[String]) -> Result<Option<BTreeMap<String, Vec<String>>>> {
        let op = "vsphere:tag.listAttachedObjectsOnTags";
        let url = format!("{}/api/cis/tagging/tag-association?action=list-attached-objects-on-tags", vc.root);
        let body = json!({ "tag_ids": tags });
        let answer = self.call(op, vc, |c| c.post(&url).json(&body)).await?;
        if !answer.is_success() {
            tracing::info!(error = %api_error(&answer).1, "vCenter refused the tags' list; looking at each cluster alone");
            return Ok(None);
        }
        let found: Vec<TagToObjects> = answer.json(op)?;
        Ok(Some(
            found
                .into_iter()
                .map(|t| {
                    (t.tag_id, t.object_ids.into_iter().filter(|o| o.kind == "VirtualMachine").map(|o| o.id).collect())
                })
                .collect(),
        ))
    }

    /// The VMs of the ids `vms`, [`LIST_IDS`] to a list.
    async fn listed(&self, vc: &Vc<'_>, vms: &[String]) -> Result<Vec<Vm>> {
        let mut found = Vec::new();
        for ids in vms.chunks(LIST_IDS) {
            let filters: Vec<(&str, String)> = ids.iter().map(|id| ("vms", id.clone())).collect();
            found.extend(self.list(vc, &filters).await?);
        }
        Ok(found)
    }

    /// A power call on each VM: `(vm, path under /api/vcenter/vm/{vm}, op)`.
    async fn power(&self, vc: &Vc<'_>, calls: Vec<(Vm, &'static str, &'static str)>) -> Result<Refused> {
        let calls: Vec<(String, (String, &'static str))> = calls
            .into_iter()
            .map(|(vm, path, op)| {
                (vm.name.clone(), (format!("{}/api/vcenter/vm/{}/{path}", vc.root, escape(&vm.vm)), op))
            })
            .collect();
        fanout::each(calls, |(url, op)| async move {
            let answer = self.call(op, vc, |c| c.post(&url)).await?;
            if answer.is_success() || answer.status == StatusCode::NOT_FOUND {
                return Ok(Outcome::Done);
            }
            let (kind, message) = api_error(&answer);
            Ok(match kind.as_str() {
                // Done already, or not yet possible (a guest shutdown under way): the next look asks again.
                "ALREADY_IN_DESIRED_STATE" | "NOT_ALLOWED_IN_CURRENT_STATE" | "RESOURCE_BUSY" => Outcome::Done,
                _ => Outcome::Refused(message),
            })
        })
        .await
    }

    /// Whether VMware Tools runs in each VM, in order.
    async fn tools(&self, vc: &Vc<'_>, vms: &[Vm]) -> Result<Vec<bool>> {
        fanout::all(vms.to_vec(), |vm| async move {
            let url = format!("{}/api/vcenter/vm/{}/tools", vc.root, escape(&vm.vm));
            let tools: Value = self.get("vsphere:vm.tools.get", vc, &url).await?;
            Ok(tools["run_state"] == "RUNNING")
        })
        .await
    }

    /// The cluster's own VMs in the pool's folder (`<infraId>-<n>`), by machine number.
    async fn own(&self, vc: &Vc<'_>, t: &Target<'_>, folder: &str) -> Result<BTreeMap<usize, Vm>> {
        let count = usize::try_from(vc.vs.machine_count).unwrap_or(1).max(1);
        let names: BTreeMap<String, usize> = (0..count).map(|n| (vm_name(&t.cluster.infra_id, n), n)).collect();
        let mut filters: Vec<(&str, String)> = names.keys().map(|n| ("names", n.clone())).collect();
        filters.push(("folders", folder.to_owned()));
        Ok(self.list(vc, &filters).await?.into_iter().filter_map(|vm| names.get(&vm.name).map(|n| (*n, vm))).collect())
    }

    /// How many of the clone tasks of `handle` are still running (a task vCenter has forgotten is not).
    async fn clones_running(&self, vc: &Vc<'_>, handle: Option<&str>) -> Result<u32> {
        let mut running = 0;
        for (_, task) in tasks_of(handle) {
            let url = format!("{}/api/cis/tasks/{}", vc.root, escape(&task));
            let answer = self.call("vsphere:task.get", vc, |c| c.get(&url)).await?;
            if !answer.is_success() {
                continue;
            }
            let info: Value = answer.json("vsphere:task.get")?;
            if matches!(info["status"].as_str(), Some("PENDING" | "RUNNING" | "BLOCKED")) {
                running += 1;
            }
        }
        Ok(running)
    }

    /// The pool's folder, looked up in its datacenter.
    async fn folder(&self, vc: &Vc<'_>, dc: &str) -> Result<Option<String>> {
        self.lookup(vc, "folder", &vc.vs.folder, Some(dc), false).await
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

/// A provisioning handle: `n=task` for each clone started, comma-separated.
fn handle_of(tasks: &[(usize, String)]) -> Option<String> {
    (!tasks.is_empty()).then(|| tasks.iter().map(|(n, task)| format!("{n}={task}")).collect::<Vec<_>>().join(","))
}

fn tasks_of(handle: Option<&str>) -> Vec<(usize, String)> {
    handle
        .into_iter()
        .flat_map(|h| h.split(','))
        .filter_map(|pair| pair.split_once('=').and_then(|(n, task)| Some((n.parse().ok()?, task.to_owned()))))
        .collect()
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

#[async_trait]
impl Provisioner for Vsphere {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        let vs = Self::platform(t.pool, t.spec)?;
        let vc = self.vc(vs)?;
        let dc = self.datacenter(&vc).await?;
        let Some(folder) = self.folder(&vc, &dc).await? else { return Ok(Install::Absent) };
        let own = self.own(&vc, &t, &folder).await?;
        let mut under_way = false;
        for (n, task) in tasks_of(t.cluster.provision_ref.as_deref()) {
            if own.contains_key(&n) {
                continue;
            }
            let url = format!("{}/api/cis/tasks/{}", vc.root, escape(&task));
            let answer = self.call("vsphere:task.get", &vc, |c| c.get(&url)).await?;
            if answer.status == StatusCode::NOT_FOUND {
                // Forgotten by vCenter: what is missing is made again.
                continue;
            }
            let info: Value = answer.json("vsphere:task.get")?;
            match info["status"].as_str().unwrap_or_default() {
                "FAILED" => {
                    let why = info["error"]["messages"][0]["default_message"].as_str().unwrap_or("the clone failed");
                    return Ok(Install::Failed {
                        message: format!("clone of {}: {why}", vm_name(&t.cluster.infra_id, n)),
                    });
                }
                _ => under_way = true,
            }
        }
        let count = usize::try_from(vs.machine_count).unwrap_or(1).max(1);
        if under_way {
            return Ok(Install::UnderWay);
        }
        if own.len() < count {
            return Ok(Install::Absent);
        }
        let Some((_, tag)) = self.tag(&vc, &t, false).await? else { return Ok(Install::Absent) };
        let tagged = self.attached(&vc, &tag).await?;
        let ready = own.values().all(|vm| tagged.contains(&vm.vm) && vm.state() == MachineState::Running);
        // Untagged or off: the next provisioning call tags them and powers them on.
        Ok(if ready { Install::Done } else { Install::Absent })
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let vs = Self::platform(t.pool, t.spec)?;
        let vc = self.vc(vs)?;
        let dc = self.datacenter(&vc).await?;
        let missing = |what: &str, name: &str| {
            Ok(Provision::Refused(format!("no {what} {name:?} in datacenter {}", vs.datacenter)))
        };
        let Some(folder) = self.folder(&vc, &dc).await? else { return missing("VM folder", &vs.folder) };
        let Some(template) = self.lookup(&vc, "vm", &vs.template, Some(&dc), false).await? else {
            return missing("template VM", &vs.template);
        };
        let mut placement = json!({ "folder": folder });
        for (kind, field, name) in
            [("resource-pool", "resource_pool", &vs.resource_pool), ("datastore", "datastore", &vs.datastore)]
        {
            if let Some(name) = name {
                let Some(id) = self.lookup(&vc, kind, name, Some(&dc), false).await? else {
                    return missing(kind, name);
                };
                placement[field] = json!(id);
            }
        }
        let (_, tag) = self
            .tag(&vc, &t, true)
            .await?
            .ok_or_else(|| Error::service("vsphere:tag.create", "the tag was not made", true))?;
        let own = self.own(&vc, &t, &folder).await?;
        let count = usize::try_from(vs.machine_count).unwrap_or(1).max(1);
        let url = format!("{}/api/vcenter/vm?action=clone&vmw-task=true", vc.root);
        let mut tasks = vec![];
        for n in (0..count).filter(|n| !own.contains_key(n)) {
            let body = json!({"name": vm_name(&t.cluster.infra_id, n), "source": template, "placement": placement, "power_on": true});
            let answer = self.call("vsphere:vm.clone", &vc, |c| c.post(&url).json(&body)).await?;
            if answer.is_success() {
                tasks.push((n, answer.json::<String>("vsphere:vm.clone")?));
                continue;
            }
            let (kind, message) = api_error(&answer);
            if kind != "ALREADY_EXISTS" {
                return Ok(Provision::Refused(format!("clone of {}: {message}", vm_name(&t.cluster.infra_id, n))));
            }
        }
        // Clones made earlier: tagged as the cluster's and powered on.
        if !own.is_empty() {
            let url = format!(
                "{}/api/cis/tagging/tag-association/{}?action=attach-tag-to-multiple-objects",
                vc.root,
                escape(&tag)
            );
            let objects: Vec<Value> = own.values().map(|vm| json!({"type": "VirtualMachine", "id": vm.vm})).collect();
            let body = json!({ "object_ids": objects });
            let answer = self.call("vsphere:tag.attach", &vc, |c| c.post(&url).json(&body)).await?;
            if answer.status == StatusCode::NOT_FOUND {
                // The tag was deleted meanwhile: the next provisioning call makes it again.
                self.forget_tag(&tag);
            }
            if !answer.is_success() {
                return Ok(Provision::Refused(format!("tagging the clones: {}", api_error(&answer).1)));
            }
            let off = own
                .into_values()
                .filter(|vm| vm.state().start_acts())
                .map(|vm| (vm, "power?action=start", "vsphere:vm.power.start"))
                .collect();
            if let Err(why) = self.power(&vc, off).await?.into_result() {
                return Ok(Provision::Refused(why));
            }
        }
        Ok(Provision::Accepted { handle: handle_of(&tasks) })
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let vc = self.vc(Self::platform(t.pool, t.spec)?)?;
        // Clones still running become VMs later: wait for them rather than call the cluster gone; and for those
        // a provisioning call whose outcome was never recorded may have started. Asked before the VMs are listed:
        // a clone that finishes between the two looks is then listed, never missed by both.
        let unknown =
            t.cluster.pending_call.is_some_and(|p| p.call == ActuatorCall::Provision && t.now < p.at + CLONE_GRACE);
        let running = self.clones_running(&vc, t.cluster.provision_ref.as_deref()).await? + u32::from(unknown);
        let mut vms = self.members(&vc, &t).await?;
        // Its own clones in the pool's folder, tagged or not yet (the tag comes with a later provisioning call),
        // however many the pool asked for when they were made.
        let dc = self.datacenter(&vc).await?;
        if let Some(folder) = self.folder(&vc, &dc).await? {
            let prefix = format!("{}-", t.cluster.infra_id);
            for vm in self.list(&vc, &[("folders", folder)]).await? {
                let own = vm
                    .name
                    .strip_prefix(&prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if own && !vms.iter().any(|m| m.vm == vm.vm) {
                    vms.push(vm);
                }
            }
        }
        let on: Vec<(Vm, &str, &str)> = vms
            .iter()
            .filter(|vm| vm.state() == MachineState::Running)
            .map(|vm| (vm.clone(), "power?action=stop", "vsphere:vm.power.stop"))
            .collect();
        let mut refused = self.power(&vc, on).await?;
        let deletions: Vec<(String, String)> = vms
            .iter()
            .filter(|vm| !refused.machines.iter().any(|(name, _)| name == &vm.name))
            .map(|vm| (vm.name.clone(), format!("{}/api/vcenter/vm/{}", vc.root, escape(&vm.vm))))
            .collect();
        let vc_ref = &vc;
        let deleted = fanout::each(deletions, |url| async move {
            let answer = self.call("vsphere:vm.delete", vc_ref, |c| c.delete(&url)).await?;
            Ok(if answer.is_success() || answer.status == StatusCode::NOT_FOUND {
                Outcome::Done
            } else {
                Outcome::Refused(api_error(&answer).1)
            })
        })
        .await?;
        refused.machines.extend(deleted.machines);
        refused.machines.sort();
        let remaining = refused.machines.len() as u32 + running;
        if remaining > 0 {
            return Ok(Termination { remaining, refused: refused.machines });
        }
        // No VM left (a VM's deletion is done when vCenter answers it): the tag and its category go too, and a
        // category left with no tag (a provisioning call that died between making the two) as well.
        let category = match self.tag(&vc, &t, false).await? {
            Some((category, _)) => Some(category),
            None => self.find_category(&vc, &category_name(&t.cluster.infra_id)).await?,
        };
        if let Some(category) = category {
            let url = format!("{}/api/cis/tagging/category/{}", vc.root, escape(&category));
            let answer = self.call("vsphere:category.delete", &vc, |c| c.delete(&url)).await?;
            self.ids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&format!("{} tag {}", vc.root, t.cluster.infra_id));
            if !(answer.is_success() || answer.status == StatusCode::NOT_FOUND) {
                let why = format!("{}: {}", category_name(&t.cluster.infra_id), api_error(&answer).1);
                return Ok(Termination { remaining: 0, refused: vec![("tag category".into(), why)] });
            }
        }
        Ok(Termination { remaining: 0, refused: vec![] })
    }

    /// The tag categories Apiary made for the pool's clusters (`openshift-<infraId>`, its description naming the
    /// pool): one list of the categories, each new one read once per process. A cluster's VMs are found through
    /// its category (its tag, and its clones in the pool's folder) when the orphan is deprovisioned; the category
    /// is deleted only once no clone of it is left or still running, so it outlives every VM it stands for.
    async fn marked(&self, pool: &str, spec: &PoolSpec, _now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let vc = self.vc(Self::platform(pool, spec)?)?;
        let prefix = category_name("");
        let mut marked = vec![];
        for id in self.category_ids(&vc).await? {
            let Some((name, description)) = self.category(&vc, &id).await? else { continue };
            if pool_of(&description) != Some(pool) {
                continue;
            }
            if let Some(infra_id) = name.strip_prefix(&prefix).filter(|i| !i.is_empty()) {
                marked.push(Marked { infra_id: infra_id.to_owned(), machine: name.clone() });
            }
        }
        Ok(Some(marked))
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
    fn a_handle_lists_the_clone_tasks_by_machine() {
        let h = handle_of(&[(0, "task-1".into()), (2, "task-3".into())]);
        assert_eq!(h.as_deref(), Some("0=task-1,2=task-3"));
        assert_eq!(tasks_of(h.as_deref()), [(0, "task-1".to_owned()), (2, "task-3".to_owned())]);
        assert_eq!(handle_of(&[]), None);
        assert!(tasks_of(Some("garbage")).is_empty());
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
