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

mod tagging;
mod vms;

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
    match (req.method.as_str(), parts.as_slice()) {
        ("GET", ["api", "vcenter", "datacenter"]) => named(&s.datacenters, &req, "datacenter", "datacenter"),
        ("GET", ["api", "vcenter", "folder"]) => named(&s.folders, &req, "folder", "folder"),
        ("GET", ["api", "vcenter", "resource-pool"]) => named(&s.pools, &req, "resource_pool", "resource-pool"),
        ("GET", ["api", "vcenter", "datastore"]) => named(&s.datastores, &req, "datastore", "datastore"),
        (_, ["api", "cis", "tagging", ..]) => tagging::route(&mut s, &req, &parts, &action),
        (_, ["api", "vcenter", "vm", ..] | ["api", "cis", "tasks", _]) => vms::route(&mut s, &req, &parts, &action),
        _ => no_route(&req),
    }
}

/// The API's answer to a path it does not serve.
fn no_route(req: &Request) -> Response {
    error(404, "NOT_FOUND", &format!("no route {} {}", req.method, req.path))
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
