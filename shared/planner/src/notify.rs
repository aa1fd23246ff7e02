//! Claim notifications: a pool's `notify` webhooks hear when a claim gets its cluster, when it ends (given back
//! or expired) and when a cluster breaks, as Hive users learn it from controllers watching ClusterClaims.
//!
//! What a notification says is captured when the event it tells of is written ([`Notice`], on the trail's event),
//! since a released claim's item is gone by the time it is delivered. The power function posts it to each hook
//! that wants it, signed as the installer webhook's requests are (Standard Webhooks; the event's key is the
//! `webhook-id`, so a receiver drops what it already has), and tries again after [`RETRIES`]: a delivery's every
//! attempt is an entry of the trail ([`Delivery`]), and the last one failed leaves the notification there whole,
//! its dead-letter record. Nothing a claim waits on ever waits on a receiver.

use chrono::TimeDelta;
use serde_json::{json, Value};

use crate::events::{Event, EventType};
pub use crate::model::notice::{Delivery, Notice, NoticeKind, NotifyHook, MAX_HOOKS};
use crate::model::{Claim, Cluster, Snapshot};
use crate::plan::{Action, ReleaseReason};
use crate::PoolSpec;

/// How long after each failed attempt the next is made: a receiver down for an hour and a half still gets it.
/// After the last, the notification is dead-lettered.
pub const RETRIES: [TimeDelta; 5] =
    [TimeDelta::seconds(10), TimeDelta::minutes(1), TimeDelta::minutes(5), TimeDelta::minutes(15), TimeDelta::hours(1)];

/// How many attempts a notification gets in all.
pub const ATTEMPTS: u8 = RETRIES.len() as u8 + 1;

/// When to try again after attempt `attempt` (from 1) failed; `None` once it was the last.
pub fn retry_after(attempt: u8) -> Option<TimeDelta> {
    RETRIES.get(usize::from(attempt.max(1)) - 1).copied()
}

/// The notification kind `event` tells of, if a pool's hooks hear of it.
pub fn kind_of(event: &Event) -> Option<NoticeKind> {
    event.notice.as_ref().map(|n| n.kind)
}

/// The indices of the hooks of `spec` that hear `kind`.
pub fn hearers(spec: &PoolSpec, kind: NoticeKind) -> Vec<u8> {
    (0u8..).zip(&spec.notify).filter(|(_, h)| h.wants(kind)).map(|(i, _)| i).collect()
}

/// `event` with the notice of `kind`, when a hook of `spec` hears it: what `claim` and `cluster` (as the pool knew
/// them before the change) say, and when the claim ends.
pub fn with_notice(
    spec: &PoolSpec,
    event: Event,
    kind: NoticeKind,
    claim: Option<&Claim>,
    cluster: Option<&Cluster>,
) -> Event {
    if hearers(spec, kind).is_empty() {
        return event;
    }
    let expires_at =
        claim.filter(|_| kind == NoticeKind::ClaimAssigned).and_then(|c| c.expires_at(spec.claim_lifetime.as_ref()));
    let notice = Notice {
        kind,
        owner: claim.map(|c| c.owner.clone()),
        subjects: claim.map(|c| c.subjects.clone()).unwrap_or_default(),
        outputs: cluster.map(|c| c.outputs.clone()).unwrap_or_default(),
        cluster_name: cluster.map(|c| c.cluster_name.clone()),
        expires_at,
    };
    Event { notice: Some(Box::new(notice)), ..event }
}

/// `events`, which the reconcile's `action` on `before` (the snapshot it was planned from) tells the trail
/// ([`crate::events::of_action`]), each with the notice its kind calls for when a hook of the pool hears it: a
/// claim's assignment, or its end (an expiry when its lifetime ran out).
pub fn of_action(before: &Snapshot, action: &Action, events: Vec<Event>) -> Vec<Event> {
    let (kind, claim, cluster) = match action {
        Action::AssignClaim { claim, cluster, .. } => (NoticeKind::ClaimAssigned, claim, Some(cluster)),
        Action::ReleaseClaim { claim, cluster, reason, .. } => {
            let kind = match reason {
                ReleaseReason::Expired => NoticeKind::ClaimExpired,
                ReleaseReason::Released | ReleaseReason::PoolDeleted => NoticeKind::ClaimReleased,
            };
            (kind, claim, cluster.as_ref().map(|(id, _)| id))
        }
        _ => return events,
    };
    let claim = before.claims.iter().find(|c| &c.name == claim);
    let cluster = cluster.and_then(|id| before.clusters.iter().find(|c| &c.id == id));
    let notifies = |e: &Event| matches!(e.kind, EventType::ClaimAssigned | EventType::ClaimReleased);
    events
        .into_iter()
        .map(|e| if notifies(&e) { with_notice(&before.pool.spec, e, kind, claim, cluster) } else { e })
        .collect()
}

/// The notification's body, as Standard Webhooks shapes it: its `type`, its `timestamp` (the event's time) and
/// its `data` (the pool, the claim, the cluster, who holds it and its outputs, and why, for an ending).
pub fn body(pool: &str, event: &Event) -> Option<Value> {
    let notice = event.notice.as_ref()?;
    let mut data = serde_json::Map::new();
    data.insert("pool".into(), json!(pool));
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(v) = value {
            data.insert(key.into(), v);
        }
    };
    put("claim", event.claim.as_ref().map(|c| json!(c)));
    put("cluster", event.cluster.as_ref().map(|c| json!(c)));
    put("clusterName", notice.cluster_name.as_ref().map(|c| json!(c)));
    put("owner", notice.owner.as_ref().map(|o| json!(o)));
    put("subjects", Some(json!(notice.subjects)));
    put("outputs", Some(json!(notice.outputs)));
    put("expiresAt", notice.expires_at.map(|t| json!(t)));
    put("reason", event.message.as_ref().filter(|_| notice.kind != NoticeKind::ClaimAssigned).map(|m| json!(m)));
    Some(json!({
        "type": notice.kind.as_str(),
        "timestamp": event.time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FakePlatform, Platform, Timestamp};

    fn at(s: i64) -> Timestamp {
        chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    fn spec(hooks: Vec<NotifyHook>) -> PoolSpec {
        PoolSpec { notify: hooks, ..PoolSpec::new(1, Platform::Fake(FakePlatform::default())) }
    }

    fn hook(events: &[NoticeKind]) -> NotifyHook {
        NotifyHook {
            url: "https://hooks.example.com/apiary".into(),
            secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook".into(),
            events: events.to_vec(),
        }
    }

    #[test]
    fn a_hook_hears_what_it_names_and_every_kind_when_it_names_none() {
        let s = spec(vec![hook(&[NoticeKind::ClusterBroken]), hook(&[])]);
        assert_eq!(hearers(&s, NoticeKind::ClaimAssigned), [1]);
        assert_eq!(hearers(&s, NoticeKind::ClusterBroken), [0, 1]);
        assert!(hearers(&spec(vec![]), NoticeKind::ClaimAssigned).is_empty());
    }

    #[test]
    fn an_assignment_carries_its_claim_and_cluster_and_only_when_a_hook_hears_it() {
        let mut claim = Claim::new("job-1", "arn:aws:iam::1:role/ci", at(0));
        claim.subjects = vec!["arn:aws:iam::1:user/dev".into()];
        let mut cluster = Cluster::new("ci-abcde", "ci-abcde", "ci-abcde-x", at(0));
        cluster.outputs.insert("apiUrl".into(), "https://api.ci.example.com:6443".into());
        let e = Event::new(EventType::ClaimAssigned, at(5), 2).claim("job-1").cluster("ci-abcde");
        let kind = NoticeKind::ClaimAssigned;
        let quiet =
            with_notice(&spec(vec![hook(&[NoticeKind::ClusterBroken])]), e.clone(), kind, Some(&claim), Some(&cluster));
        assert_eq!(quiet.notice, None);
        let told = with_notice(&spec(vec![hook(&[])]), e, kind, Some(&claim), Some(&cluster));
        let b = body("ci", &told).expect("a body");
        assert_eq!(b["type"], "claim.assigned");
        assert_eq!(b["data"]["owner"], "arn:aws:iam::1:role/ci");
        assert_eq!(b["data"]["subjects"][0], "arn:aws:iam::1:user/dev");
        assert_eq!(b["data"]["outputs"]["apiUrl"], "https://api.ci.example.com:6443");
        assert_eq!(b["data"]["claim"], "job-1");
        assert!(b["data"].get("reason").is_none());
    }

    #[test]
    fn an_ending_says_why() {
        let s = spec(vec![hook(&[])]);
        let e = Event::new(EventType::ClaimReleased, at(9), 3).claim("c").saying("its lifetime of 1h ran out");
        let told = with_notice(&s, e, NoticeKind::ClaimExpired, None, None);
        assert_eq!(kind_of(&told), Some(NoticeKind::ClaimExpired));
        let b = body("ci", &told).expect("a body");
        assert_eq!(
            (b["type"].as_str(), b["data"]["reason"].as_str()),
            (Some("claim.expired"), Some("its lifetime of 1h ran out"))
        );
    }

    #[test]
    fn a_release_by_the_reconcile_is_told_as_an_expiry_when_the_lifetime_ran_out() {
        let s = spec(vec![hook(&[NoticeKind::ClaimExpired])]);
        let mut claim = Claim::new("c", "arn:aws:iam::1:role/ci", at(0));
        claim.cluster = Some("ci-1".into());
        let before =
            Snapshot { pool: crate::Pool::new("ci", s, at(0)), clusters: vec![], claims: vec![claim], leases: vec![] };
        let release = |reason| Action::ReleaseClaim {
            claim: "c".into(),
            expected_rev: 2,
            cluster: Some(("ci-1".into(), 4)),
            reason,
        };
        for (reason, told) in [(ReleaseReason::Expired, true), (ReleaseReason::Released, false)] {
            let action = release(reason);
            let events = of_action(&before, &action, crate::events::of_action(&before, &action, at(9)));
            let kinds: Vec<_> = events.iter().map(kind_of).collect();
            assert_eq!(kinds, [told.then_some(NoticeKind::ClaimExpired)], "{reason:?}");
        }
        assert_eq!(
            events_owner(&before),
            Some("arn:aws:iam::1:role/ci".to_owned()),
            "the owner, as the claim had it before it ended"
        );
    }

    fn events_owner(before: &Snapshot) -> Option<String> {
        let action =
            Action::ReleaseClaim { claim: "c".into(), expected_rev: 2, cluster: None, reason: ReleaseReason::Expired };
        let events = of_action(before, &action, crate::events::of_action(before, &action, at(9)));
        events.first().and_then(|e| e.notice.as_ref()).and_then(|n| n.owner.clone())
    }

    #[test]
    fn retries_back_off_to_an_hour_then_stop() {
        assert_eq!(retry_after(1), Some(TimeDelta::seconds(10)));
        assert_eq!(retry_after(5), Some(TimeDelta::hours(1)));
        assert_eq!(retry_after(ATTEMPTS), None);
        assert_eq!(ATTEMPTS, 6);
    }
}
