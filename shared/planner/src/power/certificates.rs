//! Seed 004's certificate requests: a node whose certificates expired while its cluster was hibernated asks for
//! new ones on resume, and stays NotReady until they are approved. The pool's readiness check approves the
//! requests a node may make ([`CertificateLook`]); what it did is kept on the cluster for the resume
//! ([`NodeCertificates`]), said in its conditions and told once to the pool's trail
//! ([`crate::events::of_cluster`]).

use serde::{Deserialize, Serialize};

use crate::model::{condition, Cluster, ConditionStatus, PowerState};

/// Requests named at most on a cluster (approved at its last look, or left pending): its item stays small.
pub const MAX_NAMED: usize = 16;
/// Requests left pending remembered past the named ones, by a 32-bit hash of their names: each told once.
pub const MAX_HASHED: usize = 240;

/// What one look at a resuming cluster's pending certificate requests did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateLook {
    /// The requests approved, each as `name (what it is for)`.
    pub approved: Vec<String>,
    /// The requests left pending, each with the rule it failed.
    pub refused: Vec<Refusal>,
}

/// A request left pending, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The request's name.
    pub name: String,
    /// The rule it failed, in a sentence.
    pub why: String,
}

impl CertificateLook {
    /// Whether the look approved or refused nothing.
    pub fn is_empty(&self) -> bool {
        self.approved.is_empty() && self.refused.is_empty()
    }
}

/// What the readiness check did with a cluster's certificate requests since its resume began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCertificates {
    /// Requests approved since the resume began.
    #[serde(default)]
    pub approved: u32,
    /// Those approved at the last look that approved any (at most [`MAX_NAMED`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_approved: Vec<String>,
    /// Requests left pending, each `name: why`, in the order found (at most [`MAX_NAMED`]): each is told once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// Requests left pending past the named ones, said once each: their names' hashes (at most
    /// [`MAX_HASHED`]). Stored as `told`, the name the releases before this one read.
    #[serde(default, rename = "told", skip_serializing_if = "Vec::is_empty")]
    pub refused_hashes: Vec<u32>,
    /// More requests were left pending than are named and remembered: said once, then no longer told.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more: bool,
}

impl NodeCertificates {
    /// Whether request `name` was left pending already (and told).
    pub fn refused_already(&self, name: &str) -> bool {
        self.refused.iter().any(|r| r.split_once(": ").is_some_and(|(n, _)| n == name))
            || self.refused_hashes.contains(&hash(name))
    }
}

/// The name of the one refusal that tells of the requests left pending past those remembered.
pub const MORE: &str = "more";

/// A request's name as [`NodeCertificates::refused_hashes`] keeps it: 32-bit FNV-1a (a collision only leaves one untold).
fn hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// What a look's refusals are to `kept`: those to name, those to remember by hash, and whether the ones past both
/// are to be said (once: when `kept` has not said them).
fn triage<'a>(
    kept: Option<&NodeCertificates>,
    look: &'a CertificateLook,
) -> (Vec<&'a Refusal>, Vec<&'a Refusal>, bool) {
    let (mut named, mut hashed, mut more) = (vec![], vec![], false);
    let (mut names, mut hashes) = kept.map_or((0, 0), |k| (k.refused.len(), k.refused_hashes.len()));
    let mut seen = std::collections::BTreeSet::new();
    for r in &look.refused {
        if kept.is_some_and(|k| k.refused_already(&r.name)) || !seen.insert(r.name.as_str()) {
            continue;
        }
        if names < MAX_NAMED {
            named.push(r);
            names += 1;
        } else if hashes < MAX_HASHED {
            hashed.push(r);
            hashes += 1;
        } else {
            more = !kept.is_some_and(|k| k.more);
        }
    }
    (named, hashed, more)
}

/// The requests `look` left pending that `c`'s resume had not told of before: what is told, counted and logged of
/// a look (a hostile request is found again at every look of the resume). Past the [`MAX_NAMED`] named and
/// [`MAX_HASHED`] remembered, the rest is one refusal named [`MORE`], once.
pub fn new_refusals(c: &Cluster, look: &CertificateLook) -> Vec<Refusal> {
    let (named, hashed, more) = triage(c.node_certificates.as_ref(), look);
    let mut out: Vec<Refusal> = named.into_iter().chain(hashed).cloned().collect();
    if more {
        let why =
            format!("more than {} requests left pending in this resume: the rest are not told", MAX_NAMED + MAX_HASHED);
        out.push(Refusal { name: MORE.to_owned(), why });
    }
    out
}

/// Keeps what `look` did on `c`, stepped just before from the same look: approvals counted, requests left pending
/// named once, and, while it waits for its nodes, its Ready condition's message prefixed with the counts so far
/// (at every look of the resume once there is something to count). Whether `c` changed.
pub fn note(c: &mut Cluster, look: &CertificateLook) -> bool {
    if look.is_empty() && c.node_certificates.is_none() {
        return false;
    }
    let mut kept = c.node_certificates.clone().unwrap_or_default();
    if !look.approved.is_empty() {
        kept.approved = kept.approved.saturating_add(u32::try_from(look.approved.len()).unwrap_or(u32::MAX));
        kept.last_approved = look.approved.iter().take(MAX_NAMED).cloned().collect();
    }
    let (named, hashed, more) = triage(c.node_certificates.as_ref(), look);
    kept.refused.extend(named.iter().map(|r| format!("{}: {}", r.name, r.why)));
    kept.refused_hashes.extend(hashed.iter().map(|r| hash(&r.name)));
    kept.more |= more;
    let before = c.clone();
    if c.power_state == Some(PowerState::WaitingForNodes) && (kept.approved > 0 || !kept.refused.is_empty()) {
        let summary = summary(&kept);
        if let Some(ready) = c.conditions.iter_mut().find(|k| k.type_ == condition::READY) {
            if ready.status != ConditionStatus::True && !ready.message.starts_with(&summary) {
                ready.message = format!("{summary}; {}", ready.message).trim_end_matches("; ").to_owned();
            }
        }
    }
    c.node_certificates = Some(kept);
    *c != before
}

/// `N node certificate requests approved, M left pending`, as the cluster's condition says it.
fn summary(kept: &NodeCertificates) -> String {
    let mut out = format!(
        "{} node certificate request{} approved since the resume began",
        kept.approved,
        if kept.approved == 1 { "" } else { "s" }
    );
    if !kept.refused.is_empty() {
        let pending = kept.refused.len() + kept.refused_hashes.len();
        out.push_str(&format!(", {pending}{} left pending", if kept.more { "+" } else { "" }));
    }
    out
}

/// How many requests were approved in `c`'s last resume, if any were.
pub fn approved_in_resume(c: &Cluster) -> Option<u32> {
    c.node_certificates.as_ref().map(|n| n.approved).filter(|n| *n > 0)
}
