//! The timeouts function: the periodic sweep, Apiary's level-triggered safety net.
//!
//! Every run (EventBridge Scheduler, `rate(1 minute)` by default) lists the pools (one Query of the sparse
//! `pools` index) and enqueues a reconcile for each pool that is due ([`apiary_planner::sweep::due`]): its
//! `nextWakeAt` has passed, it has no status yet, it is being deleted, or claims wait for clusters (installs under
//! way end with the power function's own message, and so do deletions wherever their end frees room the pool is
//! held to; the full pass catches one lost). A run is a
//! full pass when the last recorded one is old enough
//! ([`apiary_planner::sweep::full_due`], every `APIARY_FULL_SWEEP_SECONDS`): it enqueues every pool, and those
//! reconciles (as any reconcile does) start the tick of a pool with clusters in motion and none live, so a lost
//! message delays work, never loses it. The time of the last full pass is kept in the table, written once the pass
//! has enqueued every pool: a run cannot skip it whatever the sweep's rate, and one that failed part way is made
//! again by the next run. Every run also asks the power function for the notifications' pass over the trail of
//! each pool with `notify` webhooks ([`apiary_ports::notify`]).

use apiary_planner::sweep;
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::{Deps, Error, Result};

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Pools seen.
    pub pools: usize,
    /// Reconciles enqueued.
    pub enqueued: usize,
    /// Whether it was a full pass.
    pub full: bool,
    /// Notifications' passes asked for: one a pool with `notify` webhooks.
    pub notices: usize,
}

/// One run of the sweep as its schedule invokes it: decides whether this run is a full pass, sweeps, and records a
/// full pass once it has enqueued every pool. One that fails part way (the queue refused a pool's message) is not
/// recorded, so the next run, a minute later, makes it again rather than leaving the pools it missed for ten
/// minutes more. (The function runs one at a time, and two full passes at once would only reconcile each pool
/// twice.)
pub async fn run(deps: &Deps) -> Result<Outcome> {
    let now = deps.clock.now();
    let last = deps.store.last_full_sweep().await?;
    let full = sweep::full_due(last, now, deps.config.full_sweep_every);
    let outcome = sweep(deps, full).await?;
    if full {
        match deps.store.record_full_sweep(last, now).await {
            // Another run recorded one meanwhile: both were made.
            Ok(()) | Err(Error::Conflict(_)) => {}
            // Made but not recorded: the next run makes it again, which costs each pool a reconcile.
            Err(e) => tracing::warn!(error = %e, "full pass made but not recorded"),
        }
    }
    Ok(outcome)
}

/// The function's answer to an invocation by the sweep's schedule (EventBridge Scheduler's target input, the
/// template's `{"source":"apiary-sweep"}`, which the sweep does not need to read): the run's figures, or the error
/// Lambda records for it, typed `Retryable` or `Fatal`.
pub async fn handle(
    deps: &Deps,
    _event: apiary_ports::messages::SweepEvent,
) -> std::result::Result<serde_json::Value, lambda_runtime::Diagnostic> {
    match run(deps).await {
        Ok(o) => Ok(serde_json::json!({"pools": o.pools, "enqueued": o.enqueued, "full": o.full})),
        Err(e) => Err(lambda_runtime::Diagnostic {
            error_type: if e.is_retryable() { "Retryable" } else { "Fatal" }.into(),
            error_message: e.to_string(),
        }),
    }
}

/// Runs one pass; a `full` one enqueues every pool, with [`reconcile::FULL_SWEEP`] as the reason.
pub async fn sweep(deps: &Deps, full: bool) -> Result<Outcome> {
    let now = deps.clock.now();
    let pools = deps.store.list_pools().await?;
    let mut outcome = Outcome { pools: pools.len(), enqueued: 0, full, notices: 0 };
    let reason = if full { reconcile::FULL_SWEEP } else { "sweep" };
    for pool in pools.iter().filter(|p| full || sweep::due(p, now)) {
        deps.queue.reconcile(&ReconcileMessage::new(pool.name.clone(), reason)).await?;
        outcome.enqueued += 1;
    }
    // Every run: the pass over the trail of each pool with hooks sends, within two minutes, a notification whose
    // writer stopped before it sent it (apiary_ports::notify).
    for pool in pools.iter().filter(|p| !p.spec.notify.is_empty()) {
        deps.queue.power(&PowerMessage::notices(pool.name.clone()), std::time::Duration::ZERO).await?;
        outcome.notices += 1;
    }
    tracing::info!(pools = outcome.pools, enqueued = outcome.enqueued, full, notices = outcome.notices, "sweep");
    Ok(outcome)
}
