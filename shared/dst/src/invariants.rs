//! What must hold after every step, each with its own message, and what must hold once the faults stop.
//!
//! After every step (checked when the table, the queues or the API answers moved):
//! - **one claim per cluster**: no cluster is in two claims, and a claim's cluster names that claim back;
//! - **assigned only when Running**: a claim that gains a cluster gains one the table says is installed and Running
//!   and whose machines all run in the cloud at that moment;
//! - **unique inventory names**: no two live clusters of a pool hold the same name;
//! - **maxSize** and **maxConcurrent** as the planner promises: all clusters never above maxSize (the inventory
//!   caps it), installing + deleting never above maxConcurrent, and if a spec change left a pool above either,
//!   the count never grows;
//! - **bounded re-checks**: at most two links of a pool's tick in flight;
//! - **no 500**: the API never answers a server error but 503 (busy, try again);
//! - **claims by labels**: one answered goes to a pool carrying its labels, and each such claim and its name's
//!   entry (which makes the name the stack's) come and go together;
//! - **no hostile certificate request approved** (seed 004): of the requests the clusters' kubelets and the hostile
//!   requesters beside them made, none of the hostile ones is ever approved;
//! - **install failures by class** (issue 73): a failure of a class the pool does not try again is never retried
//!   (no cluster carries a ProvisionFailed condition naming such a class); the reference installer's failed jobs
//!   end with a line of each class in turn.
//! - **the reference installer's jobs** (issue 72): never two jobs at once for one cluster, nor one started twice,
//!   and no install started for a cluster after the installer accepted its removal;
//! - **every end told**: a cluster whose item is gone has, in its pool's trail, a `ClusterDeleting` event saying
//!   why and a `ClusterRemoved` event (written in the same transactions as the changes they tell of), unless the
//!   simulation removed it behind Apiary's back.
//!
//! Once quiet (see [`crate::run()`]): **resumes end Running**: no cluster whose machines all run breaks on a resume
//! begun once the faults stopped (a resume whose nodes need their certificates approved among them); every pending
//! claim is assigned within [`CLAIM_BOUND`] of its pool having room for it, every pool converges within
//! [`POOL_BOUND`], and no machine is left without its cluster. At the end, **notifications delivered**: each
//! notification a pool's receiver was to hear more than [`NOTICE_BOUND`] before is received (verified, once) or
//! dead-lettered in the trail, whatever the receiver's outages and the faults did (issue 59); and the claims were
//! served within their bounds all the same; and **every removal ends with nothing left**: each cluster whose removal
//! the reference installer accepted has no machine, stored credential or running job left, its record a tombstone.

use std::collections::{BTreeMap, BTreeSet};

use apiary_planner::events::EventType;
use apiary_planner::machines::MachineState;
use apiary_planner::power::chain::{self, Admission};
use apiary_planner::{plan, Action, PowerState, Snapshot, Timestamp};
use apiary_ports::messages::PowerMessage;
use apiary_ports::store::{spare_key, Item, Key};
use apiary_testkit::queue::QueueName;
use apiary_testkit::store::Tables;
use chrono::TimeDelta;

use crate::sim::{Request, Sim};

/// Once faults stop, a claim that can be served is served within this (a lost reconcile comes back after the
/// six-minute visibility timeout; a lost tick is started again by the ten-minute full sweep after its two-minute
/// grace; then an install and two resumes, each a few minutes at most).
pub const CLAIM_BOUND: TimeDelta = TimeDelta::minutes(30);
/// Once faults stop, every pool converges within this: [`CLAIM_BOUND`], and a termination refused many times
/// retried after its longest backoff (fifteen minutes).
pub const POOL_BOUND: TimeDelta = TimeDelta::minutes(50);

/// Every notification is delivered or dead-lettered within this of its event: its attempts' waits
/// ([`apiary_planner::notify::RETRIES`], 81 minutes and 10 seconds in all), a pass's lag and the sweep's minute,
/// and a few minutes of messages coming back after faults.
pub const NOTICE_BOUND: TimeDelta = TimeDelta::minutes(95);

/// Of each pool still there at `now` (as made last) that has `notify` webhooks, each notification of an event
/// more than [`NOTICE_BOUND`] old was received by the simulation's receiver or dead-lettered in the trail: how
/// many were received, how many dead-lettered, and how many attempts failed on the way.
pub fn notifications_delivered(sim: &Sim, now: Timestamp) -> Result<(usize, usize, usize), Violation> {
    let received: BTreeSet<String> = sim.clouds.receiver.received().into_iter().map(|r| r.id).collect();
    let (mut delivered, mut dead, mut failed) = (0, 0, 0);
    for snap in sim.world.store.tables().snapshots().into_iter().filter(|s| !s.pool.spec.notify.is_empty()) {
        let trail = sim.world.store.trail(&snap.pool.name);
        failed += trail.iter().filter(|(_, e)| e.kind == EventType::NotificationFailed).count();
        let dead_lettered: BTreeSet<&str> = trail
            .iter()
            .filter(|(_, e)| e.kind == EventType::NotificationDeadLettered)
            .filter_map(|(_, e)| e.delivery.as_ref().map(|d| d.of.as_str()))
            .collect();
        let due = trail.iter().filter(|(_, e)| {
            e.notice.is_some() && e.delivery.is_none() && e.time >= snap.pool.created_at && now - e.time > NOTICE_BOUND
        });
        for (key, event) in due {
            if received.contains(key) {
                delivered += 1;
            } else if dead_lettered.contains(key.as_str()) {
                dead += 1;
            } else {
                let detail = format!(
                    "{}: the notification of {key} ({:?}) was neither received nor dead-lettered",
                    snap.pool.name, event.kind
                );
                return Err(Violation { at: now, invariant: "notifications delivered", detail });
            }
        }
    }
    Ok((delivered, dead, failed))
}

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// When.
    pub at: Timestamp,
    /// Which invariant.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}: {}", self.invariant, self.at.to_rfc3339(), self.detail)
    }
}

/// The names of claims by labels and the claims agree: each claim-name entry names a pool that holds a claim by
/// labels of that name, and each claim by labels has its entry naming its pool (both are written, and deleted, in
/// one transaction).
fn claim_names(tables: &Tables, now: Timestamp) -> Result<(), Violation> {
    let mut entries = BTreeMap::new();
    for items in tables.pools.values() {
        for item in items.values() {
            if let Item::ClaimName(entry) = item {
                entries.insert(entry.name.clone(), entry.holder.clone());
            }
        }
    }
    let mut selected = BTreeMap::new();
    for snap in tables.snapshots() {
        for k in snap.claims.iter().filter(|k| k.selector.is_some()) {
            selected.insert(k.name.clone(), snap.pool.name.clone());
        }
    }
    if entries != selected {
        let detail = format!("entries {entries:?}, claims by labels {selected:?}");
        return violation(now, "a claim by labels and its name's entry come and go together", detail);
    }
    Ok(())
}

/// A cluster of `snap` whose install is being tried again after a failure of a class its pool does not retry
/// (its ProvisionFailed condition, which only a retried failure sets, names such a class).
fn retried_against_its_pool(snap: &Snapshot) -> Option<&str> {
    use apiary_planner::failure::FailureReason;
    let retried = snap.pool.spec.power_limits().retried;
    let refused: Vec<&str> =
        FailureReason::ALL.into_iter().filter(|r| !retried.contains(*r)).map(FailureReason::condition_reason).collect();
    snap.clusters.iter().find_map(|c| {
        let k = apiary_planner::find_condition(&c.conditions, apiary_planner::condition::PROVISION_FAILED)?;
        (k.status == apiary_planner::ConditionStatus::True && refused.contains(&k.reason.as_str()))
            .then_some(c.id.as_str())
    })
}

fn violation(at: Timestamp, invariant: &'static str, detail: String) -> Result<(), Violation> {
    Err(Violation { at, invariant, detail })
}

/// Counts a pool's limits are held against.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    total: usize,
    busy: usize,
}

/// The step-by-step checker.
#[derive(Default)]
pub struct Checker {
    writes: u64,
    sent: u64,
    answers: usize,
    /// (pool, claim) → its cluster, as of the last look.
    assigned: BTreeMap<(String, String), Option<String>>,
    counts: BTreeMap<String, Counts>,
    /// Every cluster (pool, id) in the table, as of the last look.
    clusters: BTreeSet<(String, String)>,
    /// The approvals the clusters' API servers took, as of the last look.
    approvals: u64,
    /// When the faults stopped, once they have.
    quiet_at: Option<Timestamp>,
    /// Clusters of pools with the Kubernetes check whose machines were found running, since when.
    nodes_since: BTreeMap<(String, String), Timestamp>,
    /// How long the resumes seen so far took from there.
    pub resumes: ResumeTimes,
    /// Clusters (pool, id) standing free for a claim (a Running spare the pool may assign), since when, as of the
    /// last look.
    free_since: BTreeMap<(String, String), Timestamp>,
    /// Each pool's labels, each time they changed (as seen at a look), with when: a claim by labels may have read
    /// a pool's spec just before an admin relabeled it.
    labels_seen: BTreeMap<String, Vec<(Timestamp, apiary_planner::select::Labels)>>,
    /// The reference installer's jobs started, and its removals accepted, as of the last look.
    installer: (usize, usize),
    /// Each cluster (pool, id) whose provisioning stopped, with its condition's reason.
    pub stopped: BTreeMap<(String, String), String>,
}

/// Resumes (and installs) on pools with the Kubernetes readiness check, from the look that found their machines
/// running (WaitingForNodes) to Running, in seconds: those whose nodes needed certificate requests approved
/// (seed 004), and the others.
#[derive(Debug, Clone, Default)]
pub struct ResumeTimes {
    /// Those that approved certificate requests.
    pub with_certificates: Vec<f64>,
    /// Those that needed none.
    pub without: Vec<f64>,
}

impl ResumeTimes {
    /// Adds `other`'s.
    pub fn extend(&mut self, other: &ResumeTimes) {
        self.with_certificates.extend(&other.with_certificates);
        self.without.extend(&other.without);
    }
}

impl Checker {
    /// Checks what moved since the last step.
    pub fn step(&mut self, sim: &Sim) -> Result<(), Violation> {
        let now = sim.now();
        if sim.answers.len() != self.answers {
            for a in &sim.answers[self.answers..] {
                if a.status >= 500 && a.status != 503 {
                    return violation(now, "no 500", format!("{:?} answered {} {}", a.request, a.status, a.body));
                }
                self.went_where_labelled(sim, a, now)?;
                if let (202, Request::Claim { pool, claim, .. }) = (a.status, &a.request) {
                    let since =
                        |c: &apiary_planner::Cluster| self.free_since.get(&(pool.clone(), c.id.clone())).copied();
                    if let Some(why) =
                        sim.world.snapshot(pool).and_then(|snap| told_to_wait_since(&snap, claim, since).err())
                    {
                        return violation(now, "no claim waits while a spare is free", why);
                    }
                }
            }
            self.answers = sim.answers.len();
        }
        let sent = sim.world.queue.sent();
        if sent != self.sent {
            self.sent = sent;
            rechecks(sim, now)?;
        }
        let approvals = sim.clouds.cluster_api.approvals();
        if approvals != self.approvals {
            self.approvals = approvals;
            if let Some((infra, csr)) = sim.clouds.csrs().into_iter().find(|(_, c)| c.hostile() && c.approved()) {
                let detail = format!("{} of the cluster {infra} was approved: {}", csr.name(), csr.object);
                return violation(now, "no hostile certificate request approved", detail);
            }
        }
        let installer = &sim.clouds.installer;
        let seen = (installer.jobs.started(), installer.removals());
        if seen != self.installer {
            self.installer = seen;
            if let Err((invariant, detail)) = installer.jobs_kept() {
                return violation(now, invariant, detail);
            }
        }
        let writes = sim.world.store.writes();
        if writes != self.writes {
            self.writes = writes;
            let tables = sim.world.store.tables();
            self.table(sim, &tables, now)?;
        }
        Ok(())
    }

    /// The faults stopped at `at`: from now on, resumes begun since end Running.
    pub fn quiet(&mut self, at: Timestamp) {
        self.quiet_at = Some(at);
    }

    fn table(&mut self, sim: &Sim, tables: &Tables, now: Timestamp) -> Result<(), Violation> {
        let machines = all_machines(sim);
        let mut assigned = BTreeMap::new();
        let mut clusters = BTreeSet::new();
        let mut free_since = BTreeMap::new();
        for snap in tables.snapshots() {
            let pool = snap.pool.name.clone();
            let seen = self.labels_seen.entry(pool.clone()).or_default();
            if seen.last().is_none_or(|(_, l)| *l != snap.pool.spec.labels) {
                seen.push((now, snap.pool.spec.labels.clone()));
            }
            for c in snap.clusters.iter().filter(|c| free_for_a_claim(&snap, c)) {
                let key = (pool.clone(), c.id.clone());
                let since = self.free_since.get(&key).copied().unwrap_or(now);
                free_since.insert(key, since);
            }
            clusters.extend(snap.clusters.iter().map(|c| (pool.clone(), c.id.clone())));
            for c in snap.clusters.iter().filter(|c| c.provision_stopped) {
                let k = apiary_planner::find_condition(&c.conditions, apiary_planner::condition::PROVISION_STOPPED);
                let reason = k.map(|k| k.reason.clone()).unwrap_or_default();
                self.stopped.entry((pool.clone(), c.id.clone())).or_insert(reason);
            }
            if let Some(c) = retried_against_its_pool(&snap) {
                let detail =
                    format!("{pool}/{c}: an install failure of a class the pool does not try again was retried");
                return violation(now, "a failure not tried again is never retried", detail);
            }
            let mut holders: BTreeMap<&str, &str> = BTreeMap::new();
            for k in &snap.claims {
                let key = (pool.clone(), k.name.clone());
                if let Some(id) = &k.cluster {
                    if let Some(other) = holders.insert(id.as_str(), k.name.as_str()) {
                        return violation(
                            now,
                            "one claim per cluster",
                            format!("{pool}/{id} is in claims {other} and {}", k.name),
                        );
                    }
                    let cluster = snap.clusters.iter().find(|c| &c.id == id);
                    if let Some(c) = cluster {
                        if c.claim.as_deref() != Some(k.name.as_str()) {
                            return violation(
                                now,
                                "one claim per cluster",
                                format!("{pool}/{id} names claim {:?}, claim {} names it", c.claim, k.name),
                            );
                        }
                    }
                    let before = self.assigned.get(&key).cloned().flatten();
                    if before.as_deref() != Some(id.as_str()) {
                        // Just assigned: Running in the table and in the cloud.
                        let Some(c) = cluster else {
                            return violation(
                                now,
                                "assigned only when Running",
                                format!("{pool}/{} got {id}, which does not exist", k.name),
                            );
                        };
                        let up: Vec<MachineState> = machines
                            .iter()
                            .filter(|(infra_id, state)| *infra_id == c.infra_id && !state.is_gone())
                            .map(|(_, state)| *state)
                            .collect();
                        if !c.is_running() || up.is_empty() || up.iter().any(|s| *s != MachineState::Running) {
                            return violation(
                                now,
                                "assigned only when Running",
                                format!("{pool}/{} got {id} in state {:?}, machines {up:?}", k.name, c.power_state),
                            );
                        }
                    }
                }
                assigned.insert(key, k.cluster.clone());
            }
            if snap.pool.spec.inventory.is_some() {
                let mut names = BTreeSet::new();
                for c in snap.clusters.iter().filter(|c| !c.deleting) {
                    if !names.insert(c.cluster_name.as_str()) {
                        return violation(
                            now,
                            "unique inventory names",
                            format!("{pool}: two live clusters hold {}", c.cluster_name),
                        );
                    }
                }
            }
            self.limits(&snap, now)?;
            self.resumes_end_running(sim, &snap, now)?;
            self.time_resumes(&snap, now);
        }
        self.assigned = assigned;
        self.free_since = free_since;
        claim_names(tables, now)?;
        self.ends_told(sim, clusters, now)
    }

    /// A claim by labels answered 201 or 202 went to a pool that carried its labels at some moment while it was
    /// made: when it was asked, when it was answered, or in between (an admin may relabel the pool while the claim
    /// reads it; the claim's write holds no condition on the pool item, which every reconcile rewrites).
    fn went_where_labelled(&self, sim: &Sim, answer: &crate::sim::Answer, now: Timestamp) -> Result<(), Violation> {
        let (Request::ClaimByLabels { labels, .. }, 201 | 202) = (&answer.request, answer.status) else {
            return Ok(());
        };
        let pool = answer.body["pool"].as_str().unwrap_or_default();
        let Some(snap) = sim.world.snapshot(pool) else { return Ok(()) };
        let carries = |l: &BTreeMap<String, String>| labels.iter().all(|(k, v)| l.get(k) == Some(v));
        let seen = self.labels_seen.get(pool).map(Vec::as_slice).unwrap_or_default();
        // The labels in force when it was asked (the last seen by then), and every change since.
        let asked = seen.iter().rposition(|(t, _)| *t <= answer.at).unwrap_or(0);
        if carries(&snap.pool.spec.labels) || seen[asked.min(seen.len())..].iter().any(|(_, l)| carries(l)) {
            return Ok(());
        }
        let detail = format!("{:?} went to {pool}, labelled {:?}", answer.request, snap.pool.spec.labels);
        violation(now, "a claim by labels goes to a pool that carries them", detail)
    }

    /// Every cluster gone since the last look (`clusters` are those there now) has its deletion and its removal
    /// in its pool's trail.
    fn ends_told(&mut self, sim: &Sim, clusters: BTreeSet<(String, String)>, now: Timestamp) -> Result<(), Violation> {
        let gone: Vec<&(String, String)> =
            self.clusters.difference(&clusters).filter(|k| !sim.forgotten.contains(*k)).collect();
        for (pool, id) in gone {
            for kind in [EventType::ClusterDeleting, EventType::ClusterRemoved] {
                if !sim.world.store.trail_has(pool, |e| e.kind == kind && e.cluster.as_deref() == Some(id)) {
                    return violation(now, "every end told", format!("{pool}/{id} is gone with no {kind:?} event"));
                }
            }
        }
        self.clusters = clusters;
        Ok(())
    }

    /// Once quiet, no cluster whose machines all run breaks on a resume begun since: every call succeeds, and a
    /// resume whose nodes need their certificate requests approved gets them approved. (A machine the faults left
    /// stuck may still break a resume begun after them: the timeout replacing it is the pool's answer.)
    fn resumes_end_running(&self, sim: &Sim, snap: &Snapshot, now: Timestamp) -> Result<(), Violation> {
        let Some(quiet_at) = self.quiet_at else { return Ok(()) };
        let failed = snap.clusters.iter().find(|c| {
            c.broken_reason() == Some(apiary_planner::reason::FAILED_TO_START)
                && c.transition_started_at.is_some_and(|t| t >= quiet_at)
        });
        let Some(c) = failed else { return Ok(()) };
        let machines: Vec<MachineState> = all_machines(sim)
            .into_iter()
            .filter(|(infra, state)| *infra == c.infra_id && !state.is_gone())
            .map(|(_, state)| state)
            .collect();
        if machines.is_empty() || machines.iter().any(|m| *m != MachineState::Running) {
            return Ok(());
        }
        let pending: Vec<String> = sim
            .clouds
            .csrs()
            .into_iter()
            .filter(|(infra, csr)| *infra == c.infra_id && !csr.approved() && !csr.hostile())
            .map(|(_, csr)| csr.name().to_owned())
            .collect();
        let detail = format!(
            "{}/{} broke on a resume begun at {:?}, after the faults stopped: {}; its certificate requests still \
             pending: {pending:?}; node certificates {:?}",
            snap.pool.name,
            c.id,
            c.transition_started_at,
            c.broken_reason().unwrap_or_default(),
            c.node_certificates
        );
        violation(now, "resumes end Running once quiet", detail)
    }

    /// Notes when clusters of a pool with the Kubernetes check wait for their nodes, and how long until Running.
    fn time_resumes(&mut self, snap: &Snapshot, now: Timestamp) {
        if snap.pool.spec.readiness.as_ref().is_none_or(|r| r.kubernetes.is_none()) {
            return;
        }
        for c in &snap.clusters {
            let key = (snap.pool.name.clone(), c.id.clone());
            match c.power_state {
                Some(PowerState::WaitingForNodes) => {
                    self.nodes_since.entry(key).or_insert(now);
                }
                Some(PowerState::Running) => {
                    if let Some(since) = self.nodes_since.remove(&key) {
                        let took = (now - since).as_seconds_f64();
                        match c.node_certificates.as_ref().is_some_and(|n| n.approved > 0) {
                            true => self.resumes.with_certificates.push(took),
                            false => self.resumes.without.push(took),
                        }
                    }
                }
                _ => {
                    self.nodes_since.remove(&key);
                }
            }
        }
    }

    fn limits(&mut self, snap: &Snapshot, now: Timestamp) -> Result<(), Violation> {
        let spec = &snap.pool.spec;
        let names = spec.inventory_names().map(|n| n.len());
        let max_size = match (spec.max_size, names) {
            (Some(m), Some(n)) => Some((m.max(0) as usize).min(n)),
            (m, n) => m.map(|m| m.max(0) as usize).or(n),
        };
        let counts = Counts {
            total: snap.clusters.len(),
            busy: snap.clusters.iter().filter(|c| c.deleting || (c.installed_at.is_none() && !c.is_broken())).count(),
        };
        let before = self.counts.insert(snap.pool.name.clone(), counts).unwrap_or(counts);
        if let Some(max) = max_size {
            if counts.total > max && counts.total > before.total {
                return violation(
                    now,
                    "maxSize",
                    format!("{}: {} clusters (was {}), maxSize {max}", snap.pool.name, counts.total, before.total),
                );
            }
        }
        if let Some(max) = spec.max_concurrent.map(|m| m.max(0) as usize) {
            if counts.busy > max && counts.busy > before.busy {
                return violation(
                    now,
                    "maxConcurrent",
                    format!(
                        "{}: {} installing or deleting (was {}), maxConcurrent {max}",
                        snap.pool.name, counts.busy, before.busy
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Re-check chains never multiply: of the power function's re-check messages in the queue (waiting, delayed or
/// being handled), at most two links of a pool's tick can still act on arrival (the live one, and the one it
/// replaced, which only clears its own record); every other copy (an SQS duplicate of an old link, a link whose
/// handling failed after the chain moved on) ends on arrival without a look.
fn rechecks(sim: &Sim, now: Timestamp) -> Result<(), Violation> {
    let tables = sim.world.store.tables();
    let mut acting: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for m in sim.world.queue.messages(QueueName::Power) {
        let Ok(msg) = serde_json::from_str::<PowerMessage>(&m.body) else { continue };
        let (Some(token), true) = (msg.check, msg.tick) else { continue };
        let admission = match tables.pools.get(&msg.pool).and_then(|p| p.get(&Key::Tick.sort_key())) {
            Some(Item::Tick(tick)) => chain::admit(tick.as_ref(), Some(token)),
            _ => continue, // no tick: every link ends on arrival
        };
        if admission != Admission::Drop {
            acting.entry(msg.pool).or_default().insert(token);
        }
    }
    match acting.into_iter().find(|(_, tokens)| tokens.len() > 2) {
        Some((pool, tokens)) => violation(
            now,
            "bounded re-checks",
            format!("{pool}'s tick has {} acting links in flight: {tokens:?}", tokens.len()),
        ),
        None => Ok(()),
    }
}

/// Whether `snap`'s pool has converged at `now`: nothing left to plan, every cluster installed, unbroken and
/// settled in the power state asked for (but a claimed one that broke: seed 002 leaves it to its claimant), none
/// being deleted, and no claim pending unless the pool is at maxSize.
/// A pool being deleted has converged when only claimed clusters remain. A pool that says its credentials are
/// refused (AuthenticationFailure) has not: none are, once the faults stop.
pub fn converged(snap: &Snapshot, now: Timestamp) -> Result<(), String> {
    let p = plan(snap, now, 0);
    let work: Vec<&Action> = p.writes().filter(|a| !matches!(a, Action::UpdatePool { .. })).collect();
    if !work.is_empty() {
        return Err(format!("still to do: {}", serde_json::to_string(&work).unwrap_or_default()));
    }
    let refused =
        apiary_planner::find_condition(&snap.pool.status.conditions, apiary_planner::condition::AUTHENTICATION_FAILURE)
            .filter(|c| c.status == apiary_planner::ConditionStatus::True);
    if let Some(c) = refused {
        // The role works again once the faults stop: a call with it must have said so.
        return Err(format!("still says its credentials are refused: {}", c.message));
    }
    if snap.pool.deletion_requested_at.is_some() {
        return match snap.clusters.iter().find(|c| c.claim.is_none() || c.marked_for_deletion) {
            Some(c) => Err(format!("pool being deleted still holds unclaimed {}", c.id)),
            None => Ok(()),
        };
    }
    for c in &snap.clusters {
        if c.claim.is_some() && c.is_broken() {
            // Seed 002: a cluster that broke after it was assigned is left to its claimant.
            continue;
        }
        let settled = c.installed_at.is_some()
            && !c.is_broken()
            && !c.deleting
            && match c.spec_power_state {
                Some(apiary_planner::DesiredPower::Running) => c.is_running(),
                Some(apiary_planner::DesiredPower::Hibernating) => {
                    c.power_state == Some(apiary_planner::PowerState::Hibernating)
                }
                None => false,
            };
        if !settled {
            return Err(format!(
                "{} not settled: {:?} wants {:?} (pending call {:?}, retry at {:?})",
                c.id, c.power_state, c.spec_power_state, c.pending_call, c.retry_at
            ));
        }
    }
    pending_with_capacity(snap, now).map_err(|(_, why)| why)
}

/// `Err` naming a claim still pending although its pool has room (a free cluster, or room for another, and no
/// provisioning backoff holding new clusters back), with what the pool holds.
pub fn pending_with_capacity(snap: &Snapshot, now: Timestamp) -> Result<(), (String, String)> {
    // The head of the line, as the pool serves it: oldest first, then by name.
    let pending = snap
        .claims
        .iter()
        .filter(|k| k.is_pending())
        .min_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
    let Some(k) = pending else { return Ok(()) };
    let spec = &snap.pool.spec;
    let names = spec.inventory_names().map(|n| n.len());
    let room = match (spec.max_size, names) {
        (Some(m), Some(n)) => (m.max(0) as usize).min(n),
        (Some(m), None) => m.max(0) as usize,
        (None, Some(n)) => n,
        (None, None) => usize::MAX,
    };
    // A broken cluster serves no claim: it is not free, it waits its turn to be deleted within maxConcurrent.
    let free =
        snap.clusters.iter().any(|c| c.claim.is_none() && !c.deleting && !c.marked_for_deletion && !c.is_broken());
    if snap.clusters.len() >= room && !free {
        // No room for another cluster and none free: it waits for a release.
        return Ok(());
    }
    if !free && backing_off(snap, now) {
        // Clusters were lost to provisioning in a row (during the faults): the pool waits out its backoff, up to
        // an hour, before it makes another. The claim has room once the backoff ends.
        return Ok(());
    }
    let states: Vec<String> = snap
        .clusters
        .iter()
        .map(|c| {
            format!(
                "{} {:?}/{:?} claim {:?} broken {} deleting {} installed {} call {:?}",
                c.id,
                c.power_state,
                c.spec_power_state,
                c.claim,
                c.is_broken(),
                c.deleting,
                c.installed_at.is_some(),
                c.pending_call
            )
        })
        .collect();
    let why = format!(
        "claim {} still pending with {} of {room} clusters (one free: {free}): {}",
        k.name,
        snap.clusters.len(),
        states.join("; ")
    );
    Err((k.name.clone(), why))
}

/// `Err` with what the pool holds when `claim`, just told to wait (202) and still without a cluster, was kept
/// waiting while a spare stood free for it: when the pool has more free Running spares that were already up when
/// the claim arrived than claims ahead of it in line (those that arrived before it, by time then name, and had no
/// cluster then). Seed 000's FIFO promise is between waiting claims: the claims ahead get the oldest spares, and a
/// spare nobody ahead waits for goes to the claim at once.
pub fn told_to_wait(snap: &Snapshot, claim: &str) -> Result<(), String> {
    told_to_wait_since(snap, claim, |c| c.running_since.filter(|_| free_for_a_claim(snap, c)))
}

/// Whether `c` stands free for a claim of its pool: a Running spare the pool may assign.
fn free_for_a_claim(snap: &Snapshot, c: &apiary_planner::Cluster) -> bool {
    spare_key(c).is_some() && snap.pool.spec.may_assign(c) && c.power_state == Some(PowerState::Running)
}

/// [`told_to_wait`], `free_since` saying since when each cluster has stood free for a claim ([`None`]: it does not).
/// The checker passes its own record of each cluster's last change to free: a cluster Running all along but busy
/// a moment (a power call in flight) stood free only from when that call ended, and a claim that arrived while it
/// was busy was right not to take it.
pub fn told_to_wait_since(
    snap: &Snapshot,
    claim: &str,
    free_since: impl Fn(&apiary_planner::Cluster) -> Option<Timestamp>,
) -> Result<(), String> {
    let Some(k) = snap.claims.iter().find(|c| c.name == claim && c.cluster.is_none()) else {
        return Ok(());
    };
    let arrived = k.created_at;
    let line = |c: &apiary_planner::Claim| (c.created_at, c.name.clone());
    let ahead: Vec<&str> = snap
        .claims
        .iter()
        .filter(|c| line(c) < line(k) && c.assigned_at.is_none_or(|at| at > arrived))
        .map(|c| c.name.as_str())
        .collect();
    let free: Vec<&str> =
        snap.clusters.iter().filter(|c| free_since(c).is_some_and(|at| at <= arrived)).map(|c| c.id.as_str()).collect();
    if free.len() > ahead.len() {
        return Err(format!(
            "{}/{claim} was told to wait with {} free Running spares up since it arrived ({free:?}) and {} claims ahead of it ({ahead:?})",
            snap.pool.name,
            free.len(),
            ahead.len()
        ));
    }
    Ok(())
}

/// Whether the pool holds back new clusters at `now`, after clusters lost to provisioning in a row (the planner's
/// rule: the losses end with the first cluster installed after the last of them).
fn backing_off(snap: &Snapshot, now: Timestamp) -> bool {
    let status = &snap.pool.status;
    let Some(last) = status.last_provision_failure.as_ref().filter(|_| status.provision_failures > 0) else {
        return false;
    };
    let recovered = snap.clusters.iter().any(|c| c.installed_at.is_some_and(|t| t > last.at));
    !recovered && now < last.at + apiary_planner::plan::provisioning_backoff(status.provision_failures)
}

/// Every machine of every cloud (EC2 in memory and the three fakes) as (infraId, state).
pub fn all_machines(sim: &Sim) -> Vec<(String, MachineState)> {
    let ec2 = sim.world.cloud.machines().into_iter().map(|m| (m.infra_id, m.state));
    let fakes = sim.clouds.machines().into_iter().map(|m| (m.infra_id, m.state));
    ec2.chain(fakes).collect()
}
