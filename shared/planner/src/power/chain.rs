//! Re-check chains: the power function looks again by sending itself a delayed message, and each such message
//! names the chain link it is ([`Recheck`]'s token). What carries the chain ([`Links`]: the pool's tick item,
//! [`super::tick::Tick`]) records the live link (`check`), so of all the messages that may be in flight for it,
//! only one keeps the work going:
//!
//! - the live link's message does the work and, if more is to do, records and sends the next link;
//! - a nudge (a message without a token, from a reconcile, the claim API or the sweep) acts at once, and starts a
//!   chain only when none is live, or the live one is due too late for what the nudge found (a claim waiting on
//!   a cluster that began resuming while the tick slept for five minutes), or presumed lost ([`LOST_AFTER`]
//!   overdue);
//! - any other link is stale (an SQS duplicate of an old link, or a link whose handling failed after the chain
//!   moved on) and ends on arrival without a look. A chain that is lost (its next link never sent) is taken over
//!   by the next nudge: the sweep's full pass starts the tick of every pool with work under way and no live tick.
//!
//! Replacing a live link leaves its message in flight until it arrives: it is recorded as `superseded`, and a
//! chain is replaced only while no superseded link is in flight, or when its live link is lost, which is then
//! forgotten rather than recorded (should its message come after all, it ends on arrival). So at most two links
//! can act per chain: the live one and one superseded one. A superseded link is forgotten when it arrives, or
//! [`FORGET_AFTER`] past its due (by then SQS has delivered it or moved it to the dead-letter queue: five receives,
//! six minutes apart).
//!
//! The live link carries the chain on in its own message while that message has receives to spare
//! ([`carries_on`]): the power function puts it back in the queue, hidden until the next look is due, instead of
//! deleting it and sending another (one request to SQS instead of three). The token stays the same, so the link
//! is still the live one when it comes back. A link whose message has been received [`MAX_RECEIVES`] `- 2` times
//! goes on in a new message with a new token, which leaves the old message's later receives for its handling to
//! fail in before SQS moves it to the dead-letter queue.
//!
//! Clusters carried their own chains before the pool's tick took their looks over; a cluster's recorded links are
//! still honoured (its live link steps it once and ends) while they arrive.

use chrono::TimeDelta;

use crate::model::{Recheck, Timestamp};

/// What carries a chain: its live link and the superseded one that may still arrive. A pool's tick
/// ([`super::tick::Tick`]) carries the chain that looks at its clusters.
pub trait Links {
    /// The live link.
    fn check(&self) -> Option<Recheck>;
    /// The superseded link that may still arrive.
    fn superseded(&self) -> Option<Recheck>;
}

/// A live link this far past its due is presumed lost (its invocation died between recording it and sending
/// it): a nudge may take over.
pub const LOST_AFTER: TimeDelta = TimeDelta::minutes(2);
/// A superseded link this far past its due is gone: delivered, or dead-lettered after five receives.
pub const FORGET_AFTER: TimeDelta = TimeDelta::minutes(40);
/// A live link due this much later than a nudge wants is kept anyway: not worth a second message.
pub const SLACK: TimeDelta = TimeDelta::seconds(5);

/// Receives of one message before SQS moves it to the dead-letter queue (the template's `maxReceiveCount` on
/// the power queue).
pub const MAX_RECEIVES: u32 = 5;

/// Whether a link admitted as `admission`, arriving on the `receives`th receive of its message, carries the chain
/// on in that same message rather than a new one: the live link does, while two receives or more are left after
/// the next (one for SQS's count being approximate, one for a handling that fails), so that a message put back
/// never reaches the dead-letter queue for having been put back.
pub fn carries_on(admission: Admission, receives: u32) -> bool {
    admission == Admission::Own && receives + 2 <= MAX_RECEIVES
}

/// What a power message arriving for a cluster may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It is the live link: step, and carry the chain on.
    Own,
    /// A nudge: step, and start a chain if one is needed.
    Nudge,
    /// It is the superseded link arriving: forget it, nothing else.
    Forget,
    /// A stale link: end here, without a look.
    Drop,
}

/// Whether `links` has a live chain at `now`: a link recorded and not yet [`LOST_AFTER`] overdue.
pub fn live(links: &impl Links, now: Timestamp) -> bool {
    links.check().is_some_and(|c| now <= c.due + LOST_AFTER)
}

/// What a message carrying `token` (`None`: a nudge) may do on `links`.
pub fn admit(links: &impl Links, token: Option<u64>) -> Admission {
    let Some(token) = token else { return Admission::Nudge };
    if links.check().is_some_and(|c| c.token == token) {
        Admission::Own
    } else if links.superseded().is_some_and(|c| c.token == token) {
        Admission::Forget
    } else {
        Admission::Drop
    }
}

/// The chain after a step: what to record on the cluster and what to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    /// The live link to record.
    pub check: Option<Recheck>,
    /// The superseded link to record.
    pub superseded: Option<Recheck>,
    /// The link whose message to send (after the cluster is written).
    pub send: Option<Recheck>,
}

/// The chain of `links` after a message admitted as `admission` did its work and wants a look at `want` (`None`:
/// nothing left to do); `token` is a fresh token, used if a link is started.
pub fn next(links: &impl Links, admission: Admission, want: Option<Timestamp>, now: Timestamp, token: u64) -> Next {
    let superseded = links.superseded().filter(|s| now <= s.due + FORGET_AFTER);
    let keep = Next { check: links.check(), superseded, send: None };
    let start = |superseded| {
        let link = want.map(|due| Recheck { token, due });
        Next { check: link, superseded, send: link }
    };
    match admission {
        Admission::Drop => keep,
        Admission::Forget => Next { superseded: None, ..keep },
        // The live link carries on, or the chain ends.
        Admission::Own => start(superseded),
        Admission::Nudge => {
            let Some(want) = want else { return keep };
            match links.check() {
                None => start(superseded),
                Some(c) if live(links, now) && c.due <= want + SLACK => keep,
                // Too late for what the nudge found, or lost: replace it, unless a replaced link is still in flight.
                Some(c) if superseded.is_none() => start(Some(c)),
                // Lost while a replaced link is still recorded: forgotten (its message, should it come after all,
                // ends on arrival), so the chain goes on with two links at most that can act.
                Some(_) if !live(links, now) => start(superseded),
                Some(_) => keep,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    fn t(s: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time") + TimeDelta::seconds(s)
    }

    /// A chain's two links, as the pool's tick item records them.
    #[derive(Clone, Copy)]
    struct Record {
        check: Option<Recheck>,
        superseded: Option<Recheck>,
    }

    impl Links for Record {
        fn check(&self) -> Option<Recheck> {
            self.check
        }
        fn superseded(&self) -> Option<Recheck> {
            self.superseded
        }
    }

    fn tick(check: Option<(u64, i64)>, superseded: Option<(u64, i64)>) -> Record {
        Record {
            check: check.map(|(token, due)| Recheck { token, due: t(due) }),
            superseded: superseded.map(|(token, due)| Recheck { token, due: t(due) }),
        }
    }

    #[test]
    fn only_the_live_link_carries_the_chain_and_stale_links_end() {
        let c = tick(Some((7, 60)), Some((5, 300)));
        assert_eq!(admit(&c, Some(7)), Admission::Own);
        assert_eq!(admit(&c, Some(5)), Admission::Forget);
        assert_eq!(admit(&c, Some(3)), Admission::Drop);
        assert_eq!(admit(&c, None), Admission::Nudge);
        // A stale link ends even when the live one is lost: the next nudge takes the chain over.
        assert_eq!(admit(&tick(None, None), Some(3)), Admission::Drop);
        let n = next(&c, Admission::Own, Some(t(75)), t(60), 8);
        assert_eq!((n.check.map(|r| r.token), n.send.map(|r| r.due)), (Some(8), Some(t(75))));
        let n = next(&c, Admission::Own, None, t(60), 8);
        assert_eq!((n.check, n.send), (None, None), "settled: the chain ends");
        assert_eq!(next(&c, Admission::Forget, None, t(300), 8).superseded, None);
    }

    #[test]
    fn a_link_carries_on_in_its_own_message_while_receives_are_left_for_failures() {
        let own = |receives| carries_on(Admission::Own, receives);
        assert!(own(1) && own(MAX_RECEIVES - 2));
        assert!(!own(MAX_RECEIVES - 1) && !own(MAX_RECEIVES));
        // Only the live link: a nudge starts a chain in a message of its own.
        assert!(!carries_on(Admission::Nudge, 1));
        // Carried on with its own token, the link is still the live one when it comes back.
        let c = tick(Some((7, 60)), None);
        let n = next(&c, Admission::Own, Some(t(75)), t(60), 7);
        assert_eq!(n.check.map(|r| (r.token, r.due)), Some((7, t(75))));
        let back = tick(n.check.map(|r| (r.token, 75)), None);
        assert_eq!(admit(&back, Some(7)), Admission::Own);
    }

    #[test]
    fn a_nudge_starts_a_chain_only_when_none_serves_it_and_never_a_third_message() {
        // No chain: start one.
        let n = next(&tick(None, None), Admission::Nudge, Some(t(15)), t(0), 9);
        assert_eq!(n.send.map(|r| (r.token, r.due)), Some((9, t(15))));
        // A live link due soon enough: keep it, send nothing.
        let n = next(&tick(Some((7, 16)), None), Admission::Nudge, Some(t(15)), t(0), 9);
        assert_eq!((n.check.map(|r| r.token), n.send), (Some(7), None));
        // Due too late (a five-minute backoff): replace it, remembering the one still in flight.
        let n = next(&tick(Some((7, 300)), None), Admission::Nudge, Some(t(15)), t(0), 9);
        assert_eq!(
            (n.check.map(|r| r.token), n.superseded.map(|r| r.token), n.send.is_some()),
            (Some(9), Some(7), true)
        );
        // But not while a replaced link is still in flight: at most two messages.
        let n = next(&tick(Some((7, 300)), Some((5, 200))), Admission::Nudge, Some(t(15)), t(0), 9);
        assert_eq!((n.check.map(|r| r.token), n.send), (Some(7), None));
        // A superseded link long past its due is forgotten, and the replacement goes ahead.
        let late = t(200) + FORGET_AFTER + TimeDelta::seconds(1);
        let n = next(&tick(Some((7, 3000)), Some((5, 200))), Admission::Nudge, Some(late), late, 9);
        assert_eq!((n.check.map(|r| r.token), n.superseded.map(|r| r.token)), (Some(9), Some(7)));
    }

    /// Seed 36 of the whole-system simulation: the live link was lost while a replaced one was still recorded, and
    /// no nudge could take the chain over until the replaced one was forgotten, forty minutes on; a resume begun
    /// meanwhile was never looked at and timed out.
    #[test]
    fn a_lost_live_link_is_taken_over_while_a_replaced_one_is_recorded() {
        let now = t(300) + LOST_AFTER + TimeDelta::seconds(1);
        let n = next(&tick(Some((7, 300)), Some((5, 200))), Admission::Nudge, Some(now), now, 9);
        assert_eq!(
            (n.check.map(|r| r.token), n.superseded.map(|r| r.token), n.send.map(|r| r.token)),
            (Some(9), Some(5), Some(9)),
            "the lost link is forgotten (it ends on arrival, if it ever comes); the replaced one stays recorded"
        );
        // The lost link's message, should it come after all, acts no more: two links at most can act.
        let taken = Record { check: n.check, superseded: n.superseded };
        assert_eq!(admit(&taken, Some(7)), Admission::Drop);
    }
}
