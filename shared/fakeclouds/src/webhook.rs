//! A reference receiver of Apiary's webhook provisioner contract (`shared/clouds/provisioner.openapi.json`), for
//! local use: it verifies every request's Standard Webhooks signature, and installs a cluster by launching its
//! machines on the fake Compute Engine ([`FakeGcp::launch`]), labelled `kubernetes-io-cluster-<infraId>=owned` as
//! openshift-install labels them, so the pool's GCP actuator powers them. A cluster is Ready once its machines run
//! and the install time has passed; removing it deletes them.
//!
//! Injected faults: throttling and outages, installs that fail (each cluster's first attempts), installs that
//! never finish, and a request log.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};

use crate::canary;
use crate::common::{Clock, Faults, Log};
use crate::gcp::FakeGcp;
use crate::server::{serve_on, Request, Response};

/// A new random signing key, `whsec_<base64>`, as a pool's secret holds it: a [`canary::signing_key`].
pub fn new_key() -> String {
    canary::signing_key("signing-key")
}

/// How far a request's `webhook-timestamp` may be from the receiver's time (the spec's tolerance).
pub const TOLERANCE: Duration = Duration::from_secs(300);

/// Where and how the receiver installs.
#[derive(Clone)]
pub struct Settings {
    /// The fake Compute Engine the machines are launched on.
    pub gcp: FakeGcp,
    /// Its project.
    pub project: String,
    /// Its zone.
    pub zone: String,
    /// Machines per cluster.
    pub machines: u32,
    /// How long an install takes at least (the machines must also run).
    pub install_time: Duration,
    /// The signing key, `whsec_<base64>`, as the pool's secret holds it.
    pub key: String,
    /// The AWS account and region the kubeconfig secrets' ARNs name.
    pub secrets_region: String,
    /// The clusters' API servers, told of each install as it completes (its kubelets' certificates date from it).
    pub cluster_api: Option<crate::cluster_api::FakeClusterApi>,
}

struct Record {
    pool: String,
    attempt: u32,
    infra_id: String,
    name: String,
    base_domain: String,
    /// The cluster's inventory entry's parameters, as the request sent them.
    parameters: BTreeMap<String, String>,
    release: Option<String>,
    started: Duration,
    fails: bool,
    removing: bool,
}

struct State {
    settings: Settings,
    clock: Clock,
    /// The Unix time, in seconds, at which `clock` read zero.
    epoch: u64,
    records: BTreeMap<String, Record>,
    failing_attempts: u32,
    /// What a failed attempt says, when not the bootstrap's timeout.
    failure: Option<String>,
    stalled: bool,
    faults: Faults,
    log: Log,
}

/// The receiver: served on 127.0.0.1 ([`FakeWebhook::start`]), or called in process ([`FakeWebhook::handle`]).
#[derive(Clone)]
pub struct FakeWebhook {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
}

impl FakeWebhook {
    /// The receiver on the wall clock, not served: [`FakeWebhook::handle`] answers.
    pub fn new(settings: Settings, addr: SocketAddr) -> Self {
        let epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let state = State {
            settings,
            clock: Clock::wall(),
            epoch,
            records: BTreeMap::new(),
            failing_attempts: 0,
            failure: None,
            stalled: false,
            faults: Faults::default(),
            log: Log::default(),
        };
        Self { state: Arc::new(Mutex::new(state)), addr }
    }

    /// Starts the receiver on a free port of 127.0.0.1.
    pub async fn start(settings: Settings) -> std::io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), settings).await
    }

    /// Starts the receiver on `addr` (port 0: a free one).
    pub async fn start_on(addr: SocketAddr, settings: Settings) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let fake = Self::new(settings, listener.local_addr()?);
        let state = fake.state.clone();
        serve_on(listener, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: Request) -> Response {
        handle(&self.state, req)
    }

    /// The URL a pool's `provisioner.webhook.url` names.
    pub fn url(&self) -> String {
        format!("http://{}/apiary", self.addr)
    }

    /// Each cluster's first `n` attempts fail once their install time has passed.
    pub fn fail_attempts(&self, n: u32) {
        self.lock().failing_attempts = n;
    }

    /// Failed attempts say `message` (as openshift-install's log would), or, with `None`, that bootstrap timed out.
    pub fn fail_saying(&self, message: Option<&str>) {
        self.lock().failure = message.map(str::to_owned);
    }

    /// Installs never finish (`true`) or finish again (`false`).
    pub fn stall(&self, stalled: bool) {
        self.lock().stalled = stalled;
    }

    /// The next `n` calls answer 429 with `Retry-After: 0`.
    pub fn throttle(&self, n: u32) {
        self.lock().faults.throttle = n;
    }

    /// The next `n` calls answer 503.
    pub fn unavailable(&self, n: u32) {
        self.lock().faults.unavailable = n;
    }

    /// Moves the receiver's clock on (the install time; the fake cloud has its own clock).
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// The clusters it holds, as (cluster id, attempt, infraId).
    pub fn clusters(&self) -> Vec<(String, u32, String)> {
        self.lock().records.iter().map(|(id, r)| (id.clone(), r.attempt, r.infra_id.clone())).collect()
    }

    /// The parameters the install request of cluster `id` carried, if the receiver holds it.
    pub fn parameters(&self, id: &str) -> Option<BTreeMap<String, String>> {
        self.lock().records.get(id).map(|r| r.parameters.clone())
    }

    /// The release the install request of cluster `id` named, if the receiver holds it and it named one.
    pub fn release(&self, id: &str) -> Option<String> {
        self.lock().records.get(id).and_then(|r| r.release.clone())
    }

    /// Requests so far, as `METHOD path`, and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, None);
    let throttled = || Response::json(429, &json!({"message": "slow down"})).header("retry-after", "0");
    let unavailable = || Response::json(503, &json!({"message": "the installer is unavailable"}));
    if let Some(fault) = s.faults.take(throttled, unavailable) {
        return fault;
    }
    if let Err(why) = verified(&s, &req) {
        return Response::json(401, &json!({"message": why}));
    }
    let segments: Vec<&str> = req.path.split('/').filter(|p| !p.is_empty()).collect();
    let id = match segments.as_slice() {
        ["apiary", "clusters"] if req.method == "GET" => return list(&s, req.param("pool").unwrap_or_default()),
        ["apiary", "clusters", id] => (*id).to_owned(),
        _ => return Response::json(404, &json!({"message": format!("no route {}", req.path)})),
    };
    match req.method.as_str() {
        "PUT" => install(&mut s, &id, &req.json()),
        "GET" => look(&mut s, &id),
        "DELETE" => remove(&mut s, &id),
        m => Response::json(405, &json!({"message": format!("{m} is not allowed")})),
    }
}

/// Checks the request's Standard Webhooks headers, as a receiver must ([`verify`]), with the receiver's key.
fn verified(s: &State, req: &Request) -> Result<(), String> {
    verify(&s.settings.key, req, s.epoch + s.clock.now().as_secs())
}

/// Checks a request's Standard Webhooks headers as a receiver must: the signature over
/// `{webhook-id}.{webhook-timestamp}.{body}` with `key` (`whsec_<base64>`), and a timestamp within [`TOLERANCE`] of
/// `now` (Unix seconds). `Err` says what is wrong.
pub fn verify(key: &str, req: &Request, now: u64) -> Result<(), String> {
    let header = |name: &str| req.headers.get(name).map(String::as_str).ok_or(format!("{name} is missing"));
    let (id, timestamp, signatures) =
        (header("webhook-id")?, header("webhook-timestamp")?, header("webhook-signature")?);
    let sent: u64 = timestamp.parse().map_err(|_| format!("webhook-timestamp {timestamp:?} is not a number"))?;
    if sent.abs_diff(now) > TOLERANCE.as_secs() {
        return Err(format!("webhook-timestamp {sent} is more than {}s from now ({now})", TOLERANCE.as_secs()));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let secret = key.strip_prefix("whsec_").unwrap_or(key);
    let key = b64.decode(secret).map_err(|e| format!("the receiver's key: {e}"))?;
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &key);
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(&req.body);
    // Several signatures may be sent (a key rotation): one valid one is enough.
    let valid = signatures
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|sig| b64.decode(sig).is_ok_and(|tag| aws_lc_rs::hmac::verify(&key, &signed, &tag).is_ok()));
    if valid {
        Ok(())
    } else {
        Err("no valid signature".to_owned())
    }
}

fn label(infra_id: &str) -> String {
    format!("kubernetes-io-cluster-{infra_id}")
}

fn install(s: &mut State, id: &str, body: &Value) -> Response {
    let attempt = body["attempt"].as_u64().and_then(|a| u32::try_from(a).ok()).unwrap_or(1);
    let Some(name) = body["clusterName"].as_str().filter(|n| !n.is_empty()) else {
        return Response::json(400, &json!({"state": "Failed", "message": "clusterName is required"}));
    };
    if let Some(r) = s.records.get(id).filter(|r| r.attempt >= attempt) {
        if r.removing {
            return Response::json(409, &json!({"state": "Failed", "message": "the cluster is being removed"}));
        }
        // The same attempt again: where it stands.
        return answer(s, id);
    }
    // A new cluster, or a new attempt after a failed one (whose machines were removed when it failed).
    let tag: String = format!("{:08x}", fnv(&format!("{id}/{attempt}"))).chars().take(5).collect();
    let infra_id = format!("{}-{tag}", &name[..name.len().min(20)]);
    let names: Vec<String> = (0..s.settings.machines).map(|i| format!("{infra_id}-{i}")).collect();
    let labels = BTreeMap::from([(label(&infra_id), "owned".to_owned())]);
    s.settings.gcp.launch(&s.settings.project, &s.settings.zone, &names, &labels);
    let record = Record {
        pool: body["pool"].as_str().unwrap_or_default().to_owned(),
        attempt,
        infra_id,
        name: name.to_owned(),
        base_domain: body["baseDomain"].as_str().unwrap_or("example.com").to_owned(),
        parameters: serde_json::from_value(body["parameters"].clone()).unwrap_or_default(),
        release: body["release"].as_str().map(str::to_owned),
        started: s.clock.now(),
        fails: attempt <= s.failing_attempts,
        removing: false,
    };
    s.records.insert(id.to_owned(), record);
    answer(s, id)
}

/// Every cluster held for `pool`, with where it stands.
fn list(s: &State, pool: &str) -> Response {
    let clusters: Vec<Value> = s
        .records
        .iter()
        .filter(|(_, r)| r.pool == pool)
        .map(|(id, r)| {
            let state = if r.removing { "Deprovisioning" } else { "Provisioning" };
            json!({"id": id, "state": state, "infraId": r.infra_id})
        })
        .collect();
    Response::json(200, &json!({ "clusters": clusters }))
}

fn look(s: &mut State, id: &str) -> Response {
    if !s.records.contains_key(id) {
        return Response::json(404, &json!({"message": format!("no cluster {id}")}));
    }
    answer(s, id)
}

/// Where the cluster `id` stands: Provisioning (202), Ready (200) or Failed (409), or Deprovisioning (202).
fn answer(s: &mut State, id: &str) -> Response {
    let now = s.clock.now();
    let Some(r) = s.records.get(id) else { return Response::json(404, &json!({})) };
    let statuses = s.settings.gcp.labelled(&s.settings.project, &label(&r.infra_id), "owned");
    let base = json!({"attempt": r.attempt});
    let with = |mut v: Value, extra: Value| {
        if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
            v.extend(extra.clone());
        }
        v
    };
    if r.removing {
        return Response::json(202, &with(base, json!({"state": "Deprovisioning"})));
    }
    let installed = now >= r.started + s.settings.install_time;
    if installed && r.fails {
        let (project, infra_id) = (s.settings.project.clone(), r.infra_id.clone());
        // A failed run cleans up after itself, as openshift-install's destroy does.
        s.settings.gcp.remove_labelled(&project, &label(&infra_id), "owned");
        let said = s.failure.clone().unwrap_or_else(|| "the install failed (bootstrap timed out)".to_owned());
        let message = format!("attempt {}: {said}", r.attempt);
        return Response::json(409, &with(base, json!({"state": "Failed", "message": message})));
    }
    let running = statuses.len() == s.settings.machines as usize && statuses.iter().all(|st| st == "RUNNING");
    if !installed || !running || s.stalled {
        return Response::json(202, &with(base, json!({"state": "Provisioning", "retryAfterSeconds": 30})));
    }
    if let Some(api) = &s.settings.cluster_api {
        api.installed(&r.infra_id, Duration::ZERO);
    }
    let domain = format!("{}.{}", r.name, r.base_domain);
    let outputs = json!({
        "apiUrl": format!("https://api.{domain}:6443"),
        "consoleUrl": format!("https://console-openshift-console.apps.{domain}"),
        "kubeconfigSecretArn": format!(
            "arn:aws:secretsmanager:{}:123456789012:secret:clusters/{}/kubeconfig", s.settings.secrets_region, r.infra_id
        ),
    });
    Response::json(200, &with(base, json!({"state": "Ready", "infraId": r.infra_id, "outputs": outputs})))
}

fn remove(s: &mut State, id: &str) -> Response {
    let Some(r) = s.records.get_mut(id) else {
        return Response::json(404, &json!({"message": format!("no cluster {id}")}));
    };
    r.removing = true;
    let infra_id = r.infra_id.clone();
    let project = s.settings.project.clone();
    let left = s.settings.gcp.remove_labelled(&project, &label(&infra_id), "owned");
    if left == 0 {
        s.records.remove(id);
        return Response::json(404, &json!({"message": format!("cluster {id} is gone")}));
    }
    Response::json(202, &json!({"state": "Deprovisioning"}))
}

fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}
