//! What a pool's `notify` webhooks are and what a notification carries in the trail ([`crate::notify`] says when
//! they are told and what).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// What a notification tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NoticeKind {
    /// A claim got its cluster.
    #[serde(rename = "claim.assigned")]
    ClaimAssigned,
    /// A claim ended: its claimant (or a subject, or an admin) gave it back, or its pool was deleted.
    #[serde(rename = "claim.released")]
    ClaimReleased,
    /// A claim ended because its lifetime ran out.
    #[serde(rename = "claim.expired")]
    ClaimExpired,
    /// A cluster broke: its install gave up or a power transition timed out (it is replaced).
    #[serde(rename = "cluster.broken")]
    ClusterBroken,
}

impl NoticeKind {
    /// Every kind, as a hook that names none hears them.
    pub const ALL: [NoticeKind; 4] =
        [NoticeKind::ClaimAssigned, NoticeKind::ClaimReleased, NoticeKind::ClaimExpired, NoticeKind::ClusterBroken];

    /// The kind's name, as the notification's `type` and a hook's `events` say it.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::ClaimAssigned => "claim.assigned",
            NoticeKind::ClaimReleased => "claim.released",
            NoticeKind::ClaimExpired => "claim.expired",
            NoticeKind::ClusterBroken => "cluster.broken",
        }
    }
}

/// One of a pool's `notify` webhooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NotifyHook {
    /// Where notifications are posted: `https://…`, as the stack's URL policy allows.
    pub url: String,
    /// ARN of the Secrets Manager secret holding the signing key (`whsec_<base64>`), tagged for the pool as every
    /// secret a pool names is.
    pub secret: String,
    /// The kinds it hears; none named: every kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<NoticeKind>,
}

impl NotifyHook {
    /// Whether the hook hears `kind`.
    pub fn wants(&self, kind: NoticeKind) -> bool {
        self.events.is_empty() || self.events.contains(&kind)
    }
}

/// How many hooks a pool may name.
pub const MAX_HOOKS: usize = 4;

/// What a notification says beyond its event, captured when the event is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// What it tells.
    pub kind: NoticeKind,
    /// The claim's owner, when the event is about a claim the pool still knew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Who else may use the claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// The cluster's outputs (API and console URLs, its kubeconfig's secret ARN, …; never a secret itself).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// The cluster's name (an inventory name, or its id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// When the claim ends unless it is extended or released first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

/// A trail entry's account of one attempt to deliver a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// The sort key of the event whose notification it is (the `webhook-id` it was sent with).
    pub of: String,
    /// Which of the pool's hooks (its place in `notify`).
    pub hook: u8,
    /// Which attempt, from 1.
    pub attempt: u8,
}
