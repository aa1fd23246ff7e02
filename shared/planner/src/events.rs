//! A pool's event trail: what happened to its claims and clusters, and who asked, as Kubernetes events tell a
//! Hive user why a cluster went away.
//!
//! An event is written in the same transaction as the change it tells of, so the trail and the table never
//! disagree: a cluster whose item is gone has its `ClusterRemoved` event, and a cluster marked for deletion its
//! `ClusterDeleting` event with the reason. A cluster's progress ([`EventType::is_progress`]: its install done, a
//! power transition begun, Running, Hibernated) is the exception: the power function appends it alone once the
//! change is written, at half the write units. The trail never tells of a change that did not land; it misses
//! such an event only if the function stops between the two writes.
//!
//! The functions here derive events from what the reconcile does (its [`Action`]s) and from how the power
//! function changes a cluster; the claim API makes its own (who asked for a claim, a release, a power change or a
//! pool change).
//!
//! Each event names its subject (a claim, a cluster or the pool) and that subject's revision as written, so no two
//! events ever share a key: two writes of one item at one revision cannot both land.

use serde::{Deserialize, Serialize};

use crate::model::{find_condition, Cluster, DesiredPower, PowerState, Snapshot, Timestamp};
use crate::plan::{Action, DeleteReason, ReleaseReason};
use crate::{condition, Claim};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    /// A stack admin created the pool.
    PoolCreated,
    /// The pool's spec was changed.
    PoolChanged,
    /// The pool's deletion was asked for: its clusters are deprovisioned, then it is gone.
    PoolDeletionRequested,
    /// Nothing of the pool is left: its item is deleted.
    PoolDeleted,
    /// A claim was made.
    ClaimCreated,
    /// A claim got a cluster.
    ClaimAssigned,
    /// A claim's release was asked for.
    ClaimReleaseRequested,
    /// Its owner, a subject or an admin changed a claim's lifetime or its subjects (the message says what).
    ClaimChanged,
    /// A claim is gone; its cluster, if any, is deleted (the message says why: released, expired, pool deleted).
    ClaimReleased,
    /// A claimant asked its cluster to hibernate or resume.
    PowerRequested,
    /// A cluster was created: its install begins.
    ClusterCreated,
    /// A provisioning attempt failed (it is tried again within the pool's limit).
    InstallFailed,
    /// A cluster's install completed.
    ClusterInstalled,
    /// A power transition began (the message says to which state).
    PowerTransitionStarted,
    /// A resuming cluster's node certificate requests were approved (seed 004; the message names them).
    NodeCertificatesApproved,
    /// A resuming cluster's certificate requests were left pending: they failed a rule (the message names each
    /// and the rule); each is told once.
    NodeCertificatesLeftPending,
    /// A cluster's machines all run and it is ready.
    ClusterRunning,
    /// A cluster's machines are stopped.
    ClusterHibernated,
    /// An admin paused power management of a cluster.
    ClusterPaused,
    /// An admin unpaused it.
    ClusterUnpaused,
    /// A cluster broke: its install gave up or a power transition timed out (the message says which and why).
    ClusterBroken,
    /// A cluster is being deprovisioned (the message says why).
    ClusterDeleting,
    /// A cluster's machines are gone and its item deleted.
    ClusterRemoved,
    /// A notification reached one of the pool's `notify` webhooks (the message says which, and its answer).
    NotificationDelivered,
    /// An attempt to deliver a notification failed; it is made again later (the message says why and when).
    NotificationFailed,
    /// The last attempt to deliver a notification failed: the entry keeps the notification whole, its
    /// dead-letter record.
    NotificationDeadLettered,
}

impl EventType {
    /// Whether it tells of a cluster's progress through its install or a power transition (its install done, a
    /// transition begun, Running, Hibernated): the power function writes these after the change they tell of, not
    /// in its transaction, which would bill the cluster's item twice. Everything a caller did, every failure and
    /// every end is told in the change's own transaction.
    pub fn is_progress(self) -> bool {
        matches!(
            self,
            EventType::ClusterInstalled
                | EventType::PowerTransitionStarted
                | EventType::ClusterRunning
                | EventType::ClusterHibernated
                | EventType::NodeCertificatesApproved
                | EventType::NodeCertificatesLeftPending
        )
    }

    /// The type's name, as the API shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::PoolCreated => "PoolCreated",
            EventType::PoolChanged => "PoolChanged",
            EventType::PoolDeletionRequested => "PoolDeletionRequested",
            EventType::PoolDeleted => "PoolDeleted",
            EventType::ClaimCreated => "ClaimCreated",
            EventType::ClaimAssigned => "ClaimAssigned",
            EventType::ClaimReleaseRequested => "ClaimReleaseRequested",
            EventType::ClaimChanged => "ClaimChanged",
            EventType::ClaimReleased => "ClaimReleased",
            EventType::PowerRequested => "PowerRequested",
            EventType::ClusterCreated => "ClusterCreated",
            EventType::InstallFailed => "InstallFailed",
            EventType::ClusterInstalled => "ClusterInstalled",
            EventType::PowerTransitionStarted => "PowerTransitionStarted",
            EventType::NodeCertificatesApproved => "NodeCertificatesApproved",
            EventType::NodeCertificatesLeftPending => "NodeCertificatesLeftPending",
            EventType::ClusterRunning => "ClusterRunning",
            EventType::ClusterHibernated => "ClusterHibernated",
            EventType::ClusterPaused => "ClusterPaused",
            EventType::ClusterUnpaused => "ClusterUnpaused",
            EventType::ClusterBroken => "ClusterBroken",
            EventType::ClusterDeleting => "ClusterDeleting",
            EventType::ClusterRemoved => "ClusterRemoved",
            EventType::NotificationDelivered => "NotificationDelivered",
            EventType::NotificationFailed => "NotificationFailed",
            EventType::NotificationDeadLettered => "NotificationDeadLettered",
        }
    }
}

/// One entry of a pool's trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// When it happened.
    pub time: Timestamp,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The caller who caused it, when a caller did (the claim API's requests); absent for what Apiary did itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The claim it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// The cluster it concerns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Why, or what more there is to say, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The revision the change writes (or deletes) of the item the event tells of: with its claim, cluster and
    /// type it makes the event's key unique, since two writes of one item at one revision cannot both land (and
    /// an event told after its change is appended only once the change landed).
    pub rev: u64,
    /// What the pool's `notify` webhooks are told of it, when one hears its kind (`crate::notify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Box<crate::model::notice::Notice>>,
    /// For an attempt to deliver a notification: whose, to which hook, which attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<crate::model::notice::Delivery>,
}

/// The longest message an event keeps; longer ones are cut (on a character boundary) and end with `…`.
pub const MAX_MESSAGE: usize = 512;

impl Event {
    /// An event of `kind` at `time` about the subject at revision `rev`, with nothing else said.
    pub fn new(kind: EventType, time: Timestamp, rev: u64) -> Self {
        Self {
            time,
            kind,
            principal: None,
            claim: None,
            cluster: None,
            message: None,
            rev,
            notice: None,
            delivery: None,
        }
    }

    /// Caused by `principal`.
    pub fn by(mut self, principal: impl Into<String>) -> Self {
        self.principal = Some(principal.into());
        self
    }

    /// About claim `name`.
    pub fn claim(mut self, name: impl Into<String>) -> Self {
        self.claim = Some(name.into());
        self
    }

    /// About cluster `id`.
    pub fn cluster(mut self, id: impl Into<String>) -> Self {
        self.cluster = Some(id.into());
        self
    }

    /// Saying `message` (at most [`MAX_MESSAGE`] bytes kept).
    pub fn saying(mut self, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE - '…'.len_utf8();
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        self.message = Some(message);
        self
    }

    /// What the event is about: `<claim>/<cluster>`, `-` for either it does not name.
    pub fn subject(&self) -> String {
        format!("{}/{}", self.claim.as_deref().unwrap_or("-"), self.cluster.as_deref().unwrap_or("-"))
    }
}

/// The trail's `PoolCreated` or `PoolChanged` for `after`, written by `principal` at `now` over `before` (`None`:
/// created). A change names the spec's fields it changed.
pub fn pool_written(before: Option<&crate::PoolSpec>, after: &crate::Pool, principal: &str, now: Timestamp) -> Event {
    let Some(before) = before else {
        return Event::new(EventType::PoolCreated, now, after.rev).by(principal);
    };
    let fields = |spec: &crate::PoolSpec| match serde_json::to_value(spec) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    let (old, new) = (fields(before), fields(&after.spec));
    let mut changed: Vec<&str> = new.iter().filter(|(k, v)| old.get(*k) != Some(*v)).map(|(k, _)| k.as_str()).collect();
    changed.extend(old.keys().filter(|k| !new.contains_key(*k)).map(String::as_str));
    changed.sort_unstable();
    Event::new(EventType::PoolChanged, now, after.rev).by(principal).saying(format!("changed {}", changed.join(", ")))
}

/// What the reconcile's `action` on `before` (the snapshot it was planned from, not yet changed by it) tells the
/// trail, at `now`.
pub fn of_action(before: &Snapshot, action: &Action, now: Timestamp) -> Vec<Event> {
    let cluster = |id: &str| before.clusters.iter().find(|c| c.id == id);
    match action {
        Action::ReleaseClaim { claim, expected_rev, cluster: held, reason } => {
            let why = match reason {
                ReleaseReason::Released => "released by its claimant".to_owned(),
                ReleaseReason::Expired => {
                    let lifetime = before.claims.iter().find(|c| &c.name == claim).and_then(|c| c.lifetime.clone());
                    match lifetime {
                        Some(l) => format!("its lifetime of {} ran out", l.text()),
                        None => "its lifetime ran out".to_owned(),
                    }
                }
                ReleaseReason::PoolDeleted => "the pool is being deleted".to_owned(),
            };
            // Its cluster, marked for deletion, is deleted by the next plan's `DeleteCluster`, which says so.
            let e = Event::new(EventType::ClaimReleased, now, *expected_rev).claim(claim).saying(why);
            vec![match held {
                Some((id, _)) => e.cluster(id),
                None => e,
            }]
        }
        Action::AssignClaim { claim, claim_rev, cluster: id, at, .. } => {
            vec![Event::new(EventType::ClaimAssigned, *at, claim_rev + 1).claim(claim).cluster(id)]
        }
        Action::CreateCluster { cluster: c } => {
            let e = Event::new(EventType::ClusterCreated, c.created_at, c.rev).cluster(&c.id);
            let named = (c.cluster_name != c.id).then(|| format!("named {} from the inventory", c.cluster_name));
            vec![match named {
                Some(n) => e.saying(n),
                None => e,
            }]
        }
        Action::DeleteCluster { cluster: id, expected_rev, reason, at } => {
            let why = match reason {
                DeleteReason::Released => "its claim was released".to_owned(),
                DeleteReason::Broken => match cluster(id) {
                    Some(c) => format!("broken ({}), to be replaced", broken_why(c)),
                    None => "broken, to be replaced".to_owned(),
                },
                DeleteReason::Excess => "the pool has more clusters than it needs".to_owned(),
                DeleteReason::Stale => stale_why(cluster(id), before.pool.spec.release.as_deref()),
                DeleteReason::InventoryNameRemoved => "its inventory name was removed".to_owned(),
                DeleteReason::InventoryEntryChanged => {
                    "its inventory entry's parameters changed, to be made again with them".to_owned()
                }
                DeleteReason::PoolDeleted => "the pool is being deleted".to_owned(),
            };
            vec![Event::new(EventType::ClusterDeleting, *at, expected_rev + 1).cluster(id).saying(why)]
        }
        Action::DeletePool { expected_rev } => vec![Event::new(EventType::PoolDeleted, now, *expected_rev)],
        Action::ReserveName { .. }
        | Action::ReleaseName { .. }
        | Action::SetPowerState { .. }
        | Action::Deprovision { .. }
        | Action::CheckPower { .. }
        | Action::UpdatePool { .. } => vec![],
    }
}

/// What a change of a cluster from `before` to `after` (as written, at its new revision; `None`: its item is
/// deleted) tells the trail, at `now`.
pub fn of_cluster(before: &Cluster, after: Option<&Cluster>, now: Timestamp) -> Vec<Event> {
    let Some(after) = after else {
        return vec![Event::new(EventType::ClusterRemoved, now, before.rev)
            .cluster(&before.id)
            .saying("its machines are gone and its item deleted")];
    };
    let at = |kind| Event::new(kind, now, after.rev).cluster(&after.id);
    let mut out = vec![];
    if after.install_failures > before.install_failures {
        let why = find_condition(&after.conditions, condition::PROVISION_FAILED).map(|c| c.message.clone());
        let e = at(EventType::InstallFailed);
        out.push(match why.filter(|m| !m.is_empty()) {
            Some(m) => e.saying(format!("attempt {}: {m}", after.install_failures)),
            None => e.saying(format!("attempt {} failed", after.install_failures)),
        });
    }
    if before.installed_at.is_none() && after.installed_at.is_some() {
        out.push(at(EventType::ClusterInstalled));
    }
    if before.transition_started_at.is_none() && after.transition_started_at.is_some() {
        let to = match after.spec_power_state {
            Some(DesiredPower::Hibernating) => "to Hibernating",
            _ => "to Running",
        };
        out.push(at(EventType::PowerTransitionStarted).saying(to));
    }
    if after.power_state != before.power_state {
        match after.power_state {
            Some(PowerState::Running) => {
                let took =
                    after.last_resume_seconds.filter(|_| after.last_resume_seconds != before.last_resume_seconds);
                let e = at(EventType::ClusterRunning);
                let approved = crate::power::certificates::approved_in_resume(after)
                    .map(|n| format!(", {n} node certificate request{} approved", if n == 1 { "" } else { "s" }))
                    .unwrap_or_default();
                out.push(match took {
                    Some(s) => e.saying(format!("resumed in {s}s{approved}")),
                    None => e,
                });
            }
            Some(PowerState::Hibernating) => out.push(at(EventType::ClusterHibernated)),
            _ => {}
        }
    }
    out.extend(certificates(before, after).into_iter().map(|(kind, message)| at(kind).saying(message)));
    if !before.is_broken() && after.is_broken() {
        // A claimed cluster's break is in its claim's story too (and what its pool's hooks are told names it).
        let e = at(EventType::ClusterBroken).saying(broken_why(after));
        out.push(match &after.claim {
            Some(claim) => e.claim(claim),
            None => e,
        });
    }
    out
}

/// What a look at `after`'s certificate requests did since `before`: the requests it approved, and those it left
/// pending that `before` had not told of.
fn certificates(before: &Cluster, after: &Cluster) -> Vec<(EventType, String)> {
    let Some(now) = &after.node_certificates else { return vec![] };
    let then = before.node_certificates.as_ref();
    let mut out = vec![];
    let approved_then = then.map_or(0, |t| t.approved);
    if now.approved > approved_then {
        let n = now.approved - approved_then;
        out.push((EventType::NodeCertificatesApproved, format!("approved {n}: {}", now.last_approved.join(", "))));
    }
    let new: Vec<&str> = now
        .refused
        .iter()
        .filter(|r| r.split_once(": ").is_none_or(|(name, _)| !then.is_some_and(|t| t.refused_already(name))))
        .map(String::as_str)
        .collect();
    if !new.is_empty() {
        out.push((EventType::NodeCertificatesLeftPending, format!("left pending: {}", new.join("; "))));
    }
    out
}

/// Why a stale cluster goes: the release it was made from when the pool's is another, else an older spec.
fn stale_why(c: Option<&Cluster>, release: Option<&str>) -> String {
    let of = |r: Option<&str>| r.map_or_else(|| "the installer's own".to_owned(), str::to_owned);
    match c.map(|c| c.release.as_deref()) {
        Some(was) if was != release => {
            format!("made from release {}, the pool's is now {}: to be replaced", of(was), of(release))
        }
        _ => "made from an older version of the pool's spec, to be replaced".to_owned(),
    }
}

/// Why a broken cluster is broken: its condition's reason and message.
fn broken_why(c: &Cluster) -> String {
    let reason = c.broken_reason().unwrap_or("Broken");
    let type_ = if c.provision_stopped { condition::PROVISION_STOPPED } else { condition::HIBERNATING };
    match find_condition(&c.conditions, type_).map(|k| k.message.as_str()).filter(|m| !m.is_empty()) {
        Some(message) => format!("{reason}: {message}"),
        None => reason.to_owned(),
    }
}

/// The trail's `ClaimCreated` for `claim`, made by its owner.
pub fn claim_created(claim: &Claim) -> Event {
    let e = Event::new(EventType::ClaimCreated, claim.created_at, claim.rev).by(&claim.owner).claim(&claim.name);
    match &claim.lifetime {
        Some(l) => e.saying(format!("lifetime {}", l.text())),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ConditionStatus, Platform, PoolSpec};
    use crate::{set_condition, FakePlatform, Pool};

    fn at(s: i64) -> Timestamp {
        chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    fn snapshot(clusters: Vec<Cluster>, claims: Vec<Claim>) -> Snapshot {
        let spec = PoolSpec::new(2, Platform::Fake(FakePlatform::default()));
        let pool = Pool { rev: 1, ..Pool::new("ci", spec, at(0)) };
        Snapshot { pool, clusters, claims, leases: vec![] }
    }

    #[test]
    fn a_broken_clusters_deletion_says_why_it_broke() {
        let mut c = Cluster::new("ci-1", "ci-1", "ci-1-x", at(0));
        c.broken_at = Some(at(60));
        set_condition(
            &mut c.conditions,
            condition::HIBERNATING,
            ConditionStatus::False,
            "FailedToStart",
            "machines did not start within 15m",
            at(60),
        );
        c.rev = 4;
        let snap = snapshot(vec![c], vec![]);
        let action =
            Action::DeleteCluster { cluster: "ci-1".into(), expected_rev: 4, reason: DeleteReason::Broken, at: at(61) };
        let events = of_action(&snap, &action, at(61));
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(
            (e.kind, e.cluster.as_deref(), e.rev, e.time),
            (EventType::ClusterDeleting, Some("ci-1"), 5, at(61))
        );
        let message = e.message.as_deref().unwrap_or_default();
        assert!(message.contains("FailedToStart") && message.contains("did not start within 15m"), "{message}");
    }

    #[test]
    fn a_released_claim_tells_why_and_names_its_cluster() {
        let mut claim = Claim::new("job", "arn:aws:iam::123456789012:user/alice", at(0));
        claim.lifetime = Some(crate::GoDuration::new("2h"));
        claim.rev = 3;
        let snap = snapshot(vec![], vec![claim]);
        let action = Action::ReleaseClaim {
            claim: "job".into(),
            expected_rev: 3,
            cluster: Some(("ci-1".into(), 7)),
            reason: ReleaseReason::Expired,
        };
        let events = of_action(&snap, &action, at(7200));
        let kinds: Vec<_> = events.iter().map(|e| (e.kind, e.subject(), e.rev)).collect();
        assert_eq!(kinds, vec![(EventType::ClaimReleased, "job/ci-1".into(), 3)]);
        assert_eq!(events[0].message.as_deref(), Some("its lifetime of 2h ran out"));
    }

    #[test]
    fn a_clusters_changes_tell_of_its_install_its_transitions_and_its_breaking() {
        let mut before = Cluster::new("ci-1", "ci-1", "ci-1-x", at(0));
        let mut after = before.clone();
        after.rev = 1;
        after.installed_at = Some(at(600));
        after.power_state = Some(PowerState::Running);
        let kinds =
            |b: &Cluster, a: &Cluster| of_cluster(b, Some(a), at(600)).iter().map(|e| e.kind).collect::<Vec<_>>();
        assert_eq!(kinds(&before, &after), vec![EventType::ClusterInstalled, EventType::ClusterRunning]);
        // A look that changes nothing the trail tells of (a re-check's bookkeeping) adds nothing.
        before = after.clone();
        after.rev = 2;
        after.retry_at = Some(at(700));
        assert!(kinds(&before, &after).is_empty());
        // A hibernation begins, then times out: broken, with the reason.
        before = after.clone();
        after.rev = 3;
        after.spec_power_state = Some(DesiredPower::Hibernating);
        after.transition_started_at = Some(at(800));
        after.power_state = Some(PowerState::Stopping);
        assert_eq!(kinds(&before, &after), vec![EventType::PowerTransitionStarted]);
        assert_eq!(of_cluster(&before, Some(&after), at(800))[0].message.as_deref(), Some("to Hibernating"));
        before = after.clone();
        after.rev = 4;
        after.broken_at = Some(at(1800));
        after.power_state = Some(PowerState::FailedToStop);
        set_condition(
            &mut after.conditions,
            condition::HIBERNATING,
            ConditionStatus::False,
            "FailedToStop",
            "",
            at(1800),
        );
        let events = of_cluster(&before, Some(&after), at(1800));
        assert_eq!(events.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![EventType::ClusterBroken]);
        assert_eq!(events[0].message.as_deref(), Some("FailedToStop"));
        // Its item deleted: removed, at the revision it was deleted at.
        let gone = of_cluster(&after, None, at(2000));
        assert_eq!((gone[0].kind, gone[0].rev), (EventType::ClusterRemoved, 4));
        // Progress is told after its change; a failure and an end with it.
        assert!(events.iter().chain(&gone).all(|e| !e.kind.is_progress()));
    }

    #[test]
    fn only_a_clusters_progress_is_told_after_its_change() {
        let progress = [
            EventType::ClusterInstalled,
            EventType::PowerTransitionStarted,
            EventType::ClusterRunning,
            EventType::ClusterHibernated,
        ];
        let rest = [
            EventType::PoolCreated,
            EventType::PoolChanged,
            EventType::PoolDeletionRequested,
            EventType::PoolDeleted,
            EventType::ClaimCreated,
            EventType::ClaimAssigned,
            EventType::ClaimReleaseRequested,
            EventType::ClaimChanged,
            EventType::ClaimReleased,
            EventType::PowerRequested,
            EventType::ClusterCreated,
            EventType::InstallFailed,
            EventType::ClusterPaused,
            EventType::ClusterUnpaused,
            EventType::ClusterBroken,
            EventType::ClusterDeleting,
            EventType::ClusterRemoved,
        ];
        assert!(progress.iter().all(|k| k.is_progress()));
        assert!(rest.iter().all(|k| !k.is_progress()), "every end, failure and caller's act goes with its change");
    }

    #[test]
    fn a_pool_change_names_the_fields_it_changed() {
        let snap = snapshot(vec![], vec![]);
        let mut after = snap.pool.clone();
        after.spec.size = 5;
        after.spec.running_count = 2;
        after.rev = 2;
        let e = pool_written(Some(&snap.pool.spec), &after, "arn:aws:iam::123456789012:user/ann", at(9));
        assert_eq!((e.kind, e.rev, e.time), (EventType::PoolChanged, 2, at(9)));
        assert_eq!(e.principal.as_deref(), Some("arn:aws:iam::123456789012:user/ann"));
        assert_eq!(e.message.as_deref(), Some("changed runningCount, size"));
        let created = pool_written(None, &snap.pool, "arn:aws:iam::123456789012:user/admin", at(0));
        assert_eq!((created.kind, created.message), (EventType::PoolCreated, None));
    }

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let e = Event::new(EventType::ClusterBroken, at(0), 1).saying("é".repeat(400));
        let m = e.message.expect("message");
        assert!(m.len() <= MAX_MESSAGE && m.ends_with('…'), "{}", m.len());
    }

    #[test]
    fn every_type_is_named_as_it_is_serialized() {
        for kind in
            [EventType::PoolCreated, EventType::ClaimReleased, EventType::ClusterRemoved, EventType::InstallFailed]
        {
            assert_eq!(serde_json::to_value(kind).expect("json"), serde_json::json!(kind.as_str()));
        }
    }
}
