//! A fake of the clusters' API servers, for readiness checks, over HTTPS (a certificate issued by a CA of its own,
//! [`FakeClusterApi::ca_bundle`]). Each cluster is served under `/{infraId}`:
//!
//! - `GET /{infraId}/readyz`: `200 ok` once the cluster is ready, `503` until then (the HTTPS probe).
//! - `GET /{infraId}/api/v1/nodes`: its nodes, each Ready once `nodes_after` has passed since its first look.
//! - `GET /{infraId}/apis/config.openshift.io/v1/clusteroperators`: its ClusterOperators, all Available and
//!   neither Progressing nor Degraded once the cluster is ready; `404` for a plain Kubernetes cluster.
//!
//! - `GET /{infraId}/apis/certificates.k8s.io/v1/certificatesigningrequests`, `PUT
//!   …/certificatesigningrequests/{name}/approval`: its kubelets' certificate requests, and their approval
//!   ([`crate::kubelets`]: certificates that expired while the cluster was hibernated are renewed on resume).
//! - `GET /{infraId}/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines`: a Machine per
//!   node, with its addresses and its node; `404` for a plain Kubernetes cluster.
//!
//! A cluster is ready `ready_after` its first look, unless it never becomes ready or flaps (ready and not, look
//! after look). The Kubernetes endpoints want the fake's bearer token or a client certificate its CA issued (both
//! in the kubeconfig [`FakeClusterApi::kubeconfig`] writes), answer `401` otherwise or once a cluster's
//! credentials are revoked, and page their lists (`limit`, `continue`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::common::{recorded, Clock, Exchange, Log, Wire};
use crate::kubelets::{self, Hostile, Kubelets, Validity};
use crate::server::{serve_tls_on, Request, Response, CLIENT_CERTIFICATE};
use crate::tls::Authority;

/// The ClusterOperators each OpenShift cluster has.
const OPERATORS: [&str; 4] = ["authentication", "etcd", "kube-apiserver", "ingress"];

struct State {
    /// The bearer token the fake accepts: a canary, as OpenShift's are `sha256~<random>`.
    token: String,
    clock: Clock,
    /// The Unix time the clock's zero is: the cluster's objects carry times as Apiary's clock reads them.
    epoch: Duration,
    ready_after: Duration,
    nodes_after: Duration,
    nodes: usize,
    page: usize,
    first_look: BTreeMap<String, Duration>,
    never: BTreeSet<String>,
    nodes_never: BTreeSet<String>,
    flapping: BTreeMap<String, bool>,
    plain: BTreeSet<String>,
    revoked: BTreeSet<String>,
    validity: Validity,
    kubelets: BTreeMap<String, Kubelets>,
    hostile: Vec<Hostile>,
    approvals: u64,
    authority: Arc<Authority>,
    log: Log,
    wire: Wire,
}

/// How a kubeconfig authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// With the fake's bearer token.
    Token,
    /// With a client certificate the fake's CA issued (as openshift-install's admin kubeconfig does).
    ClientCertificate,
}

/// The fake cluster APIs.
#[derive(Clone)]
pub struct FakeClusterApi {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    authority: Arc<Authority>,
    token: String,
}

impl FakeClusterApi {
    /// Starts the fake on a free port of 127.0.0.1, on the wall clock: each cluster ready `ready_after` its first
    /// look.
    pub async fn start(ready_after: Duration) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let fake =
            Self::new(ready_after, Clock::wall(), epoch, listener.local_addr()?).map_err(std::io::Error::other)?;
        let state = fake.state.clone();
        serve_tls_on(listener, fake.authority.server.clone(), Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// The fake answering as at `addr`, on `clock`, which read zero at Unix time `epoch` (seconds), without a
    /// server: [`FakeClusterApi::handle`] answers each request (the whole-system simulation serves it in process so).
    pub fn new(ready_after: Duration, clock: Clock, epoch: u64, addr: SocketAddr) -> Result<Self, String> {
        let authority = Arc::new(crate::tls::authority("Fake cluster CA", &["127.0.0.1", "localhost"])?);
        let state = State {
            token: format!("sha256~{}", crate::canary::secret("cluster-api-token")),
            clock,
            epoch: Duration::from_secs(epoch),
            ready_after,
            nodes_after: Duration::ZERO,
            nodes: 3,
            page: usize::MAX,
            first_look: BTreeMap::new(),
            never: BTreeSet::new(),
            nodes_never: BTreeSet::new(),
            flapping: BTreeMap::new(),
            plain: BTreeSet::new(),
            revoked: BTreeSet::new(),
            validity: Validity::default(),
            kubelets: BTreeMap::new(),
            hostile: Vec::new(),
            approvals: 0,
            authority: authority.clone(),
            log: Log::default(),
            wire: Wire::default(),
        };
        let token = state.token.clone();
        Ok(Self { state: Arc::new(Mutex::new(state)), addr, authority, token })
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: Request) -> Response {
        handle(&self.state, req)
    }

    /// The API server URL of cluster `infra_id`.
    pub fn server(&self, infra_id: &str) -> String {
        format!("https://{}/{infra_id}", self.addr)
    }

    /// The bearer token the fake accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A kubeconfig for cluster `infra_id`, as an installer writes one: the server, the CA, and the token or a
    /// client certificate the fake's CA issued.
    pub fn kubeconfig(&self, infra_id: &str, auth: Auth) -> std::io::Result<String> {
        use base64::Engine;
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let user = match auth {
            Auth::Token => format!("    token: {}\n", self.token),
            Auth::ClientCertificate => {
                let (cert, key) = self.authority.client_certificate("system:admin").map_err(std::io::Error::other)?;
                format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(&cert), b64(&key))
            }
        };
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: \
             {server}\n  name: {infra_id}\ncontexts:\n- context:\n    cluster: {infra_id}\n    user: admin\n  name: \
             admin\ncurrent-context: admin\npreferences: {{}}\nusers:\n- name: admin\n  user:\n{user}",
            ca = b64(&self.authority.ca_pem),
            server = self.server(infra_id),
        ))
    }

    /// Nodes become Ready `after` a cluster's first look (default: at once).
    pub fn nodes_after(&self, after: Duration) {
        self.lock().nodes_after = after;
    }

    /// Each cluster has `n` nodes (default 3).
    pub fn nodes(&self, n: usize) {
        self.lock().nodes = n;
    }

    /// Lists answer at most `n` items per page, whatever the `limit` asked.
    pub fn page(&self, n: usize) {
        self.lock().page = n.max(1);
    }

    /// One node of cluster `infra_id` never becomes Ready.
    pub fn nodes_never(&self, infra_id: &str) {
        self.lock().nodes_never.insert(infra_id.to_owned());
    }

    /// Cluster `infra_id` is plain Kubernetes: no ClusterOperator API.
    pub fn plain(&self, infra_id: &str) {
        self.lock().plain.insert(infra_id.to_owned());
    }

    /// Kubelet certificates are valid `first` at install and `later` once renewed (default 24 hours and 30
    /// days): a cluster resumed after they expired needs its nodes' certificate requests approved.
    pub fn certificates_valid(&self, first: Duration, later: Duration) {
        self.lock().validity = Validity { first, later };
    }

    /// Each renewal posts `hostile` requests beside its kubelets' (each must stay pending).
    pub fn hostile(&self, hostile: &[Hostile]) {
        self.lock().hostile = hostile.to_vec();
    }

    /// Cluster `infra_id`'s certificate requests, as listed.
    pub fn csrs(&self, infra_id: &str) -> Vec<kubelets::Csr> {
        self.lock().kubelets.get(infra_id).map(|k| k.csrs.clone()).unwrap_or_default()
    }

    /// Cluster `infra_id` was installed `ago` (its kubelets' first certificates issued then), unless it was looked
    /// at already. Without this a cluster's certificates date from its first look: one hibernated at its install
    /// and first looked at on a resume would seem freshly installed.
    pub fn installed(&self, infra_id: &str, ago: Duration) {
        let mut s = self.lock();
        let (at, validity) = (s.now().saturating_sub(ago), s.validity);
        s.kubelets.entry(infra_id.to_owned()).or_insert_with(|| Kubelets::installed(at, validity));
    }

    /// Cluster `infra_id`'s kubelets' certificates expire now, as if it had slept past their life: its next boot
    /// renews them through certificate requests.
    pub fn expire(&self, infra_id: &str) {
        let mut s = self.lock();
        let now = s.now();
        if let Some(k) = s.kubelets.get_mut(infra_id) {
            k.expire(now);
        }
    }

    /// Whether cluster `infra_id` was looked at or told installed.
    pub fn knows(&self, infra_id: &str) -> bool {
        self.lock().kubelets.contains_key(infra_id)
    }

    /// Every cluster's certificate requests, with its infraId.
    pub fn every_csr(&self) -> Vec<(String, kubelets::Csr)> {
        let s = self.lock();
        s.kubelets.iter().flat_map(|(infra, k)| k.csrs.iter().map(move |c| (infra.clone(), c.clone()))).collect()
    }

    /// How many approvals the clusters took so far.
    pub fn approvals(&self) -> u64 {
        self.lock().approvals
    }

    /// Cluster `infra_id` refuses every credential (expired certificates, a revoked token).
    pub fn revoke(&self, infra_id: &str) {
        self.lock().revoked.insert(infra_id.to_owned());
    }

    /// The probe URL template a pool's `readiness.https.url` names.
    pub fn url_template(&self) -> String {
        format!("https://{}/{{infraId}}/readyz", self.addr)
    }

    /// The PEM certificate of the CA that issued the fake's: a pool's `readiness.https.caBundle`.
    pub fn ca_bundle(&self) -> String {
        self.authority.ca_pem.clone()
    }

    /// Cluster `infra_id` never becomes ready.
    pub fn never(&self, infra_id: &str) {
        let mut s = self.lock();
        s.flapping.remove(infra_id);
        s.never.insert(infra_id.to_owned());
    }

    /// Cluster `infra_id` answers ready and not ready in turn.
    pub fn flap(&self, infra_id: &str) {
        let mut s = self.lock();
        s.never.remove(infra_id);
        s.flapping.insert(infra_id.to_owned(), false);
    }

    /// Moves the clock on.
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// The time the cluster's objects carry now (a certificate request's `creationTimestamp`).
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        kubelets::instant(self.lock().now())
    }

    /// Requests so far, as `METHOD path`, and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    /// Records every exchange from now on, for [`FakeClusterApi::take_wire`].
    pub fn record(&self) {
        self.lock().wire.record();
    }

    /// The exchanges recorded so far ([`FakeClusterApi::record`]), and clears them.
    pub fn take_wire(&self) -> Vec<Exchange> {
        self.lock().wire.take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// The time since the Unix epoch as the cluster reads it.
    fn now(&self) -> Duration {
        self.epoch + self.clock.now()
    }
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    recorded(state, |s| &mut s.wire, req, answer)
}

fn answer(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, None);
    let segments: Vec<&str> = req.path.split('/').filter(|p| !p.is_empty()).collect();
    let (infra, what) = match (req.method.as_str(), segments.as_slice()) {
        ("GET", [infra, "readyz"]) => ((*infra).to_owned(), What::Readyz),
        ("GET", [infra, "api", "v1", "nodes"]) => ((*infra).to_owned(), What::Nodes),
        ("GET", [infra, "apis", "config.openshift.io", "v1", "clusteroperators"]) => {
            ((*infra).to_owned(), What::Operators)
        }
        ("GET", [infra, "apis", "certificates.k8s.io", "v1", "certificatesigningrequests"]) => {
            ((*infra).to_owned(), What::Csrs)
        }
        ("PUT", [infra, "apis", "certificates.k8s.io", "v1", "certificatesigningrequests", name, "approval"]) => {
            ((*infra).to_owned(), What::Approve((*name).to_owned()))
        }
        (
            "GET",
            [infra, "apis", "machine.openshift.io", "v1beta1", "namespaces", "openshift-machine-api", "machines"],
        ) => ((*infra).to_owned(), What::Machines),
        _ => return Response::json(404, &status(404, "NotFound", &format!("no route {}", req.path))),
    };
    let now = s.now();
    let first = *s.first_look.entry(infra.clone()).or_insert(now);
    let validity = s.validity;
    s.kubelets.entry(infra.clone()).or_insert_with(|| Kubelets::new(now, validity)).looked(now, validity);
    if what != What::Readyz {
        let token = req.headers.get("authorization").and_then(|a| a.strip_prefix("Bearer "));
        let certificate = req.headers.contains_key(CLIENT_CERTIFICATE);
        if s.revoked.contains(&infra) || !(token == Some(s.token.as_str()) || certificate) {
            return Response::json(401, &status(401, "Unauthorized", "Unauthorized"));
        }
    }
    match what {
        What::Readyz if ready(&mut s, &infra, first, now) => {
            Response { status: 200, headers: vec![], body: b"ok".to_vec() }
        }
        What::Readyz => Response { status: 503, headers: vec![], body: b"[-]etcd failed: reason withheld".to_vec() },
        What::Nodes => nodes(&mut s, &req, &infra, first, now),
        What::Csrs => {
            let csrs = s.kubelets.get(&infra).map(|k| k.csrs.iter().map(|c| c.object.clone()).collect());
            page(&s, &req, "certificates.k8s.io/v1", "CertificateSigningRequestList", csrs.unwrap_or_default())
        }
        What::Approve(name) => {
            let (validity, authority) = (s.validity, s.authority.clone());
            let kubelets = s.kubelets.get_mut(&infra).expect("looked");
            match kubelets.approve(&infra, &name, &req.json(), now, validity, &authority) {
                Ok(csr) => {
                    s.approvals += 1;
                    Response::json(200, &csr)
                }
                Err((code, message)) => {
                    let reason = match code {
                        404 => "NotFound",
                        409 => "Conflict",
                        _ => "Invalid",
                    };
                    Response::json(code, &status(code, reason, &message))
                }
            }
        }
        What::Machines if s.plain.contains(&infra) => {
            Response::json(404, &status(404, "NotFound", "the server could not find the requested resource"))
        }
        What::Machines => {
            let machines = (0..s.nodes).map(|i| kubelets::machine(&infra, i)).collect();
            page(&s, &req, "machine.openshift.io/v1beta1", "MachineList", machines)
        }
        What::Operators if s.plain.contains(&infra) => {
            s.kubelets.get_mut(&infra).expect("looked").settled();
            Response::json(404, &status(404, "NotFound", "the server could not find the requested resource"))
        }
        What::Operators => operators(&mut s, &req, &infra, first, now),
    }
}

/// The cluster's nodes: Ready once its nodes are up, Unknown while a kubelet's certificate is not valid.
fn nodes(s: &mut State, req: &Request, infra: &str, first: Duration, now: Duration) -> Response {
    let up = now >= first + s.nodes_after;
    let stuck = s.nodes_never.contains(infra);
    let (n, hostile) = (s.nodes, s.hostile.clone());
    let kubelets = s.kubelets.get_mut(infra).expect("looked");
    let certified = kubelets.nodes(infra, n, &hostile, now);
    let nodes: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let ready = up && !(stuck && i == 1);
            let condition = if !certified[i] {
                json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                       "message": "Kubelet stopped posting node status."})
            } else if ready {
                json!({"type": "Ready", "status": "True", "reason": "KubeletReady"})
            } else {
                json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                       "message": "container runtime network not ready"})
            };
            json!({"metadata": {"name": kubelets::node_name(infra, i)}, "status": {"conditions": [condition]}})
        })
        .collect();
    page(s, req, "v1", "NodeList", nodes)
}

/// The cluster's operators: `authentication` degraded and `etcd` progressing until the cluster has settled.
fn operators(s: &mut State, req: &Request, infra: &str, first: Duration, now: Duration) -> Response {
    let settled = ready(s, infra, first, now);
    if settled {
        s.kubelets.get_mut(infra).expect("looked").settled();
    }
    let operators: Vec<serde_json::Value> = OPERATORS
        .iter()
        .map(|name| {
            let degraded = !settled && *name == "authentication";
            let progressing = !settled && *name == "etcd";
            let mut conditions = vec![
                json!({"type": "Available", "status": if degraded { "False" } else { "True" }}),
                json!({"type": "Progressing", "status": if progressing { "True" } else { "False" },
                       "reason": if progressing { "NodeInstaller" } else { "AsExpected" }}),
                json!({"type": "Degraded", "status": if degraded { "True" } else { "False" }}),
            ];
            if degraded {
                conditions[2]["reason"] = json!("OAuthServerDeployment_UnavailablePod");
            }
            json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                   "metadata": {"name": name}, "status": {"conditions": conditions}})
        })
        .collect();
    page(s, req, "config.openshift.io/v1", "ClusterOperatorList", operators)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum What {
    Readyz,
    Nodes,
    Operators,
    Csrs,
    Approve(String),
    Machines,
}

/// Whether cluster `infra` answers ready at this look.
fn ready(s: &mut State, infra: &str, first: Duration, now: Duration) -> bool {
    if s.never.contains(infra) {
        false
    } else if let Some(up) = s.flapping.get_mut(infra) {
        *up = !*up;
        *up
    } else {
        now >= first + s.ready_after
    }
}

/// One page of `items`, a list of `kind` in `api_version`: from the `continue` offset, at most the `limit` asked and
/// the fake's page size.
fn page(s: &State, req: &Request, api_version: &str, kind: &str, items: Vec<serde_json::Value>) -> Response {
    let from: usize = req.param("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
    let limit: usize = req.param("limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0).unwrap_or(usize::MAX);
    let to = from.saturating_add(limit.min(s.page)).min(items.len());
    let rest = if to < items.len() { to.to_string() } else { String::new() };
    let items: Vec<serde_json::Value> = items.into_iter().skip(from).take(to.saturating_sub(from)).collect();
    Response::json(
        200,
        &json!({"kind": kind, "apiVersion": api_version, "metadata": {"continue": rest}, "items": items}),
    )
}

/// A Kubernetes Status answer.
fn status(code: u16, reason: &str, message: &str) -> serde_json::Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code})
}
