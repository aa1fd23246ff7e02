//! The claims' side: each waiting claim's claimant looking as the CLI does, and the per-minute readings the
//! report's percentiles come from.

use apiary_planner::Timestamp;

use crate::claimant::{self, Claimant};
use crate::report::{Lateness, Meter};

use super::*;

impl Simulation<'_> {
    /// The looks of the measured claims that waited, each claimant following the claim API's hints and, for
    /// comparison, on its own gaps alone; how long after being readable Ready each saw its claim so.
    pub(super) fn claimants(&self, end: Timestamp) -> Claimants {
        let measured = self.trace.measured_from();
        // Each waiting claim: when made, and when readable Ready (a cluster given but never noticed: when given).
        let mut claims: Vec<(Timestamp, Option<Timestamp>)> = self
            .waited
            .values()
            .filter(|(made, ..)| *made >= measured)
            .map(|(made, given, ready)| (*made, Some(ready.unwrap_or(*given + claimant::NEWS))))
            .collect();
        claims.extend(
            self.snap
                .claims
                .iter()
                .filter(|c| c.cluster.is_none() && c.created_at >= measured)
                .map(|c| (c.created_at, None)),
        );
        claims.sort();
        let (mut seen, mut seen_unhinted) = (Vec::new(), Vec::new());
        let mut c = Claimants::default();
        // Claims made a reconcile's time before this one (so counted waiting) are readable Ready by then at the
        // latest: while that is later, older claims still wait for the tick.
        let (mut counted, mut waiting_until) = (0, None);
        for (i, &(made, ready)) in claims.iter().enumerate() {
            while counted < i && claims[counted].0 + claimant::SEEN <= made {
                waiting_until = waiting_until.max(Some(claims[counted].1.unwrap_or(end)));
                counted += 1;
            }
            let after_others = waiting_until.is_some_and(|until| until > made);
            if after_others {
                c.told_at_making.push(made);
            }
            let told = claimant::looks(made, ready, end, &self.tick_log, Claimant::Told { after_others });
            let own = claimant::looks(made, ready, end, &self.tick_log, Claimant::Own);
            if let Some(ready) = ready.filter(|r| *r <= end) {
                seen.push((told.seen - ready).as_seconds_f64());
                seen_unhinted.push((own.seen - ready).as_seconds_f64());
            }
            c.unhinted += own.at.len();
            c.looks.extend(told.at);
        }
        c.looks.sort();
        (c.seen, c.seen_unhinted) = (Lateness::of(seen), Lateness::of(seen_unhinted));
        c
    }

    /// Reads the table's counters at the start of each measured minute up to the one `now` is in, before
    /// anything happens at `now`.
    pub(super) fn meter(&mut self, now: Timestamp) {
        let from = self.trace.measured_from();
        if now < from {
            return;
        }
        let minute = usize::try_from((now - from).num_minutes()).unwrap_or(0);
        while self.minutes.len() <= minute {
            let reading = self.reading();
            self.minutes.push(reading);
        }
    }

    /// The counters as they stand.
    pub(super) fn reading(&self) -> Meter {
        let u = &self.usage;
        let all = u.written.total();
        Meter {
            table_writes: all.items + all.entries + all.events + u.tick_write_units,
            index_writes: all.copies,
            query_units: u.query_units,
            claims: self.made,
            nudges: u.nudges,
            ticks: u.ticks,
            looks: u.tick_looks,
        }
    }
}

/// The claimants of the claims that waited ([`Simulation::claimants`]).
#[derive(Debug, Default)]
pub(super) struct Claimants {
    /// Each look, following the claim API's hints, in order.
    pub(super) looks: Vec<Timestamp>,
    /// How many looks they would have taken on their own gaps alone.
    pub(super) unhinted: usize,
    /// When each claim made while older ones waited was made: its making read the tick item too.
    pub(super) told_at_making: Vec<Timestamp>,
    /// From readable Ready to seen, following the hints.
    pub(super) seen: Lateness,
    /// The same on their own gaps alone.
    pub(super) seen_unhinted: Lateness,
}
