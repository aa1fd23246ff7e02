//! The power function: a nudge's step and the pool's tick, run by the planner's own `power` rules, each look's
//! lateness measured against when the machines were done.

use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::tick;
use apiary_planner::power::{self, Termination};
use apiary_planner::Timestamp;
use apiary_ports::store::Item;
use chrono::TimeDelta;

use crate::claimant;
use crate::units;

use super::reconcile::cluster_write_units;
use super::*;

impl Simulation<'_> {
    /// A nudge of the power function for `id`: it steps the cluster, and makes sure the pool's tick comes soon
    /// enough for the look it wants next (writing the tick item only when it starts or brings the tick forward).
    /// True when it reached a state the pool acts on.
    pub(super) fn nudge(&mut self, id: &str, now: Timestamp) -> bool {
        self.usage.nudges += 1;
        let (notable, want) = self.steps(id, now);
        let want = want.map(|w| tick::aligned(w, now));
        if let Some(want) = want {
            self.tokens += 1;
            let next = chain::next(&self.tick, Admission::Nudge, Some(want), now, self.tokens);
            if let Some(link) = next.send {
                (self.tick.check, self.tick.superseded) = (next.check, next.superseded);
                self.live_receives = 0;
                self.tick.due.insert(id.to_string(), want);
                self.write_tick(now);
                self.at(link.due, Event::Tick(link.token));
            }
        }
        notable
    }

    /// A step the simulation takes the moment machines finish (a deployed pool takes it at the first look at `id`
    /// after that, which [`Self::noticed`] measures); the tick's record of `id` is left as that look will find it.
    pub(super) fn at_once(&mut self, id: &str, now: Timestamp) -> bool {
        self.steps(id, now).0
    }

    /// The tick's look at `id` at `now`: if it notices a transition done since the last look, how long after it
    /// came. (A nudge may look sooner; the simulation, acting at once, makes some nudges at the very moment machines
    /// are done that a deployed pool makes only after the tick noticed them, so only the tick's looks count.)
    /// True when it noticed an install or a resume done: a cluster come up ([`Tick::up`]).
    pub(super) fn noticed(&mut self, id: &str, now: Timestamp) -> bool {
        let Some((kind, done, claim_waiting)) = self.noticing.remove(id) else { return false };
        let late = (now - done).as_seconds_f64();
        self.late[kind].push(late);
        if claim_waiting {
            self.late[kind + WAITED_ON].push(late);
        }
        // A claim given it meanwhile is readable Ready once the reconcile this look asks for has run.
        if let Some(claim) = self.given.remove(id) {
            if let Some(w) = self.waited.get_mut(&claim) {
                w.2 = Some(now + claimant::NEWS);
            }
        }
        kind < 2
    }

    /// The pool's tick, admitted: looks at the clusters in motion whose look is due, records their next looks
    /// and sends the next link. True when a look reached a state the pool acts on.
    pub(super) fn tick_run(&mut self, admission: Admission, now: Timestamp) -> bool {
        let moving = self.moving();
        let mut looked = Vec::new();
        let (mut notable, mut came_up) = (false, false);
        let hurry = tick::hurried(admission, self.snap.pool.status.pending_claims);
        for id in tick::looks(&self.tick, &moving, now, hurry) {
            self.usage.tick_looks += 1;
            came_up |= self.noticed(&id, now);
            let (n, want) = self.steps(&id, now);
            notable |= n;
            looked.push((id, want.map(|w| tick::aligned(w, now))));
        }
        let moving = self.moving();
        self.tick.due = tick::after(&self.tick, &moving, &looked);
        let want = tick::next_due(&self.tick.due, &moving, now).map(|at| at.min(now + MAX_DELAY));
        // The live link goes on in its own message, with its own token, while the message has receives to spare;
        // else in a new one.
        let receives = self.live_receives + 1;
        let live = self.tick.check.map(|c| c.token);
        let back = chain::carries_on(admission, receives);
        let token = match live.filter(|_| back) {
            Some(token) => token,
            None => {
                self.tokens += 1;
                self.tokens
            }
        };
        let next = chain::next(&self.tick, admission, want, now, token);
        if admission == Admission::Own && next.send.is_some() {
            if back {
                self.usage.tick_returns += 1;
            } else {
                self.usage.tick_sends += 1;
            }
        }
        self.live_receives = match next.check.map(|c| c.token) {
            t if t != live => 0,
            _ if admission == Admission::Own => receives,
            _ => self.live_receives,
        };
        (self.tick.check, self.tick.superseded) = (next.check, next.superseded);
        self.tick.up = tick::up(&self.tick, came_up, now);
        self.write_tick(now);
        if let Some(link) = next.send {
            self.at(link.due, Event::Tick(link.token));
        }
        notable
    }

    /// The clusters the pool's index says are in motion: those the power function has work on (deleting ones
    /// included), and those whose done transition no look has noticed yet (to the table, still in motion).
    pub(super) fn moving(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .snap
            .clusters
            .iter()
            .filter(|c| power::in_progress(c) || self.noticing.contains_key(&c.id))
            .map(|c| c.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Counts a write of the tick item at `now`: one conditional put, a unit per KB of it.
    pub(super) fn write_tick(&mut self, now: Timestamp) {
        self.tick_log.write(now, &self.tick);
        let bytes = units::size(&Item::Tick(Box::new(self.tick.clone())));
        self.usage.tick_writes += 1;
        self.usage.tick_write_units += units::kb(bytes);
    }

    /// The steps of one look at `id`: whether it reached a state the pool acts on, and when it wants its next
    /// look. The intent before each call and the outcome after it are counted as table writes.
    pub(super) fn steps(&mut self, id: &str, now: Timestamp) -> (bool, Option<Timestamp>) {
        if let Some(deleting) = self.position(id).map(|i| &self.snap.clusters[i]).filter(|c| c.deleting) {
            // A look at a deleting cluster asks the cloud to terminate its machines. They are still going: the
            // simulation deletes the item the moment they are gone (`Event::Deprovisioned`).
            let going = Termination { remaining: 1, refused: vec![] };
            let step = power::deprovision_step(deleting, &going, now);
            return (false, step.recheck_after.map(|d| now + d.min(MAX_DELAY)));
        }
        let timeouts = self.snap.pool.power_limits();
        let mut notable = false;
        for _ in 0..4 {
            let Some(idx) = self.position(id) else { break };
            let Some(probe) = power::probe(&self.snap.clusters[idx]) else { break };
            let report = self.report(id, probe);
            let before = &self.snap.clusters[idx];
            let mut step = power::step(before, &report, now, timeouts);
            let mut intent = None;
            if let Some(call) = step.call {
                // The intent is written before the call, with the events of what it changed.
                self.writes += 1;
                let parts = cluster_write_units(before, &step.cluster, now);
                self.written(|w| &mut w.power_intents, parts);
                intent = Some(step.cluster.clone());
                let outcome = self.call(id, call, now);
                let (changed, wakes) = (step.changed, step.wakes_pool);
                step = power::step(&step.cluster, &outcome, now, timeouts);
                step.changed |= changed;
                step.wakes_pool |= wakes;
            }
            notable |= step.wakes_pool;
            let before = &self.snap.clusters[idx];
            let mut after = step.cluster;
            if step.changed {
                self.dirty = true;
                after.rev = before.rev + 1;
                self.writes += 1;
                let parts = cluster_write_units(intent.as_ref().unwrap_or(before), &after, now);
                if after.is_broken() && !before.is_broken() {
                    self.broken += 1;
                }
                let timed = apiary_ports::metrics::power_transition("sim", "sim", before, &after, now);
                self.written(|w| &mut w.power_outcomes, parts);
                match timed.as_ref().and_then(|doc| doc["Transition"].as_str()) {
                    Some("Resume") => self.metered(RESUMED, now),
                    Some(_) => self.metered(STOPPED, now),
                    None => {}
                }
                self.snap.clusters[idx] = after;
            }
            match step.recheck_after {
                Some(d) if d <= TimeDelta::zero() => continue,
                Some(d) => return (notable, Some(now + d.min(MAX_DELAY))),
                None => return (notable, None),
            }
        }
        // The step budget ran out: come back after the short poll.
        let more = self.position(id).is_some_and(|i| power::in_progress(&self.snap.clusters[i]));
        (notable, more.then(|| now + power::POLL))
    }

    /// Notes that `id`'s machines finished their transition at `done`: the power function's next look at it
    /// notices it ([`Self::noticed`]; the simulation acts on machines at once, a deployed pool at that look).
    pub(super) fn note_lateness(&mut self, id: &str, done: Timestamp) {
        let kind = match self.machines.get(id) {
            Some(Machines::Installing(t)) if *t == done => 0,
            Some(Machines::Starting(Some(t))) if *t == done => 1,
            Some(Machines::Stopping(t)) if *t == done => 2,
            _ => return,
        };
        let claim_waiting =
            kind < 2 && self.snap.claims.iter().any(|c| c.cluster.is_none() && c.release_requested_at.is_none());
        self.noticing.insert(id.to_string(), (kind, done, claim_waiting));
    }

    /// The index of cluster `id` in the snapshot.
    pub(super) fn position(&mut self, id: &str) -> Option<usize> {
        if let Some(&i) = self.index.get(id) {
            if self.snap.clusters.get(i).is_some_and(|c| c.id == id) {
                return Some(i);
            }
        }
        self.index = self.snap.clusters.iter().enumerate().map(|(i, c)| (c.id.clone(), i)).collect();
        self.index.get(id).copied()
    }
}
