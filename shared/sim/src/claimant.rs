//! A claimant waiting on its claim, as the CLI waits: a look at once after making it, then on its own gaps
//! ([`waiting::next`]) or when the claim API says ([`waiting::hint`]). The simulation acts on machines the moment
//! they are done; a deployed pool gives a waiting claim its cluster only after the pool's tick has looked at it
//! and the reconcile that look asked for has run. So a claim is Ready, for its claimant, [`NEWS`] after the tick's
//! look that noticed its cluster; and the claim API answers each look from the pool's tick item as it stood then
//! ([`TickLog`]), and from the pool item, whose status that reconcile wrote [`NEWS`] after the look.

use chrono::TimeDelta;

use apiary_planner::power::tick::Tick;
use apiary_planner::waiting;
use apiary_planner::{Claim, FakePlatform, Platform, Pool, PoolSpec, PoolStatus, Recheck, Timestamp};

/// From a tick's look noticing a cluster done to the claim given it being readable, and the pool item written
/// (**assumed**): the reconcile's message and its run, each well under a second on Lambda.
pub const NEWS: TimeDelta = TimeDelta::seconds(1);

/// From a claim's making to the reconcile that sees it (**assumed**, as [`NEWS`]): unless older claims were waiting
/// already, looks before then are answered without a hint, as the pool's status does not count a claim waiting yet.
pub const SEEN: TimeDelta = TimeDelta::seconds(1);

/// How a claimant looks at its claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claimant {
    /// On its own gaps alone.
    Own,
    /// When the claim API says ([`waiting::hint`]), else on its own gaps.
    Told {
        /// Older claims were waiting already when it was made, counted by the pool's last reconcile: the answer to
        /// its making may say too.
        after_others: bool,
    },
}

/// The pool's tick item over time: each write's time, its live link's due and its [`Tick::up`].
#[derive(Debug, Clone, Default)]
pub struct TickLog(Vec<(Timestamp, Option<Timestamp>, Option<Timestamp>)>);

impl TickLog {
    /// Records the tick item as written at `at`.
    pub fn write(&mut self, at: Timestamp, tick: &Tick) {
        self.0.push((at, tick.check.map(|c| c.due), tick.up));
    }

    /// The tick item as a read at `at` finds it (the last write by then), with what [`waiting::hint`] reads.
    fn at(&self, at: Timestamp) -> Option<Tick> {
        let i = self.0.partition_point(|(t, _, _)| *t <= at);
        let (_, due, up) = *self.0.get(i.checked_sub(1)?)?;
        Some(Tick { check: due.map(|due| Recheck { token: 0, due }), up, ..Tick::default() })
    }
}

/// A waiting claim's looks, and when its claimant saw it Ready.
#[derive(Debug, Clone, PartialEq)]
pub struct Looks {
    /// When each look came.
    pub at: Vec<Timestamp>,
    /// The look that found it Ready (or the last, for a claim still waiting at `end`).
    pub seen: Timestamp,
}

/// The pool item as the claim API reads it at `now`, for a claim the last reconcile saw waiting with no Running
/// spare (else it had one): its status written again by the reconcile a look asked for, [`NEWS`] after that look
/// found a cluster come up (`tick`'s [`Tick::up`]).
fn pool_item(tick: &Tick, now: Timestamp) -> Pool {
    let planned_at = tick.up.map(|up| up + NEWS).filter(|at| *at <= now);
    Pool {
        name: "sim".into(),
        spec: PoolSpec::new(1, Platform::Fake(FakePlatform::default())),
        status: PoolStatus { pending_claims: 1, planned_at, ..PoolStatus::default() },
        next_wake_at: None,
        deletion_requested_at: None,
        created_at: now,
        rev: 1,
        later: Default::default(),
    }
}

/// The looks of a claim made at `made` and readable Ready from `ready` (`None`: not by `end`), by `claimant`.
pub fn looks(made: Timestamp, ready: Option<Timestamp>, end: Timestamp, log: &TickLog, claimant: Claimant) -> Looks {
    let claim = Claim::new("waiting", "sim", made);
    let until = ready.unwrap_or(end);
    // What the answer to the claim's making, or to a look at `now`, says.
    let told = |now: Timestamp| -> Option<std::time::Duration> {
        let Claimant::Told { after_others } = claimant else { return None };
        let tick = log.at(now).filter(|_| after_others || now >= made + SEEN)?;
        waiting::hint(now, &claim, &pool_item(&tick, now), Some(&tick))
    };
    let mut at = Vec::new();
    let (mut now, mut gap, mut hint) = (made, waiting::FIRST, told(made));
    loop {
        now += TimeDelta::from_std(hint.unwrap_or(gap)).unwrap_or(TimeDelta::MAX);
        gap = waiting::next(gap);
        if now > end {
            break;
        }
        at.push(now);
        if now >= until {
            break;
        }
        hint = told(now);
    }
    let seen = at.last().copied().unwrap_or(made);
    Looks { at, seen }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    const TOLD: Claimant = Claimant::Told { after_others: false };

    fn t(s: f64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).single().expect("time")
            + TimeDelta::milliseconds((s * 1000.0) as i64)
    }

    /// A tick every 15 s from 5 s, each written at its due; the one at `up` found a cluster come up.
    fn ticking(up: f64) -> TickLog {
        let mut log = TickLog::default();
        log.write(t(-10.0), &Tick { check: Some(Recheck { token: 1, due: t(5.0) }), ..Tick::default() });
        let mut due = 5.0;
        while due < 300.0 {
            let found = (due == up).then(|| t(due));
            let tick = Tick { check: Some(Recheck { token: 1, due: t(due + 15.0) }), up: found, ..Tick::default() };
            log.write(t(due), &tick);
            due += 15.0;
        }
        log
    }

    #[test]
    fn a_hinted_claimant_looks_once_a_tick_and_sees_its_cluster_as_soon() {
        // The tick at 95 s notices the resume; the claim is readable Ready a second later.
        let log = ticking(95.0);
        let ready = Some(t(95.0) + NEWS);
        let own = looks(t(0.0), ready, t(600.0), &log, Claimant::Own);
        let told = looks(t(0.0), ready, t(600.0), &log, TOLD);
        // Its own gaps: 0.25, 0.75, 1.75, 3.75 s, then every 2 s, until 97.75 s.
        assert_eq!(own.at.len(), 4 + 47, "{:?}", own.at);
        assert_eq!(own.seen, t(97.75));
        // Told: 0.25, 0.75 (its reconcile has not seen it yet), 1.75 s (told to come at the tick of 5 s, and 2 s
        // after), then 2 s after each tick until the one at 95 s.
        let expected: Vec<Timestamp> = [0.25, 0.75, 1.75, 7.0, 22.0, 37.0, 52.0, 67.0, 82.0, 97.0].map(t).to_vec();
        assert_eq!(told.at, expected);
        assert!(told.seen <= own.seen);
        // Made while older claims waited for the tick: the answer to its making says when, too.
        let after = looks(t(0.0), ready, t(600.0), &log, Claimant::Told { after_others: true });
        assert_eq!(after.at, [7.0, 22.0, 37.0, 52.0, 67.0, 82.0, 97.0].map(t).to_vec());
    }

    #[test]
    fn a_tick_that_brought_a_cluster_up_for_another_claim_costs_no_look_once_the_pool_is_written() {
        // The tick at 35 s brought up a cluster an older claim was given; this one's is noticed at 65 s. At 37 s
        // the reconcile has written the pool item (36 s): the next tick, then.
        let log = ticking(35.0);
        let told = looks(t(0.0), Some(t(65.0) + NEWS), t(600.0), &log, TOLD);
        let expected: Vec<Timestamp> = [0.25, 0.75, 1.75, 7.0, 22.0, 37.0, 52.0, 67.0].map(t).to_vec();
        assert_eq!(told.at, expected);
        // A nudge found one come up at 36.5 s: at 37 s the pool item is not written yet, a look of its own at 39 s.
        let mut log = ticking(-1.0);
        let nudged = (t(36.5), Some(t(50.0)), Some(t(36.5)));
        log.0.insert(log.0.partition_point(|(at, ..)| *at <= t(36.5)), nudged);
        let told = looks(t(0.0), Some(t(65.0) + NEWS), t(600.0), &log, TOLD);
        let expected: Vec<Timestamp> = [0.25, 0.75, 1.75, 7.0, 22.0, 37.0, 39.0, 52.0, 67.0].map(t).to_vec();
        assert_eq!(told.at, expected, "one look of its own while the news is news");
    }

    #[test]
    fn a_claim_still_waiting_at_the_end_is_looked_at_until_then() {
        let log = ticking(-1.0);
        let told = looks(t(0.0), None, t(60.0), &log, TOLD);
        assert_eq!(told.at.last().copied(), Some(t(52.0)));
        assert_eq!(told.seen, t(52.0));
        assert!(looks(t(0.0), None, t(60.0), &log, Claimant::Own).at.len() > told.at.len());
    }
}
