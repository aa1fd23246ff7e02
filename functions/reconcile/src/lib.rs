//! The reconcile function: one pool at a time (the FIFO queue groups messages by pool).
//!
//! Reads the pool's whole partition (one strongly consistent Query), asks the planner for a plan, and carries it
//! out write by write, each conditional. A lost condition means someone acted first: re-read and re-plan, up to
//! [`MAX_ATTEMPTS`] times, then leave the message to SQS. A read or write the table refused for a moment
//! (throttled, a 5xx) is tried again the same way, after a short pause; a reconcile that fails all the same puts
//! its messages back to come again in seconds (`come_again_after`), not at the queue's visibility timeout.
//! Clusters the plan created, powered, assigned or wants checked or deprovisioned get a power message: the power
//! function drives machines, never the reconcile.
//! Delivered twice or late, a message only makes the reconcile plan again from what is stored.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apiary_planner::power::{needs_tick, tick};
use apiary_planner::{plan, reaper, Action};
use apiary_ports::messages::{PowerMessage, ReconcileMessage, CLOCK_SKEW, COALESCE_WINDOW};
use apiary_ports::metrics;
use apiary_ports::notify;
use apiary_ports::queue::{come_again_after, receives};
use apiary_ports::store::{transactions, writes_with_events};
use apiary_ports::{Deps, Error, Result};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use tracing::Instrument;

/// Re-plans after lost conditions before giving the message back to the queue.
pub const MAX_ATTEMPTS: u32 = apiary_ports::retry::PLAN;

/// What one reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Plans made (1 unless conditions were lost).
    pub attempts: u32,
    /// Conditional writes that succeeded.
    pub writes: usize,
    /// Power messages sent.
    pub power_messages: usize,
    /// The pool does not exist (any more).
    pub gone: bool,
}

/// The reason of the sweep's periodic full pass, which enqueues every pool, due or not.
pub const FULL_SWEEP: &str = "sweep-full";

/// Reconciles `pool` once. A pool with clusters in motion and no live tick also gets its tick nudged: the safety
/// net for a power message lost on its way (the tick's looks chain from one message to the next, so one lost
/// message would stall them), at every reconcile that finds something in motion, so a pool that reconciles often
/// (claims waiting, clusters deleting) is never left without its looks until the sweep's next full pass.
pub async fn reconcile(deps: &Deps, pool: &str) -> Result<Outcome> {
    let mut outcome = Outcome::default();
    loop {
        outcome.attempts += 1;
        // The plan's time is taken before the partition is read: a status it writes says that what a look found
        // come up before then is old news (`PoolStatus::planned_at`, `tick::news`).
        let now = deps.clock.now();
        // The tick item comes with the partition (one Query): whether the pool's tick is live.
        let read = match deps.store.read_pool_and_tick(pool).await {
            Err(e) if momentary(&e) && outcome.attempts < MAX_ATTEMPTS => {
                back_off(deps, pool, outcome.attempts, &e).await;
                continue;
            }
            read => read?,
        };
        let Some((mut snapshot, tick)) = read else {
            outcome.gone = true;
            return Ok(outcome);
        };
        let plan = plan(&snapshot, now, deps.clock.seed());
        let hurry = tick::hurry(snapshot.pool.status.pending_claims, plan.status.pending_claims, &snapshot.clusters);
        let mut power = BTreeSet::new();
        // When something moves and no tick is live, the first attempt starts one.
        if outcome.attempts == 1 && needs_tick(&snapshot.clusters, tick.as_ref(), now) {
            deps.queue.power(&PowerMessage::tick(pool, None), Duration::ZERO).await?;
            outcome.power_messages += 1;
        }
        let mut lost = None;
        // The events of the writes that landed that the pool's hooks hear, sent together once the plan is written.
        let mut to_send = Vec::new();
        'actions: for group in transactions(&plan.actions) {
            let mut writes = Vec::new();
            for a in group {
                match writes_with_events(&mut snapshot, a, now) {
                    Ok(w) => writes.extend(w),
                    Err(e) => {
                        lost = Some(e);
                        break 'actions;
                    }
                }
            }
            if !writes.is_empty() {
                let notices = notify::to_notify(&writes);
                match deps.store.write(pool, writes).await {
                    Ok(()) => {
                        outcome.writes += 1;
                        to_send.extend(notices);
                    }
                    Err(e) if matches!(e, Error::Conflict(_)) || momentary(&e) => {
                        lost = Some(e);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            written(deps, pool, &snapshot, group, &mut power);
        }
        // What was written stands even if a later write lost: its machines must be driven either way.
        // In as few requests as SQS allows: a release's three nudges (its cluster deleted and deprovisioned, its
        // replacement made) are one request.
        let nudges: Vec<PowerMessage> = power.into_iter().map(|cluster| PowerMessage::nudge(pool, cluster)).collect();
        deps.queue.power_now(&nudges).await?;
        // Their notifications, ten to a request, however many claims the plan assigned or ended.
        notify::after_write(deps, pool, &snapshot.pool.spec, &to_send).await;
        outcome.power_messages += nudges.len();
        match lost {
            None => {
                if hurry {
                    // Claims began to wait on clusters in motion: the tick looks at each now, not at its pace.
                    deps.queue.power(&PowerMessage::tick(pool, None), Duration::ZERO).await?;
                    outcome.power_messages += 1;
                }
                // The snapshot now holds what the plan wrote: its status is the pool's as of now.
                deps.metrics.emit(metrics::pool_status(&deps.config.stack, &snapshot, &plan.status, now));
                if reaper::due(&snapshot.pool, now) {
                    // The power function makes the pass: it is the one that reaches the pool's cloud.
                    deps.queue.power(&PowerMessage::reap(pool), Duration::ZERO).await?;
                    outcome.power_messages += 1;
                }
                return Ok(outcome);
            }
            Some(e) if outcome.attempts >= MAX_ATTEMPTS => return Err(e),
            Some(e) if momentary(&e) => back_off(deps, pool, outcome.attempts, &e).await,
            Some(e) => tracing::info!(pool, attempt = outcome.attempts, error = %e, "lost a condition; re-planning"),
        }
    }
}

/// What follows a group of actions written: each logged, an assignment's delay measured, and each cluster the
/// group touched put among those the power function is nudged for.
fn written(
    deps: &Deps,
    pool: &str,
    snapshot: &apiary_planner::Snapshot,
    group: &[Action],
    power: &mut BTreeSet<String>,
) {
    for action in group {
        log_action(pool, action);
        if let Action::AssignClaim { claim, at, .. } = action {
            if let Some(c) = snapshot.claims.iter().find(|c| &c.name == claim) {
                deps.metrics.emit(metrics::claim_assigned(&deps.config.stack, pool, c, *at));
            }
        }
        match action {
            Action::CreateCluster { cluster } => power.insert(cluster.id.clone()),
            Action::SetPowerState { cluster, .. }
            | Action::AssignClaim { cluster, .. }
            | Action::DeleteCluster { cluster, .. }
            | Action::Deprovision { cluster }
            | Action::CheckPower { cluster } => power.insert(cluster.clone()),
            _ => false,
        };
    }
}

/// Whether `e` is a moment's trouble rather than a lost race or a fault of the request: a call the service refused
/// but may take if tried again, after the SDK's own retries (a partition past its units, a 5xx, a timeout). The
/// reconcile tries again itself after [`back_off`], within its [`MAX_ATTEMPTS`], rather than leaving its messages
/// to the queue (see [`come_again_after`]).
fn momentary(e: &Error) -> bool {
    matches!(e, Error::Service { retryable: true, .. })
}

/// A pause before the `attempt`-th attempt's successor: 100 ms doubled at each attempt, and up to 100 ms more
/// drawn from the clock's seed, so reconciles throttled together do not come back together.
async fn back_off(deps: &Deps, pool: &str, attempt: u32, e: &Error) {
    let wait = Duration::from_millis((100 << attempt.saturating_sub(1).min(4)) + deps.clock.seed() % 100);
    tracing::info!(pool, attempt, error = %e, wait_ms = wait.as_millis() as u64, "store call refused; trying again");
    deps.clock.sleep(wait).await;
}

fn log_action(pool: &str, action: &Action) {
    match action {
        Action::CreateCluster { cluster } => tracing::info!(pool, cluster = %cluster.id, "cluster created"),
        Action::AssignClaim { claim, cluster, .. } => tracing::info!(pool, claim, cluster, "claim assigned"),
        Action::ReleaseClaim { claim, reason, .. } => tracing::info!(pool, claim, ?reason, "claim released"),
        Action::DeleteCluster { cluster, reason, .. } => tracing::info!(pool, cluster, ?reason, "cluster deleting"),
        Action::SetPowerState { cluster, power_state, .. } => {
            tracing::info!(pool, cluster, ?power_state, "power state set")
        }
        Action::DeletePool { .. } => tracing::info!(pool, "pool deleted"),
        _ => tracing::debug!(pool, ?action, "action"),
    }
}

/// Handles one batch from the reconcile queue: each pool once, however many messages name it, and not before the
/// end of the latest coalescing window among them; the messages of a pool whose reconcile failed are put back to
/// come again after [`come_again_after`] and reported as batch item failures, the others are done.
pub async fn handle(deps: &Deps, event: SqsEvent) -> SqsBatchResponse {
    let mut by_pool: BTreeMap<String, Vec<&SqsMessage>> = BTreeMap::new();
    let mut failures = vec![];
    let mut not_before = None;
    for record in &event.records {
        let id = record.message_id.clone().unwrap_or_default();
        match serde_json::from_str::<ReconcileMessage>(record.body.as_deref().unwrap_or_default()) {
            Ok(m) => {
                not_before = not_before.max(m.not_before);
                by_pool.entry(m.pool).or_default().push(record);
            }
            // A body that is not a reconcile message never will be: drop it (logged) rather than loop on it.
            Err(e) => tracing::error!(message_id = id, error = %e, "unreadable reconcile message dropped"),
        }
    }
    // A coalesced request stands for every request of its window: read only once the window has ended.
    // (Never longer than a window: a message naming a far future must not hold the pool's reconciles back.)
    let longest = COALESCE_WINDOW + CLOCK_SKEW;
    if let Some(wait) = not_before.and_then(|t| (t - deps.clock.now()).min(longest).to_std().ok()) {
        deps.clock.sleep(wait).await;
    }
    for (pool, records) in by_pool {
        let span = tracing::info_span!("reconcile", pool = %pool);
        match reconcile(deps, &pool).instrument(span.clone()).await {
            Ok(o) => tracing::info!(
                parent: &span,
                attempts = o.attempts,
                writes = o.writes,
                power_messages = o.power_messages,
                gone = o.gone,
                "reconciled"
            ),
            Err(e) => {
                tracing::warn!(parent: &span, error = %e, retryable = e.is_retryable(), "reconcile failed");
                for record in records {
                    come_again(deps, record).await;
                    failures.push(record.message_id.clone().unwrap_or_default());
                }
            }
        }
    }
    apiary_ports::queue::batch_response(failures)
}

/// Puts `record` back to come again after [`come_again_after`] its receives. Best effort: if the queue does not
/// take it, the message comes back at the visibility timeout, as it would have anyway.
async fn come_again(deps: &Deps, record: &SqsMessage) {
    let Some(receipt) = record.receipt_handle.as_deref() else { return };
    let after = come_again_after(receives(record));
    if let Err(e) = deps.queue.return_reconcile(receipt, after).await {
        tracing::warn!(error = %e, "reconcile message not put back; it comes again at the visibility timeout");
    }
}
