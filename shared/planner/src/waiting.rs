//! How a claimant looks at a claim it waits on: soon after making it, then less and less often, down to once every
//! [`MOST`]. A claim that becomes Ready is seen at most [`MOST`] later, and many jobs waiting on one pool read it
//! far less often than if each looked at once again.
//!
//! The CLI looks with one request each time, answered at once; a `GET` with `?wait=` takes the same looks inside
//! one request (docs/concepts.md, "A CI fan-out", says what each costs).
//!
//! A claim that waits for a cluster is given one only by a reconcile, and only a Running cluster
//! ([`crate::plan`](mod@crate::plan)): once the pool has no Running spare, that is after the pool's tick finds an
//! install or a resume done. The claim API then tells the claimant when that can next be ([`hint`]): a little
//! after the tick's next link is due. A claimant that follows it looks once a tick instead of every [`MOST`], and
//! sees its cluster as soon: the look after the tick that brought it up.

use std::time::Duration;

use chrono::TimeDelta;

use crate::model::{Claim, Pool, PoolStatus, Timestamp};
use crate::power::tick::Tick;

/// The first gap, between making a claim (or a look's request) and the next look.
pub const FIRST: Duration = Duration::from_millis(250);
/// The longest gap between two looks.
pub const MOST: Duration = Duration::from_secs(2);

/// The gap after `gap`: twice it, at most [`MOST`].
pub fn next(gap: Duration) -> Duration {
    (gap * 2).min(MOST)
}

/// From a tick's due to what its looks found being in the claim: the link's delivery, the power function's run
/// and the reconcile it asks for (each well under a second on Lambda).
pub const SETTLE: TimeDelta = TimeDelta::seconds(2);

/// The longest [`hint`]: a poll and [`SETTLE`] (while claims wait, the tick looks at a resume every poll). A tick
/// due later (an install's looks, a minute apart) is looked for again this soon: a nudge may bring it forward. A
/// claimant takes no longer one from an answer.
pub const LONGEST_HINT: Duration = Duration::from_secs(17);

/// When a claimant waiting on `claim` should look at it next, as the claim API sees the pool at `now` (its `pool`
/// item, with its status as the last reconcile wrote it, and its `tick` item): [`SETTLE`] after the tick's next
/// link is due, when nothing but that tick can bring the claim its cluster. `None` (the claimant's own gaps,
/// [`next`]) for a claim that is not pending; while the last reconcile had no claim waiting (it may not have seen
/// this one yet) or a Running spare to give (it may be giving it now); while what a look found come up is news
/// ([`Tick::up`]: no reconcile that read the partition after it has written the pool's status yet, and the one it
/// asked for may be giving the cluster now);
/// and when no link is live or the live one is overdue. At most [`LONGEST_HINT`].
pub fn hint(now: Timestamp, claim: &Claim, pool: &Pool, tick: Option<&Tick>) -> Option<Duration> {
    if !tick_brings(claim, &pool.status) {
        return None;
    }
    let tick = tick?;
    if crate::power::tick::news(tick.up, now, pool.status.planned_at) {
        return None;
    }
    let wait = tick.check?.due + SETTLE - now;
    if wait <= TimeDelta::zero() {
        return None;
    }
    wait.to_std().ok().map(|w| w.min(LONGEST_HINT))
}

/// Whether only the pool's tick can bring `claim` its cluster, as far as the pool's `status` says: the claim is
/// pending, and the last reconcile had claims waiting and no Running spare. Where it cannot, [`hint`] has nothing
/// to say, and the claim API does not read the tick item.
pub fn tick_brings(claim: &Claim, status: &PoolStatus) -> bool {
    claim.is_pending() && status.pending_claims > 0 && status.ready == 0
}

/// When each look comes, counted from the claim's making: 0.25, 0.75, 1.75, 3.75, 5.75 s and on, without end.
pub fn times() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FIRST), |g| Some(next(*g))).scan(Duration::ZERO, |at, gap| {
        *at += gap;
        Some(*at)
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::model::{ClaimPhase, Cluster, FakePlatform, Platform, PoolSpec, Recheck};
    use crate::power::tick::UP_NEWS;
    use crate::power::POLL;

    fn t(s: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).single().expect("time") + TimeDelta::seconds(s)
    }

    /// A pool item whose last reconcile had three claims waiting, and no Running spare.
    fn waiting_pool() -> Pool {
        with_status(PoolStatus { pending_claims: 3, ..PoolStatus::default() })
    }

    fn with_status(status: PoolStatus) -> Pool {
        Pool {
            name: "ci".into(),
            spec: PoolSpec::new(4, Platform::Fake(FakePlatform::default())),
            status,
            next_wake_at: None,
            deletion_requested_at: None,
            created_at: t(-3600),
            rev: 5,
            later: Default::default(),
        }
    }

    fn ticking(due: i64) -> Tick {
        Tick { check: Some(Recheck { token: 1, due: t(due) }), ..Tick::default() }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_looks_come_soon_then_every_two_seconds() {
        let first: Vec<Duration> = times().take(7).collect();
        assert_eq!(first, [0.25, 0.75, 1.75, 3.75, 5.75, 7.75, 9.75].map(secs));
        assert_eq!(next(Duration::from_secs(5)), MOST);
    }

    #[test]
    fn the_longest_hint_is_a_poll_and_a_settle() {
        assert_eq!(TimeDelta::from_std(LONGEST_HINT).ok(), Some(POLL + SETTLE));
    }

    #[test]
    fn a_pending_claim_is_looked_at_again_a_settle_after_the_ticks_next_link() {
        let claim = Claim::new("k1", "ci", t(0));
        let hint = hint(t(4), &claim, &waiting_pool(), Some(&ticking(10)));
        assert_eq!(hint, Some(Duration::from_secs(8)));
        // Overdue, or running now: the claimant's own gaps until the tick has written its next link.
        assert_eq!(super::hint(t(12), &claim, &waiting_pool(), Some(&ticking(10))), None);
        assert_eq!(super::hint(t(11), &claim, &waiting_pool(), Some(&ticking(10))), Some(Duration::from_secs(1)));
        // A tick a minute off (an install's looks): again a poll and a settle later, as a nudge may bring it on.
        assert_eq!(super::hint(t(4), &claim, &waiting_pool(), Some(&ticking(60))), Some(LONGEST_HINT));
    }

    #[test]
    fn no_hint_where_something_but_the_tick_may_give_the_claim_its_cluster() {
        let claim = Claim::new("k1", "ci", t(0));
        let tick = ticking(10);
        // The last reconcile saw no claim waiting (not this one yet), or had a spare to give.
        assert_eq!(hint(t(4), &claim, &with_status(PoolStatus::default()), Some(&tick)), None);
        let spare = with_status(PoolStatus { ready: 1, pending_claims: 3, ..PoolStatus::default() });
        assert_eq!(hint(t(4), &claim, &spare, Some(&tick)), None);
        // A look found a cluster come up two seconds ago, and no reconcile has written the pool's status since: the
        // one it asked for may be giving it now.
        let up = Tick { up: Some(t(2)), ..tick.clone() };
        assert_eq!(hint(t(4), &claim, &waiting_pool(), Some(&up)), None);
        let later = Tick { up: up.up, ..ticking(20) };
        assert_eq!(hint(t(2) + UP_NEWS, &claim, &waiting_pool(), Some(&later)), Some(Duration::from_secs(10)));
        // A plan made since has written it: it gave the cluster to an older claim.
        let mut since = waiting_pool();
        since.status.planned_at = Some(t(3));
        assert_eq!(hint(t(4), &claim, &since, Some(&up)), Some(Duration::from_secs(8)));
        // No tick live.
        assert_eq!(hint(t(4), &claim, &waiting_pool(), None), None);
        assert_eq!(hint(t(4), &claim, &waiting_pool(), Some(&Tick::default())), None);
    }

    #[test]
    fn no_hint_for_a_claim_that_is_not_waiting_for_a_cluster() {
        let mut claim = Claim::new("k1", "ci", t(0));
        claim.cluster = Some("c1".into());
        let running = Cluster::new("c1", "c1", "c1", t(0));
        assert_ne!(claim.phase(Some(&running)), ClaimPhase::Pending);
        assert_eq!(hint(t(4), &claim, &waiting_pool(), Some(&ticking(10))), None);
        let released = Claim { release_requested_at: Some(t(1)), ..Claim::new("k2", "ci", t(0)) };
        assert_eq!(hint(t(4), &released, &waiting_pool(), Some(&ticking(10))), None);
    }
}
