//! One message's work on one cluster: read it, ask its platform what the planner wants to know, take the step
//! the planner decides, write it. When a step calls the actuator, the cluster is **written first** with the call
//! recorded and the state it leads to (so the table never says Running while a stop is landing), then the call is
//! made, then its outcome is written. Steps that say "look again now" run at once. A deleting cluster is
//! deprovisioned instead: its machines terminated, then its item and its name lease deleted. Every write is
//! conditional on the revision read; a lost condition reads again and steps again ([`retry`]).

use apiary_planner::events;
use apiary_planner::power::certificates::{self, CertificateLook};
use apiary_planner::power::{
    deprovision_step, deprovision_wait, fenced_until, probe, step, ActuatorCall, PowerStep, Probe, Termination, POLL,
};
use apiary_planner::{Cluster, Machine, Pool, PowerLimits, Timestamp};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::metrics;
use apiary_ports::platform::{Machinery, Seen, Target};
use apiary_ports::store::{cluster_change, Cond, Key, Write};
use apiary_ports::{on_conflict, retry};
use apiary_ports::{Deps, Error, Result};
use chrono::TimeDelta;

use crate::credentials::Credentials;
use crate::outcome::Outcome;
use crate::platform::{ask, call};

/// Steps that ask to look again at once, taken in one invocation.
const MAX_STEPS: usize = 4;
/// Machines recorded at most per cluster (the cluster item stays far below the table's item size limit).
const MAX_MACHINES: usize = 200;

/// One invocation's work on one cluster: its pool, the message that names it, and what came of it.
pub(crate) struct Run<'a> {
    pub(crate) deps: &'a Deps,
    pub(crate) pool: &'a Pool,
    pub(crate) platform: &'a dyn Machinery,
    pub(crate) limits: PowerLimits,
    pub(crate) msg: PowerMessage,
    pub(crate) outcome: Outcome,
    /// What the platform's answers said of the pool's credentials.
    pub(crate) creds: Credentials,
    /// Why the pool must reconcile, if it must.
    pub(crate) wake: Option<&'static str>,
    /// The cluster as a tick read it just before, for the first attempt.
    pub(crate) preread: Option<Cluster>,
    /// What the tick's look at many clusters found for this one, for the first question.
    pub(crate) seen: Option<Seen>,
}

impl<'a> Run<'a> {
    pub(crate) fn new(deps: &'a Deps, pool: &'a Pool, platform: &'a dyn Machinery, msg: PowerMessage) -> Self {
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
        let (mut writes, progress) = cluster_change(stored, &written, now);
        crate::notice::broken(self.deps, self.pool, &written, &mut writes).await?;
        let notices = apiary_ports::notify::to_notify(&writes);
        self.deps.store.write(&self.pool.name, writes).await?;
        self.outcome.written = true;
        apiary_ports::notify::after_write(self.deps, &self.pool.name, &self.pool.spec, &notices).await;
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
                let Some(fresh) = self.deps.store.get_cluster(&self.pool.name, &self.msg.cluster).await? else {
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
            None => self.deps.store.get_cluster(&self.pool.name, &self.msg.cluster).await?,
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

    /// Attempts until one holds (a lost condition re-reads), at most [`retry::STEP`].
    pub(crate) async fn drive(&mut self) -> Result<Option<TimeDelta>> {
        on_conflict!(retry::STEP, "the cluster", self.attempt())
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
pub(crate) async fn wake_pool(deps: &Deps, pool: &str, reason: &str) -> Result<()> {
    deps.queue.reconcile(&ReconcileMessage::new(pool.to_owned(), reason)).await
}
