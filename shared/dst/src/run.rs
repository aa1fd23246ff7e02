//! One seed end to end: a workload under every fault for the chaos phase, with the invariants checked after every
//! step; then quiet (no faults, no new requests), within whose bounds every pending claim with capacity is served,
//! every pool converges, and no machine is left without its cluster.

use std::collections::BTreeMap;

use apiary_planner::Timestamp;
use apiary_testkit::cloud::Timings;
use chrono::{TimeDelta, TimeZone, Utc};

use crate::faults::{FaultCounts, Faults};
use crate::invariants::{converged, pending_with_capacity, Checker, Violation, CLAIM_BOUND, POOL_BOUND};
use crate::sim::{Options, Request, Sim, Stats};
use crate::workload;

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The seed: the workload, the faults, the interleaving and the cloud's timings all come from it.
    pub seed: u64,
    /// How long faults are injected while the workload runs.
    pub chaos: TimeDelta,
    /// The faults.
    pub faults: Faults,
    /// Keep a trace of every invocation (printed with a failure).
    pub trace: bool,
}

impl RunConfig {
    /// Every fault for two simulated hours.
    pub fn new(seed: u64) -> Self {
        Self { seed, chaos: TimeDelta::hours(2), faults: Faults::all(), trace: false }
    }
}

/// What a passing run did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// Virtual time simulated.
    pub simulated: TimeDelta,
    /// What ran.
    pub stats: Stats,
    /// What the faults did.
    pub faults: FaultCounts,
    /// API answers by status.
    pub answers: BTreeMap<u16, usize>,
    /// The answers to claims by labels and to the requests that found them by name alone, by request and status
    /// (`PUT 201`, `DELETE 202`, …).
    pub by_labels: BTreeMap<String, usize>,
    /// The longest any pool took to converge once quiet.
    pub slowest_convergence: TimeDelta,
    /// Messages dead-lettered (their work was recovered by the sweep).
    pub dead_letters: usize,
    /// How long resumes on pools with the Kubernetes check took from their machines found running to Running.
    pub resumes: crate::invariants::ResumeTimes,
    /// Notifications the receiver got, those dead-lettered after their last attempt, and attempts that failed.
    pub notifications: (usize, usize, usize),
    /// Clusters whose provisioning stopped, by their condition's reason (the class of a failure not tried again,
    /// the attempts limit, the install timeout).
    pub provisions_stopped: BTreeMap<String, usize>,
}

/// A failing run: the first invariant that did not hold.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed that replays it.
    pub seed: u64,
    /// What failed.
    pub violation: Violation,
    /// Invocations and steps until then.
    pub stats: Stats,
    /// The trace, when asked for.
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} (after {} steps); replay: make dst SEED={}",
            self.seed, self.violation, self.stats.polls, self.seed
        )
    }
}

/// The start of every run's timeline.
pub fn start() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 11, 23, 8, 0, 0).single().unwrap_or_default()
}

/// The longest a pool may go on serving a queue of claims once the faults stop. A pool still waiting on claims
/// then fails: a claimed cluster that never comes free, say.
pub const BACKLOG_LIMIT: TimeDelta = TimeDelta::hours(8);

/// The longest a machine may stay without a cluster once the faults have stopped (or from when it is first seen
/// so, if later): the reaper's default interval and grace (the longest a pool here sets), and time for a pass to
/// be asked for (a full sweep reconciles every pool every ten minutes) twice, and for the deprovisioning.
pub const ORPHAN_BOUND: TimeDelta = TimeDelta::minutes(
    apiary_planner::reaper::REAP_GRACE.num_minutes() + apiary_planner::reaper::REAP_EVERY.num_minutes() + 30,
);

/// The longest a cluster whose removal the reference installer accepted may keep anything once the faults have
/// stopped (or from when it is first seen so, if later): a destroy of six minutes at most, and Apiary's looks at a
/// deleting cluster, which grow sparser as it ages.
pub const REMOVAL_BOUND: TimeDelta = TimeDelta::minutes(60);

/// The quiet phase, from `quiet_at`: no faults and no new requests. Each claim with room is served within
/// [`CLAIM_BOUND`]; each pool converges within [`POOL_BOUND`] of the faults stopping or, while it works through a
/// queue of claims, of the last of them getting its cluster (a claim holds its cluster for its lifetime, so a
/// queue at maxSize drains no faster than the lifetimes before it run out: that is the pool working, not stuck),
/// within [`BACKLOG_LIMIT`]; and no machine stays without its cluster for longer than [`ORPHAN_BOUND`] (the
/// reaper's to find: a cluster item removed behind Apiary's back leaves its machines so), none is left at the end;
/// nor does a cluster whose removal the reference installer accepted keep anything past [`REMOVAL_BOUND`].
/// Returns the longest any pool took to converge.
pub fn settle(sim: &mut Sim, checker: &mut Checker, quiet_at: Timestamp) -> Result<TimeDelta, Violation> {
    sim.quiet();
    // The invocations in flight at `quiet_at` ran to their end under the faults: from here on, none.
    checker.quiet(sim.now());
    let pools = sim.world.store.tables().snapshots();
    let settled: BTreeMap<String, Option<TimeDelta>> = pools.into_iter().map(|s| (s.pool.name, None)).collect();
    let due = settled.keys().map(|p| (p.clone(), quiet_at + POOL_BOUND)).collect();
    let mut q = Quiet {
        quiet_at,
        settled,
        due,
        waiting: BTreeMap::new(),
        orphans: BTreeMap::new(),
        removing: BTreeMap::new(),
        last_look: quiet_at,
    };
    // Until every pool that has not converged is past its bound, or the backlog limit.
    let limit = quiet_at + BACKLOG_LIMIT;
    let mut horizon = quiet_at + POOL_BOUND;
    loop {
        sim.run_until(horizon, |s| q.look(s, checker))?;
        let open = q.due.iter().filter(|(p, _)| q.settled.get(*p).is_some_and(Option::is_none));
        // Machines without their cluster keep the quiet phase going until the reaper's bound for each.
        let orphaned = q.orphans.values().map(|first| (*first).max(quiet_at) + ORPHAN_BOUND);
        // A removal accepted since the last look keeps it going too.
        let now = sim.now();
        let installer = &sim.clouds.installer;
        for id in installer.removed().into_iter().filter(|id| !installer.left_of(id).is_empty()) {
            q.removing.entry(id).or_insert(now);
        }
        let removing = q.removing.values().map(|first| (*first).max(quiet_at) + REMOVAL_BOUND);
        match open.map(|(_, t)| *t).chain(orphaned).chain(removing).max() {
            Some(t) if t > horizon && horizon < limit => horizon = t.min(limit),
            _ => break,
        }
    }
    let Quiet { settled, due, .. } = q;
    let now = sim.now();
    let tables = sim.world.store.tables();
    for (pool, when) in &settled {
        // The pools are looked at every ten seconds: one that converged since the last look has converged.
        let unsettled = tables.snapshot(pool).and_then(|s| converged(&s, now).err());
        if let (None, Some(why)) = (when, unsettled) {
            let since = due.get(pool).map_or(quiet_at, |t| *t - POOL_BOUND);
            let detail = format!(
                "{pool} did not converge within {POOL_BOUND} of {since} (the faults stopping, or its last claim waiting): {why}"
            );
            return Err(Violation { at: now, invariant: "pools converge", detail });
        }
    }
    // No leaked machines: every machine still up belongs to a cluster that exists.
    if let Some((m, _)) = orphans(sim).into_iter().next() {
        return Err(Violation { at: now, invariant: "no leaked machines", detail: m });
    }
    // Every removal the reference installer accepted ended with nothing of the cluster left.
    let installer = &sim.clouds.installer;
    for id in installer.removed() {
        let left = installer.left_of(&id);
        if !left.is_empty() {
            let detail = format!("{id}'s removal was accepted, yet {}", left.join(", "));
            return Err(Violation { at: now, invariant: "every removal ends with nothing left", detail });
        }
    }
    Ok(settled.values().map(|w| w.unwrap_or(POOL_BOUND)).max().unwrap_or_default())
}

/// What the quiet phase keeps between its looks at the pools.
struct Quiet {
    quiet_at: Timestamp,
    /// Each pool: how long after the faults stopped it was first seen converged.
    settled: BTreeMap<String, Option<TimeDelta>>,
    /// Each pool's bound: POOL_BOUND after the faults stopped or after the last look at which a claim of it waited.
    due: BTreeMap<String, Timestamp>,
    /// Each pending claim: since when it has had room, without a break.
    waiting: BTreeMap<(String, String), Timestamp>,
    /// Each machine up that no cluster has (by infraId): since when it has been so.
    orphans: BTreeMap<String, Timestamp>,
    /// Each cluster whose removal the reference installer accepted and that still has something left: since when.
    removing: BTreeMap<String, Timestamp>,
    last_look: Timestamp,
}

/// Every machine up whose infraId no cluster has (what the reaper is for), described, with its infraId.
fn orphans(sim: &Sim) -> Vec<(String, String)> {
    let tables = sim.world.store.tables();
    // A cluster the reference installer is installing has machines before Apiary hears their infraId.
    let installer = &sim.clouds.installer.jobs;
    let known: std::collections::BTreeSet<String> = tables
        .snapshots()
        .into_iter()
        .flat_map(|s| s.clusters.into_iter().flat_map(|c| installer.infra_ids(&c.id).into_iter().chain([c.infra_id])))
        .collect();
    let ec2 =
        sim.world.cloud.machines().into_iter().filter(|m| !m.state.is_gone() && !known.contains(&m.infra_id)).map(
            |m| {
                (
                    format!(
                        "{} ({:?}) of {}/{} belongs to infraId {}, which no cluster has",
                        m.id, m.state, m.pool, m.cluster, m.infra_id
                    ),
                    m.infra_id,
                )
            },
        );
    let fakes =
        sim.clouds.machines().into_iter().filter(|m| !m.state.is_gone() && !known.contains(&m.infra_id)).map(|m| {
            (
                format!(
                    "{} {} ({:?}) belongs to infraId {}, which no cluster has",
                    m.cloud, m.name, m.state, m.infra_id
                ),
                m.infra_id,
            )
        });
    ec2.chain(fakes).collect()
}

impl Quiet {
    /// After every step: the invariants; every ten seconds, the pools.
    fn look(&mut self, s: &Sim, checker: &mut Checker) -> Result<(), Violation> {
        checker.step(s)?;
        let now = s.now();
        if now - self.last_look < TimeDelta::seconds(10) {
            return Ok(());
        }
        self.last_look = now;
        let tables = s.world.store.tables();
        for (pool, when) in self.settled.iter_mut().filter(|(_, w)| w.is_none()) {
            let done = match tables.snapshot(pool) {
                None => true,
                Some(snap) => converged(&snap, now).is_ok(),
            };
            if done {
                *when = Some(now - self.quiet_at);
            }
        }
        let mut still = BTreeMap::new();
        for snap in tables.snapshots() {
            if snap.claims.iter().any(|k| k.is_pending()) {
                self.due.insert(snap.pool.name.clone(), now + POOL_BOUND);
            }
            if let Err((claim, why)) = pending_with_capacity(&snap, now) {
                let key = (snap.pool.name.clone(), claim);
                let since = self.waiting.get(&key).copied().unwrap_or(now);
                if now - since > CLAIM_BOUND {
                    let detail = format!("{}: {why}, with room for {}", snap.pool.name, CLAIM_BOUND);
                    return Err(Violation { at: now, invariant: "claims served", detail });
                }
                still.insert(key, since);
            }
        }
        self.waiting = still;
        let mut orphaned = BTreeMap::new();
        for (what, infra_id) in orphans(s) {
            let first = self.orphans.get(&infra_id).copied().unwrap_or(now);
            if now - first.max(self.quiet_at) > ORPHAN_BOUND {
                let detail = format!("{what} since {first}, longer than the reaper's bound {ORPHAN_BOUND}");
                return Err(Violation { at: now, invariant: "orphans reaped", detail });
            }
            orphaned.insert(infra_id, first);
        }
        self.orphans = orphaned;
        let installer = &s.clouds.installer;
        let mut removing = BTreeMap::new();
        for id in installer.removed() {
            let left = installer.left_of(&id);
            if left.is_empty() {
                continue;
            }
            let first = self.removing.get(&id).copied().unwrap_or(now);
            if now - first.max(self.quiet_at) > REMOVAL_BOUND {
                let detail = format!("{id}'s removal was accepted, yet {} since {first}", left.join(", "));
                return Err(Violation { at: now, invariant: "every removal ends with nothing left", detail });
            }
            removing.insert(id, first);
        }
        self.removing = removing;
        Ok(())
    }
}

/// Runs one seed.
pub fn run(config: &RunConfig) -> Result<Report, Box<Failure>> {
    let t0 = start();
    let options = Options { faults: config.faults, interleave: true, ..Options::deployed(config.seed) };
    let mut sim = Sim::new(t0, options);
    if config.trace {
        sim.trace = Some(vec![]);
    }
    sim.world.cloud.set_timings(Timings {
        launch: TimeDelta::seconds(90),
        start: TimeDelta::seconds(60),
        stop: TimeDelta::seconds(30),
        terminate: TimeDelta::seconds(10),
        status_checks: TimeDelta::seconds(20),
    });
    for (at, request) in workload::generate(config.seed, t0, config.chaos) {
        sim.request(at, request);
    }
    let mut checker = Checker::default();
    let fail = |sim: &Sim, violation: Violation| {
        Box::new(Failure {
            seed: config.seed,
            violation,
            stats: sim.stats.clone(),
            trace: sim.trace.clone().unwrap_or_default(),
        })
    };
    let quiet_at = t0 + config.chaos;
    if let Err(v) = sim.run_until(quiet_at, |s| checker.step(s)) {
        return Err(fail(&sim, v));
    }
    let slowest = match settle(&mut sim, &mut checker, quiet_at) {
        Ok(slowest) => slowest,
        Err(v) => return Err(fail(&sim, v)),
    };
    let now = sim.now();
    let notifications = match crate::invariants::notifications_delivered(&sim, now) {
        Ok(counts) => counts,
        Err(v) => return Err(fail(&sim, v)),
    };
    let mut answers = BTreeMap::new();
    let mut by_labels = BTreeMap::new();
    for a in &sim.answers {
        *answers.entry(a.status).or_default() += 1;
        let verb = match &a.request {
            Request::ClaimByLabels { .. } => "PUT",
            Request::Change { pool, .. } if pool.is_empty() => "PATCH",
            Request::Release { pool, .. } if pool.is_empty() => "DELETE",
            Request::Power { pool, .. } if pool.is_empty() => "POST",
            _ => continue,
        };
        *by_labels.entry(format!("{verb} {}", a.status)).or_default() += 1;
    }
    Ok(Report {
        seed: config.seed,
        simulated: now - t0,
        stats: sim.stats.clone(),
        faults: sim.hook.counts(),
        answers,
        by_labels,
        slowest_convergence: slowest,
        dead_letters: sim.world.queue.dead_letters().len(),
        resumes: checker.resumes.clone(),
        notifications,
        provisions_stopped: checker.stopped.values().fold(BTreeMap::new(), |mut m, r| {
            *m.entry(r.clone()).or_insert(0) += 1;
            m
        }),
    })
}
