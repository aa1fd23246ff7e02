//! The power function: drives one cluster's power state machine (seed 004, with seed 002's timeouts) a step.
//!
//! For each message it reads the pool and the cluster (two strongly consistent GetItems), asks the platform
//! what [`probe`] says to ask, lets [`step`] decide, makes the actuator call the step asks for and steps again
//! with its outcome. Steps that say "look again now" run at once, in the same invocation. The cluster is written
//! conditional on its revision (a lost condition: re-read and step again); a later look is a delayed power
//! message; a step that settles, installs or breaks a cluster enqueues a reconcile of its pool.
//!
//! A deleting cluster is deprovisioned instead: its machines are terminated, and once none is left its item and
//! its name lease are deleted and the pool is reconciled (to refill).
//!
//! Idempotent: a duplicate or late message re-reads the stored state and takes the step that state calls for.

use std::time::Duration;

use apiary_planner::power::{probe, step, ActuatorCall, Probe, Report, POLL};
use apiary_planner::{Cluster, Pool};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::metrics;
use apiary_ports::platform::{Machinery, Target};
use apiary_ports::store::{Cond, Item, Key, Write};
use apiary_ports::{Deps, Error, Result};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use tracing::Instrument;

/// Lost conditions tolerated before the message goes back to the queue.
pub const MAX_ATTEMPTS: u32 = 3;
/// Steps that ask to look again at once, taken in one invocation.
const MAX_STEPS: usize = 4;

/// What one power message did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The cluster was written.
    pub written: bool,
    /// The next look, if any.
    pub recheck: Option<Duration>,
    /// A reconcile of the pool was enqueued.
    pub woke_pool: bool,
    /// The cluster's item was deleted (deprovisioned).
    pub removed: bool,
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

/// What the actuator reports for `question`.
async fn ask(platform: &dyn Machinery, t: Target<'_>, question: Probe) -> Result<Report> {
    let m = match question {
        Probe::MachinesRunning => platform.machines_running(t).await?,
        Probe::MachinesStopped => platform.machines_stopped(t).await?,
        Probe::NodesReady => return Ok(Report::Nodes { ready: platform.nodes_ready(t).await? }),
    };
    Ok(Report::Machines { not_ready: m.not_ready.len() as u32, total: m.total })
}

/// Makes `call`; the cloud's refusal is a report, not an error.
async fn call(platform: &dyn Machinery, t: Target<'_>, call: ActuatorCall) -> Result<Report> {
    let refused = match call {
        ActuatorCall::Provision => platform.provision(t).await?,
        ActuatorCall::Start => platform.start_machines(t).await?.into_result(),
        ActuatorCall::Stop => platform.stop_machines(t).await?.into_result(),
    };
    Ok(match refused {
        Ok(()) => Report::CallAccepted,
        Err(message) => Report::CallFailed { message },
    })
}

/// Steps the cluster of `msg` once (or a few times, while each step asks to look again at once).
pub async fn power(deps: &Deps, msg: &PowerMessage) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    let Some(pool) = get_pool(deps, &msg.pool).await? else { return Ok(outcome) };
    let timeouts = pool.spec.power_timeouts();
    let platform = deps.platforms.of(&pool.spec)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(stored) = get_cluster(deps, &msg.pool, &msg.cluster).await? else { return Ok(outcome) };
        if stored.deleting {
            return deprovision(deps, &pool, &stored, platform).await;
        }
        let mut current = stored.clone();
        let (mut recheck, mut wakes) = (None, false);
        for _ in 0..MAX_STEPS {
            let Some(question) = probe(&current) else {
                recheck = None;
                break;
            };
            let now = deps.clock.now();
            let t = Target { pool: &pool.name, spec: &pool.spec, cluster: &current, now };
            let report = ask(platform, t, question).await?;
            let mut s = step(&current, &report, now, timeouts);
            if let Some(c) = s.call {
                let t = Target { pool: &pool.name, spec: &pool.spec, cluster: &s.cluster, now };
                let result = call(platform, t, c).await?;
                tracing::info!(pool = %pool.name, cluster = %current.id, call = ?c, result = ?result, "actuator call");
                let then = step(&s.cluster, &result, now, timeouts);
                wakes |= s.wakes_pool;
                s = then;
            }
            wakes |= s.wakes_pool;
            current = s.cluster;
            recheck = s.recheck_after;
            if recheck != Some(chrono::TimeDelta::zero()) {
                break;
            }
        }
        if current != stored {
            let mut next = current.clone();
            next.rev = stored.rev + 1;
            let write = Write::Put(Item::Cluster(Box::new(next)), Cond::Rev(stored.rev));
            match deps.store.write(&msg.pool, vec![write]).await {
                Ok(()) => {
                    outcome.written = true;
                    let done =
                        metrics::power_transition(&deps.config.stack, &pool.name, &stored, &current, deps.clock.now());
                    done.into_iter().for_each(|d| deps.metrics.emit(d));
                }
                Err(e @ Error::Conflict(_)) if attempt >= MAX_ATTEMPTS => return Err(e),
                Err(Error::Conflict(_)) => continue,
                Err(e) => return Err(e),
            }
            tracing::info!(
                pool = %pool.name,
                cluster = %current.id,
                from = ?stored.power_state,
                to = ?current.power_state,
                broken = current.is_broken(),
                "cluster power state"
            );
        }
        if let Some(after) = recheck {
            // "Now" again means the step budget ran out: come back after the short poll.
            let after = if after <= chrono::TimeDelta::zero() { POLL } else { after };
            let delay =
                Duration::from_secs(after.num_seconds().clamp(0, i64::from(deps.config.max_recheck_seconds)) as u64);
            deps.queue.power(msg, delay).await?;
            outcome.recheck = Some(delay);
        }
        if wakes {
            deps.queue.reconcile(&ReconcileMessage { pool: msg.pool.clone(), reason: "power".into() }).await?;
            outcome.woke_pool = true;
        }
        return Ok(outcome);
    }
}

async fn deprovision(deps: &Deps, pool: &Pool, cluster: &Cluster, platform: &dyn Machinery) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    let t = Target { pool: &pool.name, spec: &pool.spec, cluster, now: deps.clock.now() };
    if !platform.deprovision(t).await? {
        let delay = Duration::from_secs(POLL.num_seconds().min(i64::from(deps.config.max_recheck_seconds)) as u64);
        deps.queue
            .power(&PowerMessage { pool: pool.name.clone(), cluster: cluster.id.clone(), check: None }, delay)
            .await?;
        outcome.recheck = Some(delay);
        return Ok(outcome);
    }
    match deps
        .store
        .write(&pool.name, vec![Write::Delete(Key::Cluster(cluster.id.clone()), Cond::Rev(cluster.rev))])
        .await
    {
        Ok(()) => {}
        // Someone changed or removed it meanwhile: the message that follows their change handles it.
        Err(Error::Conflict(_)) => return Ok(outcome),
        Err(e) => return Err(e),
    }
    outcome.removed = true;
    tracing::info!(pool = %pool.name, cluster = %cluster.id, "cluster deprovisioned");
    if pool.spec.inventory.is_some() {
        let lease = Write::Delete(Key::Lease(cluster.cluster_name.clone()), Cond::Holder(cluster.id.clone()));
        match deps.store.write(&pool.name, vec![lease]).await {
            // Not held by this cluster (or already gone): nothing to release.
            Ok(()) | Err(Error::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
    }
    deps.queue.reconcile(&ReconcileMessage { pool: pool.name.clone(), reason: "deprovisioned".into() }).await?;
    outcome.woke_pool = true;
    Ok(outcome)
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
        let result = power(deps, &msg).instrument(span.clone()).await;
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
