//! The power function: drives one cluster's power state machine (seed 004, with seed 002's timeouts) a step.
//!
//! For each message it reads the pool and the cluster (two strongly consistent GetItems) and asks the planner
//! whether the message may act ([`chain::admit`]): only the cluster's live re-check link or a nudge (a message
//! from a reconcile, the claim API or the sweep) steps it; a stale link ends on arrival. Then, while the cluster
//! is not fenced by another invocation's actuator call ([`fenced_until`]), it asks the platform what [`probe`]
//! says to ask and lets [`step`] decide. When the step calls the actuator, the cluster is **written first** with
//! the call recorded and the state it leads to (so the table never says Running while a stop is landing), then
//! the call is made, then its outcome is written. Steps that say "look again now" run at once, in the same
//! invocation. At the end the cluster's re-check chain is recorded and its next link sent ([`chain::next`]): at
//! most two re-checks are ever in flight for a cluster. A step that settles, installs or breaks a cluster
//! enqueues a reconcile of its pool.
//!
//! A deleting cluster is deprovisioned instead: its machines are terminated; once none is left its item and its
//! name lease are deleted and the pool is reconciled (to refill). Refused terminations back off and are surfaced
//! ([`deprovision_step`]).
//!
//! Every write is conditional on the revision read; a lost condition re-reads and steps again (at most
//! [`MAX_ATTEMPTS`] times, then the message goes back to the queue). Idempotent: a duplicate or late message
//! re-reads the stored state and takes the step that state calls for.

use std::time::Duration;

use apiary_planner::events;
use apiary_planner::power::chain::{self, Admission};
use apiary_planner::power::{
    deprovision_step, deprovision_wait, fenced_until, probe, step, ActuatorCall, Install, PowerStep, Probe, Readiness,
    Report, Termination, POLL,
};
use apiary_planner::{Cluster, Machine, Pool, PowerLimits, Timestamp};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::metrics;
use apiary_ports::platform::{Machinery, Machines, Nodes, Provision, Refused, Target};
use apiary_ports::store::{Cond, Item, Key, Write};
use apiary_ports::{Deps, Error, Result};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::TimeDelta;
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
    /// The cluster was written.
    pub written: bool,
    /// The next look sent, if any.
    pub recheck: Option<Duration>,
    /// A reconcile of the pool was enqueued.
    pub woke_pool: bool,
    /// The cluster's item was deleted (deprovisioned).
    pub removed: bool,
    /// The message was a stale re-check link and ended without a look.
    pub dropped: bool,
    /// The infraIds whose machines a reap message's pass deprovisioned (their cluster is gone).
    pub reaped: Vec<String>,
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

/// What the platform reports for `question`. An error that trying again cannot mend (credentials refused, a
/// secret that does not exist, a permission missing) is reported as a failure of what the question is for, so the
/// planner backs off and the cluster's conditions say why, instead of the message failing until it is dropped.
async fn ask(platform: &dyn Machinery, t: Target<'_>, question: Probe, creds: &mut Credentials) -> Result<Report> {
    let answer = match question {
        Probe::Install => platform.install_state(t).await.map(Report::Install),
        Probe::MachinesRunning => platform.machines_running(t).await.map(|m| machines(&m)),
        Probe::MachinesStopped => platform.machines_stopped(t).await.map(|m| match m.unsupported_message() {
            // Nothing is stopped when some machine cannot be: a half-stopped cluster is neither.
            Some(message) if !m.not_ready.is_empty() => Report::Unsupported { message },
            _ => machines(&m),
        }),
        Probe::Readiness => platform.cluster_ready(t).await.map(Report::Ready),
        Probe::NodesReady => platform.nodes_ready(t).await.map(|nodes| match nodes {
            Nodes::Ready => Report::Nodes(Readiness::Ready),
            Nodes::NotReady(message) => Report::Nodes(Readiness::NotReady { message }),
            Nodes::Unreachable(message) => Report::Nodes(Readiness::Unreachable { message }),
            // A machine went down while the nodes were awaited: the resume waits for the machines again.
            Nodes::Machines(m) => machines(&m),
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

/// One invocation's work on one cluster: the message, its pool, and what it wrote last.
struct Run<'a> {
    deps: &'a Deps,
    pool: &'a Pool,
    platform: &'a dyn Machinery,
    limits: PowerLimits,
    msg: &'a PowerMessage,
    /// The message's receipt handle, when it came from the queue.
    receipt: Option<&'a str>,
    outcome: Outcome,
    /// What the platform's answers said of the pool's credentials.
    creds: Credentials,
}

impl Run<'_> {
    fn target<'c>(&'c self, cluster: &'c Cluster, now: Timestamp) -> Target<'c> {
        Target { pool: &self.pool.name, spec: &self.pool.spec, cluster, now }
    }

    /// Writes `next` over `stored` (conditional on `stored`'s revision); the cluster as written.
    async fn put(&mut self, stored: &Cluster, next: &Cluster) -> Result<Cluster> {
        let mut written = next.clone();
        written.rev = stored.rev + 1;
        let now = self.deps.clock.now();
        let mut writes = vec![Write::Put(Item::Cluster(Box::new(written.clone())), Cond::Rev(stored.rev))];
        writes.extend(events::of_cluster(stored, Some(&written), now).into_iter().map(Write::Append));
        self.deps.store.write(&self.pool.name, writes).await?;
        self.outcome.written = true;
        let stack = &self.deps.config.stack;
        if let Some(doc) = metrics::power_transition(stack, &self.pool.name, stored, &written, now) {
            self.deps.metrics.emit(doc);
        }
        if stored.power_state != written.power_state || stored.is_broken() != written.is_broken() {
            tracing::info!(
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

    /// Records the chain after a step that wants a look at `want`, writes what changed, sends the next link.
    async fn carry_on(
        &mut self,
        stored: &Cluster,
        mut current: Cluster,
        admission: Admission,
        want: Option<TimeDelta>,
    ) -> Result<()> {
        let now = self.deps.clock.now();
        // "Now" again means the step budget ran out: come back after the short poll.
        let max = TimeDelta::seconds(i64::from(self.deps.config.max_recheck_seconds));
        let want = want.map(|w| if w <= TimeDelta::zero() { POLL } else { w }.min(max));
        let next = chain::next(&current, admission, want.map(|w| now + w), now, self.deps.clock.seed());
        current.check = next.check;
        current.superseded = next.superseded;
        if current != *stored {
            self.put(stored, &current).await?;
        }
        if let (Some(_), Admission::Own, Some(receipt)) = (next.send, admission, self.receipt) {
            // This link is done: delete it before sending the next, so that a kill in between cannot leave both.
            self.deps.queue.ack_power(receipt).await?;
        }
        if let Some(link) = next.send {
            let delay = (link.due - now).to_std().unwrap_or_default();
            let message = PowerMessage { check: Some(link.token), ..self.msg.clone() };
            self.deps.queue.power(&message, delay).await?;
            self.outcome.recheck = Some(delay);
        }
        Ok(())
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

    async fn wake_pool(&mut self, reason: &str) -> Result<()> {
        let message = ReconcileMessage::new(self.pool.name.clone(), reason);
        self.deps.queue.reconcile(&message).await?;
        self.outcome.woke_pool = true;
        Ok(())
    }

    /// One attempt: read the cluster, step it, write, carry the chain on.
    async fn attempt(&mut self) -> Result<()> {
        let Some(stored) = get_cluster(self.deps, &self.pool.name, &self.msg.cluster).await? else { return Ok(()) };
        let admission = chain::admit(&stored, self.msg.check);
        match admission {
            Admission::Drop => {
                self.outcome.dropped = true;
                return Ok(());
            }
            Admission::Forget => {
                let forgotten = Cluster { superseded: None, ..stored.clone() };
                self.put(&stored, &forgotten).await?;
                return Ok(());
            }
            Admission::Own | Admission::Nudge => {}
        }
        if stored.deleting {
            return self.deprovision(stored, admission).await;
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
            let report = ask(self.platform, t, question, &mut self.creds).await?;
            tracing::debug!(?question, ?report, "looked");
            let mut s = step(&current, &report, now, self.limits);
            if s.cluster.is_running() && !current.is_running() {
                s.cluster.machines = self.addresses(&s.cluster, now).await;
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
        self.carry_on(&last, current, admission, want).await?;
        if wakes {
            self.wake_pool("power").await?;
        }
        Ok(())
    }

    async fn deprovision(&mut self, stored: Cluster, admission: Admission) -> Result<()> {
        let now = self.deps.clock.now();
        if let Some(wait) = deprovision_wait(&stored, now) {
            // Backing off after refusals: a nudge only makes sure the chain carries on.
            return self.carry_on(&stored.clone(), stored, admission, Some(wait)).await;
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
            return self.carry_on(&stored.clone(), ds.cluster, admission, ds.recheck_after).await;
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
        self.wake_pool("deprovisioned").await
    }
}

/// Steps the cluster of `msg` once (or a few times, while each step asks to look again at once). `receipt` is the
/// message's receipt handle when it came from the queue.
pub async fn power(deps: &Deps, msg: &PowerMessage, receipt: Option<&str>) -> Result<Outcome> {
    if msg.reap {
        return Ok(Outcome { reaped: reap::pass(deps, &msg.pool).await?, ..Outcome::default() });
    }
    let Some(pool) = get_pool(deps, &msg.pool).await? else { return Ok(Outcome::default()) };
    let machinery = deps.platforms.of(&pool.spec)?;
    let platform = machinery.as_ref();
    let limits = pool.power_limits();
    let creds = Credentials::Untried;
    let mut run = Run { deps, pool: &pool, platform, limits, msg, receipt, outcome: Outcome::default(), creds };
    let mut attempt = 0;
    let result = loop {
        attempt += 1;
        match run.attempt().await {
            Ok(()) => break Ok(()),
            Err(Error::Conflict(why)) if attempt < MAX_ATTEMPTS => {
                tracing::info!(attempt, why, "lost a condition; re-reading");
            }
            Err(e) => break Err(e),
        }
    };
    record_credentials(deps, &pool, &run.creds).await;
    result.map(|()| run.outcome)
}

/// Handles one batch from the power queue, its messages concurrently; each failed message is reported alone.
pub async fn handle(deps: &Deps, event: SqsEvent) -> SqsBatchResponse {
    let results = futures::future::join_all(event.records.into_iter().map(|record| async move {
        let id = record.message_id.clone().unwrap_or_default();
        let msg = match serde_json::from_str::<PowerMessage>(record.body.as_deref().unwrap_or_default()) {
            Ok(m) => m,
            Err(e) => {
                // A body that is not a power message never will be: drop it (logged) rather than loop on it.
                tracing::error!(message_id = id, error = %e, "unreadable power message dropped");
                return None;
            }
        };
        let span = tracing::info_span!("power", pool = %msg.pool, cluster = %msg.cluster);
        let result = power(deps, &msg, record.receipt_handle.as_deref()).instrument(span.clone()).await;
        tracing::debug!(parent: &span, ?result, "power message");
        match result {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(parent: &span, error = %e, "power step failed");
                Some(id)
            }
        }
    }))
    .await;
    apiary_ports::queue::batch_response(results.into_iter().flatten())
}
