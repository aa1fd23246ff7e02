//! How a notification reaches a pool's `notify` webhooks ([`apiary_planner::notify`] says what they hear).
//!
//! The event a notification tells of is written in the trail with the change itself, so nothing is told that did
//! not happen and nothing that happened is lost:
//!
//! - **The writer sends it.** Once its write landed, the function that wrote it sends one power message a hook
//!   ([`after_write`]): the power function posts it within a second or so. Best effort: a function that stops
//!   between its write and its send leaves it to the pass.
//! - **The pass finds what no writer sent.** Every minute the sweep asks the power function for a pass over the
//!   trail of each pool that has hooks: it reads each shard of the trail on from where the last pass stopped
//!   ([`Notified`]), up to a minute ago ([`PASS_LAG`], so that an event written a moment late by a slow clock is
//!   not passed over), and sends each notification whose delivery to a hook has no attempt in the trail yet
//!   ([`missed`]).
//! - **Each attempt is in the trail** ([`Delivery`]): delivered, failed (with when it is tried again), or
//!   dead-lettered after the last one ([`apiary_planner::notify::RETRIES`]), the entry then keeping the
//!   notification whole.
//!
//! So delivery is at least once: a receiver may get a notification twice (a writer's send and the pass's when the
//! first attempt came later than a minute, or a message the queue handed out twice), and drops the second by its
//! `webhook-id`, the event's sort key.

use apiary_planner::events::Event;
use apiary_planner::notify::{hearers, kind_of, Delivery};
use apiary_planner::{PoolSpec, Timestamp};
use chrono::TimeDelta;

use crate::messages::{NoticeMessage, PowerMessage};
use crate::store::{event_shard, event_sort_key, Notified, Write, EVENT_SHARDS};
use crate::Deps;

/// How far behind the present the pass reads: an event written this long ago is in the trail, whatever the
/// writer's clock said.
pub const PASS_LAG: TimeDelta = TimeDelta::minutes(1);

/// Where a pool's first pass starts: this long before the present (the writers sent what came before).
pub const FIRST_PASS: TimeDelta = TimeDelta::minutes(5);

/// Events a page of the pass's read of one shard.
pub const PASS_PAGE: usize = 500;

/// Pages a pass reads of one shard at most; it reads on from there the next minute.
pub const PASS_PAGES: usize = 20;

/// The first attempts to deliver `events` to the hooks of `spec` that hear them: one message an event and hook.
pub fn deliveries<'a>(pool: &str, spec: &PoolSpec, events: impl IntoIterator<Item = &'a Event>) -> Vec<PowerMessage> {
    let mut out = vec![];
    for event in events {
        let Some(kind) = kind_of(event) else { continue };
        out.extend(hearers(spec, kind).into_iter().map(|hook| first_attempt(pool, spec, event, hook)));
    }
    out
}

/// The events `writes` append that a hook may hear (those with a notice), to send once the writes landed.
pub fn to_notify(writes: &[Write]) -> Vec<Event> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Append(e) if e.notice.is_some() => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Sends, once the writes that appended `events` ([`to_notify`]) landed in `pool`'s partition, the first attempts to
/// deliver them to the hooks of `spec` that hear them. Best effort: a send that fails is logged, and the pass
/// sends it within two minutes.
pub async fn after_write(deps: &Deps, pool: &str, spec: &PoolSpec, events: &[Event]) {
    let messages = deliveries(pool, spec, events);
    if messages.is_empty() {
        return;
    }
    if let Err(e) = deps.queue.power_now(&messages).await {
        tracing::warn!(pool, error = %e, "notifications not sent; the pass sends them");
    }
}

/// Of `read`, one shard's trail entries after the pass's cursor, oldest first with their sort keys, the first
/// attempts the pass must send: each event up to `settled` (a sort key) of a kind a hook of `spec` hears whose
/// delivery to that hook has no attempt among them.
pub fn undelivered(pool: &str, spec: &PoolSpec, read: &[(String, Event)], settled: &str) -> Vec<PowerMessage> {
    let tried: std::collections::BTreeSet<(&str, u8)> =
        read.iter().filter_map(|(_, e)| e.delivery.as_ref()).map(|d: &Delivery| (d.of.as_str(), d.hook)).collect();
    let mut out = vec![];
    for (sort, event) in read.iter().filter(|(sort, _)| sort.as_str() <= settled) {
        let Some(kind) = kind_of(event) else { continue };
        if event.delivery.is_some() {
            continue;
        }
        for hook in hearers(spec, kind).into_iter().filter(|h| !tried.contains(&(sort.as_str(), *h))) {
            out.push(first_attempt(pool, spec, event, hook));
        }
    }
    out
}

/// The first attempt to deliver `event` to hook `hook` of `spec`.
fn first_attempt(pool: &str, spec: &PoolSpec, event: &Event, hook: u8) -> PowerMessage {
    let to = spec.notify[usize::from(hook)].clone();
    PowerMessage::deliver(pool, NoticeMessage { event: event.clone(), hook, to, attempt: 1, due: None })
}

/// The pass's cursor for a pool that has none: every shard from [`FIRST_PASS`] before `now`.
pub fn first_cursor(pool: &str, now: Timestamp) -> Notified {
    let from = crate::store::time_key(now - FIRST_PASS);
    Notified { pool: pool.to_owned(), through: vec![from; usize::from(EVENT_SHARDS)], rev: 0 }
}

/// The trail entry of an attempt to deliver `notice`'s event: in the event's own shard (its claim, else its
/// cluster), naming the event ([`event_sort_key`]), the hook and the attempt.
pub fn attempt_entry(notice: &NoticeMessage, kind: apiary_planner::events::EventType, now: Timestamp) -> Event {
    let of = &notice.event;
    let entry = Event {
        delivery: Some(Delivery { of: event_sort_key(of), hook: notice.hook, attempt: notice.attempt }),
        ..Event::new(kind, now, of.rev)
    };
    let entry = Event { claim: of.claim.clone(), cluster: of.cluster.clone(), ..entry };
    debug_assert_eq!(event_shard(&entry), event_shard(of));
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_planner::events::EventType;
    use apiary_planner::notify::{with_notice, NoticeKind, NotifyHook};
    use apiary_planner::{FakePlatform, Platform};

    fn at(s: i64) -> Timestamp {
        chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).expect("time")
    }

    fn spec() -> PoolSpec {
        let hook = |events: Vec<NoticeKind>| NotifyHook {
            url: "https://hooks.example.com/".into(),
            secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:h".into(),
            events,
        };
        PoolSpec {
            notify: vec![hook(vec![]), hook(vec![NoticeKind::ClusterBroken])],
            ..PoolSpec::new(1, Platform::Fake(FakePlatform::default()))
        }
    }

    fn keyed(e: Event) -> (String, Event) {
        (event_sort_key(&e), e)
    }

    #[test]
    fn the_pass_sends_what_no_attempt_tells_of_and_only_what_has_settled() {
        let s = spec();
        let assigned = |claim: &str, t: i64| {
            let e = Event::new(EventType::ClaimAssigned, at(t), 2).claim(claim).cluster("c-1");
            with_notice(&s, e, NoticeKind::ClaimAssigned, None, None)
        };
        let (sent, unsent, late) = (assigned("a", 1), assigned("b", 2), assigned("c", 90));
        let tried = NoticeMessage { event: sent.clone(), hook: 0, to: s.notify[0].clone(), attempt: 1, due: None };
        let read = vec![
            keyed(sent),
            keyed(unsent.clone()),
            keyed(Event::new(EventType::ClaimCreated, at(3), 1).claim("d")),
            keyed(attempt_entry(&tried, EventType::NotificationFailed, at(4))),
            keyed(late),
        ];
        let settled = crate::store::time_key(at(30));
        let out = undelivered("ci", &s, &read, &settled);
        assert_eq!(out.len(), 1, "{out:?}");
        let notice = out[0].notice.as_ref().expect("a notice");
        assert_eq!((notice.event.claim.as_deref(), notice.hook, notice.attempt), (unsent.claim.as_deref(), 0, 1));
    }

    #[test]
    fn a_writer_sends_one_message_an_event_and_hook_that_hears_it() {
        let s = spec();
        let broken = with_notice(
            &s,
            Event::new(EventType::ClusterBroken, at(1), 3).cluster("c-1"),
            NoticeKind::ClusterBroken,
            None,
            None,
        );
        let quiet = Event::new(EventType::ClusterRunning, at(1), 4).cluster("c-1");
        let sent = deliveries("ci", &s, [&broken, &quiet]);
        assert_eq!(sent.iter().map(|m| m.notice.as_ref().map(|n| n.hook)).collect::<Vec<_>>(), [Some(0), Some(1)]);
        assert!(sent.iter().all(|m| m.cluster.is_empty() && !m.tick && !m.reap));
    }
}
