//! A fake of Compute Engine's REST API (v1) and of Google's OAuth 2.0 token endpoint, with state.
//!
//! Served: `POST /token` (the JWT bearer grant: the assertion's RS256 signature is checked against the service
//! account's public key, and its issuer, audience, scope and expiry), and under `/compute/v1/projects/{p}`:
//! `GET aggregated/instances` (`filter` of the form `labels.KEY = "VALUE"`, or such terms in parentheses joined by
//! `OR`; pages of [`FakeGcp::set_page_size`]
//! with `nextPageToken`), `POST zones/{z}/instances/bulkInsert` (`sourceInstanceTemplate`,
//! `perInstanceProperties`, `instanceProperties.labels`, `requestId`), `POST zones/{z}/instances` (one instance
//! as openshift-install makes its machines: `name`, `machineType`, `labels`), `POST zones/{z}/instances/{i}/start`,
//! `/stop`, `/resume`, `DELETE zones/{z}/instances/{i}`. Every Compute call needs a live bearer token (else 401).
//!
//! Instances move through the real states on a clock the test can advance: PROVISIONING → STAGING → RUNNING
//! after `boot`, RUNNING → STOPPING → TERMINATED after `stop`, deleted instances STOPPING then gone after
//! `stop`. A start of a TERMINATED instance boots it; of a RUNNING one is a no-op; of a STOPPING one answers 400
//! `resourceNotReady`, as the API does. Faults: the next N calls answer 429 (with `Retry-After`) or 503; tokens
//! expire at once; an instance refuses every call (403) or never finishes a transition; a zone is unreachable; a
//! bulkInsert's operation fails with `QUOTA_EXCEEDED`. Every request is logged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::signature::KeyPair as _;
use serde_json::{json, Value};

use crate::common::{bearer, recorded, Clock, Exchange, Faults, Log, Tokens, Wire};
use crate::server::{serve_on, Request, Response};

/// Transition times.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    /// PROVISIONING or STAGING to RUNNING.
    pub boot: Duration,
    /// STOPPING to TERMINATED (or gone, for a delete).
    pub stop: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self { boot: Duration::from_secs(3), stop: Duration::from_secs(2) }
    }
}

#[derive(Debug, Clone)]
struct Instance {
    status: &'static str,
    labels: BTreeMap<String, String>,
    /// Its ordinal, which its addresses derive from.
    ordinal: u32,
    /// When the current transition ends, and what it ends in (`None`: the instance is gone).
    next: Option<(Duration, Option<&'static str>)>,
}

/// An instance's (project, zone, name).
type InstanceKey = (String, String, String);

struct State {
    timings: Timings,
    clock: Clock,
    accounts: HashMap<String, Vec<u8>>,
    tokens: Tokens,
    templates: BTreeSet<String>,
    /// (project, zone, name) → instance.
    instances: BTreeMap<(String, String, String), Instance>,
    /// Instances created so far.
    created: u32,
    operations: HashMap<String, Value>,
    /// Operations by name, with the instances they act on: done once none of them is mid-transition.
    ops: HashMap<String, (Value, Vec<InstanceKey>)>,
    next_op: u64,
    page_size: usize,
    faults: Faults,
    refusing: BTreeSet<String>,
    stuck: BTreeSet<String>,
    unreachable: BTreeSet<String>,
    quota_exceeded: bool,
    log: Log,
    /// Every exchange, when recording ([`FakeGcp::record`]).
    wire: Wire,
}

/// The fake: served on 127.0.0.1 ([`FakeGcp::start`]), or called in process ([`FakeGcp::handle`]).
#[derive(Clone)]
pub struct FakeGcp {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
}

impl FakeGcp {
    /// The fake on `clock`, not served: [`FakeGcp::handle`] answers requests addressed to `addr`.
    pub fn new(timings: Timings, clock: Clock, addr: SocketAddr) -> Self {
        let state = State {
            timings,
            clock,
            accounts: HashMap::new(),
            tokens: Tokens::default(),
            templates: BTreeSet::new(),
            instances: BTreeMap::new(),
            created: 0,
            operations: HashMap::new(),
            ops: HashMap::new(),
            next_op: 0,
            page_size: 2,
            faults: Faults::default(),
            refusing: BTreeSet::new(),
            stuck: BTreeSet::new(),
            unreachable: BTreeSet::new(),
            quota_exceeded: false,
            log: Log::default(),
            wire: Wire::default(),
        };
        Self { state: Arc::new(Mutex::new(state)), addr }
    }

    /// Starts the fake on a free port, on the wall clock.
    pub async fn start(timings: Timings) -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), timings).await
    }

    /// Starts the fake on `addr` (port 0: a free one), on the wall clock.
    pub async fn start_on(addr: SocketAddr, timings: Timings) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let fake = Self::new(timings, Clock::wall(), listener.local_addr()?);
        let state = fake.state.clone();
        serve_on(listener, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: Request) -> Response {
        handle(&self.state, req)
    }

    /// The Compute API root to configure (`APIARY_GCP_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}/compute/v1", self.addr)
    }

    /// The token endpoint a key names.
    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// A new service account `email` with a fresh RSA key: its JSON key file, as GCP hands it out.
    pub fn service_account(&self, email: &str, project: &str) -> String {
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("an RSA key");
        let pkcs8 = pair.as_der().expect("PKCS#8");
        let pem = pem::encode(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref().to_vec()));
        self.service_account_with(email, project, &pem).expect("the key just made")
    }

    /// A new service account `email` whose key is `private_key_pem` (PKCS#8): its JSON key file; `None` when the
    /// PEM is not an RSA key. (Keys are slow to make: a simulation makes one and gives it to every fake.)
    pub fn service_account_with(&self, email: &str, project: &str, private_key_pem: &str) -> Option<String> {
        let der = pem::parse(private_key_pem).ok()?;
        let pair = aws_lc_rs::rsa::KeyPair::from_pkcs8(der.contents()).ok()?;
        let pem = private_key_pem;
        self.lock().accounts.insert(email.to_owned(), pair.public_key().as_ref().to_vec());
        json!({
            "type": "service_account",
            "project_id": project,
            "private_key_id": crate::canary::secret("gcp-key-id"),
            "private_key": pem,
            "client_email": email,
            "client_id": "100000000000000000001",
            "token_uri": self.token_uri(),
        })
        .to_string()
        .into()
    }

    /// Makes `template` exist (`name`, in every project).
    pub fn add_template(&self, name: &str) {
        self.lock().templates.insert(name.to_owned());
    }

    /// Adds an instance, as another tool would have created it.
    pub fn add_instance(&self, project: &str, zone: &str, name: &str, status: &'static str, labels: &[(&str, &str)]) {
        let labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let mut s = self.lock();
        let instance = s.instance(status, labels);
        s.instances.insert(key(project, zone, name), instance);
    }

    /// Creates instances `names` in `zone` as an installer would (PROVISIONING, then RUNNING after the boot time),
    /// each with `labels`; names already taken are left alone.
    pub fn launch(&self, project: &str, zone: &str, names: &[String], labels: &BTreeMap<String, String>) {
        let mut s = self.lock();
        let boot = s.timings.boot;
        for n in names {
            let k = key(project, zone, n);
            if !s.instances.contains_key(&k) {
                let instance = s.instance("PROVISIONING", labels.clone());
                s.instances.insert(k.clone(), instance);
                s.transition(&k, "PROVISIONING", boot, Some("RUNNING"));
            }
        }
    }

    /// Deletes the instances labelled `label=value` as an installer's destroy would (STOPPING, then gone): how many
    /// are still there, being deleted.
    pub fn remove_labelled(&self, project: &str, label: &str, value: &str) -> usize {
        let mut s = self.lock();
        s.settle();
        let stop = s.timings.stop;
        let keys: Vec<_> = s
            .instances
            .iter()
            .filter(|((p, _, _), i)| p == project && i.labels.get(label).map(String::as_str) == Some(value))
            .map(|(k, i)| (k.clone(), matches!(i.next, Some((_, None)))))
            .collect();
        for (k, being_deleted) in &keys {
            if !being_deleted {
                s.transition(k, "STOPPING", stop, None);
            }
        }
        keys.len()
    }

    /// The statuses of the instances labelled `label=value`, after the clock's transitions.
    pub fn labelled(&self, project: &str, label: &str, value: &str) -> Vec<String> {
        let mut s = self.lock();
        s.settle();
        s.instances
            .iter()
            .filter(|((p, _, _), i)| p == project && i.labels.get(label).map(String::as_str) == Some(value))
            .map(|(_, i)| i.status.to_owned())
            .collect()
    }

    /// Instances as (zone, name, status), after the clock's transitions.
    pub fn instances(&self, project: &str) -> Vec<(String, String, String)> {
        let mut s = self.lock();
        s.settle();
        s.instances
            .iter()
            .filter(|((p, _, _), _)| p == project)
            .map(|((_, z, n), i)| (z.clone(), n.clone(), i.status.to_owned()))
            .collect()
    }

    /// An instance's labels.
    pub fn labels(&self, project: &str, zone: &str, name: &str) -> BTreeMap<String, String> {
        self.lock().instances.get(&key(project, zone, name)).map(|i| i.labels.clone()).unwrap_or_default()
    }

    /// Moves the clock on.
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// Aggregated-list pages hold this many instances.
    pub fn set_page_size(&self, n: usize) {
        self.lock().page_size = n.max(1);
    }

    /// The next `n` Compute calls answer 429 with `Retry-After: 0`.
    pub fn throttle(&self, n: u32) {
        self.lock().faults.throttle = n;
    }

    /// The next `n` Compute calls answer 503.
    pub fn unavailable(&self, n: u32) {
        self.lock().faults.unavailable = n;
    }

    /// Every issued token stops being accepted.
    pub fn expire_tokens(&self) {
        self.lock().tokens.expire_all();
    }

    /// Calls on instance `name` answer 403 until [`FakeGcp::comply`].
    pub fn refuse(&self, name: &str) {
        self.lock().refusing.insert(name.to_owned());
    }

    /// Instance `name` no longer refuses and no longer sticks.
    pub fn comply(&self, name: &str) {
        let mut s = self.lock();
        s.refusing.remove(name);
        s.stuck.remove(name);
    }

    /// Instance `name`'s transitions never end.
    pub fn stick(&self, name: &str) {
        self.lock().stuck.insert(name.to_owned());
    }

    /// Zone `zone` does not answer the aggregated list.
    pub fn unreachable(&self, zone: &str) {
        self.lock().unreachable.insert(zone.to_owned());
    }

    /// bulkInsert operations fail with `QUOTA_EXCEEDED`.
    pub fn exhaust_quota(&self, exhausted: bool) {
        self.lock().quota_exceeded = exhausted;
    }

    /// Requests so far, as `METHOD path` (and the `requestId` of inserts), and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    /// Records every request and its answer from now on (off by default: a long run would keep them all).
    pub fn record(&self) {
        self.lock().wire.record();
    }

    /// The exchanges recorded so far ([`FakeGcp::record`]), and clears them.
    pub fn take_wire(&self) -> Vec<Exchange> {
        self.lock().wire.take()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(project: &str, zone: &str, name: &str) -> (String, String, String) {
    (project.to_owned(), zone.to_owned(), name.to_owned())
}

fn error(status: u16, reason: &str, message: &str) -> Response {
    Response::json(
        status,
        &json!({"error": {"code": status, "message": message, "errors": [{"domain": "global", "reason": reason, "message": message}]}}),
    )
}

impl State {
    /// A new instance, with the next ordinal.
    fn instance(&mut self, status: &'static str, labels: BTreeMap<String, String>) -> Instance {
        self.created += 1;
        Instance { status, labels, ordinal: self.created, next: None }
    }

    fn now(&self) -> Duration {
        self.clock.now()
    }

    /// Ends every transition whose time has come.
    fn settle(&mut self) {
        let now = self.now();
        let stuck = self.stuck.clone();
        self.instances.retain(|(_, _, name), i| {
            match i.next {
                Some((at, then)) if at <= now && !stuck.contains(name) => match then {
                    Some(status) => {
                        i.status = status;
                        i.next = None;
                    }
                    None => return false,
                },
                _ => {}
            }
            true
        });
    }

    fn transition(
        &mut self,
        k: &(String, String, String),
        now_status: &'static str,
        after: Duration,
        then: Option<&'static str>,
    ) {
        let at = self.now() + after;
        if let Some(i) = self.instances.get_mut(k) {
            i.status = now_status;
            i.next = Some((at, then));
        }
    }

    /// A new operation of `kind` on the instances `targets` (in `zone`), kept for `zoneOperations.get`.
    fn tracked(&mut self, project: &str, zone: &str, kind: &str, targets: &[String], error: Option<Value>) -> Value {
        let target = if targets.len() == 1 { targets[0].as_str() } else { "" };
        let op = self.operation(project, zone, kind, target, error);
        let keys = targets.iter().map(|n| key(project, zone, n)).collect();
        if let Some(name) = op["name"].as_str() {
            self.ops.insert(name.to_owned(), (op.clone(), keys));
        }
        op
    }

    fn operation(&mut self, project: &str, zone: &str, kind: &str, target: &str, error: Option<Value>) -> Value {
        self.next_op += 1;
        let mut op = json!({
            "kind": "compute#operation",
            "id": self.next_op.to_string(),
            "name": format!("operation-{}", self.next_op),
            "zone": format!("projects/{project}/zones/{zone}"),
            "operationType": kind,
            "targetLink": format!("projects/{project}/zones/{zone}/instances/{target}"),
            "status": if error.is_some() { "DONE" } else { "RUNNING" },
            "progress": 0,
        });
        if let Some(e) = error {
            op["error"] = e;
            op["httpErrorStatusCode"] = json!(403);
        }
        op
    }
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    recorded(state, |s| &mut s.wire, req, answer)
}

fn answer(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, req.param("requestId").map(|id| format!("requestId={id}")));
    if req.path == "/token" && req.method == "POST" {
        return token(&mut s, &req);
    }
    let Some(rest) = req.path.strip_prefix("/compute/v1/projects/") else {
        return error(404, "notFound", &format!("no route {}", req.path));
    };
    let now = s.now();
    if !s.tokens.valid(bearer(&req), now) {
        return error(401, "authError", "Request had invalid authentication credentials.");
    }
    let fault = s.faults.take(
        || error(429, "rateLimitExceeded", "Rate Limit Exceeded").header("retry-after", "0"),
        || error(503, "backendError", "The service is currently unavailable."),
    );
    if let Some(answer) = fault {
        return answer;
    }
    s.settle();
    let parts: Vec<&str> = rest.split('/').collect();
    match (req.method.as_str(), parts.as_slice()) {
        ("GET", [project, "aggregated", "instances"]) => list(&mut s, project, &req),
        ("POST", [project, "zones", zone, "instances", "bulkInsert"]) => bulk_insert(&mut s, project, zone, &req),
        ("POST", [project, "zones", zone, "instances"]) => insert(&mut s, project, zone, &req),
        ("POST", [project, "zones", zone, "instances", name, verb]) => power(&mut s, project, zone, name, verb),
        ("DELETE", [project, "zones", zone, "instances", name]) => delete(&mut s, project, zone, name),
        ("GET", [project, "zones", zone, "instances", name]) => get_instance(&s, project, zone, name),
        ("GET", [project, "zones", zone, "operations", name]) => get_operation(&s, project, zone, name),
        _ => error(404, "notFound", &format!("no route {} {}", req.method, req.path)),
    }
}

/// The audience Google's documentation gives for a JWT-bearer grant.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

fn token(s: &mut State, req: &Request) -> Response {
    let form: HashMap<String, String> = req.form().into_iter().collect();
    if form.get("grant_type").map(String::as_str) != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return Response::json(400, &json!({"error": "unsupported_grant_type"}));
    }
    let assertion = form.get("assertion").cloned().unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Claims {
        iss: String,
        scope: String,
        aud: String,
        exp: u64,
        iat: u64,
    }
    let unverified = jsonwebtoken::dangerous::insecure_decode::<Claims>(&assertion);
    let Ok(claims) = unverified.map(|t| t.claims) else {
        return Response::json(400, &json!({"error": "invalid_grant", "error_description": "Invalid JWT."}));
    };
    let Some(public) = s.accounts.get(&claims.iss) else {
        return Response::json(400, &json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}));
    };
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[claims.aud.as_str()]);
    validation.set_issuer(&[claims.iss.as_str()]);
    let verified =
        jsonwebtoken::decode::<Value>(&assertion, &jsonwebtoken::DecodingKey::from_rsa_der(public), &validation);
    let token_uri = format!("http://{}/token", req.headers.get("host").cloned().unwrap_or_default());
    // Google's token endpoint takes its canonical address as the audience (what google-auth sends, whatever the
    // key's `token_uri`), or the address it was reached at (what a key's `token_uri` names).
    let audience_ok = claims.aud == token_uri || claims.aud == GOOGLE_TOKEN_URI;
    if verified.is_err() || !audience_ok || claims.exp > claims.iat + 3600 {
        return Response::json(400, &json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}));
    }
    if !claims.scope.split(' ').any(|sc| sc.starts_with("https://www.googleapis.com/auth/compute")) {
        return Response::json(400, &json!({"error": "invalid_scope"}));
    }
    let now = s.now();
    let token = s.tokens.issue("ya29.fake", now, Duration::from_secs(3599));
    Response::json(200, &json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}))
}

/// `labels.KEY = "VALUE"` (spaces optional), or several such terms each in parentheses joined by `OR`, as
/// Compute Engine's list filter writes a choice: `(labels.a = "x") OR (labels.b = "y")`. The label pairs, any
/// of which selects an instance.
fn label_filter(filter: &str) -> Option<Vec<(String, String)>> {
    let term = |t: &str| -> Option<(String, String)> {
        let (k, v) = t.split_once('=')?;
        let k = k.trim().strip_prefix("labels.")?;
        let v = v.trim().strip_prefix('"')?.strip_suffix('"')?;
        Some((k.to_owned(), v.to_owned()))
    };
    if !filter.trim_start().starts_with('(') {
        return term(filter).map(|t| vec![t]);
    }
    filter.split(" OR ").map(|t| term(t.trim().strip_prefix('(')?.strip_suffix(')')?)).collect()
}

fn list(s: &mut State, project: &str, req: &Request) -> Response {
    let filter = match req.param("filter") {
        Some(f) => match label_filter(f) {
            Some(f) => Some(f),
            None => return error(400, "invalid", &format!("Invalid value for field 'filter': '{f}'.")),
        },
        None => None,
    };
    let page = req.param("maxResults").and_then(|m| m.parse::<usize>().ok()).unwrap_or(500).min(s.page_size);
    let from = req.param("pageToken").and_then(|t| t.strip_prefix("page-")).and_then(|t| t.parse().ok()).unwrap_or(0);
    let matching: Vec<(&(String, String, String), &Instance)> = s
        .instances
        .iter()
        .filter(|((p, z, _), i)| {
            p == project
                && !s.unreachable.contains(z)
                && filter.as_ref().is_none_or(|any| any.iter().any(|(k, v)| i.labels.get(k) == Some(v)))
        })
        .collect();
    let mut items: BTreeMap<String, Value> = BTreeMap::new();
    for ((p, z, n), i) in matching.iter().skip(from).take(page) {
        let entry = items.entry(format!("zones/{z}")).or_insert_with(|| json!({"instances": []}));
        if let Some(list) = entry["instances"].as_array_mut() {
            list.push(instance_json(p, z, n, i));
        }
    }
    let mut body = json!({"kind": "compute#instanceAggregatedList", "id": format!("projects/{project}/aggregated/instances"), "items": items});
    if from + page < matching.len() {
        body["nextPageToken"] = json!(format!("page-{}", from + page));
    }
    // compute v1 names no `returnPartialSuccess` for instances.aggregatedList (its discovery document, as
    // google-api-python-client ships it): the zones it could not reach are always in `unreachables`.
    if !s.unreachable.is_empty() {
        body["unreachables"] = json!(s.unreachable.iter().map(|z| format!("zones/{z}")).collect::<Vec<_>>());
    }
    Response::json(200, &body)
}

fn bulk_insert(s: &mut State, project: &str, zone: &str, req: &Request) -> Response {
    let request_id = req.param("requestId").map(str::to_owned);
    if let Some(op) = request_id.as_ref().and_then(|id| s.operations.get(id)) {
        return Response::json(200, op);
    }
    let body = req.json();
    let template = body["sourceInstanceTemplate"].as_str().unwrap_or_default();
    let name = template.rsplit('/').next().unwrap_or_default();
    if !template.contains("instanceTemplates/") || !s.templates.contains(name) {
        return error(404, "notFound", &format!("The resource 'projects/{project}/{template}' was not found"));
    }
    let names: Vec<String> =
        body["perInstanceProperties"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    // `count` is an int64: a JSON string as Google's clients send it, or a number, as proto3's JSON mapping allows.
    let count = body["count"].as_u64().or_else(|| body["count"].as_str().and_then(|c| c.parse().ok()));
    if names.is_empty() || count != Some(names.len() as u64) {
        return error(400, "invalid", "count must equal the number of perInstanceProperties");
    }
    if let Some(taken) = names.iter().find(|n| s.instances.contains_key(&key(project, zone, n))) {
        return error(
            409,
            "alreadyExists",
            &format!("The resource 'projects/{project}/zones/{zone}/instances/{taken}' already exists"),
        );
    }
    let labels = labels_of(&body["instanceProperties"]["labels"]);
    let op = if s.quota_exceeded {
        s.tracked(project, zone, "bulkInsert", &[], Some(quota_exceeded(zone)))
    } else {
        let boot = s.timings.boot;
        for n in &names {
            let k = key(project, zone, n);
            let instance = s.instance("PROVISIONING", labels.clone());
            s.instances.insert(k.clone(), instance);
            s.transition(&k, "PROVISIONING", boot, Some("RUNNING"));
        }
        s.tracked(project, zone, "bulkInsert", &names, None)
    };
    if let Some(id) = request_id {
        s.operations.insert(id, op.clone());
    }
    Response::json(200, &op)
}

/// An instance's labels as a request body gives them.
fn labels_of(labels: &Value) -> BTreeMap<String, String> {
    labels
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default()
}

/// The error of an operation the project's quota refused.
fn quota_exceeded(zone: &str) -> Value {
    json!({"errors": [{"code": "QUOTA_EXCEEDED", "message": format!("Quota 'CPUS' exceeded in region of {zone}.")}]})
}

/// `instances.insert`: one instance as its body describes it, as openshift-install makes its machines (no
/// template), PROVISIONING then RUNNING.
fn insert(s: &mut State, project: &str, zone: &str, req: &Request) -> Response {
    let request_id = req.param("requestId").map(str::to_owned);
    if let Some(op) = request_id.as_ref().and_then(|id| s.operations.get(id)) {
        return Response::json(200, op);
    }
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    if name.is_empty() || body["machineType"].as_str().is_none_or(str::is_empty) {
        return error(
            400,
            "invalid",
            "Invalid value for field 'resource': the instance needs a name and a machineType.",
        );
    }
    if s.instances.contains_key(&key(project, zone, &name)) {
        return error(
            409,
            "alreadyExists",
            &format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists"),
        );
    }
    let labels = labels_of(&body["labels"]);
    let op = if s.quota_exceeded {
        s.tracked(project, zone, "insert", &[], Some(quota_exceeded(zone)))
    } else {
        let k = key(project, zone, &name);
        let instance = s.instance("PROVISIONING", labels);
        s.instances.insert(k.clone(), instance);
        let boot = s.timings.boot;
        s.transition(&k, "PROVISIONING", boot, Some("RUNNING"));
        s.tracked(project, zone, "insert", &[name], None)
    };
    if let Some(id) = request_id {
        s.operations.insert(id, op.clone());
    }
    Response::json(200, &op)
}

/// The instance a call on `name` acts on: 404 when there is none, 403 when it refuses `verb`.
fn acted_on<'a>(s: &'a State, project: &str, zone: &str, name: &str, verb: &str) -> Result<&'a Instance, Response> {
    let resource = format!("projects/{project}/zones/{zone}/instances/{name}");
    let Some(i) = s.instances.get(&key(project, zone, name)) else {
        return Err(error(404, "notFound", &format!("The resource '{resource}' was not found")));
    };
    if s.refusing.contains(name) {
        return Err(error(
            403,
            "forbidden",
            &format!("Required 'compute.instances.{verb}' permission for '{resource}'"),
        ));
    }
    Ok(i)
}

fn power(s: &mut State, project: &str, zone: &str, name: &str, verb: &str) -> Response {
    let k = key(project, zone, name);
    let status = match acted_on(s, project, zone, name, verb) {
        Ok(i) => i.status,
        Err(answer) => return answer,
    };
    let Timings { boot, stop } = s.timings;
    let not_ready = || {
        error(
            400,
            "resourceNotReady",
            &format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' is not ready"),
        )
    };
    match (verb, status) {
        ("start", "TERMINATED" | "STOPPED") => s.transition(&k, "STAGING", boot, Some("RUNNING")),
        ("start", "RUNNING" | "STAGING" | "PROVISIONING") => {}
        ("resume", "SUSPENDED") => s.transition(&k, "STAGING", boot, Some("RUNNING")),
        ("stop", "RUNNING" | "STAGING" | "PROVISIONING") => s.transition(&k, "STOPPING", stop, Some("TERMINATED")),
        ("stop", "TERMINATED" | "STOPPING") => {}
        ("start" | "resume" | "stop", _) => return not_ready(),
        _ => return error(404, "notFound", &format!("no method {verb}")),
    }
    let op = s.tracked(project, zone, verb, &[name.to_owned()], None);
    Response::json(200, &op)
}

fn delete(s: &mut State, project: &str, zone: &str, name: &str) -> Response {
    let being_deleted = match acted_on(s, project, zone, name, "delete") {
        Ok(i) => matches!(i.next, Some((_, None))),
        Err(answer) => return answer,
    };
    if !being_deleted {
        let stop = s.timings.stop;
        s.transition(&key(project, zone, name), "STOPPING", stop, None);
    }
    let op = s.tracked(project, zone, "delete", &[name.to_owned()], None);
    Response::json(200, &op)
}

/// `zoneOperations.get`: the operation, `DONE` (progress 100) once none of its instances is mid-transition.
fn get_operation(s: &State, project: &str, zone: &str, name: &str) -> Response {
    let Some((op, targets)) = s.ops.get(name) else {
        return error(
            404,
            "notFound",
            &format!("The resource 'projects/{project}/zones/{zone}/operations/{name}' was not found"),
        );
    };
    let mut op = op.clone();
    if targets.iter().all(|k| s.instances.get(k).is_none_or(|i| i.next.is_none())) {
        op["status"] = json!("DONE");
        op["progress"] = json!(100);
    }
    Response::json(200, &op)
}

/// `instances.get`.
fn get_instance(s: &State, project: &str, zone: &str, name: &str) -> Response {
    match s.instances.get(&key(project, zone, name)) {
        Some(i) => Response::json(200, &instance_json(project, zone, name, i)),
        None => error(
            404,
            "notFound",
            &format!("The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"),
        ),
    }
}

/// An instance as the API shows it: its name, zone, status, labels and network interface.
fn instance_json(project: &str, zone: &str, name: &str, i: &Instance) -> Value {
    // Every instance has its private address; an ephemeral external one only while it runs.
    let [.., hi, lo] = i.ordinal.to_be_bytes();
    let mut nic = json!({"name": "nic0", "networkIP": format!("10.128.{hi}.{lo}")});
    if i.status == "RUNNING" {
        nic["accessConfigs"] =
            json!([{"type": "ONE_TO_ONE_NAT", "name": "External NAT", "natIP": format!("198.51.100.{lo}")}]);
    }
    json!({
        "kind": "compute#instance",
        "id": (1_000_000 + u64::from(i.ordinal)).to_string(),
        "name": name,
        "zone": format!("https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"),
        "status": i.status,
        "labels": i.labels,
        "networkInterfaces": [nic],
    })
}
