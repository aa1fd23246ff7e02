//! The timeouts function: the periodic sweep, Apiary's level-triggered safety net.
//!
//! Every run (EventBridge Scheduler, `rate(1 minute)` by default) lists the pools (one Query of the sparse
//! `pools` index) and enqueues a reconcile for each pool that is due: its `nextWakeAt` has passed (power-transition
//! timeouts, hibernateAfter, claim lifetimes, schedule boundaries), it has no recorded status yet, it is being
//! deleted, or work is under way (installing, deleting, pending claims) whose follow-up message may have been lost.
//! Every [`FULL_SWEEP_MINUTES`] minutes every pool is enqueued, so a lost message delays work, never loses it.

use apiary_planner::{Pool, Timestamp};
use apiary_ports::messages::ReconcileMessage;
use apiary_ports::{Deps, Result};
use chrono::Timelike;

/// Every pool is reconciled at least this often (in minutes past the hour divisible by it), and those
/// reconciles nudge every unsettled cluster (see [`reconcile::FULL_SWEEP`]).
pub const FULL_SWEEP_MINUTES: u32 = 10;

/// Whether the sweep at `now` is a full one.
pub fn full_due(now: Timestamp) -> bool {
    now.minute() % FULL_SWEEP_MINUTES == 0
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Pools seen.
    pub pools: usize,
    /// Reconciles enqueued.
    pub enqueued: usize,
}

/// Whether `pool` needs a reconcile at `now` (every pool does on a full sweep).
pub fn due(pool: &Pool, now: Timestamp) -> bool {
    let s = &pool.status;
    pool.next_wake_at.is_some_and(|t| t <= now)
        || s.pool_version.is_empty()
        || pool.deletion_requested_at.is_some()
        || s.installing > 0
        || s.deleting > 0
        || s.pending_claims > 0
}

/// Runs one sweep; a `full` one enqueues every pool, with [`reconcile::FULL_SWEEP`] as the reason.
pub async fn sweep(deps: &Deps, full: bool) -> Result<Outcome> {
    let now = deps.clock.now();
    let pools = deps.store.list_pools().await?;
    let mut outcome = Outcome { pools: pools.len(), enqueued: 0 };
    let reason = if full { reconcile::FULL_SWEEP } else { "sweep" };
    for pool in pools.iter().filter(|p| full || due(p, now)) {
        deps.queue.reconcile(&ReconcileMessage { pool: pool.name.clone(), reason: reason.into() }).await?;
        outcome.enqueued += 1;
    }
    tracing::info!(pools = outcome.pools, enqueued = outcome.enqueued, full, "sweep");
    Ok(outcome)
}
