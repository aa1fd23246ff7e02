//! A pool's Kubernetes readiness check (`readiness.kubernetes`): the cluster's own API says whether it is usable.
//!
//! - Nodes (while a resume waits for nodes, seed 004's WaitingForNodes): `GET /api/v1/nodes`; every node's Ready
//!   condition must be True.
//! - Operators (once they have settled, WaitingForClusterOperators): `GET
//!   /apis/config.openshift.io/v1/clusteroperators`; every ClusterOperator Available=True, Progressing=False and
//!   Degraded=False. A cluster without that API (`404`: not OpenShift) has no operators to wait for.
//!
//! The way in is the secret the check names (a template, so each cluster may have its own): a kubeconfig, whose
//! current context gives the server, its certificate authority and a token or a client certificate, or a bare
//! bearer token (the check's `server` then says where). The check's `server` and `caBundle` override the
//! kubeconfig's. Nothing of the secret is logged or put in a message: messages name the secret by its ARN.
//!
//! - Certificate requests (seed 004), while some node is not Ready and the check approves them
//!   (`approveNodeCertificates`, default on): the cluster's pending CSRs (`certificates.k8s.io/v1`), its Machines
//!   (`machine.openshift.io/v1beta1` in `openshift-machine-api`) and the nodes just read are held to the machine
//!   approver's rules ([`crate::csr`]); each request that passes is approved through its `approval` subresource in
//!   the same look, and the requests the kubelets post once approved (a serving one after a client one) are looked
//!   at once more before the look ends. A cluster without the Machine API gets no approval: nothing can say which
//!   machine a node is.
//!
//! One attempt per look, bounded like the HTTPS probe: an API that does not answer is unreachable; `401`/`403`
//! (credentials expired or revoked, seed 002's failed resume) and any other answer are not ready, with what the
//! cluster said. A refused credential is read again at the next look, in case it was rotated.

use std::collections::{BTreeMap, BTreeSet};

use apiary_planner::power::certificates::{CertificateLook, Refusal};
use apiary_planner::power::Readiness;
use apiary_planner::KubernetesCheck;
use apiary_ports::platform::{NodesFound, ReadinessCheck, Target};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::csr::{self, Verdict};
use crate::http::{look_once, Bundles, Http, Identity};
use crate::secrets::SecretCache;

/// Items asked for per page of a list.
const PAGE: u32 = 500;
/// Pages followed at most per list (a look stays bounded).
const MAX_PAGES: usize = 20;
/// Names listed at most in a message.
const NAMED: usize = 5;
/// Certificate requests approved or refused at most per look.
const MAX_DECIDED: usize = 200;
/// Rounds of listing certificate requests per look: the requests found, then those the kubelets post once the
/// first are approved.
const CSR_ROUNDS: usize = 2;
/// The cluster's certificate requests.
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
/// The cluster's Machines.
const MACHINES: &str = "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machines";

/// The Kubernetes readiness check.
pub struct KubernetesReadiness {
    clients: Bundles,
    secrets: SecretCache,
}

impl KubernetesReadiness {
    /// Checks through clients like `http`, reading the credentials through `secrets`.
    pub fn new(http: Http, secrets: std::sync::Arc<dyn Secrets>) -> Self {
        Self { clients: Bundles::new(http), secrets: SecretCache::new(secrets) }
    }
}

fn check<'a>(t: &Target<'a>) -> Result<&'a KubernetesCheck> {
    t.spec
        .readiness
        .as_ref()
        .and_then(|r| r.kubernetes.as_ref())
        .ok_or_else(|| Error::Config(format!("pool {} has no kubernetes readiness check", t.pool)))
}

/// Where and how to reach one cluster's API.
struct Access {
    server: String,
    ca: Option<String>,
    token: Option<String>,
    identity: Option<Identity>,
    /// The secret's ARN, to name it in messages and to read it again when refused.
    arn: String,
}

/// What a look found, before it is a [`Readiness`].
enum Look<T = Object> {
    /// The list's items.
    Items(Vec<T>),
    /// The API has no such resource (`404`).
    Absent,
    /// What the cluster answered instead.
    Said(Readiness),
}

impl KubernetesReadiness {
    /// The access to the cluster of `t`, or why there is none (a message for the cluster's conditions).
    async fn access(&self, t: &Target<'_>) -> Result<std::result::Result<Access, String>> {
        let check = check(t)?;
        let base_domain = t.spec.base_domain.as_deref();
        let arn = match check.credentials_for(t.cluster, base_domain) {
            Ok(arn) => arn,
            Err(why) => return Ok(Err(format!("the readiness credentials: {why}"))),
        };
        let server = match check.server_for(t.cluster, base_domain) {
            Ok(server) => server,
            Err(why) => return Ok(Err(format!("the readiness server: {why}"))),
        };
        let secret = self.secrets.get(&arn, t.pool).await?;
        // The check's own server and CA bundle come before the kubeconfig's.
        let (own_server, ca, token, identity) = match parse_credentials(secret.expose()) {
            Ok(Credentials::Token(token)) => (None, None, Some(token), None),
            Ok(Credentials::Kubeconfig(k)) => (Some(k.server), k.ca, k.token, k.identity),
            Err(why) => return Ok(Err(format!("the secret {arn} {why}"))),
        };
        let Some(server) = server.or(own_server) else {
            return Ok(Err(format!("the secret {arn} holds a token: the check must name its server")));
        };
        let server = server.trim_end_matches('/').to_owned();
        Ok(Ok(Access { server, ca: check.ca_bundle.clone().or(ca), token, identity, arn }))
    }

    /// Every item of `path` on the cluster (following `continue`), or what the cluster said instead.
    async fn list<T: DeserializeOwned>(&self, access: &Access, path: &str) -> Result<Look<T>> {
        let http = self.clients.client_with(access.ca.as_deref(), access.identity.as_ref())?;
        let mut items = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut url = format!("{}{path}?limit={PAGE}", access.server);
            if let Some(token) = &next {
                url.push_str(&format!("&continue={}", crate::http::escape(token)));
            }
            let mut request = http.client().get(&url).header("accept", "application/json");
            if let Some(token) = &access.token {
                request = request.bearer_auth(token);
            }
            apiary_ports::calls::count("kubernetes.List");
            let (status, body) = match look_once(&http, &url, request).await {
                Ok(answer) => answer,
                Err(message) => return Ok(Look::Said(Readiness::Unreachable { message })),
            };
            match status {
                200 => {}
                404 => return Ok(Look::Absent),
                401 | 403 => {
                    self.secrets.forget(&access.arn);
                    return Ok(not_ready(format!(
                        "{url} refused the credentials in {} ({status}): {}",
                        access.arn,
                        said(&body)
                    )));
                }
                _ => return Ok(not_ready(format!("{url} answered {status}: {}", said(&body)))),
            }
            let page: List<T> = match serde_json::from_slice(&body) {
                Ok(page) => page,
                Err(e) => return Ok(not_ready(format!("{url}: the answer is not a Kubernetes list: {e}"))),
            };
            items.extend(page.items);
            match page.metadata.and_then(|m| m.continue_).filter(|c| !c.is_empty()) {
                Some(token) => next = Some(token),
                None => return Ok(Look::Items(items)),
            }
        }
        Ok(not_ready(format!("{}{path}: more than {} items", access.server, PAGE as usize * MAX_PAGES)))
    }
}

fn not_ready<T>(message: String) -> Look<T> {
    Look::Said(Readiness::NotReady { message })
}

/// What an answer said, for a message: its Status message when it is one, else its text, cut short.
fn said(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Status {
        message: String,
    }
    match serde_json::from_slice::<Status>(body) {
        Ok(s) => crate::http::excerpt(&s.message),
        Err(_) => crate::http::excerpt(&String::from_utf8_lossy(body)),
    }
}

#[async_trait]
impl ReadinessCheck for KubernetesReadiness {
    async fn nodes(&self, t: Target<'_>) -> Result<Option<NodesFound>> {
        let access = match self.access(&t).await? {
            Ok(access) => access,
            Err(message) => return Ok(Some(NodesFound::only(Readiness::NotReady { message }))),
        };
        let nodes = match self.list::<Object>(&access, "/api/v1/nodes").await? {
            Look::Said(said) => return Ok(Some(NodesFound::only(said))),
            Look::Absent => {
                let message = format!("{}: no node API", access.server);
                return Ok(Some(NodesFound::only(Readiness::NotReady { message })));
            }
            Look::Items(nodes) if nodes.is_empty() => {
                let message = "the cluster has no nodes".to_owned();
                return Ok(Some(NodesFound::only(Readiness::NotReady { message })));
            }
            Look::Items(nodes) => nodes,
        };
        let waiting: Vec<String> = nodes
            .iter()
            .filter_map(|node| match node.condition("Ready") {
                Some(c) if c.status == "True" => None,
                Some(c) => Some(format!("{} (Ready={}{})", node.name(), c.status, c.why())),
                None => Some(format!("{} (no Ready condition yet)", node.name())),
            })
            .collect();
        let readiness = verdict(&waiting, nodes.len(), "nodes are not Ready");
        if waiting.is_empty() || !check(&t)?.approves_node_certificates() {
            return Ok(Some(NodesFound::only(readiness)));
        }
        let names: BTreeMap<String, bool> = nodes
            .iter()
            .map(|n| (n.metadata.name.clone(), n.condition("Ready").is_some_and(|c| c.status == "True")))
            .collect();
        let (certificates, note) = self.approve(&access, &names, t.cluster.transition_started_at).await?;
        let readiness = match (readiness, note) {
            (Readiness::NotReady { message }, Some(note)) => {
                Readiness::NotReady { message: format!("{message}; {note}") }
            }
            (readiness, _) => readiness,
        };
        Ok(Some(NodesFound { readiness, certificates }))
    }

    async fn check(&self, t: Target<'_>) -> Result<Readiness> {
        let access = match self.access(&t).await? {
            Ok(access) => access,
            Err(message) => return Ok(Readiness::NotReady { message }),
        };
        Ok(match self.list::<Object>(&access, "/apis/config.openshift.io/v1/clusteroperators").await? {
            Look::Said(said) => said,
            // Not OpenShift: no operators to wait for.
            Look::Absent => Readiness::Ready,
            Look::Items(operators) => {
                let unsettled: Vec<String> = operators
                    .iter()
                    .filter_map(|op| {
                        let off: Vec<String> = [("Available", "True"), ("Progressing", "False"), ("Degraded", "False")]
                            .into_iter()
                            .filter_map(|(kind, wanted)| match op.condition(kind) {
                                Some(c) if c.status == wanted => None,
                                Some(c) => Some(format!("{kind}={}{}", c.status, c.why())),
                                None => Some(format!("no {kind} condition")),
                            })
                            .collect();
                        (!off.is_empty()).then(|| format!("{} ({})", op.name(), off.join(", ")))
                    })
                    .collect();
                verdict(&unsettled, operators.len(), "ClusterOperators have not settled")
            }
        })
    }
}

impl KubernetesReadiness {
    /// Approves the pending certificate requests of the cluster at `access` that pass the rules, on a cluster
    /// whose nodes are `nodes`: what it approved and left pending, and why it could not look, if it could not.
    async fn approve(
        &self,
        access: &Access,
        nodes: &BTreeMap<String, bool>,
        began: Option<apiary_planner::Timestamp>,
    ) -> Result<(CertificateLook, Option<String>)> {
        let mut look = CertificateLook::default();
        let mut machines: Option<Vec<csr::Machine>> = None;
        let mut decided = BTreeSet::new();
        for _ in 0..CSR_ROUNDS {
            let pending: Vec<Csr> = match self.list::<serde_json::Value>(access, CSRS).await? {
                Look::Items(items) => items.into_iter().map(Csr::from).filter(|c| !c.decided).collect(),
                Look::Absent => return Ok((look, Some("the cluster has no certificates API".into()))),
                Look::Said(said) => return Ok((look, Some(format!("its certificate requests: {}", message(&said))))),
            };
            let fresh: Vec<Csr> = pending.into_iter().filter(|c| !decided.contains(&c.request.name)).collect();
            if fresh.is_empty() {
                break;
            }
            let machines = match &machines {
                Some(m) => m,
                None => match self.list::<MachineObject>(access, MACHINES).await? {
                    Look::Items(items) => machines.insert(items.into_iter().map(csr::Machine::from).collect()),
                    Look::Absent => {
                        let why = "the cluster has no Machine API: its nodes' certificate requests are left pending";
                        return Ok((look, Some(why.into())));
                    }
                    Look::Said(said) => return Ok((look, Some(format!("its Machines: {}", message(&said))))),
                },
            };
            let mut approved = false;
            for c in fresh {
                if decided.len() >= MAX_DECIDED {
                    break;
                }
                decided.insert(c.request.name.clone());
                let name = c.request.name.clone();
                let resuming = csr::Resuming { nodes, machines, began };
                match c.problem.clone().map_or_else(|| csr::verdict(&c.request, resuming), Verdict::Refuse) {
                    Verdict::Refuse(why) => look.refused.push(Refusal { name, why }),
                    Verdict::Approve(what) => match self.put_approval(access, c).await? {
                        Ok(()) => {
                            look.approved.push(format!("{name} ({what})"));
                            approved = true;
                        }
                        Err(why) => tracing::info!(csr = %name, why, "a certificate request not approved this look"),
                    },
                }
            }
            if !approved {
                break;
            }
        }
        Ok((look, None))
    }

    /// Approves `c` through its `approval` subresource, at the resource version read; `Err` says why the cluster
    /// did not take it (changed since, gone: the next look sees it again).
    async fn put_approval(&self, access: &Access, c: Csr) -> Result<std::result::Result<(), String>> {
        let http = self.clients.client_with(access.ca.as_deref(), access.identity.as_ref())?;
        let url = format!("{}{CSRS}/{}/approval", access.server, crate::http::escape(&c.request.name));
        let mut body = c.object;
        let approved = serde_json::json!({
            "type": "Approved",
            "status": "True",
            "reason": "ApiaryApprove",
            "message": "Approved by Apiary: a kubelet's request on resuming from hibernation, by the machine approver's rules",
        });
        match body.pointer_mut("/status/conditions").and_then(|v| v.as_array_mut()) {
            Some(conditions) => conditions.push(approved),
            None => body["status"] = serde_json::json!({"conditions": [approved]}),
        }
        let mut request = http.client().put(&url).header("accept", "application/json").json(&body);
        if let Some(token) = &access.token {
            request = request.bearer_auth(token);
        }
        apiary_ports::calls::count("kubernetes.Approve");
        Ok(match look_once(&http, &url, request).await {
            Ok((200 | 201, _)) => Ok(()),
            Ok((status, body)) => Err(format!("{url} answered {status}: {}", said(&body))),
            Err(why) => Err(why),
        })
    }
}

/// What a look said instead of the list it asked for.
fn message(r: &Readiness) -> &str {
    match r {
        Readiness::Ready => "",
        Readiness::NotReady { message } | Readiness::Unreachable { message } => message,
    }
}

/// A certificate request as listed: what the rules read, whether it is decided already, and the object itself
/// (its approval is the object written back with one more condition).
struct Csr {
    request: csr::Request,
    /// Approved, denied or failed already: left alone.
    decided: bool,
    /// What makes it unreadable (a request that is not base64), if anything.
    problem: Option<String>,
    object: serde_json::Value,
}

impl From<serde_json::Value> for Csr {
    fn from(object: serde_json::Value) -> Self {
        let text = |path: &str| object.pointer(path).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        let list = |path: &str| -> Vec<String> {
            let items = object.pointer(path).and_then(|v| v.as_array()).map(Vec::as_slice).unwrap_or_default();
            items.iter().filter_map(|v| v.as_str()).map(str::to_owned).collect()
        };
        let decided = object
            .pointer("/status/conditions")
            .and_then(|v| v.as_array())
            .is_some_and(|cs| cs.iter().any(|c| matches!(c["type"].as_str(), Some("Approved" | "Denied" | "Failed"))));
        let encoded = text("/spec/request");
        let (pem, problem) = if encoded.len() > csr::MAX_REQUEST * 4 / 3 + 4 {
            (vec![], Some(format!("the request is more than {} bytes", csr::MAX_REQUEST)))
        } else {
            match base64::engine::general_purpose::STANDARD.decode(encoded.trim()) {
                Ok(pem) => (pem, None),
                Err(_) => (vec![], Some("the request is not base64".to_owned())),
            }
        };
        let request = csr::Request {
            name: text("/metadata/name"),
            signer: text("/spec/signerName"),
            username: text("/spec/username"),
            groups: list("/spec/groups"),
            usages: list("/spec/usages"),
            pem,
            created: chrono::DateTime::parse_from_rfc3339(&text("/metadata/creationTimestamp"))
                .ok()
                .map(|t| t.to_utc()),
        };
        Self { request, decided, problem, object }
    }
}

/// A Machine of the Machine API (only what the rules read).
#[derive(Deserialize)]
struct MachineObject {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    status: MachineStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MachineStatus {
    #[serde(default)]
    addresses: Vec<Address>,
    #[serde(default)]
    node_ref: Option<Meta>,
}

#[derive(Deserialize)]
struct Address {
    #[serde(rename = "type")]
    type_: String,
    address: String,
}

impl From<MachineObject> for csr::Machine {
    fn from(m: MachineObject) -> Self {
        csr::Machine {
            name: m.metadata.name,
            addresses: m.status.addresses.into_iter().map(|a| (a.type_, a.address)).collect(),
            node: m.status.node_ref.map(|r| r.name).filter(|n| !n.is_empty()),
        }
    }
}

/// Ready when nothing is `waiting`, else not ready naming the first few of them.
fn verdict(waiting: &[String], of: usize, what: &str) -> Readiness {
    if waiting.is_empty() {
        return Readiness::Ready;
    }
    let mut named = waiting.iter().take(NAMED).cloned().collect::<Vec<_>>().join("; ");
    if waiting.len() > NAMED {
        named.push_str(&format!("; and {} more", waiting.len() - NAMED));
    }
    Readiness::NotReady { message: format!("{} of {of} {what}: {named}", waiting.len()) }
}

/// A Kubernetes list (only what the check reads).
#[derive(Deserialize)]
struct List<T> {
    #[serde(default = "Vec::new")]
    items: Vec<T>,
    #[serde(default)]
    metadata: Option<ListMeta>,
}

#[derive(Deserialize)]
struct ListMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

/// A node or a ClusterOperator: its name and its conditions.
#[derive(Deserialize)]
struct Object {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    status: Status,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
}

#[derive(Default, Deserialize)]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Object {
    fn name(&self) -> &str {
        if self.metadata.name.is_empty() {
            "(unnamed)"
        } else {
            &self.metadata.name
        }
    }

    fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == kind)
    }
}

impl Condition {
    /// `: reason: message`, cut short, or nothing.
    fn why(&self) -> String {
        let why = [self.reason.as_deref(), self.message.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        if why.is_empty() {
            String::new()
        } else {
            format!(": {}", why.chars().take(120).collect::<String>())
        }
    }
}

/// What a credentials secret holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Credentials {
    /// A bare bearer token.
    Token(String),
    /// A kubeconfig's current context.
    Kubeconfig(Kubeconfig),
}

/// The current context of a kubeconfig: where the API server is and how to authenticate to it.
#[derive(Debug, PartialEq, Eq)]
pub struct Kubeconfig {
    /// The API server's URL.
    pub server: String,
    /// The certificate authority to trust for it, PEM.
    pub ca: Option<String>,
    /// A bearer token.
    pub token: Option<String>,
    /// A client certificate.
    pub identity: Option<Identity>,
}

/// Reads a credentials secret: a kubeconfig (YAML or JSON) or a bare token. `Err` says what is wrong, never
/// what the secret holds.
pub fn parse_credentials(text: &str) -> std::result::Result<Credentials, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("is empty".to_owned());
    }
    if !text.contains(char::is_whitespace) && !text.starts_with('{') {
        return Ok(Credentials::Token(text.to_owned()));
    }
    // The parser's message is left out: it may quote the text, which is the secret's.
    let config: raw::Config = serde_saphyr::from_str(text).map_err(|_| {
        "is neither a token nor a kubeconfig (YAML or JSON with clusters, contexts and users)".to_owned()
    })?;
    config.current().map(Credentials::Kubeconfig)
}

/// A kubeconfig as written by kubectl and openshift-install (only what the check reads).
mod raw {
    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub(super) struct Config {
        #[serde(default)]
        clusters: Vec<Named<Cluster>>,
        #[serde(default)]
        contexts: Vec<Named<Context>>,
        #[serde(default)]
        users: Vec<Named<User>>,
        #[serde(default)]
        current_context: Option<String>,
    }

    #[derive(Deserialize)]
    struct Named<T> {
        name: String,
        #[serde(alias = "cluster", alias = "context", alias = "user")]
        value: T,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Cluster {
        server: String,
        #[serde(default)]
        certificate_authority_data: Option<String>,
        #[serde(default)]
        certificate_authority: Option<String>,
        #[serde(default)]
        insecure_skip_tls_verify: bool,
    }

    #[derive(Deserialize)]
    struct Context {
        cluster: String,
        #[serde(default)]
        user: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct User {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        client_certificate_data: Option<String>,
        #[serde(default)]
        client_key_data: Option<String>,
        #[serde(default)]
        client_certificate: Option<String>,
        #[serde(default)]
        exec: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        auth_provider: Option<serde::de::IgnoredAny>,
    }

    fn find<'a, T>(list: &'a [Named<T>], name: &str, what: &str) -> std::result::Result<&'a T, String> {
        list.iter().find(|n| n.name == name).map(|n| &n.value).ok_or_else(|| format!("names no {what} {name:?}"))
    }

    fn pem(field: &str, data: &str) -> std::result::Result<String, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| format!("has a {field} that is not base64"))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("has a {field} that is not PEM"))?;
        if !text.contains("-----BEGIN") {
            return Err(format!("has a {field} that is not PEM"));
        }
        Ok(text)
    }

    impl Config {
        /// The current context (the only context, when none is current).
        pub(super) fn current(self) -> std::result::Result<Kubeconfig, String> {
            let name = match (&self.current_context, self.contexts.as_slice()) {
                (Some(name), _) if !name.is_empty() => name.clone(),
                (_, [only]) => only.name.clone(),
                _ => return Err("is a kubeconfig without a current-context".to_owned()),
            };
            let context = find(&self.contexts, &name, "context")?;
            let cluster = find(&self.clusters, &context.cluster, "cluster")?;
            if cluster.insecure_skip_tls_verify {
                return Err("is a kubeconfig that skips TLS verification, which the check refuses".to_owned());
            }
            if cluster.certificate_authority.is_some() {
                return Err("is a kubeconfig naming a CA file: embed it (certificate-authority-data)".to_owned());
            }
            let ca = cluster.certificate_authority_data.as_deref().map(|d| pem("certificate-authority-data", d));
            let user = match &context.user {
                Some(user) => Some(find(&self.users, user, "user")?),
                None => None,
            };
            let mut config =
                Kubeconfig { server: cluster.server.clone(), ca: ca.transpose()?, token: None, identity: None };
            let Some(user) = user else { return Ok(config) };
            if user.exec.is_some() || user.auth_provider.is_some() {
                return Err("is a kubeconfig whose user runs a credential plugin: use a token or a client certificate"
                    .to_owned());
            }
            if user.client_certificate.is_some() {
                return Err("is a kubeconfig naming a certificate file: embed it (client-certificate-data)".to_owned());
            }
            config.token = user.token.clone().filter(|t| !t.is_empty());
            config.identity = match (&user.client_certificate_data, &user.client_key_data) {
                (Some(cert), Some(key)) => Some(Identity {
                    certificate: pem("client-certificate-data", cert)?,
                    key: pem("client-key-data", key)?,
                }),
                (None, None) => None,
                _ => return Err("is a kubeconfig with a client certificate or key but not both".to_owned()),
            };
            Ok(config)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn kubeconfig(user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: ci\n  cluster:\n    server: https://api.ci.example.com:6443\n    \
             certificate-authority-data: {}\ncontexts:\n- name: admin\n  context:\n    cluster: ci\n    user: admin\n\
             current-context: admin\npreferences: {{}}\nusers:\n- name: admin\n  user:\n{user}",
            b64(CA)
        )
    }

    #[test]
    fn a_bare_token_is_a_token() {
        assert_eq!(parse_credentials("  sha256~abc.def \n"), Ok(Credentials::Token("sha256~abc.def".into())));
    }

    #[test]
    fn an_installers_kubeconfig_gives_the_server_its_ca_and_the_client_certificate() {
        let user = format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(CA),
            b64("-----BEGIN EC PRIVATE KEY-----\nx\n-----END EC PRIVATE KEY-----\n")
        );
        let Ok(Credentials::Kubeconfig(k)) = parse_credentials(&kubeconfig(&user)) else { panic!("a kubeconfig") };
        assert_eq!(k.server, "https://api.ci.example.com:6443");
        assert_eq!(k.ca.as_deref(), Some(CA));
        assert_eq!(k.token, None);
        assert!(k.identity.is_some_and(|i| i.certificate == CA && i.key.contains("EC PRIVATE KEY")));
    }

    #[test]
    fn a_kubeconfig_with_a_token_gives_the_token() {
        let Ok(Credentials::Kubeconfig(k)) = parse_credentials(&kubeconfig("    token: sha256~secret\n")) else {
            panic!("a kubeconfig")
        };
        assert_eq!((k.token.as_deref(), k.identity), (Some("sha256~secret"), None));
    }

    #[test]
    fn what_the_check_cannot_use_is_named_without_the_secret() {
        for (user, says) in [
            ("    exec:\n      command: aws\n", "credential plugin"),
            ("    client-certificate: /home/me/cert.pem\n", "certificate file"),
            ("    client-key-data: c2VjcmV0\n", "not both"),
            (
                "    token: sha256~secret\n    client-certificate-data: bm90IHBlbQ==\n    client-key-data: eA==\n",
                "not PEM",
            ),
        ] {
            let why = parse_credentials(&kubeconfig(user)).expect_err(says);
            assert!(why.contains(says), "{why}");
            assert!(!why.contains("secret") && !why.contains("c2VjcmV0"), "{why}");
        }
        let skip = kubeconfig("    token: t\n")
            .replace("    certificate-authority-data", "    insecure-skip-tls-verify: true\n    x");
        assert!(parse_credentials(&skip).expect_err("refused").contains("skips TLS verification"));
        let other = kubeconfig("    token: t\n").replace("current-context: admin", "current-context: other");
        assert!(parse_credentials(&other).expect_err("refused").contains("no context \"other\""));
        let garbled = "token: [sha256~secret-value\nclusters: {";
        let why = parse_credentials(garbled).expect_err("refused");
        assert!(why.starts_with("is neither a token nor a kubeconfig") && !why.contains("secret-value"), "{why}");
        assert_eq!(parse_credentials(" \n"), Err("is empty".into()));
    }
}
