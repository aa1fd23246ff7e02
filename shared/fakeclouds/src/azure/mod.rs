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

mod compute;
mod deployments;
mod groups;
mod identity;
mod template;

use compute::{instance_view, list_vms, vm_action, vm_not_found};
use deployments::{deployment_state, get_deployment, operation_status, put_deployment};
use groups::{accepted, delete_group, group_not_found, list_groups, put_group};
use identity::{openid_configuration, token};

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

impl State {
    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.next_id, self.next_id)
    }

    fn operation(&mut self, op: Operation) -> String {
        let id = self.id();
        self.operations.insert(id.clone(), op);
        id
    }
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
    if let Some(refused) = refusal(&mut s, &req) {
        return refused;
    }
    route(&mut s, &req, &parts, &original)
}

/// Why ARM would refuse a call before reading it: an expired token, no `api-version`, or a fault the test set.
fn refusal(s: &mut State, req: &Request) -> Option<Response> {
    let now = s.now();
    if !s.tokens.valid(bearer(req), now) {
        return Some(
            error(
                401,
                "ExpiredAuthenticationToken",
                "The access token expiry UTC time is earlier than current UTC time.",
            )
            .header("www-authenticate", "Bearer authorization_uri=\"https://login.microsoftonline.com/\""),
        );
    }
    if req.param(API_VERSION).is_none() {
        return Some(error(
            400,
            "MissingApiVersionParameter",
            "The api-version query parameter (?api-version=) is required for all requests.",
        ));
    }
    let fault = s.faults.take(
        || {
            error(429, "TooManyRequests", "The request is being throttled as the limit has been reached.")
                .header("retry-after", "0")
        },
        || error(503, "ServiceUnavailable", "The service is currently unavailable."),
    );
    if fault.is_none() {
        s.settle();
    }
    fault
}

/// A call on a subscription's resources, to the handler of its resource.
fn route(s: &mut State, req: &Request, parts: &[&str], original: &[&str]) -> Response {
    let name = |i: usize| original.get(i).copied().unwrap_or_default();
    match (req.method.as_str(), parts) {
        ("PUT", ["subscriptions", sub, "resourcegroups", _]) => put_group(s, sub, name(3), req),
        ("GET", ["subscriptions", sub, "resourcegroups"]) => list_groups(s, sub, req),
        ("GET", ["subscriptions", sub, "resourcegroups", rg]) => match s.groups.get(&rg_key(sub, rg)) {
            Some(g) => Response::json(200, &s.rg_json(sub, g)),
            None => group_not_found(name(3)),
        },
        ("DELETE", ["subscriptions", sub, "resourcegroups", rg]) => delete_group(s, sub, rg, name(3)),
        ("GET", ["subscriptions", _, "operationresults", op]) => match s.operations.get(*op) {
            Some(Operation::RgDeletion(k)) if s.groups.contains_key(k) => accepted(202, &s.base, &req.path),
            Some(_) => Response::json(200, &json!({})),
            None => error(404, "NotFound", "operation not found"),
        },
        ("PUT", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.resources", "deployments", _]) => {
            put_deployment(s, sub, rg, name(7), req)
        }
        ("GET", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.resources", "deployments", d]) => {
            get_deployment(s, sub, rg, d)
        }
        (
            "GET",
            ["subscriptions", _, "resourcegroups", _, "providers", "microsoft.resources", "deployments", _, "operationstatuses", op],
        )
        | ("GET", ["subscriptions", _, "providers", "microsoft.compute", "locations", _, "operations", op]) => {
            operation_status(s, op)
        }
        ("GET", ["subscriptions", sub, "resourcegroups", rg, "providers", "microsoft.compute", "virtualmachines"]) => {
            list_vms(s, sub, rg, req)
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
        ) => vm_action(s, sub, rg, vm, verb),
        _ => error(404, "NotFound", &format!("no route {} {}", req.method, req.path)),
    }
}
