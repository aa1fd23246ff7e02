//! A claimant waiting on its claim, as the CLI waits: a look at once after making it, then on its own gaps
//! ([`waiting::next`]) or when the claim API says ([`waiting::hint`]). The simulation acts on machines the moment
//! they are done; a deployed pool gives a waiting claim its cluster only after the pool's tick has looked at it
//! and the reconcile that look asked for has run. So a claim is Ready, for its claimant, [`NEWS`] after the tick's
//! look that noticed its cluster; and the claim API answers each look from the pool's tick item as it stood then
//! ([`TickLog`]).

use chrono::TimeDelta;

use apiary_planner::power::tick::Tick;
use apiary_planner::waiting;
use apiary_planner::{Claim, PoolStatus, Recheck, Timestamp};

/// From a tick's look noticing a cluster done to the claim given it being readable (**assumed**): the reconcile's
/// message and its run, each well under a second on Lambda.
pub const NEWS: TimeDelta = TimeDelta::seconds(1);

/// From a claim's making to the reconcile that sees it (**assumed**, as [`NEWS`]): looks before then are answered
/// without a hint, as the pool's status does not count the claim yet.
pub const SEEN: TimeDelta = TimeDelta::seconds(1);

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

/// The looks of a claim made at `made` and readable Ready from `ready` (`None`: not by `end`), its claimant
/// following the claim API's hints when `hinted`, else its own gaps alone.
pub fn looks(made: Timestamp, ready: Option<Timestamp>, end: Timestamp, log: &TickLog, hinted: bool) -> Looks {
    let claim = Claim::new("waiting", "sim", made);
    // The reconcile that saw it had claims waiting, and no Running spare (else the claim had one).
    let status = PoolStatus { pending_claims: 1, ..PoolStatus::default() };
    let until = ready.unwrap_or(end);
    let mut at = Vec::new();
    // The answer to the claim's making has no hint (its reconcile has not run); each look's answer may.
    let (mut now, mut gap, mut hint) = (made, waiting::FIRST, None);
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
        hint = match hinted && now >= made + SEEN {
            true => waiting::hint(now, &claim, &status, log.at(now).as_ref()),
            false => None,
        };
    }
    let seen = at.last().copied().unwrap_or(made);
    Looks { at, seen }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

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
        let own = looks(t(0.0), ready, t(600.0), &log, false);
        let told = looks(t(0.0), ready, t(600.0), &log, true);
        // Its own gaps: 0.25, 0.75, 1.75, 3.75 s, then every 2 s, until 97.75 s.
        assert_eq!(own.at.len(), 4 + 47, "{:?}", own.at);
        assert_eq!(own.seen, t(97.75));
        // Told: 0.25, 0.75 (its reconcile has not seen it yet), 1.75 s (told to come at the tick of 5 s, and 2 s
        // after), then 2 s after each tick until the one at 95 s.
        let expected: Vec<Timestamp> = [0.25, 0.75, 1.75, 7.0, 22.0, 37.0, 52.0, 67.0, 82.0, 97.0].map(t).to_vec();
        assert_eq!(told.at, expected);
        assert!(told.seen <= own.seen);
    }

    #[test]
    fn after_a_tick_that_brought_a_cluster_up_the_claimant_looks_on_its_own_gaps_a_while() {
        // The tick at 35 s brought up a cluster another claim was given; this one's is noticed at 65 s.
        let log = ticking(35.0);
        let told = looks(t(0.0), Some(t(65.0) + NEWS), t(600.0), &log, true);
        let expected: Vec<Timestamp> = [0.25, 0.75, 1.75, 7.0, 22.0, 37.0, 39.0, 41.0, 52.0, 67.0].map(t).to_vec();
        assert_eq!(told.at, expected, "two looks of its own while the news is fresh");
    }

    #[test]
    fn a_claim_still_waiting_at_the_end_is_looked_at_until_then() {
        let log = ticking(-1.0);
        let told = looks(t(0.0), None, t(60.0), &log, true);
        assert_eq!(told.at.last().copied(), Some(t(52.0)));
        assert_eq!(told.seen, t(52.0));
        assert!(looks(t(0.0), None, t(60.0), &log, false).at.len() > told.at.len());
    }
}
