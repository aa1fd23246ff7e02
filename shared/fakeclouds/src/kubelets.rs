//! The fake cluster API's kubelets and their certificates (seed 004's CSRs), as an OpenShift cluster has them.
//!
//! A cluster's kubelets get client certificates valid [`Validity::first`] at install (24 hours on OpenShift),
//! and renew them for [`Validity::later`] (30 days) when they are past 80 % of their life while the cluster is up.
//! The fake cannot see the machines: it counts a cluster as up while it is looked at, so a cluster renews only at
//! its looks, and one hibernated and resumed without a look between comes back with the certificates it had.
//! The install is its first look, unless an installer tells the fake of it ([`Kubelets::installed`]: the reference
//! webhook installer does as it reports a cluster Ready, the whole-system simulation as the table says): then a
//! standby hibernated at its install and first looked at on a resume counts its certificates from the install.
//!
//! A resume (the first node look after the cluster's operators were last found settled) whose certificates have
//! expired starts a **renewal**: every node is NotReady and posts a client request as the node bootstrapper; once
//! that is approved it is issued, and the node posts a serving request; once that is approved and issued the node
//! is Ready. [`Hostile`] requests can be posted beside them; they must stay pending.

use std::time::Duration;

use base64::Engine;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use serde_json::{json, Value};

use crate::tls::Authority;

/// How long kubelet certificates are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// The install's certificates (OpenShift: 24 hours).
    pub first: Duration,
    /// Renewed ones (OpenShift: 30 days).
    pub later: Duration,
}

impl Default for Validity {
    fn default() -> Self {
        Self { first: Duration::from_secs(24 * 3600), later: Duration::from_secs(30 * 24 * 3600) }
    }
}

/// A request the fake can post beside a renewal's, that the machine approver's rules refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hostile {
    /// A serving request from node 0 naming node 1's machine's address.
    OtherMachinesAddress,
    /// A client request from a user other than the node bootstrapper.
    NotTheBootstrapper,
    /// A client request for a node the cluster does not have.
    NoSuchNode,
    /// A serving request with client usages.
    WrongUsages,
    /// A serving request whose common name is another node's.
    NotTheRequester,
    /// Node 0's client request, as its kubelet would make it, but made two hours before now: one the
    /// cluster-machine-approver leaves pending past an hour, and no resume under way asked for.
    BeforeTheResume,
}

impl Hostile {
    /// Every kind.
    pub const ALL: [Hostile; 6] = [
        Hostile::OtherMachinesAddress,
        Hostile::NotTheBootstrapper,
        Hostile::NoSuchNode,
        Hostile::WrongUsages,
        Hostile::NotTheRequester,
        Hostile::BeforeTheResume,
    ];

    /// The kind a command names (`other-address`, `not-bootstrapper`, `no-such-node`, `wrong-usages`,
    /// `not-requester`, `before-resume`).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "other-address" => Hostile::OtherMachinesAddress,
            "not-bootstrapper" => Hostile::NotTheBootstrapper,
            "no-such-node" => Hostile::NoSuchNode,
            "wrong-usages" => Hostile::WrongUsages,
            "not-requester" => Hostile::NotTheRequester,
            "before-resume" => Hostile::BeforeTheResume,
            _ => return None,
        })
    }
}

/// One kind of certificate a node holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Client,
    Serving,
}

/// A certificate request as the cluster's API keeps it.
#[derive(Debug, Clone)]
pub struct Csr {
    /// The object, as listed.
    pub object: Value,
    /// Which node's and what for; `None` for a hostile one.
    owner: Option<(usize, Kind)>,
}

impl Csr {
    /// Its name.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// Whether it is one of the [`Hostile`] requests, not a kubelet's own.
    pub fn hostile(&self) -> bool {
        self.owner.is_none()
    }

    /// Whether it was approved.
    pub fn approved(&self) -> bool {
        self.condition("Approved")
    }

    fn condition(&self, kind: &str) -> bool {
        self.object["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == kind))
    }
}

/// A cluster's kubelets.
#[derive(Debug, Clone, Default)]
pub struct Kubelets {
    /// When the nodes' client certificates were issued.
    issued: Duration,
    /// How long they are valid.
    life: Duration,
    /// The cluster's operators were found settled since its nodes were last looked at: the next node look is a
    /// boot's.
    up: bool,
    /// A renewal under way: per node, the certificates issued so far.
    renewal: Option<Vec<(bool, bool)>>,
    /// The certificate requests, oldest first.
    pub csrs: Vec<Csr>,
    /// Requests made so far, for names and resource versions.
    made: u64,
}

impl Kubelets {
    /// A cluster's kubelets first seen at `now`.
    pub fn new(now: Duration, validity: Validity) -> Self {
        Self { issued: now, life: validity.first, ..Self::default() }
    }

    /// A cluster's kubelets as its install left them at `at`, the cluster up since: the next node look is a
    /// boot's, which renews the certificates if they expired meanwhile.
    pub fn installed(at: Duration, validity: Validity) -> Self {
        Self { up: true, ..Self::new(at, validity) }
    }

    /// The certificates expire at `now`, as if the cluster had slept past their life.
    pub fn expire(&mut self, now: Duration) {
        (self.issued, self.life) = (now, Duration::ZERO);
    }

    /// A look at `now` while the cluster is up: certificates past 80 % of their life are renewed.
    pub fn looked(&mut self, now: Duration, validity: Validity) {
        if self.renewal.is_none() && now < self.issued + self.life && now >= self.issued + self.life * 4 / 5 {
            self.renew(now, validity);
        }
    }

    fn renew(&mut self, now: Duration, validity: Validity) {
        self.issued = now;
        self.life = validity.later;
    }

    /// The operators were found settled: the cluster is up.
    pub fn settled(&mut self) {
        self.up = true;
    }

    /// A look at the nodes at `now`: a boot's first starts a renewal when the certificates expired, with `hostile`
    /// requests beside it. Whether node `i` of `nodes` has its certificates (may be Ready).
    pub fn nodes(&mut self, infra: &str, nodes: usize, hostile: &[Hostile], now: Duration) -> Vec<bool> {
        let boot = std::mem::take(&mut self.up);
        if boot && self.renewal.is_none() && now >= self.issued + self.life {
            self.renewal = Some(vec![(false, false); nodes]);
            for i in 0..nodes {
                self.post(infra, i, Kind::Client, now);
            }
            for h in hostile {
                self.post_hostile(infra, *h, now);
            }
        }
        match &self.renewal {
            Some(issued) => (0..nodes).map(|i| issued.get(i).is_some_and(|(c, s)| *c && *s)).collect(),
            None => vec![true; nodes],
        }
    }

    /// Applies an approval of request `name` (the object the client wrote, at `version`): `Err` with a status
    /// and a reason when the cluster refuses it.
    pub fn approve(
        &mut self,
        infra: &str,
        name: &str,
        written: &Value,
        now: Duration,
        validity: Validity,
        authority: &Authority,
    ) -> Result<Value, (u16, String)> {
        let Some(at) = self.csrs.iter().position(|c| c.name() == name) else {
            return Err((404, format!("certificatesigningrequests.certificates.k8s.io \"{name}\" not found")));
        };
        let stored = &self.csrs[at];
        if written["metadata"]["resourceVersion"] != stored.object["metadata"]["resourceVersion"] {
            return Err((409, format!("the object has been modified; please apply your changes to {name} again")));
        }
        if stored.approved() || stored.condition("Denied") {
            return Err((409, format!("{name} is decided already")));
        }
        let Some(condition) = written["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Approved" && c["status"] == "True"))
            .cloned()
        else {
            return Err((422, "an approval must add an Approved condition".into()));
        };
        self.made += 1;
        let version = self.made.to_string();
        let owner = self.csrs[at].owner;
        let csr = &mut self.csrs[at].object;
        csr["metadata"]["resourceVersion"] = json!(version);
        csr["status"]["conditions"] = json!([condition]);
        // The signer issues it at once.
        let subject = csr["spec"]["username"].as_str().unwrap_or_default().to_owned();
        if let Ok((certificate, _)) = authority.client_certificate(&subject) {
            csr["status"]["certificate"] = json!(base64::engine::general_purpose::STANDARD.encode(certificate));
        }
        let answer = csr.clone();
        if let (Some((node, kind)), Some(issued)) = (owner, self.renewal.as_mut()) {
            match kind {
                Kind::Client => issued[node].0 = true,
                Kind::Serving => issued[node].1 = true,
            }
            if kind == Kind::Client {
                // The kubelet, back in, asks for its serving certificate.
                self.post(infra, node, Kind::Serving, now);
            }
        }
        if self.renewal.as_ref().is_some_and(|r| r.iter().all(|(c, s)| *c && *s)) {
            self.renewal = None;
            self.renew(now, validity);
        }
        Ok(answer)
    }

    fn post(&mut self, infra: &str, node: usize, kind: Kind, now: Duration) {
        let spec = match kind {
            Kind::Client => Spec::client(&node_name(infra, node)),
            Kind::Serving => Spec::serving(infra, node),
        };
        self.push(spec, Some((node, kind)), now);
    }

    fn post_hostile(&mut self, infra: &str, hostile: Hostile, now: Duration) {
        let node = |i| node_name(infra, i);
        let serving = |i| Spec::serving(infra, i);
        let client = |name: String| Spec::client(&name);
        let spec = match hostile {
            Hostile::OtherMachinesAddress => Spec { ips: vec![address(1)], ..serving(0) },
            Hostile::NotTheBootstrapper => {
                Spec { username: "system:serviceaccount:default:intruder".into(), ..client(node(0)) }
            }
            Hostile::NoSuchNode => client(format!("{infra}-intruder")),
            Hostile::WrongUsages => Spec { usages: &["digital signature", "client auth"], ..serving(0) },
            Hostile::NotTheRequester => Spec { common_name: format!("system:node:{}", node(1)), ..serving(0) },
            Hostile::BeforeTheResume => {
                return self.push(client(node(0)), None, now.saturating_sub(Duration::from_secs(2 * 3600)));
            }
        };
        self.push(spec, None, now);
    }

    fn push(&mut self, spec: Spec, owner: Option<(usize, Kind)>, now: Duration) {
        self.made += 1;
        let pem = spec.request().unwrap_or_default();
        let object = json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {
                "name": format!("csr-{:05}", self.made),
                "resourceVersion": self.made.to_string(),
                "creationTimestamp": timestamp(now),
            },
            "spec": {
                "request": base64::engine::general_purpose::STANDARD.encode(pem),
                "signerName": spec.signer,
                "usages": spec.usages,
                "username": spec.username,
                "groups": spec.groups,
            },
            "status": {},
        });
        self.csrs.push(Csr { object, owner });
    }
}

/// The name of node `i` of cluster `infra` (its Machine's InternalDNS and Hostname too).
pub fn node_name(infra: &str, i: usize) -> String {
    format!("{infra}-master-{i}")
}

/// The internal address of node `i`'s machine.
pub fn address(i: usize) -> String {
    format!("10.0.{}.{}", i / 200, 10 + i % 200)
}

/// The Machine API's Machine of node `i` of cluster `infra`.
pub fn machine(infra: &str, i: usize) -> Value {
    let name = node_name(infra, i);
    json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": format!("{infra}-machine-{i}"), "namespace": "openshift-machine-api"},
        "spec": {},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": address(i)},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name},
            ],
            "nodeRef": {"kind": "Node", "name": name},
        },
    })
}

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
const BOOTSTRAPPER_GROUPS: [&str; 3] =
    ["system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts", "system:authenticated"];

/// What a kubelet puts in a request.
struct Spec {
    signer: &'static str,
    username: String,
    groups: Vec<&'static str>,
    usages: &'static [&'static str],
    common_name: String,
    dns: Vec<String>,
    ips: Vec<String>,
}

impl Spec {
    /// What node `name`'s kubelet asks for as its client certificate.
    fn client(name: &str) -> Self {
        Spec {
            signer: CLIENT_SIGNER,
            username: BOOTSTRAPPER.into(),
            groups: BOOTSTRAPPER_GROUPS.to_vec(),
            usages: &["digital signature", "client auth"],
            common_name: format!("system:node:{name}"),
            dns: vec![],
            ips: vec![],
        }
    }

    /// What the kubelet of node `i` of cluster `infra` asks for as its serving certificate.
    fn serving(infra: &str, i: usize) -> Self {
        let name = node_name(infra, i);
        Spec {
            signer: SERVING_SIGNER,
            username: format!("system:node:{name}"),
            groups: vec!["system:nodes", "system:authenticated"],
            usages: &["digital signature", "server auth"],
            common_name: format!("system:node:{name}"),
            dns: vec![name],
            ips: vec![address(i)],
        }
    }

    /// The PKCS#10 request, PEM, signed by a new key.
    fn request(&self) -> Result<String, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::OrganizationName, "system:nodes");
        params.distinguished_name.push(DnType::CommonName, self.common_name.as_str());
        for dns in &self.dns {
            params.subject_alt_names.push(SanType::DnsName(dns.as_str().try_into()?));
        }
        for ip in &self.ips {
            if let Ok(ip) = ip.parse() {
                params.subject_alt_names.push(SanType::IpAddress(ip));
            }
        }
        params.serialize_request(&key)?.pem()
    }
}

/// The time the fake's objects carry at `now`, the time since the Unix epoch as the cluster reads it (the fake
/// cluster API's clock from the epoch it was given: the wall clock's, or the simulation's start).
pub fn instant(now: Duration) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(i64::try_from(now.as_secs()).unwrap_or(i64::MAX), 0).unwrap_or_default()
}

fn timestamp(now: Duration) -> String {
    instant(now).format("%Y-%m-%dT%H:%M:%SZ").to_string()
}
