//! A fake of vCenter's Automation REST API (`/api`, vSphere 7.0U2 and later), with state.
//!
//! Served: `POST /api/session` (Basic auth; answers the session id as a JSON string), `DELETE /api/session`, and,
//! with a live `vmware-api-session-id`:
//! - inventory: `GET /api/vcenter/datacenter`, `folder` (`type=VIRTUAL_MACHINE`), `resource-pool`, `datastore`,
//!   filtered by `names` and `datacenters`; `GET /api/vcenter/vm` filtered by `names`, `folders`, `vms`;
//! - `POST /api/vcenter/vm?action=clone&vmw-task=true` (answers a task id) and `GET /api/cis/tasks/{task}`;
//! - `POST /api/vcenter/vm/{vm}/power?action=start|stop`, `POST …/guest/power?action=shutdown`,
//!   `GET …/tools`, `GET …/power`, `DELETE /api/vcenter/vm/{vm}`;
//! - tagging: categories and tags (list, get, create, delete, `list-tags-for-category`), and tag associations
//!   (`attach`, `attach-tag-to-multiple-objects`, `list-attached-objects`, `list-attached-objects-on-tags`).
//!
//! Errors are the API's: `{error_type, messages: [{id, default_message, args}]}` with its statuses (400
//! `ALREADY_IN_DESIRED_STATE`, `NOT_ALLOWED_IN_CURRENT_STATE`, `ALREADY_EXISTS`; 401 `UNAUTHENTICATED`; 403
//! `UNAUTHORIZED`; 404 `NOT_FOUND`; 503 `SERVICE_UNAVAILABLE`). Time moves on the fake's [`Clock`]: a clone
//! finishes after `clone`; a powered-on VM's tools run after `boot`; a guest shutdown powers it off after
//! `shutdown` (power start and stop are immediate, as the API's calls return once done). Faults: the next N
//! calls answer 429 or 503; sessions expire; a VM refuses every call (403); a guest ignores shutdowns or never
//! boots; clones fail (a full datastore).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{recorded, Clock, Exchange, Faults, Log, Tokens, Wire};
use crate::server::{serve_tls_on, Request, Response};

/// Transition times.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// A clone's task.
    pub clone: Duration,
    /// From power-on to VMware Tools running.
    pub boot: Duration,
    /// A guest shutdown.
    pub shutdown: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self { clone: Duration::from_secs(3), boot: Duration::from_secs(2), shutdown: Duration::from_secs(2) }
    }
}

#[derive(Debug, Clone)]
struct Vm {
    name: String,
    folder: String,
    /// `POWERED_ON`, `POWERED_OFF`, `SUSPENDED`.
    power: &'static str,
    /// When it was last powered on (its tools run `boot` later).
    on_since: Duration,
    /// When a guest shutdown under way powers it off.
    shutting_down: Option<Duration>,
    template: bool,
}

#[derive(Debug, Clone)]
struct Task {
    started: Duration,
    done_at: Duration,
    /// The clone's VM: name, folder, whether to power it on.
    name: String,
    folder: String,
    power_on: bool,
    failure: Option<String>,
    /// The VM made, once done.
    result: Option<String>,
}

#[derive(Debug, Clone)]
struct Category {
    name: String,
    description: String,
}

#[derive(Debug, Clone)]
struct Tag {
    name: String,
    category: String,
    attached: BTreeSet<String>,
}

struct State {
    timings: Timings,
    clock: Clock,
    users: HashMap<String, String>,
    sessions: Tokens,
    datacenters: BTreeMap<String, String>,
    folders: BTreeMap<String, String>,
    pools: BTreeMap<String, String>,
    datastores: BTreeMap<String, String>,
    vms: BTreeMap<String, Vm>,
    /// Ordered, so that clones finishing at one instant become VMs (and get their ids) in one order: a
    /// simulation replays exactly.
    tasks: BTreeMap<String, Task>,
    categories: BTreeMap<String, Category>,
    tags: BTreeMap<String, Tag>,
    next_id: u64,
    faults: Faults,
    refusing: BTreeSet<String>,
    deaf_guests: BTreeSet<String>,
    hung: BTreeSet<String>,
    failing_clones: Option<String>,
    /// Time moves on by this much just before the next request whose path starts with this is answered.
    lag: Option<(String, Duration)>,
    log: Log,
    wire: Wire,
}

/// The fake: served over HTTPS on 127.0.0.1 with a certificate of its own CA ([`FakeVsphere::start`]), or called
/// in process ([`FakeVsphere::handle`]).
#[derive(Clone)]
pub struct FakeVsphere {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    ca_pem: Arc<String>,
}

/// How long a session lives without use (vCenter's default idle timeout).
const SESSION_TTL: Duration = Duration::from_secs(30 * 60);

impl FakeVsphere {
    /// The fake on `clock`, not served: [`FakeVsphere::handle`] answers requests addressed to `addr`. It holds
    /// the datacenter `DC1` with the VM folder `vm`, the resource pool `Resources` and the datastore `datastore1`.
    pub fn new(timings: Timings, clock: Clock, addr: SocketAddr) -> Self {
        let mut state = State {
            timings,
            clock,
            users: HashMap::new(),
            sessions: Tokens::default(),
            datacenters: BTreeMap::new(),
            folders: BTreeMap::new(),
            pools: BTreeMap::new(),
            datastores: BTreeMap::new(),
            vms: BTreeMap::new(),
            tasks: BTreeMap::new(),
            categories: BTreeMap::new(),
            tags: BTreeMap::new(),
            next_id: 0,
            faults: Faults::default(),
            refusing: BTreeSet::new(),
            deaf_guests: BTreeSet::new(),
            hung: BTreeSet::new(),
            failing_clones: None,
            lag: None,
            log: Log::default(),
            wire: Wire::default(),
        };
        state.datacenters.insert("datacenter-1".into(), "DC1".into());
        state.folders.insert("group-v1".into(), "vm".into());
        state.pools.insert("resgroup-1".into(), "Resources".into());
        state.datastores.insert("datastore-1".into(), "datastore1".into());
        Self { state: Arc::new(Mutex::new(state)), addr, ca_pem: Arc::new(String::new()) }
    }

    /// Starts the fake on a free port of 127.0.0.1, on the wall clock, serving HTTPS with a certificate for
    /// 127.0.0.1 and `localhost` issued by a CA of its own ([`FakeVsphere::ca_bundle`]).
    pub async fn start(timings: Timings) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let authority =
            crate::tls::authority("Fake VMCA", &["127.0.0.1", "localhost"]).map_err(std::io::Error::other)?;
        let mut fake = Self::new(timings, Clock::wall(), listener.local_addr()?);
        fake.ca_pem = Arc::new(authority.ca_pem);
        let state = fake.state.clone();
        serve_tls_on(listener, authority.server, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// The vCenter's `host:port`: a pool's `server`.
    pub fn server(&self) -> String {
        self.addr.to_string()
    }

    /// The PEM certificate of the CA that issued the fake's: a pool's `caBundle`.
    pub fn ca_bundle(&self) -> String {
        self.ca_pem.as_ref().clone()
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: Request) -> Response {
        handle(&self.state, req)
    }

    /// A vCenter user: the secret's JSON, as Apiary reads it.
    pub fn user(&self, username: &str) -> String {
        let password = crate::canary::secret("vsphere-password");
        self.lock().users.insert(username.to_owned(), password.clone());
        json!({"username": username, "password": password}).to_string()
    }

    /// Adds a VM folder; its id.
    pub fn add_folder(&self, name: &str) -> String {
        let mut s = self.lock();
        let id = s.id("group-v");
        s.folders.insert(id.clone(), name.to_owned());
        id
    }

    /// Adds a VM in `folder` (a folder name, created when missing), as another tool would have created it; its id.
    pub fn add_vm(&self, folder: &str, name: &str, power: &'static str) -> String {
        let folder_id = match self.folder_id(folder) {
            Some(id) => id,
            None => self.add_folder(folder),
        };
        let mut s = self.lock();
        let id = s.id("vm-");
        let vm = Vm {
            name: name.to_owned(),
            folder: folder_id,
            power,
            on_since: Duration::ZERO,
            shutting_down: None,
            template: false,
        };
        s.vms.insert(id.clone(), vm);
        id
    }

    /// Adds a VM template (a powered-off VM clones are made from) in the folder `vm`.
    pub fn add_template(&self, name: &str) -> String {
        let id = self.add_vm("vm", name, "POWERED_OFF");
        if let Some(vm) = self.lock().vms.get_mut(&id) {
            vm.template = true;
        }
        id
    }

    fn folder_id(&self, name: &str) -> Option<String> {
        self.lock().folders.iter().find(|(_, n)| n.as_str() == name).map(|(id, _)| id.clone())
    }

    /// VMs that are not templates, as (folder name, VM name, power state) in name order, after the clock's
    /// transitions.
    pub fn vms(&self) -> Vec<(String, String, String)> {
        let mut s = self.lock();
        s.settle();
        let mut vms: Vec<(String, String, String)> = s
            .vms
            .values()
            .filter(|vm| !vm.template)
            .map(|vm| (s.folders.get(&vm.folder).cloned().unwrap_or_default(), vm.name.clone(), vm.power.to_owned()))
            .collect();
        vms.sort_by(|a, b| a.1.cmp(&b.1));
        vms
    }

    /// Names of the VMs the tag `tag` of category `category` is attached to.
    pub fn tagged(&self, category: &str, tag: &str) -> Vec<String> {
        let s = self.lock();
        let Some((cat, _)) = s.categories.iter().find(|(_, c)| c.name == category) else { return vec![] };
        let Some(t) = s.tags.values().find(|t| t.name == tag && &t.category == cat) else { return vec![] };
        let mut names: Vec<String> =
            t.attached.iter().filter_map(|id| s.vms.get(id)).map(|vm| vm.name.clone()).collect();
        names.sort();
        names
    }

    /// Tag categories, by name.
    pub fn categories(&self) -> Vec<String> {
        self.lock().categories.values().map(|c| c.name.clone()).collect()
    }

    /// Creates the category `openshift-<infraId>` and its tag `<infraId>` and attaches it to the VM `vm`, as
    /// openshift-install does.
    pub fn tag_as_installer(&self, infra_id: &str, vm: &str) {
        let mut s = self.lock();
        let cat = s.id("urn:vmomi:InventoryServiceCategory:");
        s.categories.insert(
            cat.clone(),
            Category {
                name: format!("openshift-{infra_id}"),
                description: "Added by openshift-install do not remove".into(),
            },
        );
        let tag = s.id("urn:vmomi:InventoryServiceTag:");
        let id = s.vms.iter().find(|(_, v)| v.name == vm).map(|(id, _)| id.clone()).unwrap_or_default();
        s.tags.insert(tag, Tag { name: infra_id.to_owned(), category: cat, attached: [id].into_iter().collect() });
    }

    /// Creates a tag category with no tag in it (what a provisioning call that died between the two leaves).
    pub fn add_category(&self, name: &str, description: &str) {
        let mut s = self.lock();
        let cat = s.id("urn:vmomi:InventoryServiceCategory:");
        s.categories.insert(cat, Category { name: name.to_owned(), description: description.to_owned() });
    }

    /// Moves the clock on.
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// The next `n` calls answer 429.
    pub fn throttle(&self, n: u32) {
        self.lock().faults.throttle = n;
    }

    /// The next `n` calls answer 503.
    pub fn unavailable(&self, n: u32) {
        self.lock().faults.unavailable = n;
    }

    /// Every session ends (vCenter restarted, or they idled out).
    pub fn expire_sessions(&self) {
        self.lock().sessions.expire_all();
    }

    /// Sessions created so far.
    pub fn sessions_created(&self) -> u64 {
        self.lock().sessions.issued()
    }

    /// Calls on VM `name` answer 403 until [`FakeVsphere::comply`].
    pub fn refuse(&self, name: &str) {
        self.lock().refusing.insert(name.to_owned());
    }

    /// VM `name` no longer refuses, its guest boots and heeds shutdowns again.
    pub fn comply(&self, name: &str) {
        let mut s = self.lock();
        s.refusing.remove(name);
        s.deaf_guests.remove(name);
        s.hung.remove(name);
    }

    /// VM `name`'s guest never finishes booting: its VMware Tools never run.
    pub fn stick(&self, name: &str) {
        self.lock().hung.insert(name.to_owned());
    }

    /// VM `name`'s guest ignores shutdown requests (a hung OS).
    pub fn ignore_shutdowns(&self, name: &str) {
        self.lock().deaf_guests.insert(name.to_owned());
    }

    /// Clones from now on fail with `message`; `None`: they succeed.
    pub fn fail_clones(&self, message: Option<&str>) {
        self.lock().failing_clones = message.map(str::to_owned);
    }

    /// Just before the next request whose path starts with `path` is answered, time moves on by `by`: what a
    /// caller's earlier request saw has changed by the time its next one lands (a slow network, a busy vCenter).
    pub fn lag_before(&self, path: &str, by: Duration) {
        self.lock().lag = Some((path.to_owned(), by));
    }

    /// Requests so far, as `METHOD path` (and the `action`), and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    /// Records every exchange from now on, for [`FakeVsphere::take_wire`].
    pub fn record(&self) {
        self.lock().wire.record();
    }

    /// The exchanges recorded so far ([`FakeVsphere::record`]), and clears them.
    pub fn take_wire(&self) -> Vec<Exchange> {
        self.lock().wire.take()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The API's error answer.
fn error(status: u16, kind: &str, message: &str) -> Response {
    Response::json(
        status,
        &json!({"error_type": kind, "messages": [{"id": format!("vapi.{}", kind.to_ascii_lowercase()), "default_message": message, "args": []}]}),
    )
}

fn not_found(what: &str) -> Response {
    error(404, "NOT_FOUND", &format!("{what} could not be found."))
}

impl State {
    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{}", self.next_id)
    }

    /// Ends clones and guest shutdowns whose time has come.
    fn settle(&mut self) {
        let now = self.now();
        for vm in self.vms.values_mut() {
            if vm.shutting_down.is_some_and(|at| at <= now) {
                vm.shutting_down = None;
                vm.power = "POWERED_OFF";
            }
        }
        let done: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.done_at <= now && t.result.is_none() && t.failure.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in done {
            let Some(task) = self.tasks.get(&id).cloned() else { continue };
            if self.vms.values().any(|vm| vm.name == task.name && vm.folder == task.folder) {
                // vCenter keeps one VM of a name in a folder: a second clone of it fails when it finishes.
                if let Some(t) = self.tasks.get_mut(&id) {
                    t.failure = Some(format!("The name '{}' already exists.", task.name));
                }
                continue;
            }
            let vm_id = self.id("vm-");
            let power = if task.power_on { "POWERED_ON" } else { "POWERED_OFF" };
            let vm = Vm {
                name: task.name,
                folder: task.folder,
                power,
                on_since: task.done_at,
                shutting_down: None,
                template: false,
            };
            self.vms.insert(vm_id.clone(), vm);
            if let Some(t) = self.tasks.get_mut(&id) {
                t.result = Some(vm_id);
            }
        }
    }

    fn tools_running(&self, vm: &Vm) -> bool {
        vm.power == "POWERED_ON"
            && vm.shutting_down.is_none()
            && !self.hung.contains(&vm.name)
            && self.now() >= vm.on_since + self.timings.boot
    }
}

/// The objects named by the query's `names`, among `all` (id → name), as the inventory lists answer them.
fn named(all: &BTreeMap<String, String>, req: &Request, kind_id: &str, kind: &str) -> Response {
    let names: Vec<&str> = req.query.iter().filter(|(k, _)| k == "names").map(|(_, v)| v.as_str()).collect();
    let list: Vec<Value> = all
        .iter()
        .filter(|(_, n)| names.is_empty() || names.contains(&n.as_str()))
        .map(|(id, n)| {
            let mut o = json!({"name": n});
            o[kind_id] = json!(id);
            // The summaries' required fields beyond the id and name: a folder's type, a datastore's file system.
            match kind {
                "folder" => o["type"] = json!("VIRTUAL_MACHINE"),
                "datastore" => o["type"] = json!("VMFS"),
                _ => {}
            }
            o
        })
        .collect();
    Response::json(200, &Value::Array(list))
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    recorded(state, |s| &mut s.wire, req, answer)
}

fn answer(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, req.param("action").map(|a| format!("action={a}")));
    if s.lag.as_ref().is_some_and(|(path, _)| req.path.starts_with(path.as_str())) {
        if let Some((_, by)) = s.lag.take() {
            s.clock.advance(by);
        }
    }
    let now = s.now();
    if req.path == "/api/session" && req.method == "POST" {
        return login(&mut s, &req);
    }
    let session = req.headers.get("vmware-api-session-id").cloned().unwrap_or_default();
    if !s.sessions.valid(&session, now) {
        return error(401, "UNAUTHENTICATED", "Authentication required.");
    }
    let fault = s.faults.take(
        || error(429, "SERVICE_UNAVAILABLE", "Too many requests.").header("retry-after", "0"),
        || error(503, "SERVICE_UNAVAILABLE", "The service is temporarily unavailable."),
    );
    if let Some(answer) = fault {
        return answer;
    }
    s.settle();
    if req.path == "/api/session" && req.method == "DELETE" {
        s.sessions.end(&session);
        return Response { status: 204, headers: vec![], body: vec![] };
    }
    let parts: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    let action = req.param("action").unwrap_or_default().to_owned();
    let vms_named = |s: &State, id: &str| s.vms.get(id).map(|vm| vm.name.clone()).unwrap_or_default();
    match (req.method.as_str(), parts.as_slice()) {
        ("GET", ["api", "vcenter", "datacenter"]) => named(&s.datacenters, &req, "datacenter", "datacenter"),
        ("GET", ["api", "vcenter", "folder"]) => named(&s.folders, &req, "folder", "folder"),
        ("GET", ["api", "vcenter", "resource-pool"]) => named(&s.pools, &req, "resource_pool", "resource-pool"),
        ("GET", ["api", "vcenter", "datastore"]) => named(&s.datastores, &req, "datastore", "datastore"),
        ("GET", ["api", "vcenter", "vm"]) => list_vms(&s, &req),
        ("POST", ["api", "vcenter", "vm"]) if action == "clone" => clone(&mut s, &req),
        ("GET", ["api", "cis", "tasks", task]) => get_task(&s, task),
        ("POST", ["api", "vcenter", "vm", vm, "power"]) => {
            if s.refusing.contains(&vms_named(&s, vm)) {
                return unauthorized(vm);
            }
            power(&mut s, vm, &action)
        }
        ("POST", ["api", "vcenter", "vm", vm, "guest", "power"]) => {
            if s.refusing.contains(&vms_named(&s, vm)) {
                return unauthorized(vm);
            }
            shutdown(&mut s, vm, &action)
        }
        ("GET", ["api", "vcenter", "vm", vm, "tools"]) => match s.vms.get(*vm) {
            Some(v) => {
                let state = if s.tools_running(v) { "RUNNING" } else { "NOT_RUNNING" };
                Response::json(
                    200,
                    &json!({"run_state": state, "version_status": "CURRENT", "install_type": "OPEN_VM_TOOLS",
                            "auto_update_supported": false, "upgrade_policy": "MANUAL"}),
                )
            }
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        // The guest's identity, from its VMware Tools: unavailable until they run. The address derives from the
        // VM's id.
        ("GET", ["api", "vcenter", "vm", vm, "guest", "identity"]) => match s.vms.get(*vm) {
            Some(v) if s.tools_running(v) => {
                let n: u16 = vm.trim_start_matches("vm-").parse().unwrap_or_default();
                let [hi, lo] = n.to_be_bytes();
                Response::json(
                    200,
                    // `name` is the guest OS (an enumeration), as RHCOS reports itself; `host_name` the VM's.
                    &json!({"name": "RHEL_9_64", "family": "LINUX", "host_name": v.name,
                            "full_name": {"default_message": "Red Hat Enterprise Linux CoreOS", "id": "rhcos", "args": []},
                            "ip_address": format!("10.20.{hi}.{}", lo.max(1))}),
                )
            }
            Some(_) => Response::json(
                503,
                &json!({"error_type": "SERVICE_UNAVAILABLE", "messages": [{"id": "com.vmware.api.vcenter.vm.guest.tools_not_running", "default_message": "VMware Tools is not running.", "args": []}]}),
            ),
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        ("GET", ["api", "vcenter", "vm", vm, "power"]) => match s.vms.get(*vm) {
            Some(v) => Response::json(200, &json!({"state": v.power})),
            None => not_found(&format!("Virtual machine '{vm}'")),
        },
        ("DELETE", ["api", "vcenter", "vm", vm]) => {
            if s.refusing.contains(&vms_named(&s, vm)) {
                return unauthorized(vm);
            }
            match s.vms.get(*vm) {
                None => not_found(&format!("Virtual machine '{vm}'")),
                Some(v) if v.power == "POWERED_ON" => error(
                    400,
                    "NOT_ALLOWED_IN_CURRENT_STATE",
                    "The attempted operation cannot be performed in the current state (Powered on).",
                ),
                Some(_) => {
                    s.vms.remove(*vm);
                    for t in s.tags.values_mut() {
                        t.attached.remove(*vm);
                    }
                    Response { status: 204, headers: vec![], body: vec![] }
                }
            }
        }
        ("GET", ["api", "cis", "tagging", "category"]) => {
            Response::json(200, &Value::Array(s.categories.keys().map(|k| json!(k)).collect()))
        }
        ("GET", ["api", "cis", "tagging", "category", id]) => match s.categories.get(*id) {
            Some(c) => Response::json(
                200,
                &json!({"id": id, "name": c.name, "description": c.description, "cardinality": "SINGLE", "associable_types": ["VirtualMachine"], "used_by": []}),
            ),
            None => not_found(&format!("Category '{id}'")),
        },
        ("POST", ["api", "cis", "tagging", "category"]) => create_category(&mut s, &req),
        ("DELETE", ["api", "cis", "tagging", "category", id]) => {
            if s.categories.remove(*id).is_none() {
                return not_found(&format!("Category '{id}'"));
            }
            s.tags.retain(|_, t| t.category != *id);
            Response { status: 204, headers: vec![], body: vec![] }
        }
        ("POST", ["api", "cis", "tagging", "tag"]) if action == "list-tags-for-category" => {
            let cat = req.json()["category_id"].as_str().unwrap_or_default().to_owned();
            if !s.categories.contains_key(&cat) {
                return not_found(&format!("Category '{cat}'"));
            }
            let ids: Vec<Value> = s.tags.iter().filter(|(_, t)| t.category == cat).map(|(id, _)| json!(id)).collect();
            Response::json(200, &Value::Array(ids))
        }
        ("POST", ["api", "cis", "tagging", "tag"]) => create_tag(&mut s, &req),
        ("GET", ["api", "cis", "tagging", "tag", id]) => match s.tags.get(*id) {
            Some(t) => {
                Response::json(200, &json!({"id": id, "name": t.name, "category_id": t.category, "description": ""}))
            }
            None => not_found(&format!("Tag '{id}'")),
        },
        ("DELETE", ["api", "cis", "tagging", "tag", id]) => match s.tags.remove(*id) {
            Some(_) => Response { status: 204, headers: vec![], body: vec![] },
            None => not_found(&format!("Tag '{id}'")),
        },
        ("POST", ["api", "cis", "tagging", "tag-association"]) if action == "list-attached-objects-on-tags" => {
            attached_on_tags(&s, &req)
        }
        ("POST", ["api", "cis", "tagging", "tag-association", tag]) => associate(&mut s, tag, &action, &req),
        _ => error(404, "NOT_FOUND", &format!("no route {} {}", req.method, req.path)),
    }
}

fn unauthorized(vm: &str) -> Response {
    error(403, "UNAUTHORIZED", &format!("Permission to perform this operation was denied on virtual machine '{vm}'."))
}

fn login(s: &mut State, req: &Request) -> Response {
    let basic = req.headers.get("authorization").and_then(|h| h.strip_prefix("Basic ")).unwrap_or_default();
    let decoded = decode_base64(basic).unwrap_or_default();
    let (user, password) = decoded.split_once(':').unwrap_or_default();
    if s.users.get(user).is_none_or(|p| p != password) {
        return error(401, "UNAUTHENTICATED", "Authentication required.");
    }
    let now = s.now();
    let session = s.sessions.issue("vmware-session", now, SESSION_TTL);
    Response::json(201, &json!(session))
}

/// Standard base64 (Basic auth), decoded to text.
fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    String::from_utf8(bytes).ok()
}

fn list_vms(s: &State, req: &Request) -> Response {
    let all = |k: &str| req.query.iter().filter(|(q, _)| q == k).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    let (names, folders, ids) = (all("names"), all("folders"), all("vms"));
    let list: Vec<Value> = s
        .vms
        .iter()
        // Templates are found by name or id only.
        .filter(|(_, vm)| !vm.template || !names.is_empty() || !ids.is_empty())
        .filter(|(id, vm)| {
            (names.is_empty() || names.contains(&vm.name.as_str()))
                && (folders.is_empty() || folders.contains(&vm.folder.as_str()))
                && (ids.is_empty() || ids.contains(&id.as_str()))
        })
        .map(|(id, vm)| json!({"vm": id, "name": vm.name, "power_state": vm.power, "cpu_count": 4, "memory_size_MiB": 16384}))
        .collect();
    Response::json(200, &Value::Array(list))
}

fn clone(s: &mut State, req: &Request) -> Response {
    if req.param("vmw-task") != Some("true") {
        return error(400, "INVALID_ARGUMENT", "this fake clones as a task only (vmw-task=true)");
    }
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let source = body["source"].as_str().unwrap_or_default();
    let folder = body["placement"]["folder"].as_str().unwrap_or_default().to_owned();
    if !s.vms.contains_key(source) {
        return not_found(&format!("Virtual machine '{source}'"));
    }
    if !s.folders.contains_key(&folder) {
        return not_found(&format!("Folder '{folder}'"));
    }
    for (field, known) in [("resource_pool", &s.pools), ("datastore", &s.datastores)] {
        if let Some(id) = body["placement"][field].as_str() {
            if !known.contains_key(id) {
                return not_found(&format!("{field} '{id}'"));
            }
        }
    }
    if name.is_empty() {
        return error(400, "INVALID_ARGUMENT", "name is required");
    }
    let exists = s.vms.values().any(|vm| vm.name == name && vm.folder == folder);
    if exists {
        return error(400, "ALREADY_EXISTS", &format!("The name '{name}' already exists."));
    }
    let now = s.now();
    let task = Task {
        started: now,
        done_at: now + s.timings.clone,
        name,
        folder,
        power_on: body["power_on"].as_bool().unwrap_or(false),
        failure: s.failing_clones.clone(),
        result: None,
    };
    let id = s.id("52a9-clone-task-");
    s.tasks.insert(id.clone(), task);
    Response::json(200, &json!(id))
}

fn get_task(s: &State, id: &str) -> Response {
    let Some(t) = s.tasks.get(id) else { return not_found(&format!("Task '{id}'")) };
    let clone = s.timings.clone.as_millis().max(1);
    let elapsed = s.now().saturating_sub(t.started).as_millis().min(clone);
    // The task's Info as its status requires: progress and start time once running, end time once done.
    let mut body = json!({
        "description": {"id": "com.vmware.vcenter.VM.clone", "default_message": "Clone virtual machine", "args": []},
        "service": "com.vmware.vcenter.VM",
        "operation": "clone",
        "cancelable": false,
        "start_time": vapi_time(t.started),
        "progress": {"total": 100, "completed": elapsed * 100 / clone,
                     "message": {"id": "vcenter.vm.clone.progress", "default_message": "Cloning", "args": []}},
    });
    match (&t.result, &t.failure) {
        (Some(vm), _) => {
            body["status"] = json!("SUCCEEDED");
            body["result"] = json!(vm);
            body["end_time"] = json!(vapi_time(t.done_at));
        }
        (None, Some(message)) if s.now() >= t.done_at => {
            body["status"] = json!("FAILED");
            body["end_time"] = json!(vapi_time(t.done_at));
            body["error"] = json!({"error_type": "RESOURCE_INACCESSIBLE", "messages": [{"id": "vcenter.vm.clone.failed", "default_message": message, "args": []}]});
        }
        _ => body["status"] = json!("RUNNING"),
    }
    Response::json(200, &body)
}

/// A time on the fake's clock as the API writes a DateTime (UTC, milliseconds), its start at 2026-01-01.
fn vapi_time(at: Duration) -> String {
    let start = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let when = start + chrono::TimeDelta::from_std(at).unwrap_or_default();
    when.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn power(s: &mut State, vm: &str, action: &str) -> Response {
    let now = s.now();
    let Some(v) = s.vms.get_mut(vm) else { return not_found(&format!("Virtual machine '{vm}'")) };
    let desired =
        || error(400, "ALREADY_IN_DESIRED_STATE", "The virtual machine is already in the desired power state.");
    match (action, v.power) {
        ("start", "POWERED_ON") | ("stop", "POWERED_OFF") => return desired(),
        ("start", _) => {
            v.power = "POWERED_ON";
            v.on_since = now;
        }
        ("stop", _) => {
            v.power = "POWERED_OFF";
            v.shutting_down = None;
        }
        _ => return error(400, "INVALID_ARGUMENT", &format!("unknown action {action}")),
    }
    Response { status: 204, headers: vec![], body: vec![] }
}

fn shutdown(s: &mut State, vm: &str, action: &str) -> Response {
    if action != "shutdown" {
        return error(400, "INVALID_ARGUMENT", &format!("unknown action {action}"));
    }
    let Some(v) = s.vms.get(vm).cloned() else { return not_found(&format!("Virtual machine '{vm}'")) };
    if v.power != "POWERED_ON" {
        return error(400, "NOT_ALLOWED_IN_CURRENT_STATE", "The virtual machine is not powered on.");
    }
    if v.shutting_down.is_some() {
        return error(400, "NOT_ALLOWED_IN_CURRENT_STATE", "A guest shutdown is already under way.");
    }
    if !s.tools_running(&v) {
        return error(503, "SERVICE_UNAVAILABLE", "VMware Tools is not running in the guest.");
    }
    if !s.deaf_guests.contains(&v.name) {
        let at = s.now() + s.timings.shutdown;
        if let Some(v) = s.vms.get_mut(vm) {
            v.shutting_down = Some(at);
        }
    }
    Response { status: 204, headers: vec![], body: vec![] }
}

fn create_category(s: &mut State, req: &Request) -> Response {
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    if s.categories.values().any(|c| c.name == name) {
        return error(400, "ALREADY_EXISTS", &format!("Category with name '{name}' already exists."));
    }
    let id = s.id("urn:vmomi:InventoryServiceCategory:");
    let description = body["description"].as_str().unwrap_or_default().to_owned();
    s.categories.insert(id.clone(), Category { name, description });
    Response::json(201, &json!(id))
}

fn create_tag(s: &mut State, req: &Request) -> Response {
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let category = body["category_id"].as_str().unwrap_or_default().to_owned();
    if !s.categories.contains_key(&category) {
        return not_found(&format!("Category '{category}'"));
    }
    if s.tags.values().any(|t| t.name == name && t.category == category) {
        return error(400, "ALREADY_EXISTS", &format!("Tag with name '{name}' already exists in the category."));
    }
    let id = s.id("urn:vmomi:InventoryServiceTag:");
    s.tags.insert(id.clone(), Tag { name, category, attached: BTreeSet::new() });
    Response::json(201, &json!(id))
}

/// `list-attached-objects-on-tags`: each tag asked for that exists, with the objects it is attached to; one that
/// does not is left out.
fn attached_on_tags(s: &State, req: &Request) -> Response {
    let body = req.json();
    let Some(ids) = body["tag_ids"].as_array() else { return error(400, "INVALID_ARGUMENT", "tag_ids is required") };
    let found: Vec<Value> = ids
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|id| s.tags.get(id).map(|t| (id, t)))
        .map(|(id, t)| {
            let objects: Vec<Value> = t.attached.iter().map(|vm| json!({"type": "VirtualMachine", "id": vm})).collect();
            json!({"tag_id": id, "object_ids": objects})
        })
        .collect();
    Response::json(200, &Value::Array(found))
}

fn associate(s: &mut State, tag: &str, action: &str, req: &Request) -> Response {
    let body = req.json();
    let known_vms: BTreeSet<String> = s.vms.keys().cloned().collect();
    let Some(t) = s.tags.get_mut(tag) else { return not_found(&format!("Tag '{tag}'")) };
    let ids: Vec<String> = match action {
        "attach" => vec![body["object_id"]["id"].as_str().unwrap_or_default().to_owned()],
        "attach-tag-to-multiple-objects" => body["object_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["id"].as_str().map(str::to_owned))
            .collect(),
        "list-attached-objects" => {
            let objects: Vec<Value> = t.attached.iter().map(|id| json!({"type": "VirtualMachine", "id": id})).collect();
            return Response::json(200, &Value::Array(objects));
        }
        other => return error(400, "INVALID_ARGUMENT", &format!("unknown action {other}")),
    };
    if let Some(missing) = ids.iter().find(|id| !known_vms.contains(*id)) {
        return not_found(&format!("Virtual machine '{missing}'"));
    }
    t.attached.extend(ids);
    if action == "attach" {
        Response { status: 204, headers: vec![], body: vec![] }
    } else {
        Response::json(200, &json!({"success": true, "error_messages": []}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode() {
        assert_eq!(decode_base64("YWRtaW46czNjcmV0").as_deref(), Some("admin:s3cret"));
        assert_eq!(decode_base64("YQ==").as_deref(), Some("a"));
        assert_eq!(decode_base64("!!"), None);
    }
}
