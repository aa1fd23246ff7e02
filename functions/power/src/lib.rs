//! The power function: drives clusters' power state machines (seed 004, with seed 002's timeouts) a step at a
//! time, and looks at every cluster of a pool in motion with one message, the pool's tick.
//!
//! A message names one cluster (a nudge from a reconcile, the claim API or the sweep), or the pool's tick
//! ([`apiary_planner::power::tick`]). For a cluster it reads the pool and the cluster (two strongly consistent
//! GetItems) and steps it at once; if more is to do, it makes sure the pool's tick comes soon enough for the
//! cluster's next look ([`ensure_tick`]): it starts or brings the tick forward only when none is live or the live
//! one is due too late, so a burst of nudges writes the tick item once. A tick reads the pool's clusters in motion
//! from its sparse index, looks at those whose next look is due (at most
//! [`MAX_LOOKS`](apiary_planner::power::tick::MAX_LOOKS); their machines read with one call where the cloud
//! allows it, [`look_many`](apiary_ports::platform::Actuator::look_many)), records when each wants the next one
//! on the tick item, and sends itself the next link for the earliest: a look that finds nothing new writes
//! nothing to its cluster. Only the tick's live link looks ([`chain::admit`]); a stale one ends on arrival, so at
//! most two tick links are in flight per pool.
//!
//! Each look, while the cluster is not fenced by another invocation's actuator call ([`fenced_until`]), asks the
//! platform what [`probe`] says to ask and lets [`step`] decide. When the step calls the actuator, the cluster is
//! **written first** with the call recorded and the state it leads to (so the table never says Running while a
//! stop is landing), then the call is made, then its outcome is written. Steps that say "look again now" run at
//! once, in the same invocation. A step that settles, installs or breaks a cluster enqueues a reconcile of its
//! pool (one per message, however many of a tick's clusters did).
//!
//! A deleting cluster is deprovisioned instead: its machines are terminated; once none is left its item and its
//! name lease are deleted and the pool is reconciled (to refill). Refused terminations back off and are surfaced
//! ([`deprovision_step`]).
//!
//! Every write is conditional on the revision read; a lost condition re-reads and steps again (at most
//! [`MAX_ATTEMPTS`] times, then the message goes back to the queue; in a tick, that cluster is looked at again by
//! the next one). Idempotent: a duplicate or late message re-reads the stored state and takes the step that state
//! calls for.

use std::collections::BTreeMap;
use std::time::Duration;

use apiary_planner::events;
use apiary_planner::power::certificates::{self, CertificateLook};
use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::tick::{self, Tick};
use apiary_planner::power::{
    deprovision_step, deprovision_wait, fenced_until, probe, step, ActuatorCall, Install, PowerStep, Probe, Readiness,
    Report, Termination, POLL,
};
use apiary_planner::{Cluster, Machine, Pool, PowerLimits, Timestamp};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::metrics;
use apiary_ports::platform::{Machinery, Machines, Nodes, Provision, Refused, Seen, Target};
use apiary_ports::store::{cluster_change, Cond, Item, Key, Write};
use apiary_ports::{Deps, Error, Result};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::TimeDelta;
use futures::StreamExt;
use tracing::Instrument;

pub mod reap;

/// Lost conditions tolerated before the message goes back to the queue.
pub const MAX_ATTEMPTS: u32 = 3;
/// Steps that ask to look again at once, taken in one invocation.
const MAX_STEPS: usize = 4;
/// Machines recorded at most per cluster (the cluster item stays far below the table's item size limit).
const MAX_MACHINES: usize = 200;

/// What one power message did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The cluster was written (for a tick: some cluster it looked at).
    pub written: bool,
    /// When the cluster's next look is wanted (the pool's tick makes it), if any; for a tick, when its next link
    /// is due.
    pub recheck: Option<Duration>,
    /// A reconcile of the pool was enqueued.
    pub woke_pool: bool,
    /// A tick: the clusters it looked at.
    pub looked: Vec<String>,
    /// The cluster's item was deleted (deprovisioned).
    pub removed: bool,
    /// The message was a stale re-check link and ended without a look.
    pub dropped: bool,
    /// The infraIds whose machines a reap message's pass deprovisioned (their cluster is gone).
    pub reaped: Vec<String>,
    /// A tick link carried its chain on in its own message, put back in the queue until its next look: the batch
    /// reports the message as a failure, so that the event source mapping leaves it.
    pub returned: bool,
    /// A look found the cluster (for a tick: one it looked at) come up: an install or a resume done.
    pub came_up: bool,
}

/// A power message as the queue handed it over.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// Its receipt handle.
    pub receipt: &'a str,
    /// How many times SQS has handed it out, this time included.
    pub receives: u32,
}

async fn get_pool(deps: &Deps, pool: &str) -> Result<Option<Pool>> {
    Ok(match deps.store.get(pool, &Key::Pool).await? {
        Some(Item::Pool(p)) => Some(*p),
        _ => None,
    })
}

async fn get_cluster(deps: &Deps, pool: &str, id: &str) -> Result<Option<Cluster>> {
    Ok(match deps.store.get(pool, &Key::Cluster(id.to_owned())).await? {
        Some(Item::Cluster(c)) => Some(*c),
        _ => None,
    })
}

async fn get_tick(deps: &Deps, pool: &str) -> Result<Option<Tick>> {
    Ok(match deps.store.get(pool, &Key::Tick).await? {
        Some(Item::Tick(t)) => Some(*t),
        _ => None,
    })
}

/// Writes `next` over the tick item as `stored` had it (absent: `None`), conditional on that.
async fn put_tick(deps: &Deps, pool: &str, stored: Option<&Tick>, mut next: Tick) -> Result<()> {
    let cond = match stored {
        Some(t) => {
            next.rev = t.rev + 1;
            Cond::Rev(t.rev)
        }
        None => Cond::Absent,
    };
    deps.store.write(pool, vec![Write::Put(Item::Tick(Box::new(next)), cond)]).await
}

/// Sends the tick link `link` of `pool`.
async fn send_tick(deps: &Deps, pool: &str, link: apiary_planner::Recheck) -> Result<Duration> {
    let delay = tick::wait(link.due, deps.clock.now());
    deps.queue.power(&PowerMessage::tick(pool, Some(link.token)), delay).await?;
    Ok(delay)
}

/// Makes sure `pool`'s tick comes by `want` (to look at `cluster`, when it is for one): when no tick is live, or
/// the live one is due too late, records a new link (the one it replaces as superseded, and `want` as the
/// cluster's next look) and sends it; otherwise writes nothing. Concurrent nudges race on the tick item's
/// revision: the loser re-reads and finds the winner's link soon enough.
pub async fn ensure_tick(deps: &Deps, pool: &str, cluster: Option<&str>, want: Timestamp) -> Result<()> {
    let mut live = false;
    for _ in 0..MAX_ATTEMPTS {
        let stored = get_tick(deps, pool).await?;
        let tick = stored.clone().unwrap_or_default();
        let now = deps.clock.now();
        live = chain::live(&tick, now);
        let next = chain::next(&tick, Admission::Nudge, Some(want), now, deps.clock.seed());
        let Some(link) = next.send else { return Ok(()) };
        let mut due = tick.due.clone();
        due.extend(cluster.map(|c| (c.to_owned(), want)));
        let written = Tick { rev: 0, check: next.check, superseded: next.superseded, due, up: tick.up };
        match put_tick(deps, pool, stored.as_ref(), written).await {
            Ok(()) => {
                send_tick(deps, pool, link).await?;
                return Ok(());
            }
            Err(Error::Conflict(_)) => tracing::info!("the pool's tick changed; reading it again"),
            Err(e) => return Err(e),
        }
    }
    if live {
        // Others keep bringing the tick forward: it is live, and looks at this cluster (in motion) when it comes.
        return Ok(());
    }
    Err(Error::Conflict("the pool's tick kept changing".into()))
}

/// What the platform reports for `question`, or what `seen` (a look at many clusters just made) already says.
/// An error that trying again cannot mend (credentials refused, a secret that does not exist, a permission
/// missing) is reported as a failure of what the question is for, so the planner backs off and the cluster's
/// conditions say why, instead of the message failing until it is dropped.
/// A look at the nodes puts what the pool's readiness check did with their certificate requests in `certificates`.
async fn ask(
    platform: &dyn Machinery,
    t: Target<'_>,
    question: Probe,
    creds: &mut Credentials,
    seen: Option<Seen>,
    certificates: &mut CertificateLook,
) -> Result<Report> {
    let answer = match (question, seen) {
        (Probe::Install, Some(Seen { install: Some(install), .. })) => Ok(Report::Install(install)),
        (Probe::MachinesRunning, Some(seen)) => Ok(machines(&seen.running)),
        (Probe::MachinesStopped, Some(seen)) => Ok(stopped(&seen.stopped)),
        (Probe::Install, _) => platform.install_state(t).await.map(Report::Install),
        (Probe::MachinesRunning, _) => platform.machines_running(t).await.map(|m| machines(&m)),
        (Probe::MachinesStopped, _) => platform.machines_stopped(t).await.map(|m| stopped(&m)),
        (Probe::Readiness, _) => platform.cluster_ready(t).await.map(Report::Ready),
        (Probe::NodesReady, _) => platform.nodes_look(t).await.map(|(nodes, looked)| {
            *certificates = looked;
            match nodes {
                Nodes::Ready => Report::Nodes(Readiness::Ready),
                Nodes::NotReady(message) => Report::Nodes(Readiness::NotReady { message }),
                Nodes::Unreachable(message) => Report::Nodes(Readiness::Unreachable { message }),
                // A machine went down while the nodes were awaited: the resume waits for the machines again.
                Nodes::Machines(m) => machines(&m),
            }
        }),
    };
    creds.saw(&answer);
    match answer {
        Err(e) if !e.is_retryable() => {
            let message = e.to_string();
            Ok(match question {
                Probe::Install => Report::Install(Install::Failed { message }),
                _ => Report::CallFailed { message },
            })
        }
        other => other,
    }
}

/// The answer to "are the machines stopped?".
fn stopped(m: &Machines) -> Report {
    match m.unsupported_message() {
        // Nothing is stopped when some machine cannot be: a half-stopped cluster is neither.
        Some(message) if !m.not_ready.is_empty() => Report::Unsupported { message },
        _ => machines(m),
    }
}

fn machines(m: &Machines) -> Report {
    Report::Machines { not_ready: m.not_ready.len() as u32, total: m.total, actionable: m.actionable }
}

/// Makes `call`; the cloud's refusal, and an error that trying again cannot mend, are reports, not errors.
async fn call(platform: &dyn Machinery, t: Target<'_>, call: ActuatorCall, creds: &mut Credentials) -> Result<Report> {
    let outcome = match call {
        ActuatorCall::Provision => platform.provision(t).await.map(|p| match p {
            Provision::Accepted { handle } => Report::Provisioned { handle },
            Provision::Refused(message) => Report::CallFailed { message },
        }),
        ActuatorCall::Start => platform.start_machines(t).await.map(refusal),
        ActuatorCall::Stop => platform.stop_machines(t).await.map(refusal),
    };
    creds.saw(&outcome);
    match outcome {
        Err(e) if !e.is_retryable() => Ok(Report::CallFailed { message: e.to_string() }),
        other => other,
    }
}

/// What became of this invocation's calls with the pool's credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// No call was answered.
    #[default]
    Untried,
    /// A call was answered: the credentials were accepted.
    Accepted,
    /// The cloud refused them ([`Error::Credentials`]), for this reason.
    Refused(String),
}

impl Credentials {
    /// What two runs' answers said together: a refusal, else an acceptance.
    fn merge(self, other: Credentials) -> Credentials {
        match (self, other) {
            (refused @ Credentials::Refused(_), _) | (_, refused @ Credentials::Refused(_)) => refused,
            (Credentials::Accepted, _) | (_, Credentials::Accepted) => Credentials::Accepted,
            _ => Credentials::Untried,
        }
    }

    /// Notes what a call's `result` says of the credentials: a refusal stays noted for the invocation.
    fn saw<T>(&mut self, result: &Result<T>) {
        match result {
            Err(Error::Credentials(why)) => *self = Credentials::Refused(why.clone()),
            Ok(_) if *self == Credentials::Untried => *self = Credentials::Accepted,
            _ => {}
        }
    }
}

/// Puts what `creds` says on the pool's `AuthenticationFailure` condition, when it changes it: a write
/// conditional on the pool's revision, re-read when lost. A pool whose calls keep being refused, or keep
/// succeeding, is not written again. A write that fails is logged and left to the next call.
pub(crate) async fn record_credentials(deps: &Deps, pool: &Pool, creds: &Credentials) {
    let refused = match creds {
        Credentials::Untried => return,
        Credentials::Accepted => None,
        Credentials::Refused(why) => Some(why.as_str()),
    };
    let mut current = pool.clone();
    for _ in 0..MAX_ATTEMPTS {
        let mut next = current.clone();
        if !next.status.authenticated(refused, deps.clock.now()) {
            return;
        }
        next.rev = current.rev + 1;
        let write = Write::Put(Item::Pool(Box::new(next)), Cond::Rev(current.rev));
        match deps.store.write(&current.name, vec![write]).await {
            Ok(()) => {
                tracing::info!(refused, "the pool's authentication condition changed");
                return;
            }
            Err(Error::Conflict(_)) => match get_pool(deps, &current.name).await {
                Ok(Some(fresh)) => current = fresh,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "the pool's authentication condition could not be read again");
                    return;
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "the pool's authentication condition could not be written");
                return;
            }
        }
    }
}

fn refusal(refused: Refused) -> Report {
    match refused.into_result() {
        Ok(()) => Report::CallAccepted,
        Err(message) => Report::CallFailed { message },
    }
}

/// One invocation's work on one cluster: its pool, the message that names it, and what came of it.
struct Run<'a> {
    deps: &'a Deps,
    pool: &'a Pool,
    platform: &'a dyn Machinery,
    limits: PowerLimits,
    msg: PowerMessage,
    outcome: Outcome,
    /// What the platform's answers said of the pool's credentials.
    creds: Credentials,
    /// Why the pool must reconcile, if it must.
    wake: Option<&'static str>,
    /// The cluster as a tick read it just before, for the first attempt.
    preread: Option<Cluster>,
    /// What the tick's look at many clusters found for this one, for the first question.
    seen: Option<Seen>,
}

impl<'a> Run<'a> {
    fn new(deps: &'a Deps, pool: &'a Pool, platform: &'a dyn Machinery, msg: PowerMessage) -> Self {
        let limits = pool.power_limits();
        let (outcome, creds) = (Outcome::default(), Credentials::Untried);
        Self { deps, pool, platform, limits, msg, outcome, creds, wake: None, preread: None, seen: None }
    }

    fn target<'c>(&'c self, cluster: &'c Cluster, now: Timestamp) -> Target<'c> {
        Target { pool: &self.pool.name, spec: &self.pool.spec, cluster, now }
    }

    /// Writes `next` over `stored` (conditional on `stored`'s revision); the cluster as written.
    async fn put(&mut self, stored: &Cluster, next: &Cluster) -> Result<Cluster> {
        let mut written = next.clone();
        written.rev = stored.rev + 1;
        let now = self.deps.clock.now();
        let (writes, progress) = cluster_change(stored, &written, now);
        self.deps.store.write(&self.pool.name, writes).await?;
        self.outcome.written = true;
        for event in progress {
            // Told after the change, alone: the change stands whatever becomes of its event, and a second delivery
            // of the message would find nothing more to tell. One the trail refuses is logged instead.
            if let Err(e) = self.deps.store.write(&self.pool.name, vec![Write::Append(event.clone())]).await {
                tracing::warn!(
                    cluster = %written.id,
                    event = event.kind.as_str(),
                    time = %event.time,
                    message = event.message.as_deref().unwrap_or_default(),
                    error = %e,
                    "an event the pool's trail did not take"
                );
            }
        }
        let stack = &self.deps.config.stack;
        if let Some(doc) = metrics::power_transition(stack, &self.pool.name, stored, &written, now) {
            self.deps.metrics.emit(doc);
        }
        if stored.power_state != written.power_state || stored.is_broken() != written.is_broken() {
            tracing::info!(
                cluster = %written.id,
                from = ?stored.power_state,
                to = ?written.power_state,
                broken = written.is_broken(),
                "cluster power state"
            );
        }
        Ok(written)
    }

    /// Makes `call` for `intent` (already written with the call recorded), then writes its outcome. If someone
    /// else wrote the cluster meanwhile but the call is still the one recorded, the outcome is applied to what
    /// they wrote; otherwise the conflict is returned (re-read and step again).
    async fn call_and_record(&mut self, intent: Cluster, c: ActuatorCall, now: Timestamp) -> Result<PowerStep> {
        let t = Target { pool: &self.pool.name, spec: &self.pool.spec, cluster: &intent, now };
        let result = call(self.platform, t, c, &mut self.creds).await?;
        tracing::info!(call = ?c, result = ?result, "actuator call");
        let mut done = step(&intent, &result, now, self.limits);
        match self.put(&intent, &done.cluster).await {
            Ok(written) => {
                done.cluster = written;
                Ok(done)
            }
            Err(Error::Conflict(_)) => {
                let Some(fresh) = get_cluster(self.deps, &self.pool.name, &self.msg.cluster).await? else {
                    return Err(Error::Conflict("cluster deleted during the call".into()));
                };
                if fresh.pending_call != intent.pending_call {
                    return Err(Error::Conflict("the recorded call was replaced during the call".into()));
                }
                let mut done = step(&fresh, &result, now, self.limits);
                done.cluster = self.put(&fresh, &done.cluster).await?;
                Ok(done)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes what a step changed. When the cluster wants its next look, clamped to what a delayed message can
    /// wait.
    async fn settle(
        &mut self,
        stored: &Cluster,
        current: Cluster,
        want: Option<TimeDelta>,
    ) -> Result<Option<TimeDelta>> {
        if current != *stored {
            self.put(stored, &current).await?;
        }
        // "Now" again means the step budget ran out: come back after the short poll.
        let max = TimeDelta::seconds(i64::from(self.deps.config.max_recheck_seconds));
        Ok(want.map(|w| if w <= TimeDelta::zero() { POLL } else { w }.min(max)))
    }

    /// Counts and logs what a look at `cluster` (as it stood before the look) did with its nodes' certificate
    /// requests: those approved, and those left pending for the first time in the resume.
    fn certificates(&self, cluster: &Cluster, look: &CertificateLook) {
        let refused = certificates::new_refusals(cluster, look);
        if look.approved.is_empty() && refused.is_empty() {
            return;
        }
        let (stack, now) = (&self.deps.config.stack, self.deps.clock.now());
        let doc = metrics::node_certificates(stack, &self.pool.name, look.approved.len(), refused.len(), now);
        self.deps.metrics.emit(doc);
        for r in refused {
            tracing::warn!(cluster = %cluster.id, csr = %r.name, why = %r.why, "a certificate request left pending");
        }
        if !look.approved.is_empty() {
            tracing::info!(cluster = %cluster.id, approved = ?look.approved, "node certificate requests approved");
        }
    }

    /// The machines of `cluster`, which has just become Running, with their addresses (for the claim that gets
    /// it; a public address may be new with each start), at most [`MAX_MACHINES`]. None when the platform cannot
    /// say now: the cluster is usable all the same, and its next resume asks again.
    async fn addresses(&self, cluster: &Cluster, now: Timestamp) -> Vec<Machine> {
        match self.platform.machine_addresses(self.target(cluster, now)).await {
            Ok(mut machines) => {
                machines.truncate(MAX_MACHINES);
                machines
            }
            Err(e) => {
                tracing::warn!(error = %e, "the machines' addresses could not be read");
                Vec::new()
            }
        }
    }

    /// One attempt: read the cluster, step it, write what changed; when it wants its next look.
    async fn attempt(&mut self) -> Result<Option<TimeDelta>> {
        let stored = match self.preread.take() {
            Some(read) => Some(read),
            None => get_cluster(self.deps, &self.pool.name, &self.msg.cluster).await?,
        };
        let Some(stored) = stored else { return Ok(None) };
        if stored.deleting {
            return self.deprovision(stored).await;
        }
        let (mut last, mut current) = (stored.clone(), stored);
        let (mut want, mut wakes) = (None, false);
        for _ in 0..MAX_STEPS {
            let now = self.deps.clock.now();
            if let Some(until) = fenced_until(&current, now) {
                // Another invocation's call is under way: look again when its fence passes.
                want = Some(until - now);
                break;
            }
            let Some(question) = probe(&current) else {
                want = None;
                break;
            };
            let t = Target { pool: &self.pool.name, spec: &self.pool.spec, cluster: &current, now };
            let mut certificates = CertificateLook::default();
            let report = ask(self.platform, t, question, &mut self.creds, self.seen.take(), &mut certificates).await?;
            tracing::debug!(cluster = %current.id, ?question, ?report, "looked");
            let mut s = step(&current, &report, now, self.limits);
            if question == Probe::NodesReady {
                self.certificates(&current, &certificates);
                certificates::note(&mut s.cluster, &certificates);
            }
            if s.cluster.is_running() && !current.is_running() {
                s.cluster.machines = self.addresses(&s.cluster, now).await;
                self.outcome.came_up = true;
            }
            wakes |= s.wakes_pool;
            if let Some(c) = s.call {
                // The intent first, then the call, then its outcome.
                let intent = self.put(&last, &s.cluster).await?;
                s = self.call_and_record(intent, c, now).await?;
                wakes |= s.wakes_pool;
                last = s.cluster.clone();
            }
            current = s.cluster;
            want = s.recheck_after;
            if want != Some(TimeDelta::zero()) {
                break;
            }
        }
        let want = self.settle(&last, current, want).await?;
        if wakes {
            self.wake = Some("power");
        }
        Ok(want)
    }

    /// Attempts until one holds (a lost condition re-reads), at most [`MAX_ATTEMPTS`].
    async fn drive(&mut self) -> Result<Option<TimeDelta>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt().await {
                Err(Error::Conflict(why)) if attempt < MAX_ATTEMPTS => {
                    tracing::info!(cluster = %self.msg.cluster, attempt, why, "lost a condition; re-reading");
                }
                other => return other,
            }
        }
    }

    async fn deprovision(&mut self, stored: Cluster) -> Result<Option<TimeDelta>> {
        let now = self.deps.clock.now();
        if let Some(wait) = deprovision_wait(&stored, now) {
            // Backing off after refusals: a nudge only makes sure the looks carry on.
            return self.settle(&stored.clone(), stored, Some(wait)).await;
        }
        let termination = self.platform.deprovision(self.target(&stored, now)).await;
        self.creds.saw(&termination);
        let termination = match termination {
            Ok(t) => t,
            // Trying again cannot mend it: back off and say why, as for a refused termination.
            Err(e) if !e.is_retryable() => Termination { remaining: 1, refused: vec![("*".into(), e.to_string())] },
            Err(e) => return Err(e),
        };
        let ds = deprovision_step(&stored, &termination, now);
        if !ds.done {
            return self.settle(&stored.clone(), ds.cluster, ds.recheck_after).await;
        }
        let pool = self.pool.name.clone();
        let mut gone = vec![Write::Delete(Key::Cluster(stored.id.clone()), Cond::Rev(stored.rev))];
        gone.extend(events::of_cluster(&stored, None, now).into_iter().map(Write::Append));
        self.deps.store.write(&pool, gone).await?;
        self.outcome.removed = true;
        tracing::info!("cluster deprovisioned");
        if self.pool.spec.inventory.is_some() {
            let lease = Write::Delete(Key::Lease(stored.cluster_name.clone()), Cond::Holder(stored.id.clone()));
            match self.deps.store.write(&pool, vec![lease]).await {
                // Not held by this cluster (or already gone): nothing to release.
                Ok(()) | Err(Error::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if self.pool.removal_is_news() {
            self.wake = Some("deprovisioned");
        }
        Ok(None)
    }
}

/// Enqueues a reconcile of `pool`, for `reason`.
async fn wake_pool(deps: &Deps, pool: &str, reason: &str) -> Result<()> {
    deps.queue.reconcile(&ReconcileMessage::new(pool.to_owned(), reason)).await
}

/// Handles one power message: steps the cluster it names once (or a few times, while each step asks to look
/// again at once) and makes sure the pool's tick looks at it again when it must; or makes the pool's tick; or the
/// reaper's pass. `received` is how the queue handed the message over, when it came from the queue.
pub async fn power(deps: &Deps, msg: &PowerMessage, received: Option<Received<'_>>) -> Result<Outcome> {
    if msg.reap {
        return Ok(Outcome { reaped: reap::pass(deps, &msg.pool).await?, ..Outcome::default() });
    }
    let Some(pool) = get_pool(deps, &msg.pool).await? else {
        if msg.tick {
            forget_tick(deps, &msg.pool).await?;
        }
        return Ok(Outcome::default());
    };
    let machinery = deps.platforms.of(&pool.spec)?;
    if msg.tick {
        return tick_run(deps, &pool, machinery.as_ref(), msg, received).await;
    }
    let mut run = Run::new(deps, &pool, machinery.as_ref(), msg.clone());
    let result = run.drive().await;
    record_credentials(deps, &pool, &run.creds).await;
    let want = result?;
    if run.outcome.came_up {
        // Before the reconcile is asked for: a claimant reading the tick then looks on its own schedule.
        note_up(deps, &pool).await?;
    }
    if let Some(reason) = run.wake {
        wake_pool(deps, &pool.name, reason).await?;
        run.outcome.woke_pool = true;
    }
    if let Some(want) = want {
        let now = deps.clock.now();
        ensure_tick(deps, &pool.name, Some(&msg.cluster), tick::aligned(now + want, now)).await?;
        run.outcome.recheck = want.to_std().ok();
    }
    Ok(run.outcome)
}

/// Records in `pool`'s live tick that a nudge's look found a cluster come up ([`Tick::up`]): claimants told to
/// look after the tick's next link ([`apiary_planner::waiting::hint`]) look on their own schedule again, until a
/// reconcile has given it to one of them. Nothing to record without a live tick: no claimant is told to wait for
/// one.
async fn note_up(deps: &Deps, pool: &Pool) -> Result<()> {
    // Its look was before this: a note of any look since says it too (installs ending together write it once).
    let seen = deps.clock.now();
    for _ in 0..MAX_ATTEMPTS {
        let Some(stored) = get_tick(deps, &pool.name).await?.filter(|t| t.check.is_some()) else { return Ok(()) };
        if stored.up.is_some_and(|at| at >= seen) {
            return Ok(());
        }
        let noted = Tick { up: tick::up(&stored, true, deps.clock.now()), ..stored.clone() };
        match put_tick(deps, &pool.name, Some(&stored), noted).await {
            Err(Error::Conflict(_)) => tracing::info!("the pool's tick changed; reading it again"),
            other => return other,
        }
    }
    Err(Error::Conflict("the pool's tick kept changing".into()))
}

/// The tick item of a pool that is gone: deleted (a tick of a pool of the same name made later starts afresh).
async fn forget_tick(deps: &Deps, pool: &str) -> Result<()> {
    let Some(stored) = get_tick(deps, pool).await? else { return Ok(()) };
    match deps.store.write(pool, vec![Write::Delete(Key::Tick, Cond::Rev(stored.rev))]).await {
        Ok(()) | Err(Error::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The clusters `ids` of `pool` as stored (those that still are), and what one look at all their machines found,
/// where the platform can look at many clusters at once; and what that look said of the credentials. A look
/// that fails leaves each cluster to ask alone. The clusters are read eventually consistently (half the read
/// units): a copy that missed a write is only ever written back on its revision, so acting on it loses the
/// condition first (before any call: the intent is written before the call) and the look reads the cluster again.
async fn look_many(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    ids: &[String],
) -> Result<(BTreeMap<String, Cluster>, BTreeMap<String, Seen>, Credentials)> {
    let keys: Vec<Key> = ids.iter().map(|id| Key::Cluster(id.clone())).collect();
    let mut read = BTreeMap::new();
    for item in deps.store.get_many(&pool.name, &keys).await? {
        if let Item::Cluster(c) = item {
            read.insert(c.id.clone(), *c);
        }
    }
    let mut creds = Credentials::Untried;
    if read.is_empty() {
        return Ok((read, BTreeMap::new(), creds));
    }
    let clusters: Vec<Cluster> = read.values().cloned().collect();
    let answer = platform.look_many(&pool.name, &pool.spec, &clusters, deps.clock.now()).await;
    creds.saw(&answer);
    let seen = match answer {
        Ok(seen) => seen.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(error = %e, clusters = clusters.len(), "a look at many clusters failed; each is asked alone");
            BTreeMap::new()
        }
    };
    Ok((read, seen, creds))
}

/// The clusters a tick looked at, each with when it wants its next look.
type Looked = Vec<(String, Option<Timestamp>)>;

/// One look at cluster `id` for its pool's tick. A look that fails is tried again by the next tick, after
/// [`POLL`]: it never stops the tick's other looks.
async fn look(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    id: String,
    (preread, seen): (Option<Cluster>, Option<Seen>),
) -> Look {
    let mut run = Run::new(deps, pool, platform, PowerMessage::nudge(pool.name.clone(), id.clone()));
    (run.preread, run.seen) = (preread, seen);
    let span = tracing::info_span!("look", cluster = %id);
    let want = match run.drive().instrument(span).await {
        Ok(want) => {
            let now = deps.clock.now();
            want.map(|w| tick::aligned(now + w, now))
        }
        Err(e) => {
            tracing::warn!(cluster = %id, error = %e, "a tick's look failed; the next tick looks again");
            Some(deps.clock.now() + POLL)
        }
    };
    Look { id, want, creds: run.creds, wake: run.wake, written: run.outcome.written, came_up: run.outcome.came_up }
}

/// What one look of a tick came to.
struct Look {
    /// The cluster.
    id: String,
    /// When it wants its next look (`None`: nothing left to do).
    want: Option<Timestamp>,
    /// What the platform's answers said of the pool's credentials.
    creds: Credentials,
    /// Why the pool must reconcile, if it must.
    wake: Option<&'static str>,
    /// The cluster was written.
    written: bool,
    /// The look found it come up.
    came_up: bool,
}

/// The pool's tick: looks at the clusters in motion whose look is due, records their next looks and carries the
/// chain on to the earliest: in its own message, put back in the queue, while that has receives to spare
/// ([`chain::carries_on`]), or else in a new one. A lost condition on the tick item re-reads it and records again
/// (the looks are not taken twice); a link found stale then ends without sending.
async fn tick_run(
    deps: &Deps,
    pool: &Pool,
    platform: &dyn Machinery,
    msg: &PowerMessage,
    received: Option<Received<'_>>,
) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    // The clusters in motion, and each one looked at with when it wants its next look.
    let mut done: Option<(Vec<String>, Looked)> = None;
    for _ in 0..MAX_ATTEMPTS {
        let stored = get_tick(deps, &pool.name).await?;
        let tick = stored.clone().unwrap_or_default();
        let admission = chain::admit(&tick, msg.check);
        match admission {
            Admission::Drop => {
                outcome.dropped = true;
                return Ok(outcome);
            }
            Admission::Forget => {
                let forgotten = Tick { superseded: None, ..tick };
                match put_tick(deps, &pool.name, stored.as_ref(), forgotten).await {
                    Err(Error::Conflict(_)) => continue,
                    other => return other.map(|()| outcome),
                }
            }
            Admission::Own | Admission::Nudge => {}
        }
        if done.is_none() {
            let moving = deps.store.moving(&pool.name).await?;
            let hurry = tick::hurried(admission, pool.status.pending_claims);
            let ids = tick::looks(&tick, &moving, deps.clock.now(), hurry);
            let (mut read, mut seen, mut creds) = look_many(deps, pool, platform, &ids).await?;
            let looks = futures::stream::iter(ids).map(|id| {
                let found = (read.remove(&id), seen.remove(&id));
                look(deps, pool, platform, id, found)
            });
            let results: Vec<_> = looks.buffer_unordered(tick::CONCURRENT_LOOKS).collect().await;
            let mut looked = Vec::new();
            let mut wake = None;
            for l in results {
                creds = creds.merge(l.creds);
                wake = wake.or(l.wake);
                outcome.written |= l.written;
                outcome.came_up |= l.came_up;
                looked.push((l.id, l.want));
            }
            record_credentials(deps, pool, &creds).await;
            if let Some(reason) = wake {
                wake_pool(deps, &pool.name, reason).await?;
                outcome.woke_pool = true;
            }
            outcome.looked = looked.iter().map(|(id, _)| id.clone()).collect();
            done = Some((moving, looked));
        }
        let Some((moving, looked)) = &done else { break };
        let now = deps.clock.now();
        let due = tick::after(&tick, moving, looked);
        let max = TimeDelta::seconds(i64::from(deps.config.max_recheck_seconds));
        let want = tick::next_due(&due, moving, now).map(|at| at.min(now + max));
        // The live link goes on in its own message, with its own token, while the message has receives to spare.
        let back = received.filter(|r| chain::carries_on(admission, r.receives));
        let token = back.and(msg.check).unwrap_or_else(|| deps.clock.seed());
        let next = chain::next(&tick, admission, want, now, token);
        let up = tick::up(&tick, outcome.came_up, now);
        let written = Tick { rev: tick.rev, check: next.check, superseded: next.superseded, due, up };
        let unchanged = stored.as_ref() == Some(&written) || (stored.is_none() && written == Tick::default());
        let back = back.filter(|_| next.send.is_some());
        if unchanged && back.is_none() {
            return Ok(outcome);
        }
        if !unchanged {
            match put_tick(deps, &pool.name, stored.as_ref(), written).await {
                Ok(()) => {}
                Err(Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        match (next.send, back) {
            (Some(link), Some(back)) => {
                // Put back until the link is due. With the tick item unchanged, this is an early copy of the live
                // link (SQS delivers some messages twice): it comes back then too, and the chain's next new message
                // ends whichever copy is left.
                let delay = tick::wait(link.due, deps.clock.now());
                deps.queue.return_power(back.receipt, delay).await?;
                (outcome.recheck, outcome.returned) = (Some(delay), true);
            }
            // The event source mapping deletes this link's message when the run ends. Killed before that, the
            // message comes back with a token the tick no longer holds, and ends on arrival.
            (Some(link), None) => outcome.recheck = Some(send_tick(deps, &pool.name, link).await?),
            (None, _) => {}
        }
        if next.check.is_none() && !deps.store.moving(&pool.name).await?.is_empty() {
            // A cluster began moving after this tick read the index, and its nudge read the tick before it ended:
            // start it again. (A nudge that reads the tick after it ended starts it itself.)
            ensure_tick(deps, &pool.name, None, deps.clock.now() + tick::MIN_GAP).await?;
        }
        return Ok(outcome);
    }
    Err(Error::Conflict("the pool's tick kept changing".into()))
}

/// Handles one batch from the power queue, its messages concurrently; each failed message is reported alone, and
/// so is each tick link put back in the queue to come again.
pub async fn handle(deps: &Deps, event: SqsEvent) -> SqsBatchResponse {
    respond(&handle_each(deps, event).await)
}

/// Each message of a batch from the power queue handled, concurrently: its message id, and what came of it.
pub async fn handle_each(deps: &Deps, event: SqsEvent) -> Vec<(String, Result<Outcome>)> {
    futures::future::join_all(event.records.into_iter().map(|record| async move {
        let id = record.message_id.clone().unwrap_or_default();
        let msg = match serde_json::from_str::<PowerMessage>(record.body.as_deref().unwrap_or_default()) {
            Ok(m) => m,
            Err(e) => {
                // A body that is not a power message never will be: drop it (logged) rather than loop on it.
                tracing::error!(message_id = id, error = %e, "unreadable power message dropped");
                return (id, Ok(Outcome { dropped: true, ..Outcome::default() }));
            }
        };
        let span = tracing::info_span!("power", pool = %msg.pool, cluster = %msg.cluster, tick = msg.tick);
        let received = record
            .receipt_handle
            .as_deref()
            .map(|receipt| Received { receipt, receives: apiary_ports::queue::receives(&record) });
        let result = power(deps, &msg, received).instrument(span.clone()).await;
        tracing::debug!(parent: &span, ?result, "power message");
        if let Err(e) = &result {
            tracing::warn!(parent: &span, error = %e, "power step failed");
            // Back to come again soon, not at the visibility timeout (best effort: that is what it falls back to).
            if let Some(Received { receipt, receives }) = received {
                let after = apiary_ports::queue::come_again_after(receives);
                if let Err(e) = deps.queue.return_power(receipt, after).await {
                    tracing::warn!(parent: &span, error = %e, "power message not put back; it comes again later");
                }
            }
        }
        (id, result)
    }))
    .await
}

/// The batch response for `results`: the messages that failed, and those put back to come again (the event
/// source mapping must delete neither).
pub fn respond(results: &[(String, Result<Outcome>)]) -> SqsBatchResponse {
    let kept = results.iter().filter(|(_, r)| r.as_ref().map_or(true, |o| o.returned));
    apiary_ports::queue::batch_response(kept.map(|(id, _)| id.clone()))
}
