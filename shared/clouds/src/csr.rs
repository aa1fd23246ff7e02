//! Which of a resuming cluster's certificate requests Apiary approves (seed 004): exactly those the cluster
//! machine approver would approve for a node coming back from hibernation, as Hive's hibernation controller
//! adapts its rules (the node must exist already). Everything else stays pending, with the rule it failed.
//!
//! - A kubelet's **client** certificate (signer `kubernetes.io/kube-apiserver-client-kubelet`): requested by the
//!   node bootstrapper service account with exactly its groups; subject `O=system:nodes`, `CN=system:node:<name>`;
//!   no DNS, IP, email or URI names; exactly the client usages; a Node `<name>` and a Machine whose `InternalDNS`
//!   address is `<name>`.
//! - A kubelet's **serving** certificate (signer `kubernetes.io/kubelet-serving`): requested by
//!   `system:node:<name>` in the groups `system:nodes` and `system:authenticated`; `CN` the requester, `O`
//!   including `system:nodes`; exactly the server usages; a Machine whose `nodeRef` is `<name>`, and every DNS name
//!   and IP address of the request among that Machine's addresses; no email or URI names.
//!
//! And what a resume needs, no more: a request made before the current resume began (a minute allowed for the
//! cluster's clock) is refused, as is a client request for a node that is Ready (its kubelet renews through its
//! own identity; the machine approver's recovery approver acts only for a node whose heartbeat went stale), and a
//! client request whose Machine (the one whose `InternalDNS` is the node's name) is another node's.
//!
//! The request itself (PEM, PKCS#10) is read by `x509-parser` and its signature checked; one that does not parse,
//! is larger than [`MAX_REQUEST`] or is not signed by its own key is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use chrono::{DateTime, TimeDelta, Utc};

use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::{FromDer, X509CertificationRequest};

/// The signer of a kubelet's client certificate.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of a kubelet's serving certificate.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Who asks for a new node's (or a node with expired certificates') client certificate.
pub const BOOTSTRAPPER: &str = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// How far the cluster's clock may be behind Apiary's when a request made for this resume is judged.
pub const CLOCK_SKEW: TimeDelta = TimeDelta::minutes(1);
/// The node bootstrapper's groups on a worker, and on a control-plane machine.
const BOOTSTRAPPER_GROUPS: [&[&str]; 2] = [
    &["system:authenticated", "system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator"],
    &["system:authenticated", "system:serviceaccounts:openshift-machine-config-operator"],
];
const NODES: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";
/// A kubelet's client usages: without `key encipherment` for an ECDSA key, with it for RSA.
const CLIENT_USAGES: [&[&str]; 2] =
    [&["client auth", "digital signature"], &["client auth", "digital signature", "key encipherment"]];
/// A kubelet's server usages, likewise.
const SERVER_USAGES: [&[&str]; 2] =
    [&["digital signature", "server auth"], &["digital signature", "key encipherment", "server auth"]];
/// The largest request read, PEM (a kubelet's is under 1 KiB).
pub const MAX_REQUEST: usize = 16 * 1024;

/// A pending request as the cluster's API holds it (only what the rules read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// Its name.
    pub name: String,
    /// `spec.signerName`.
    pub signer: String,
    /// `spec.username`: who asked.
    pub username: String,
    /// `spec.groups`.
    pub groups: Vec<String>,
    /// `spec.usages`.
    pub usages: Vec<String>,
    /// `spec.request`, decoded from base64: the PEM of a PKCS#10 request.
    pub pem: Vec<u8>,
    /// `metadata.creationTimestamp`: when the cluster took the request.
    pub created: Option<DateTime<Utc>>,
}

/// What the rules know of the resuming cluster.
#[derive(Debug, Clone, Copy)]
pub struct Resuming<'a> {
    /// Its nodes, each with whether it is Ready.
    pub nodes: &'a BTreeMap<String, bool>,
    /// Its Machines.
    pub machines: &'a [Machine],
    /// When the current resume began (Apiary's clock).
    pub began: Option<DateTime<Utc>>,
}

/// A Machine of the cluster's Machine API (only what the rules read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Machine {
    /// Its name.
    pub name: String,
    /// `status.addresses`: `(type, address)`.
    pub addresses: Vec<(String, String)>,
    /// `status.nodeRef.name`.
    pub node: Option<String>,
}

impl Machine {
    fn has(&self, kinds: &[&str], address: &str) -> bool {
        self.addresses.iter().any(|(kind, a)| kinds.contains(&kind.as_str()) && a == address)
    }
}

/// What the rules say of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Approve it: what it is for, in a few words (`node X's client certificate`).
    Approve(String),
    /// Leave it pending: the rule it failed.
    Refuse(String),
}

/// What the rules say of `request`, on the resuming cluster `cluster`.
pub fn verdict(request: &Request, cluster: Resuming<'_>) -> Verdict {
    match check_request(request, cluster) {
        Ok(what) => Verdict::Approve(what),
        Err(why) => Verdict::Refuse(why),
    }
}

/// What a parsed request asks for.
struct Asked {
    common_name: String,
    organizations: Vec<String>,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    /// Email addresses, URIs and any other kind of name.
    others: usize,
}

fn check_request(request: &Request, cluster: Resuming<'_>) -> Result<String, String> {
    let Some(began) = cluster.began else {
        return Err("the cluster's resume has no start time: nothing is approved outside a resume".to_owned());
    };
    match request.created {
        Some(at) if at >= began - CLOCK_SKEW => {}
        Some(at) => {
            return Err(format!(
                "made at {}, before this resume began at {} (a minute allowed for the cluster's clock)",
                at.format("%Y-%m-%dT%H:%M:%SZ"),
                began.format("%Y-%m-%dT%H:%M:%SZ")
            ))
        }
        None => return Err("the request has no creation time".to_owned()),
    }
    match request.signer.as_str() {
        CLIENT_SIGNER => client(request, &parse(&request.pem)?, cluster.nodes, cluster.machines),
        SERVING_SIGNER => serving(request, &parse(&request.pem)?, cluster.machines),
        other => Err(format!("signer {other:?} is not a kubelet's")),
    }
}

fn client(
    request: &Request,
    asked: &Asked,
    nodes: &BTreeMap<String, bool>,
    machines: &[Machine],
) -> Result<String, String> {
    if request.username != BOOTSTRAPPER {
        return Err(format!("a client certificate asked for by {:?}, not the node bootstrapper", request.username));
    }
    if !BOOTSTRAPPER_GROUPS.iter().any(|g| same_set(&request.groups, g)) {
        return Err(format!("groups {:?} are not the node bootstrapper's", sorted(&request.groups)));
    }
    if asked.organizations != [NODES] {
        return Err(format!("organization {:?} is not exactly [\"{NODES}\"]", asked.organizations));
    }
    let name = node_name(&asked.common_name)?;
    if !asked.dns.is_empty() || !asked.ips.is_empty() || asked.others > 0 {
        return Err("a client certificate naming DNS names, IP addresses, emails or URIs".to_owned());
    }
    if !CLIENT_USAGES.iter().any(|u| same_set(&request.usages, u)) {
        return Err(format!("usages {:?} are not a kubelet client's", sorted(&request.usages)));
    }
    match nodes.get(name) {
        None => return Err(format!("no node {name} in the cluster")),
        Some(true) => {
            return Err(format!(
                "node {name} is Ready: its kubelet renews its client certificate through its own identity"
            ))
        }
        Some(false) => {}
    }
    let mut found = machines.iter().filter(|m| m.has(&["InternalDNS"], name)).peekable();
    let Some(first) = found.peek().copied() else {
        return Err(format!("no Machine whose InternalDNS address is {name}"));
    };
    if !found.any(|m| m.node.as_deref().is_none_or(|n| n == name)) {
        let other = first.node.as_deref().unwrap_or_default();
        return Err(format!("Machine {} (InternalDNS {name}) is node {other}'s", first.name));
    }
    Ok(format!("node {name}'s client certificate"))
}

fn serving(request: &Request, asked: &Asked, machines: &[Machine]) -> Result<String, String> {
    let name = node_name(&request.username)
        .map_err(|_| format!("a serving certificate asked for by {:?}, not a node", request.username))?;
    if !request.groups.iter().any(|g| g == NODES) || !request.groups.iter().any(|g| g == "system:authenticated") {
        return Err(format!("groups {:?} lack system:nodes or system:authenticated", sorted(&request.groups)));
    }
    if !SERVER_USAGES.iter().any(|u| same_set(&request.usages, u)) {
        return Err(format!("usages {:?} are not a kubelet server's", sorted(&request.usages)));
    }
    if asked.common_name != request.username {
        return Err(format!("common name {:?} is not the requester {:?}", asked.common_name, request.username));
    }
    if !asked.organizations.iter().any(|o| o == NODES) {
        return Err(format!("organization {:?} does not include {NODES}", asked.organizations));
    }
    if asked.others > 0 {
        return Err("a serving certificate naming emails or URIs".to_owned());
    }
    let Some(machine) = machines.iter().find(|m| m.node.as_deref() == Some(name)) else {
        return Err(format!("no Machine whose node is {name}"));
    };
    if let Some(dns) = asked.dns.iter().find(|d| !machine.has(&["InternalDNS", "ExternalDNS", "Hostname"], d)) {
        return Err(format!("DNS name {dns} is not among Machine {}'s names", machine.name));
    }
    if let Some(ip) = asked.ips.iter().find(|ip| !machine.has(&["InternalIP", "ExternalIP"], &ip.to_string())) {
        return Err(format!("IP address {ip} is not among Machine {}'s addresses", machine.name));
    }
    Ok(format!("node {name}'s serving certificate"))
}

/// The node a `system:node:<name>` user or common name is for.
fn node_name(user: &str) -> Result<&str, String> {
    match user.strip_prefix(NODE_PREFIX) {
        Some(name) if !name.is_empty() => Ok(name),
        _ => Err(format!("common name {user:?} is not system:node:<name>")),
    }
}

fn same_set(have: &[String], want: &[&str]) -> bool {
    let have: BTreeSet<&str> = have.iter().map(String::as_str).collect();
    have.len() == want.len() && want.iter().all(|w| have.contains(w))
}

fn sorted(list: &[String]) -> Vec<&str> {
    let set: BTreeSet<&str> = list.iter().map(String::as_str).collect();
    set.into_iter().collect()
}

/// The request `pem` holds, read and its signature checked; `Err` says what is wrong with it.
fn parse(pem: &[u8]) -> Result<Asked, String> {
    if pem.len() > MAX_REQUEST {
        return Err(format!("the request is {} bytes, more than {MAX_REQUEST}", pem.len()));
    }
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| "the request is not PEM".to_owned())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(format!("the request is a PEM {:?}, not a CERTIFICATE REQUEST", block.label));
    }
    let (rest, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("the request is not a PKCS#10 certificate request: {e}"))?;
    if !rest.is_empty() {
        return Err("the request has bytes after its PKCS#10 structure".to_owned());
    }
    csr.verify_signature().map_err(|_| "the request is not signed by its own key".to_owned())?;
    let subject = &csr.certification_request_info.subject;
    let text = |a: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        a.as_str().map(str::to_owned).map_err(|_| "the request's subject is not text".to_owned())
    };
    let names = subject.iter_common_name().map(text).collect::<Result<Vec<_>, _>>()?;
    let [common_name] = <[String; 1]>::try_from(names).map_err(|n| format!("{} common names, not one", n.len()))?;
    let organizations = subject.iter_organization().map(text).collect::<Result<Vec<_>, _>>()?;
    let mut asked = Asked { common_name, organizations, dns: vec![], ips: vec![], others: 0 };
    for extension in csr.requested_extensions().into_iter().flatten() {
        let ParsedExtension::SubjectAlternativeName(san) = extension else { continue };
        for name in &san.general_names {
            match name {
                GeneralName::DNSName(dns) => asked.dns.push((*dns).to_owned()),
                GeneralName::IPAddress(bytes) => asked.ips.push(ip(bytes)?),
                _ => asked.others += 1,
            }
        }
    }
    Ok(asked)
}

fn ip(bytes: &[u8]) -> Result<IpAddr, String> {
    match bytes.len() {
        4 => Ok(IpAddr::from(<[u8; 4]>::try_from(bytes).map_err(|_| "an IP address".to_owned())?)),
        16 => Ok(IpAddr::from(<[u8; 16]>::try_from(bytes).map_err(|_| "an IP address".to_owned())?)),
        n => Err(format!("an IP address of {n} bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    const NODE: &str = "ip-10-0-1-2.ec2.internal";

    /// A PKCS#10 request for `cn` in the organizations `o`, naming `dns` and `ips`.
    fn pem(cn: &str, o: &[&str], dns: &[&str], ips: &[&str]) -> Vec<u8> {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        for org in o {
            params.distinguished_name.push(DnType::OrganizationName, *org);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names.extend(dns.iter().map(|d| SanType::DnsName((*d).try_into().expect("dns"))));
        params.subject_alt_names.extend(ips.iter().map(|i| SanType::IpAddress(i.parse().expect("ip"))));
        params.serialize_request(&key).expect("request").pem().expect("pem").into_bytes()
    }

    fn client() -> Request {
        Request {
            name: "csr-client".into(),
            signer: CLIENT_SIGNER.into(),
            username: BOOTSTRAPPER.into(),
            groups: BOOTSTRAPPER_GROUPS[0].iter().map(|g| (*g).to_owned()).collect(),
            usages: vec!["digital signature".into(), "client auth".into()],
            pem: pem(&format!("system:node:{NODE}"), &[NODES], &[], &[]),
            created: Some(began() + TimeDelta::seconds(40)),
        }
    }

    fn serving() -> Request {
        Request {
            name: "csr-serving".into(),
            signer: SERVING_SIGNER.into(),
            username: format!("system:node:{NODE}"),
            groups: vec![NODES.into(), "system:authenticated".into()],
            usages: vec!["digital signature".into(), "key encipherment".into(), "server auth".into()],
            pem: pem(&format!("system:node:{NODE}"), &[NODES], &[NODE], &["10.0.1.2"]),
            created: Some(began() + TimeDelta::seconds(90)),
        }
    }

    fn machines() -> Vec<Machine> {
        let addresses = |ip: &str, dns: &str| {
            vec![("InternalIP".into(), ip.into()), ("InternalDNS".into(), dns.into()), ("Hostname".into(), dns.into())]
        };
        vec![
            Machine { name: "m-0".into(), addresses: addresses("10.0.1.2", NODE), node: Some(NODE.into()) },
            Machine {
                name: "m-1".into(),
                addresses: addresses("10.0.1.3", "ip-10-0-1-3.ec2.internal"),
                node: Some("ip-10-0-1-3.ec2.internal".into()),
            },
        ]
    }

    /// The resuming node is NotReady; the other, whose certificates outlived the hibernation, Ready.
    fn nodes() -> BTreeMap<String, bool> {
        [(NODE.to_owned(), false), ("ip-10-0-1-3.ec2.internal".to_owned(), true)].into_iter().collect()
    }

    fn began() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-29T09:00:00Z").expect("time").to_utc()
    }

    /// `r` judged on a cluster of `nodes` and `machines` whose resume began at [`began`].
    fn verdict_on(r: &Request, nodes: &BTreeMap<String, bool>, machines: &[Machine]) -> Verdict {
        super::verdict(r, Resuming { nodes, machines, began: Some(began()) })
    }

    fn verdict(r: &Request) -> Verdict {
        verdict_on(r, &nodes(), &machines())
    }

    #[test]
    fn a_kubelets_client_and_serving_requests_are_approved() {
        assert_eq!(verdict(&client()), Verdict::Approve(format!("node {NODE}'s client certificate")));
        assert_eq!(verdict(&serving()), Verdict::Approve(format!("node {NODE}'s serving certificate")));
        let master = Request {
            groups: BOOTSTRAPPER_GROUPS[1].iter().map(|g| (*g).to_owned()).collect(),
            usages: vec!["key encipherment".into(), "digital signature".into(), "client auth".into()],
            ..client()
        };
        assert!(matches!(verdict(&master), Verdict::Approve(_)), "a control-plane bootstrapper, an RSA key's usages");
    }

    #[test]
    fn each_client_rule_refuses_the_request_that_breaks_it() {
        let cn = format!("system:node:{NODE}");
        for (request, says) in [
            (
                Request { username: "system:serviceaccount:default:builder".into(), ..client() },
                "not the node bootstrapper",
            ),
            (Request { groups: vec!["system:authenticated".into()], ..client() }, "are not the node bootstrapper's"),
            (
                Request {
                    groups: [BOOTSTRAPPER_GROUPS[0], &["system:masters"]]
                        .concat()
                        .iter()
                        .map(|g| (*g).into())
                        .collect(),
                    ..client()
                },
                "are not the node bootstrapper's",
            ),
            (Request { pem: pem(&cn, &["system:masters"], &[], &[]), ..client() }, "is not exactly [\"system:nodes\"]"),
            (Request { pem: pem(&cn, &[NODES, "system:masters"], &[], &[]), ..client() }, "is not exactly"),
            (Request { pem: pem("system:admin", &[NODES], &[], &[]), ..client() }, "is not system:node:<name>"),
            (Request { pem: pem("system:node:", &[NODES], &[], &[]), ..client() }, "is not system:node:<name>"),
            (Request { pem: pem(&cn, &[NODES], &[NODE], &[]), ..client() }, "naming DNS names"),
            (Request { pem: pem(&cn, &[NODES], &[], &["10.0.1.2"]), ..client() }, "naming DNS names"),
            (
                Request { usages: vec!["digital signature".into(), "server auth".into()], ..client() },
                "not a kubelet client's",
            ),
            (
                Request {
                    usages: vec!["digital signature".into(), "client auth".into(), "cert sign".into()],
                    ..client()
                },
                "not a kubelet client's",
            ),
            (
                Request { pem: pem("system:node:ip-10-0-9-9.ec2.internal", &[NODES], &[], &[]), ..client() },
                "no node ip-10-0-9-9.ec2.internal in the cluster",
            ),
        ] {
            let Verdict::Refuse(why) = verdict(&request) else { panic!("{says}: approved") };
            assert!(why.contains(says), "{says}: {why}");
        }
        let mut orphan = machines();
        orphan[0].addresses.retain(|(kind, _)| kind != "InternalDNS");
        let Verdict::Refuse(why) = verdict_on(&client(), &nodes(), &orphan) else { panic!("approved") };
        assert_eq!(why, format!("no Machine whose InternalDNS address is {NODE}"));
    }

    /// What a resume needs and no more. The bootstrapper's two group sets: a worker's is the cluster machine
    /// approver's `nodeBootstrapperGroups` (openshift/cluster-machine-approver, pkg/controller/csr_check.go), a
    /// control-plane machine's Hive's `masterNodeBootstrapperGroups` (openshift/hive, pkg/controller/hibernation,
    /// its CSR helper "copied from cluster-machine-approver with modifications for the hibernation resume case"),
    /// without `system:serviceaccounts`. The machine approver leaves a client request pending past an hour
    /// (`maxPendingDelta`), and its recovery approver acts only for a node whose heartbeat went stale
    /// (`heartbeatStaleAfter`, five minutes): a Ready node's kubelet renews through its own identity.
    #[test]
    fn only_what_this_resume_needs_is_approved() {
        let at = |seconds: i64| Some(began() + TimeDelta::seconds(seconds));
        // Made two hours before the resume began: refused; a minute's clock skew is allowed, not more.
        for (created, approved) in [(at(-7200), false), (at(-61), false), (at(-59), true), (at(3600), true)] {
            let approved_now = matches!(verdict(&Request { created, ..client() }), Verdict::Approve(_));
            assert_eq!(approved_now, approved, "{created:?}");
        }
        let Verdict::Refuse(why) = verdict(&Request { created: at(-7200), ..serving() }) else { panic!("approved") };
        assert!(why.contains("before this resume began at 2026-11-29T09:00:00Z"), "{why}");
        assert!(matches!(verdict(&Request { created: None, ..client() }), Verdict::Refuse(_)));
        let outside = Resuming { nodes: &nodes(), machines: &machines(), began: None };
        assert!(matches!(super::verdict(&client(), outside), Verdict::Refuse(why) if why.contains("outside a resume")));

        // A client request for the node that stayed Ready.
        let ready = "system:node:ip-10-0-1-3.ec2.internal";
        let Verdict::Refuse(why) = verdict(&Request { pem: pem(ready, &[NODES], &[], &[]), ..client() }) else {
            panic!("approved for a Ready node")
        };
        assert!(why.contains("is Ready"), "{why}");

        // The Machine whose InternalDNS is the node's name is another node's.
        let mut taken = machines();
        taken[0].node = Some("ip-10-0-7-7.ec2.internal".into());
        let Verdict::Refuse(why) = verdict_on(&client(), &nodes(), &taken) else { panic!("approved") };
        assert_eq!(why, format!("Machine m-0 (InternalDNS {NODE}) is node ip-10-0-7-7.ec2.internal's"));
        taken[0].node = None;
        assert!(matches!(verdict_on(&client(), &nodes(), &taken), Verdict::Approve(_)), "a Machine with no node yet");

        // Exactly the two group sets: the worker's, and the control plane's without system:serviceaccounts.
        assert_eq!(
            BOOTSTRAPPER_GROUPS[0],
            [
                "system:authenticated",
                "system:serviceaccounts",
                "system:serviceaccounts:openshift-machine-config-operator"
            ]
        );
        assert_eq!(
            BOOTSTRAPPER_GROUPS[1],
            ["system:authenticated", "system:serviceaccounts:openshift-machine-config-operator"]
        );
    }

    #[test]
    fn each_serving_rule_refuses_the_request_that_breaks_it() {
        let cn = format!("system:node:{NODE}");
        for (request, says) in [
            (Request { username: BOOTSTRAPPER.into(), ..serving() }, "not a node"),
            (Request { username: "system:node:".into(), ..serving() }, "not a node"),
            (Request { groups: vec![NODES.into()], ..serving() }, "lack system:nodes or system:authenticated"),
            (
                Request { groups: vec!["system:authenticated".into(), "system:masters".into()], ..serving() },
                "lack system:nodes",
            ),
            (
                Request { usages: vec!["digital signature".into(), "client auth".into()], ..serving() },
                "not a kubelet server's",
            ),
            (
                Request { pem: pem("system:node:ip-10-0-1-3.ec2.internal", &[NODES], &[NODE], &[]), ..serving() },
                "is not the requester",
            ),
            (
                Request { pem: pem(&cn, &["system:masters"], &[NODE], &[]), ..serving() },
                "does not include system:nodes",
            ),
            (
                Request { pem: pem(&cn, &[NODES], &["ip-10-0-1-3.ec2.internal"], &[]), ..serving() },
                "DNS name ip-10-0-1-3.ec2.internal is not among Machine m-0's names",
            ),
            (
                Request { pem: pem(&cn, &[NODES], &[NODE], &["10.0.1.3"]), ..serving() },
                "IP address 10.0.1.3 is not among Machine m-0's addresses",
            ),
            (
                Request {
                    username: "system:node:ip-10-0-9-9.ec2.internal".into(),
                    pem: pem("system:node:ip-10-0-9-9.ec2.internal", &[NODES], &[], &[]),
                    ..serving()
                },
                "no Machine whose node is ip-10-0-9-9.ec2.internal",
            ),
        ] {
            let Verdict::Refuse(why) = verdict(&request) else { panic!("{says}: approved") };
            assert!(why.contains(says), "{says}: {why}");
        }
    }

    #[test]
    fn a_request_that_is_not_a_kubelets_or_cannot_be_read_is_refused_naming_why() {
        let good = client().pem;
        let der = x509_parser::pem::parse_x509_pem(&good).expect("pem").1.contents;
        let mut forged = der.clone();
        let last = forged.len() - 1;
        forged[last] ^= 0x01;
        let wrap = |label: &str, der: &[u8]| {
            use base64::Engine;
            let body = base64::engine::general_purpose::STANDARD.encode(der);
            format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----\n").into_bytes()
        };
        for (request, says) in [
            (Request { signer: "kubernetes.io/kube-apiserver-client".into(), ..client() }, "is not a kubelet's"),
            (Request { pem: b"not a request".to_vec(), ..client() }, "is not PEM"),
            (Request { pem: wrap("CERTIFICATE", &der), ..client() }, "not a CERTIFICATE REQUEST"),
            (Request { pem: wrap("CERTIFICATE REQUEST", &der[..der.len() / 2]), ..client() }, "not a PKCS#10"),
            (Request { pem: wrap("CERTIFICATE REQUEST", &[der.clone(), vec![0]].concat()), ..client() }, "bytes after"),
            (Request { pem: wrap("CERTIFICATE REQUEST", &forged), ..client() }, "not signed by its own key"),
            (Request { pem: vec![b'A'; MAX_REQUEST + 1], ..client() }, "more than 16384"),
        ] {
            let Verdict::Refuse(why) = verdict(&request) else { panic!("{says}: approved") };
            assert!(why.contains(says), "{says}: {why}");
        }
    }
}
