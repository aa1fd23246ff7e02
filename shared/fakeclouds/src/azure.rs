//! A fake of Azure Resource Manager (resource groups, template deployments, virtual machines) and of Entra ID's
//! token endpoint, with state.
//!
//! Served: `POST /{tenant}/oauth2/v2.0/token` (the client-credentials grant: a registered app's id and secret, a
//! scope ending in `/.default`), and under `/subscriptions/{s}`, paths case-insensitive as ARM's are, every call
//! with a live bearer token and an `api-version`:
//! - resource groups: `PUT`, `GET`, `DELETE` (202 with `Location`; the group and everything in it are gone after
//!   `delete`), and the `operationresults` the `Location` names; the subscription's list, filtered by tag
//!   (`$filter=tagName eq 'K' and tagValue eq 'V'`), in pages with `nextLink`;
//! - template deployments: `PUT` (201 with `Azure-AsyncOperation`), `GET`, and their `operationStatuses`;
//! - virtual machines: the list of a resource group (pages of [`FakeAzure::set_page_size`] with an absolute
//!   `nextLink`; each VM's instance view in it with `$expand=instanceView`), `GET`, `instanceView`, and
//!   `POST start`, `deallocate`, `powerOff` (202 with `Azure-AsyncOperation` and `Location`), with the operations
//!   those name.
//!
//! Templates are evaluated as far as cluster templates need: each `Microsoft.Compute/virtualMachines` resource
//! (with `copy.count`) becomes VMs, named by a subset of ARM's expression language: `parameters('p')`,
//! `copyIndex()`, `concat(…)`, `format('{0}-{1}', …)`, `string(…)`, `toLower(…)`, string and number literals.
//! Other resources are accepted and ignored. A parameter the template does not declare, or a required one not
//! given, is refused with 400 `InvalidTemplate`, as ARM refuses it.
//!
//! VMs move through ARM's power states on the fake's [`Clock`]: `starting` → `running` after `boot`;
//! `deallocating` → `deallocated` and `stopping` → `stopped` after `stop`. A start of a stopping VM, or any action
//! on a VM with an operation under way, answers 409 `Conflict`; a deallocation of a VM with an ephemeral OS disk
//! answers 409 `OperationNotAllowed`. Faults: the next N calls answer 429 (with `Retry-After`) or 503; tokens
//! expire at once; a VM refuses every action (403 `AuthorizationFailed`) or never finishes a transition; a VM's
//! starts fail for want of capacity (`ProvisioningState/failed/AllocationFailed` in its instance view); every
//! deployment fails (`DeploymentFailed` with the given detail); a resource group is locked (`ScopeLocked`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::common::{bearer, recorded, Clock, Exchange, Faults, Log, Tokens, Wire};
use crate::server::{serve_on, serve_tls_on, Request, Response};

/// Transition times.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// `starting` to `running` (and a new VM to running).
    pub boot: Duration,
    /// `deallocating` to `deallocated`, `stopping` to `stopped`.
    pub stop: Duration,
    /// A deployment's run.
    pub deploy: Duration,
    /// A resource group's deletion.
    pub delete: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            boot: Duration::from_secs(3),
            stop: Duration::from_secs(2),
            deploy: Duration::from_secs(3),
            delete: Duration::from_secs(2),
        }
    }
}

/// (subscription, resource group), lowercase: ARM's names are case-insensitive.
type RgKey = (String, String);
/// (subscription, resource group, name), lowercase.
type Key = (String, String, String);

#[derive(Debug, Clone)]
struct Vm {
    name: String,
    location: String,
    tags: Value,
    /// ARM's power state: `running`, `starting`, `stopping`, `stopped`, `deallocating`, `deallocated`.
    power: &'static str,
    /// `succeeded`, `creating`, `updating`, `deleting`, or `failed/<code>`.
    provisioning: String,
    /// The message of a failed provisioning state.
    failure: Option<String>,
    /// When the transition under way ends, and in what.
    next: Option<(Duration, Next)>,
    ephemeral_os_disk: bool,
    vm_id: String,
}

#[derive(Debug, Clone, Copy)]
enum Next {
    /// The VM reaches this power state, its provisioning succeeded.
    Power(&'static str),
    /// The start fails for want of capacity: the VM stays deallocated.
    NoCapacity,
}

#[derive(Debug, Clone)]
struct Rg {
    name: String,
    location: String,
    tags: Value,
    /// When the deletion under way ends, and its operation.
    deleting: Option<(Duration, String)>,
}

#[derive(Debug, Clone)]
struct Deployment {
    name: String,
    /// When it ends.
    done_at: Duration,
    /// Its error when it fails.
    error: Option<Value>,
    mode: String,
}

#[derive(Debug, Clone)]
enum Operation {
    Deployment(Key),
    RgDeletion(RgKey),
    Vm { done_at: Duration, failed: Option<Value> },
}

struct State {
    timings: Timings,
    clock: Clock,
    base: String,
    /// (tenant, client id) → secret.
    apps: HashMap<(String, String), String>,
    tokens: Tokens,
    groups: BTreeMap<RgKey, Rg>,
    vms: BTreeMap<Key, Vm>,
    deployments: BTreeMap<Key, Deployment>,
    operations: HashMap<String, Operation>,
    links: HashMap<String, Value>,
    next_id: u64,
    page_size: usize,
    faults: Faults,
    refusing: BTreeSet<String>,
    stuck: BTreeSet<String>,
    no_capacity: BTreeSet<String>,
    locked: BTreeSet<String>,
    failing_deployments: Option<(String, String)>,
    log: Log,
    /// Every exchange, when recording ([`FakeAzure::record`]).
    wire: Wire,
}

/// The fake: served on 127.0.0.1 ([`FakeAzure::start`]), or called in process ([`FakeAzure::handle`]).
#[derive(Clone)]
pub struct FakeAzure {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
}

/// The api-version of Compute calls the fake checks is present (any value is accepted).
const API_VERSION: &str = "api-version";

impl FakeAzure {
    /// The fake on `clock`, not served: [`FakeAzure::handle`] answers requests addressed to `addr`.
    pub fn new(timings: Timings, clock: Clock, addr: SocketAddr) -> Self {
        let state = State {
            timings,
            clock,
            base: format!("http://{addr}"),
            apps: HashMap::new(),
            tokens: Tokens::default(),
            groups: BTreeMap::new(),
            vms: BTreeMap::new(),
            deployments: BTreeMap::new(),
            operations: HashMap::new(),
            links: HashMap::new(),
            next_id: 0,
            page_size: 2,
            faults: Faults::default(),
            refusing: BTreeSet::new(),
            stuck: BTreeSet::new(),
            no_capacity: BTreeSet::new(),
            locked: BTreeSet::new(),
            failing_deployments: None,
            log: Log::default(),
            wire: Wire::default(),
        };
        Self { state: Arc::new(Mutex::new(state)), addr }
    }

    /// Starts the fake on a free port, on the wall clock.
    pub async fn start(timings: Timings) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let fake = Self::new(timings, Clock::wall(), listener.local_addr()?);
        let state = fake.state.clone();
        serve_on(listener, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// Starts the fake on a free port of 127.0.0.1, on the wall clock, serving HTTPS (as ARM and Entra ID serve
    /// only HTTPS, and Azure's own SDKs send a bearer token over nothing else) with a certificate for 127.0.0.1
    /// and `localhost` issued by a CA of the fake's own: the CA's PEM is answered alongside.
    pub async fn start_tls(timings: Timings) -> std::io::Result<(Self, String)> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let authority =
            crate::tls::authority("Fake Azure", &["127.0.0.1", "localhost"]).map_err(std::io::Error::other)?;
        let fake = Self::new(timings, Clock::wall(), listener.local_addr()?);
        fake.lock().base = format!("https://{}", fake.addr);
        let state = fake.state.clone();
        serve_tls_on(listener, authority.server, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok((fake, authority.ca_pem))
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: Request) -> Response {
        handle(&self.state, req)
    }

    /// ARM's root to configure (`APIARY_AZURE_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        self.lock().base.clone()
    }

    /// Entra ID's root to configure (`APIARY_AZURE_AUTHORITY`): tokens are at
    /// `{authority}/{tenant}/oauth2/v2.0/token`.
    pub fn authority(&self) -> String {
        self.lock().base.clone()
    }

    /// Records every exchange from now on, for [`FakeAzure::take_wire`].
    pub fn record(&self) {
        self.lock().wire.record();
    }

    /// The exchanges recorded so far ([`FakeAzure::record`]), and clears them.
    pub fn take_wire(&self) -> Vec<Exchange> {
        self.lock().wire.take()
    }

    /// Registers an app (service principal) in `tenant`: the secret's JSON, as Apiary reads it.
    pub fn app(&self, tenant: &str, client_id: &str) -> String {
        let secret = crate::canary::secret("azure-client-secret");
        self.lock().apps.insert((tenant.to_owned(), client_id.to_owned()), secret.clone());
        json!({"clientId": client_id, "clientSecret": secret}).to_string()
    }

    /// Serves `template` at `uri`, for deployments that name it by `templateLink`.
    pub fn add_template_link(&self, uri: &str, template: Value) {
        self.lock().links.insert(uri.to_owned(), template);
    }

    /// Adds a resource group, as another tool would have created it.
    pub fn add_resource_group(&self, subscription: &str, name: &str, location: &str) {
        let rg = Rg { name: name.to_owned(), location: location.to_owned(), tags: json!({}), deleting: None };
        self.lock().groups.insert(rg_key(subscription, name), rg);
    }

    /// Adds a VM in `power` to a resource group (created when missing), as another tool would have created it.
    pub fn add_vm(&self, subscription: &str, group: &str, name: &str, power: &'static str, ephemeral_os_disk: bool) {
        let mut s = self.lock();
        let location = "westeurope".to_owned();
        s.groups.entry(rg_key(subscription, group)).or_insert_with(|| Rg {
            name: group.to_owned(),
            location: location.clone(),
            tags: json!({}),
            deleting: None,
        });
        let vm = s.new_vm(name, &location, json!({}), ephemeral_os_disk, power);
        s.vms.insert(key(subscription, group, name), vm);
    }

    /// VMs of `subscription` as (resource group, name, power state), after the clock's transitions.
    pub fn vms(&self, subscription: &str) -> Vec<(String, String, String)> {
        let mut s = self.lock();
        s.settle();
        let sub = subscription.to_ascii_lowercase();
        s.vms
            .iter()
            .filter(|((su, _, _), _)| *su == sub)
            .map(|((_, rg, _), vm)| (rg.clone(), vm.name.clone(), vm.power.to_owned()))
            .collect()
    }

    /// Resource groups of `subscription` and their tags, after the clock's transitions.
    pub fn resource_groups(&self, subscription: &str) -> Vec<(String, Value)> {
        let mut s = self.lock();
        s.settle();
        let sub = subscription.to_ascii_lowercase();
        s.groups.iter().filter(|((su, _), _)| *su == sub).map(|(_, rg)| (rg.name.clone(), rg.tags.clone())).collect()
    }

    /// Deployments of a resource group as (name, provisioning state).
    pub fn deployments(&self, subscription: &str, group: &str) -> Vec<(String, String)> {
        let mut s = self.lock();
        s.settle();
        let (sub, rg) = rg_key(subscription, group);
        let now = s.now();
        s.deployments
            .iter()
            .filter(|((su, g, _), _)| *su == sub && *g == rg)
            .map(|(_, d)| (d.name.clone(), deployment_state(d, now).to_owned()))
            .collect()
    }

    /// Moves the clock on.
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// VM lists come in pages of `n`.
    pub fn set_page_size(&self, n: usize) {
        self.lock().page_size = n.max(1);
    }

    /// The next `n` ARM calls answer 429 with `Retry-After: 0`.
    pub fn throttle(&self, n: u32) {
        self.lock().faults.throttle = n;
    }

    /// The next `n` ARM calls answer 503.
    pub fn unavailable(&self, n: u32) {
        self.lock().faults.unavailable = n;
    }

    /// Every issued token stops being accepted.
    pub fn expire_tokens(&self) {
        self.lock().tokens.expire_all();
    }

    /// Tokens issued so far.
    pub fn tokens_issued(&self) -> u64 {
        self.lock().tokens.issued()
    }

    /// Actions on VM `name` answer 403 until [`FakeAzure::comply`].
    pub fn refuse(&self, name: &str) {
        self.lock().refusing.insert(name.to_owned());
    }

    /// VM `name` no longer refuses, sticks or lacks capacity.
    pub fn comply(&self, name: &str) {
        let mut s = self.lock();
        s.refusing.remove(name);
        s.stuck.remove(name);
        s.no_capacity.remove(name);
    }

    /// VM `name`'s transitions never end.
    pub fn stick(&self, name: &str) {
        self.lock().stuck.insert(name.to_owned());
    }

    /// Starts of VM `name` fail with `AllocationFailed`.
    pub fn no_capacity(&self, name: &str) {
        self.lock().no_capacity.insert(name.to_owned());
    }

    /// Resource group `name` cannot be deleted (a delete lock) until [`FakeAzure::unlock`].
    pub fn lock_group(&self, name: &str) {
        self.lock().locked.insert(name.to_ascii_lowercase());
    }

    /// Resource group `name` can be deleted again.
    pub fn unlock(&self, name: &str) {
        self.lock().locked.remove(&name.to_ascii_lowercase());
    }

    /// Deployments from now on fail with `DeploymentFailed`, detailed by `(code, message)`; `None`: they succeed.
    pub fn fail_deployments(&self, detail: Option<(&str, &str)>) {
        self.lock().failing_deployments = detail.map(|(c, m)| (c.to_owned(), m.to_owned()));
    }

    /// Requests so far, as `METHOD path`, and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn rg_key(subscription: &str, group: &str) -> RgKey {
    (subscription.to_ascii_lowercase(), group.to_ascii_lowercase())
}

fn key(subscription: &str, group: &str, name: &str) -> Key {
    (subscription.to_ascii_lowercase(), group.to_ascii_lowercase(), name.to_ascii_lowercase())
}

/// ARM's error answer.
fn error(status: u16, code: &str, message: &str) -> Response {
    Response::json(status, &json!({"error": {"code": code, "message": message}}))
}

fn deployment_state(d: &Deployment, now: Duration) -> &'static str {
    match (now >= d.done_at, &d.error) {
        (false, _) => "Running",
        (true, None) => "Succeeded",
        (true, Some(_)) => "Failed",
    }
}

impl State {
    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.next_id, self.next_id)
    }

    fn new_vm(&mut self, name: &str, location: &str, tags: Value, ephemeral: bool, power: &'static str) -> Vm {
        Vm {
            name: name.to_owned(),
            location: location.to_owned(),
            tags,
            power,
            provisioning: "succeeded".into(),
            failure: None,
            next: None,
            ephemeral_os_disk: ephemeral,
            vm_id: self.id(),
        }
    }

    /// Ends every transition, deletion and deployment whose time has come.
    fn settle(&mut self) {
        let now = self.now();
        for vm in self.vms.values_mut() {
            let Some((at, next)) = vm.next else { continue };
            if at > now || self.stuck.contains(&vm.name) {
                continue;
            }
            vm.next = None;
            match next {
                Next::Power(p) => {
                    vm.power = p;
                    vm.provisioning = "succeeded".into();
                    vm.failure = None;
                }
                Next::NoCapacity => {
                    vm.power = "deallocated";
                    vm.provisioning = "failed/AllocationFailed".into();
                    vm.failure = Some(
                        "Allocation failed. We do not have sufficient capacity for the requested VM size in this \
                         region."
                            .into(),
                    );
                }
            }
        }
        let gone: Vec<RgKey> = self
            .groups
            .iter()
            .filter(|(_, rg)| rg.deleting.as_ref().is_some_and(|(at, _)| *at <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for g in gone {
            self.groups.remove(&g);
            self.vms.retain(|(s, r, _), _| (s, r) != (&g.0, &g.1));
            self.deployments.retain(|(s, r, _), _| (s, r) != (&g.0, &g.1));
        }
    }

    /// Starts a VM transition: now in `power`, ending in `next` after `after` (provisioning `updating`).
    fn transition(&mut self, k: &Key, power: &'static str, after: Duration, next: Next) {
        let at = self.now() + after;
        if let Some(vm) = self.vms.get_mut(k) {
            vm.power = power;
            vm.provisioning = "updating".into();
            vm.failure = None;
            vm.next = Some((at, next));
        }
    }

    fn rg_json(&self, sub: &str, rg: &Rg) -> Value {
        let state = if rg.deleting.is_some() { "Deleting" } else { "Succeeded" };
        json!({
            "id": format!("/subscriptions/{sub}/resourceGroups/{}", rg.name),
            "name": rg.name,
            "type": "Microsoft.Resources/resourceGroups",
            "location": rg.location,
            "tags": rg.tags,
            "properties": {"provisioningState": state},
        })
    }

    fn vm_json(&self, sub: &str, rg: &str, vm: &Vm) -> Value {
        let mut os_disk =
            json!({"osType": "Linux", "name": format!("{}_OsDisk", vm.name), "createOption": "FromImage"});
        if vm.ephemeral_os_disk {
            os_disk["diffDiskSettings"] = json!({"option": "Local", "placement": "CacheDisk"});
        }
        let provisioning = match vm.provisioning.as_str() {
            p if p.starts_with("failed") => "Failed".to_owned(),
            p => capitalized(p),
        };
        json!({
            "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{}", vm.name),
            "name": vm.name,
            "type": "Microsoft.Compute/virtualMachines",
            "location": vm.location,
            "tags": vm.tags,
            "properties": {
                "vmId": vm.vm_id,
                "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
                "storageProfile": {"osDisk": os_disk},
                "networkProfile": {"networkInterfaces": [
                    {"id": network_id(sub, rg, "networkInterfaces", &format!("{}-nic", vm.name)), "properties": {"primary": true}},
                ]},
                "provisioningState": provisioning,
            },
        })
    }

    /// The network interfaces (`kind` "networkInterfaces") or public IP addresses ("publicIPAddresses") of the
    /// group's VMs: each VM has one of each; its private address is fixed, its public one allocated (dynamic)
    /// only while it runs.
    fn network_json(&self, sub: &str, rg: &str, kind: &str) -> Value {
        let value: Vec<Value> = self
            .vms
            .iter()
            .filter(|((su, r, _), _)| (su.as_str(), r.as_str()) == (sub, rg.to_ascii_lowercase().as_str()))
            .map(|(_, vm)| {
                let n = vm.name.bytes().fold(0u16, |h, b| h.wrapping_mul(31).wrapping_add(u16::from(b)));
                let [hi, lo] = n.to_be_bytes();
                let pip = network_id(sub, rg, "publicIPAddresses", &format!("{}-pip", vm.name));
                if kind == "networkInterfaces" {
                    json!({"id": network_id(sub, rg, kind, &format!("{}-nic", vm.name)), "name": format!("{}-nic", vm.name),
                           "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {
                               "primary": true, "privateIPAddress": format!("10.1.{hi}.{}", lo.max(4)),
                               "privateIPAllocationMethod": "Dynamic", "publicIPAddress": {"id": pip}}}]}})
                } else {
                    let mut properties = json!({"publicIPAllocationMethod": "Dynamic"});
                    if vm.power == "running" {
                        properties["ipAddress"] = json!(format!("192.0.2.{}", lo.max(1)));
                    }
                    json!({"id": pip, "name": format!("{}-pip", vm.name), "properties": properties})
                }
            })
            .collect();
        json!({"value": value})
    }

    fn operation(&mut self, op: Operation) -> String {
        let id = self.id();
        self.operations.insert(id.clone(), op);
        id
    }
}

/// The id of network resource `name` of `kind` in group `rg`.
fn network_id(sub: &str, rg: &str, kind: &str, name: &str) -> String {
    format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/{kind}/{name}")
}

fn capitalized(text: &str) -> String {
    let mut c = text.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    recorded(state, |s| &mut s.wire, req, answer)
}

fn answer(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, None);
    let lower = req.path.to_ascii_lowercase();
    let parts: Vec<&str> = lower.trim_matches('/').split('/').collect();
    let original: Vec<&str> = req.path.trim_matches('/').split('/').collect();
    match (req.method.as_str(), parts.as_slice()) {
        ("POST", [tenant, "oauth2", "v2.0", "token"]) => return token(&mut s, tenant, &req),
        ("GET", [tenant, "v2.0", ".well-known", "openid-configuration"]) => return openid_configuration(&s, tenant),
        _ => {}
    }
    if parts.first() != Some(&"subscriptions") {
        return error(404, "NotFound", &format!("no route {}", req.path));
    }
    let now = s.now();
    if !s.tokens.valid(bearer(&req), now) {
        return error(
            401,
            "ExpiredAuthenticationToken",
            "The access token expiry UTC time is earlier than current UTC time.",
        )
        .header("www-authenticate", "Bearer authorization_uri=\"https://login.microsoftonline.com/\"");
    }
    if req.param(API_VERSION).is_none() {
        return error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        );
    }
    let fault = s.faults.take(
        || {
            error(429, "TooManyRequests", "The request is being throttled as the limit has been reached.")
                .header("retry-after", "0")
        },
        || error(503, "ServiceUnavailable", "The service is currently unavailable."),
    );
    if let Some(answer) = fault {
        return answer;
    }
    s.settle();
    let name = |i: usize| original.get(i).copied().unwrap_or_default();
    match (req.method.as_str(), parts.as_slice()) {
        ("PUT", ["subscriptions", sub, "resourcegroups", _]) => put_group(&mut s, sub, name(3), &req),
        ("GET", ["subscriptions", sub, "resourcegroups"]) => list_groups(&s, sub, &req),
        ("GET", ["subscriptions", sub, "resourcegroups", rg]) => match s.groups.get(&rg_key(sub, rg)) {
            Some(g) => Response::json(200, &s.rg_json(sub, g)),
            None => group_not_found(name(3)),
        },
        ("DELETE", ["subscriptions", sub, "resourcegroups", rg]) => delete_group(&mut s, sub, rg, name(3)),
        ("GET", ["subscriptions", _, "operationresults", op]) => match s.operations.get(*op) {
            Some(Operation::RgDeletion(k)) if s.groups.contains_key(k) => accepted(202, &s.base, &req.path),
            Some(_) => Response::json(200, &json!({})),
            None => error(404, "NotFound", "operation not found"),
        },
        ("PUT", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.resources", "deployments", _]) => {
            put_deployment(&mut s, sub, rg, name(7), &req)
        }
        ("GET", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.resources", "deployments", d]) => {
            get_deployment(&s, sub, rg, d)
        }
        (
            "GET",
            ["subscriptions", _, "resourcegroups", _, "providers", "microsoft.resources", "deployments", _, "operationstatuses", op],
        )
        | ("GET", ["subscriptions", _, "providers", "microsoft.compute", "locations", _, "operations", op]) => {
            operation_status(&s, op)
        }
        ("GET", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.compute", "virtualmachines"]) => {
            list_vms(&s, sub, rg, &req)
        }
        ("GET", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.network", kind])
            if matches!(*kind, "networkinterfaces" | "publicipaddresses") =>
        {
            let kind = if *kind == "networkinterfaces" { "networkInterfaces" } else { "publicIPAddresses" };
            match s.groups.get(&rg_key(sub, rg)) {
                Some(group) => Response::json(200, &s.network_json(sub, &group.name, kind)),
                None => group_not_found(name(3)),
            }
        }
        (
            "GET",
            ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.compute", "virtualmachines", vm],
        ) => match s.vms.get(&key(sub, rg, vm)) {
            Some(v) => Response::json(200, &s.vm_json(sub, name(3), v)),
            None => vm_not_found(name(7)),
        },
        (
            "GET",
            ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.compute", "virtualmachines", vm, "instanceview"],
        ) => match s.vms.get(&key(sub, rg, vm)) {
            Some(v) => Response::json(200, &instance_view(v)),
            None => vm_not_found(name(7)),
        },
        (
            "POST",
            ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.compute", "virtualmachines", vm, verb],
        ) => vm_action(&mut s, sub, rg, vm, verb),
        _ => error(404, "NotFound", &format!("no route {} {}", req.method, req.path)),
    }
}

fn group_not_found(name: &str) -> Response {
    error(404, "ResourceGroupNotFound", &format!("Resource group '{name}' could not be found."))
}

fn vm_not_found(name: &str) -> Response {
    error(
        404,
        "ResourceNotFound",
        &format!("The Resource 'Microsoft.Compute/virtualMachines/{name}' under resource group was not found."),
    )
}

/// A 202 whose `Location` is `path` again (still running).
fn accepted(status: u16, base: &str, path: &str) -> Response {
    Response::json(status, &json!({}))
        .header("location", &format!("{base}{path}?api-version=2021-04-01"))
        .header("retry-after", "1")
}

/// The tenant's OpenID Connect metadata, as Entra ID publishes it: where a client (MSAL) finds the token endpoint.
fn openid_configuration(s: &State, tenant: &str) -> Response {
    if !s.apps.keys().any(|(t, _)| t == tenant) {
        return Response::json(
            400,
            &json!({"error": "invalid_tenant", "error_description": format!("AADSTS90002: Tenant '{tenant}' not found.")}),
        );
    }
    let root = format!("{}/{tenant}", s.base);
    Response::json(
        200,
        &json!({
            "token_endpoint": format!("{root}/oauth2/v2.0/token"),
            "authorization_endpoint": format!("{root}/oauth2/v2.0/authorize"),
            "issuer": format!("{root}/v2.0"),
            "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt", "client_secret_basic"],
            "response_types_supported": ["code", "id_token", "code id_token", "id_token token"],
            "grant_types_supported": ["authorization_code", "client_credentials", "refresh_token"],
        }),
    )
}

fn token(s: &mut State, tenant: &str, req: &Request) -> Response {
    let form: HashMap<String, String> = req.form().into_iter().collect();
    let field = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
    if field("grant_type") != "client_credentials" {
        return Response::json(400, &json!({"error": "unsupported_grant_type"}));
    }
    if !s.apps.keys().any(|(t, _)| t == tenant) {
        return Response::json(
            400,
            &json!({"error": "invalid_request", "error_description": format!("AADSTS90002: Tenant '{tenant}' not found.")}),
        );
    }
    match s.apps.get(&(tenant.to_owned(), field("client_id").to_owned())) {
        None => Response::json(
            400,
            &json!({"error": "unauthorized_client", "error_description": "AADSTS700016: Application not found in the directory."}),
        ),
        Some(secret) if secret != field("client_secret") => Response::json(
            401,
            &json!({"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}),
        ),
        Some(_) if !field("scope").ends_with("/.default") => Response::json(
            400,
            &json!({"error": "invalid_scope", "error_description": "AADSTS1002012: scope is not valid."}),
        ),
        Some(_) => {
            let now = s.now();
            let token = s.tokens.issue("eyJ0eXAiOiJKV1Qi.fake", now, Duration::from_secs(3599));
            Response::json(
                200,
                &json!({"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}),
            )
        }
    }
}

fn put_group(s: &mut State, sub: &str, name: &str, req: &Request) -> Response {
    let body = req.json();
    let Some(location) = body["location"].as_str().filter(|l| !l.is_empty()) else {
        return error(400, "LocationRequired", "The location property is required for this definition.");
    };
    let k = rg_key(sub, name);
    let status = match s.groups.get_mut(&k) {
        Some(rg) if rg.deleting.is_some() => {
            return error(
                409,
                "ResourceGroupBeingDeleted",
                &format!("The resource group '{name}' is in deprovisioning state and cannot perform this operation."),
            );
        }
        Some(rg) => {
            rg.tags = body.get("tags").cloned().unwrap_or_else(|| json!({}));
            200
        }
        None => {
            let tags = body.get("tags").cloned().unwrap_or_else(|| json!({}));
            s.groups
                .insert(k.clone(), Rg { name: name.to_owned(), location: location.to_owned(), tags, deleting: None });
            201
        }
    };
    let rg = s.groups.get(&k).cloned();
    Response::json(status, &rg.map(|g| s.rg_json(sub, &g)).unwrap_or_default())
}

fn delete_group(s: &mut State, sub: &str, rg: &str, name: &str) -> Response {
    let k = rg_key(sub, rg);
    if !s.groups.contains_key(&k) {
        return group_not_found(name);
    }
    if s.locked.contains(rg) {
        return error(
            409,
            "ScopeLocked",
            &format!("The scope '/subscriptions/{sub}/resourceGroups/{name}' cannot perform delete operation because following scope(s) are locked: '/subscriptions/{sub}/resourceGroups/{name}'. Please remove the lock and try again."),
        );
    }
    let op = match s.groups.get(&k).and_then(|g| g.deleting.clone()) {
        Some((_, op)) => op,
        None => {
            let op = s.operation(Operation::RgDeletion(k.clone()));
            let at = s.now() + s.timings.delete;
            if let Some(g) = s.groups.get_mut(&k) {
                g.deleting = Some((at, op.clone()));
            }
            for ((su, r, _), vm) in s.vms.iter_mut() {
                if (su, r) == (&k.0, &k.1) {
                    vm.provisioning = "deleting".into();
                    vm.next = None;
                }
            }
            op
        }
    };
    accepted(202, &s.base, &format!("/subscriptions/{sub}/operationresults/{op}"))
}

fn put_deployment(s: &mut State, sub: &str, rg: &str, name: &str, req: &Request) -> Response {
    let Some(group) = s.groups.get(&rg_key(sub, rg)).cloned() else {
        return group_not_found(rg);
    };
    if group.deleting.is_some() {
        return error(409, "ResourceGroupBeingDeleted", "The resource group is being deleted.");
    }
    let k = key(sub, rg, name);
    let now = s.now();
    if s.deployments.get(&k).is_some_and(|d| deployment_state(d, now) == "Running") {
        return error(409, "DeploymentActive", &format!("The deployment '{name}' is already in progress."));
    }
    let body = req.json();
    let props = &body["properties"];
    let mode = props["mode"].as_str().unwrap_or_default().to_owned();
    if mode != "Incremental" && mode != "Complete" {
        return error(400, "InvalidDeployment", "The deployment mode must be Incremental or Complete.");
    }
    let template = match (&props["template"], props["templateLink"]["uri"].as_str()) {
        (Value::Object(_), None) => props["template"].clone(),
        (Value::Null, Some(uri)) => match s.links.get(uri) {
            Some(t) => t.clone(),
            None => {
                return error(
                    400,
                    "InvalidContentLink",
                    &format!("Unable to download deployment content from '{uri}'."),
                )
            }
        },
        _ => return error(400, "InvalidRequestContent", "The request content must give template or templateLink."),
    };
    let vms = match evaluate(&template, &props["parameters"]) {
        Ok(vms) => vms,
        Err(message) => {
            return error(400, "InvalidTemplate", &format!("Deployment template validation failed: '{message}'."))
        }
    };
    let failure = s.failing_deployments.clone();
    let (boot, deploy) = (s.timings.boot, s.timings.deploy);
    let count = vms.len();
    for (i, (vm_name, location, tags, ephemeral)) in vms.into_iter().enumerate() {
        // A failing deployment gets all but its last VM, as a quota met half way leaves it.
        if failure.is_some() && i + 1 == count {
            break;
        }
        let vk = key(sub, rg, &vm_name);
        if s.vms.contains_key(&vk) {
            continue;
        }
        let location = location.unwrap_or_else(|| group.location.clone());
        let mut vm = s.new_vm(&vm_name, &location, tags, ephemeral, "starting");
        vm.provisioning = "creating".into();
        vm.next = Some((now + boot.min(deploy), Next::Power("running")));
        s.vms.insert(vk, vm);
    }
    let error = failure.map(|(code, message)| {
        json!({
            "code": "DeploymentFailed",
            "message": "At least one resource deployment operation failed. Please list deployment operations for details. Please see https://aka.ms/arm-deployment-operations for usage details.",
            "details": [{"code": code, "message": message}],
        })
    });
    s.deployments.insert(k.clone(), Deployment { name: name.to_owned(), done_at: now + deploy, error, mode });
    let op = s.operation(Operation::Deployment(k));
    let async_op = format!(
        "{}/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.Resources/deployments/{name}/operationStatuses/{op}?api-version=2021-04-01",
        s.base
    );
    Response::json(201, &deployment_json(sub, rg, s.deployments.get(&key(sub, rg, name)), now, "Accepted"))
        .header("azure-asyncoperation", &async_op)
}

fn deployment_json(sub: &str, rg: &str, d: Option<&Deployment>, now: Duration, state: &str) -> Value {
    let Some(d) = d else { return Value::Null };
    let state = if state.is_empty() { deployment_state(d, now) } else { state };
    let mut props =
        json!({"provisioningState": state, "mode": d.mode, "correlationId": "00000000-0000-0000-0000-000000000000"});
    if state == "Failed" {
        props["error"] = d.error.clone().unwrap_or_default();
    }
    json!({
        "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Resources/deployments/{}", d.name),
        "name": d.name,
        "type": "Microsoft.Resources/deployments",
        "properties": props,
    })
}

fn get_deployment(s: &State, sub: &str, rg: &str, name: &str) -> Response {
    if !s.groups.contains_key(&rg_key(sub, rg)) {
        return group_not_found(rg);
    }
    match s.deployments.get(&key(sub, rg, name)) {
        Some(d) => Response::json(200, &deployment_json(sub, rg, Some(d), s.now(), "")),
        None => error(404, "DeploymentNotFound", &format!("Deployment '{name}' could not be found.")),
    }
}

fn operation_status(s: &State, op: &str) -> Response {
    let now = s.now();
    let (status, error) = match s.operations.get(op) {
        None => return error(404, "NotFound", "operation not found"),
        Some(Operation::Deployment(k)) => match s.deployments.get(k) {
            None => ("Canceled", None),
            Some(d) => match deployment_state(d, now) {
                "Running" => ("InProgress", None),
                "Succeeded" => ("Succeeded", None),
                _ => ("Failed", d.error.clone()),
            },
        },
        Some(Operation::RgDeletion(k)) => (if s.groups.contains_key(k) { "InProgress" } else { "Succeeded" }, None),
        Some(Operation::Vm { done_at, failed }) => match (now >= *done_at, failed) {
            (false, _) => ("InProgress", None),
            (true, None) => ("Succeeded", None),
            (true, Some(e)) => ("Failed", Some(e.clone())),
        },
    };
    let mut body = json!({"name": op, "status": status});
    if let Some(e) = error {
        body["error"] = e;
    }
    Response::json(200, &body)
}

/// The subscription's resource groups, in pages, filtered as ARM filters them by tag:
/// `$filter=tagName eq 'K' and tagValue eq 'V'` (or `tagName eq 'K'` alone); another filter is refused.
fn list_groups(s: &State, sub: &str, req: &Request) -> Response {
    let tag = match req.param("$filter") {
        None => None,
        Some(f) => match tag_filter(f) {
            Some(t) => Some(t),
            None => {
                return error(
                    400,
                    "InvalidFilterInQueryString",
                    &format!("Invalid $filter '{f}' specified in the query string."),
                )
            }
        },
    };
    let all: Vec<&Rg> = s
        .groups
        .iter()
        .filter(|((su, _), _)| su.as_str() == sub)
        .map(|(_, rg)| rg)
        .filter(|rg| match &tag {
            None => true,
            Some((k, v)) => rg.tags.get(k.as_str()).is_some_and(|t| v.as_ref().is_none_or(|v| t == v.as_str())),
        })
        .collect();
    let from: usize = req.param("$skiptoken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let page: Vec<Value> = all.iter().skip(from).take(s.page_size).map(|rg| s.rg_json(sub, rg)).collect();
    let mut body = json!({"value": page});
    if from + s.page_size < all.len() {
        let filter = req
            .param("$filter")
            .map(|f| format!("&$filter={}", form_urlencoded::byte_serialize(f.as_bytes()).collect::<String>()))
            .unwrap_or_default();
        body["nextLink"] = json!(format!(
            "{}/subscriptions/{sub}/resourcegroups?api-version={}{filter}&$skiptoken={}",
            s.base,
            req.param(API_VERSION).unwrap_or_default(),
            from + s.page_size
        ));
    }
    Response::json(200, &body)
}

/// `tagName eq 'K'` with an optional ` and tagValue eq 'V'` (quotes doubled inside a literal): the tag and value.
fn tag_filter(f: &str) -> Option<(String, Option<String>)> {
    fn literal(text: &str, field: &str) -> Option<String> {
        let rest = text.trim().strip_prefix(field)?.trim_start().strip_prefix("eq")?.trim();
        let inner = rest.strip_prefix('\'')?.strip_suffix('\'')?;
        Some(inner.replace("''", "'"))
    }
    match f.split_once(" and ") {
        None => Some((literal(f, "tagName")?, None)),
        Some((name, value)) => Some((literal(name, "tagName")?, Some(literal(value, "tagValue")?))),
    }
}

fn list_vms(s: &State, sub: &str, rg: &str, req: &Request) -> Response {
    let Some(group) = s.groups.get(&rg_key(sub, rg)) else {
        return group_not_found(rg);
    };
    // `$expand=instanceView` puts each VM's instance view in its `properties`, as ARM's list does.
    let expand = req.param("$expand").filter(|e| e.eq_ignore_ascii_case("instanceView"));
    let all: Vec<&Vm> =
        s.vms.iter().filter(|((su, r, _), _)| (su.as_str(), r.as_str()) == (sub, rg)).map(|(_, v)| v).collect();
    let from: usize = req.param("$skiptoken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let page: Vec<Value> = all
        .iter()
        .skip(from)
        .take(s.page_size)
        .map(|v| {
            let mut vm = s.vm_json(sub, &group.name, v);
            if expand.is_some() {
                vm["properties"]["instanceView"] = instance_view(v);
            }
            vm
        })
        .collect();
    let mut body = json!({"value": page});
    if from + s.page_size < all.len() {
        body["nextLink"] = json!(format!(
            "{}/subscriptions/{sub}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines?api-version={}{}&$skiptoken={}",
            s.base,
            group.name,
            req.param(API_VERSION).unwrap_or_default(),
            expand.map(|e| format!("&$expand={e}")).unwrap_or_default(),
            from + s.page_size
        ));
    }
    Response::json(200, &body)
}

fn instance_view(vm: &Vm) -> Value {
    let provisioning = match &vm.failure {
        Some(message) => {
            json!({"code": format!("ProvisioningState/{}", vm.provisioning), "level": "Error", "displayStatus": "Provisioning failed", "message": message})
        }
        None => {
            json!({"code": format!("ProvisioningState/{}", vm.provisioning), "level": "Info", "displayStatus": format!("Provisioning {}", vm.provisioning)})
        }
    };
    let display = match vm.power {
        "running" => "VM running",
        "deallocated" => "VM deallocated",
        "stopped" => "VM stopped",
        "starting" => "VM starting",
        "stopping" => "VM stopping",
        _ => "VM deallocating",
    };
    let agent = if vm.power == "running" { "Ready" } else { "Not Ready" };
    json!({
        "computerName": vm.name,
        "osName": "redhat",
        "vmAgent": {"vmAgentVersion": "2.11.1", "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": agent}]},
        "statuses": [provisioning, {"code": format!("PowerState/{}", vm.power), "level": "Info", "displayStatus": display}],
    })
}

fn vm_action(s: &mut State, sub: &str, rg: &str, name: &str, verb: &str) -> Response {
    let k = key(sub, rg, name);
    let Some(vm) = s.vms.get(&k).cloned() else {
        return vm_not_found(name);
    };
    let action = match verb {
        "start" => "start",
        "deallocate" => "deallocate",
        "poweroff" => "powerOff",
        _ => return error(404, "NotFound", &format!("no action {verb}")),
    };
    if s.refusing.contains(&vm.name) {
        return error(
            403,
            "AuthorizationFailed",
            &format!("The client does not have authorization to perform action 'Microsoft.Compute/virtualMachines/{action}/action' over scope '/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{}'.", vm.name),
        );
    }
    let conflict = || {
        error(
            409,
            "Conflict",
            &format!("Operation '{action}' is not allowed on VM '{}' since another operation is in progress.", vm.name),
        )
    };
    if vm.provisioning == "deleting" {
        return conflict();
    }
    let Timings { boot, stop, .. } = s.timings;
    let mut failed = None;
    let done_after = match (action, vm.power) {
        ("start", "deallocated" | "stopped") => {
            if s.no_capacity.contains(&vm.name) {
                failed = Some(
                    json!({"code": "AllocationFailed", "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."}),
                );
                s.transition(&k, "starting", boot, Next::NoCapacity);
            } else {
                s.transition(&k, "starting", boot, Next::Power("running"));
            }
            boot
        }
        ("start", "running" | "starting") => Duration::ZERO,
        ("deallocate", _) if vm.ephemeral_os_disk => {
            return error(
                409,
                "OperationNotAllowed",
                "Operation 'deallocate' is not supported for VMs or VM Scale Set instances using an ephemeral OS disk.",
            );
        }
        ("deallocate", "running" | "stopped") => {
            s.transition(&k, "deallocating", stop, Next::Power("deallocated"));
            stop
        }
        ("deallocate", "deallocated" | "deallocating") => Duration::ZERO,
        ("powerOff", "running") => {
            s.transition(&k, "stopping", stop, Next::Power("stopped"));
            stop
        }
        ("powerOff", "stopped" | "stopping" | "deallocated") => Duration::ZERO,
        _ => return conflict(),
    };
    let done_at = s.now() + done_after;
    let op = s.operation(Operation::Vm { done_at, failed });
    let location = vm.location.clone();
    let async_op = format!(
        "{}/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}/operations/{op}?api-version=2024-07-01",
        s.base
    );
    Response { status: 202, headers: vec![], body: vec![] }
        .header("azure-asyncoperation", &async_op)
        .header("location", &format!("{async_op}&monitor=true"))
        .header("retry-after", &done_after.as_secs().clamp(1, 10).to_string())
}

/// A VM a template makes: name, location (when the template says), tags, whether its OS disk is ephemeral.
type VmSpec = (String, Option<String>, Value, bool);

/// The VMs `template` makes with `given` parameters (`{name: {value}}`), or why ARM would refuse it.
fn evaluate(template: &Value, given: &Value) -> Result<Vec<VmSpec>, String> {
    let declared = template["parameters"].as_object().cloned().unwrap_or_default();
    let given = given.as_object().cloned().unwrap_or_default();
    let unknown: Vec<&String> = given.keys().filter(|k| !declared.contains_key(*k)).collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|k| k.to_string()).collect();
        let supported: Vec<&String> = declared.keys().collect();
        return Err(format!(
            "The template parameters '{}' in the parameters file are not valid; they are not present in the original template and can therefore not be provided at deployment time. The only supported parameters for this template are '{}'.",
            names.join(", "),
            supported.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut params: Map<String, Value> = Map::new();
    for (name, decl) in &declared {
        match given.get(name).map(|g| g["value"].clone()).or_else(|| decl.get("defaultValue").cloned()) {
            Some(v) => {
                params.insert(name.clone(), v);
            }
            None => return Err(format!("The value for the template parameter '{name}' is not provided.")),
        }
    }
    let resources: Vec<Value> = match &template["resources"] {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o.values().cloned().collect(),
        _ => vec![],
    };
    let mut out = vec![];
    for r in resources
        .iter()
        .filter(|r| r["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Compute/virtualMachines")))
    {
        let count = match &r["copy"]["count"] {
            Value::Null => 1,
            c => as_count(&value(c, &params, 0)?)?,
        };
        for i in 0..count {
            let name = match value(&r["name"], &params, i)? {
                Value::String(n) => n,
                other => return Err(format!("a virtual machine's name is not a string: {other}")),
            };
            // `[resourceGroup().location]`, and any form the fake does not read, is the group's location.
            let location =
                r.get("location").and_then(|l| value(l, &params, i).ok()).and_then(|l| l.as_str().map(str::to_owned));
            let tags = match r.get("tags") {
                Some(Value::Object(t)) => {
                    let mut out = Map::new();
                    for (k, v) in t {
                        out.insert(k.clone(), value(v, &params, i)?);
                    }
                    Value::Object(out)
                }
                Some(other) => value(other, &params, i)?,
                None => json!({}),
            };
            let ephemeral = r["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"]["option"] == "Local";
            out.push((name, location, tags, ephemeral));
        }
    }
    Ok(out)
}

fn as_count(v: &Value) -> Result<u64, String> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| format!("copy count {v} is not a number"))
}

/// `v` with its ARM expression (a string `[…]`) evaluated; other values as they are.
fn value(v: &Value, params: &Map<String, Value>, index: u64) -> Result<Value, String> {
    match v.as_str() {
        Some(text) if text.starts_with('[') && text.ends_with(']') && !text.starts_with("[[") => {
            let mut p = Parser { text: &text[1..text.len() - 1], at: 0, params, index };
            let out = p.expr()?;
            p.space();
            if p.at != p.text.len() {
                return Err(format!("unexpected text in the expression {text}"));
            }
            Ok(out)
        }
        _ => Ok(v.clone()),
    }
}

/// The subset of ARM's template expressions cluster templates use.
struct Parser<'a> {
    text: &'a str,
    at: usize,
    params: &'a Map<String, Value>,
    index: u64,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.text[self.at..].starts_with(' ') {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.space();
        if self.text[self.at..].starts_with(c) {
            self.at += c.len_utf8();
            return true;
        }
        false
    }

    fn expr(&mut self) -> Result<Value, String> {
        self.space();
        let rest = &self.text[self.at..];
        if let Some(quoted) = rest.strip_prefix('\'') {
            let mut out = String::new();
            let mut chars = quoted.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c == '\'' {
                    if chars.peek().is_some_and(|(_, n)| *n == '\'') {
                        chars.next();
                        out.push('\'');
                        continue;
                    }
                    self.at += 1 + i + 1;
                    return Ok(Value::String(out));
                }
                out.push(c);
            }
            return Err("an unterminated string".into());
        }
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            self.at += digits.len();
            return digits.parse::<u64>().map(Value::from).map_err(|e| e.to_string());
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        self.at += name.len();
        if !self.eat('(') {
            return Err(format!("expected ( after {name:?}"));
        }
        let mut args = vec![];
        if !self.eat(')') {
            loop {
                args.push(self.expr()?);
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err("expected , or )".into());
                }
            }
        }
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match name.to_ascii_lowercase().as_str() {
            "parameters" => {
                let p = args.first().map(text).unwrap_or_default();
                self.params.get(&p).cloned().ok_or_else(|| format!("The template parameter '{p}' is not found."))
            }
            "copyindex" => Ok(Value::from(self.index + args.first().and_then(Value::as_u64).unwrap_or(0))),
            "concat" => Ok(Value::String(args.iter().map(text).collect())),
            "string" => Ok(Value::String(args.first().map(text).unwrap_or_default())),
            "tolower" => Ok(Value::String(args.first().map(text).unwrap_or_default().to_lowercase())),
            "format" => {
                let mut out = args.first().map(text).unwrap_or_default();
                for (i, a) in args.iter().skip(1).enumerate() {
                    out = out.replace(&format!("{{{i}}}"), &text(a));
                }
                Ok(Value::String(out))
            }
            other => Err(format!("the function '{other}' is not supported by this fake")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_names_its_vms_from_parameters_and_the_copy_index() {
        let template = json!({
            "parameters": {"infraId": {"type": "string"}, "machineCount": {"type": "int", "defaultValue": 2}},
            "resources": [
                {"type": "Microsoft.Network/virtualNetworks", "name": "[concat(parameters('infraId'), '-vnet')]"},
                {"type": "Microsoft.Compute/virtualMachines", "name": "[format('{0}-node-{1}', parameters('infraId'), copyIndex())]",
                 "copy": {"name": "nodes", "count": "[parameters('machineCount')]"},
                 "tags": {"role": "'x'", "cluster": "[parameters('infraId')]"}},
                {"type": "Microsoft.Compute/virtualMachines", "name": "[concat(parameters('infraId'), '-bootstrap')]",
                 "location": "[resourceGroup().location]",
                 "properties": {"storageProfile": {"osDisk": {"diffDiskSettings": {"option": "Local"}}}}}
            ]
        });
        let vms = evaluate(&template, &json!({"infraId": {"value": "ci-x7k2p"}})).expect("valid");
        let names: Vec<&str> = vms.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(names, ["ci-x7k2p-node-0", "ci-x7k2p-node-1", "ci-x7k2p-bootstrap"]);
        assert_eq!(vms[0].2["cluster"], "ci-x7k2p");
        assert_eq!((vms[0].3, vms[2].3), (false, true));
        let unknown =
            evaluate(&template, &json!({"infraId": {"value": "a"}, "size": {"value": 1}})).expect_err("unknown");
        assert!(unknown.contains("'size'") && unknown.contains("not present in the original template"), "{unknown}");
        let missing = evaluate(&template, &json!({})).expect_err("missing");
        assert!(missing.contains("'infraId' is not provided"), "{missing}");
    }
}
