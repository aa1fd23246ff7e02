//! A power message read and handed to what takes it: a nudge to its cluster's [`Run`], a tick to [`tick::run`],
//! the reaper's pass to [`reap::pass`]. A batch's messages run concurrently; one that fails is put back to come
//! again soon and reported alone.

use apiary_planner::power::tick as planned_tick;
use apiary_ports::messages::PowerMessage;
use apiary_ports::{Deps, Result};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use tracing::Instrument;

use crate::credentials;
use crate::notice;
use crate::outcome::{Outcome, Received};
use crate::reap;
use crate::run::{wake_pool, Run};
use crate::tick;

/// Handles one power message: steps the cluster it names once (or a few times, while each step asks to look
/// again at once) and makes sure the pool's tick looks at it again when it must; or makes the pool's tick; or the
/// reaper's pass. `received` is how the queue handed the message over, when it came from the queue.
pub async fn power(deps: &Deps, msg: &PowerMessage, received: Option<Received<'_>>) -> Result<Outcome> {
    if msg.reap {
        return Ok(Outcome { reaped: reap::pass(deps, &msg.pool).await?, ..Outcome::default() });
    }
    if let Some(notice) = &msg.notice {
        // Told even when the pool is gone since: a deleted pool's claims' endings are among what its hooks hear.
        return Ok(Outcome { notified: Some(notice::deliver(deps, &msg.pool, notice).await?), ..Outcome::default() });
    }
    let Some(pool) = deps.store.get_pool(&msg.pool).await? else {
        if msg.tick {
            tick::forget_tick(deps, &msg.pool).await?;
        }
        return Ok(Outcome::default());
    };
    if msg.notices {
        return Ok(Outcome { passed: notice::pass(deps, &pool).await?, ..Outcome::default() });
    }
    let machinery = deps.platforms.of(&pool.spec)?;
    if msg.tick {
        return tick::run(deps, &pool, machinery.as_ref(), msg, received).await;
    }
    let mut run = Run::new(deps, &pool, machinery.as_ref(), msg.clone());
    let result = run.drive().await;
    credentials::record(deps, &pool, &run.creds).await;
    let want = result?;
    if run.outcome.came_up {
        // Before the reconcile is asked for: a claimant reading the tick then looks on its own schedule.
        tick::note_up(deps, &pool).await?;
    }
    if let Some(reason) = run.wake {
        wake_pool(deps, &pool.name, reason).await?;
        run.outcome.woke_pool = true;
    }
    if let Some(want) = want {
        let now = deps.clock.now();
        let at = planned_tick::aligned(now + want, now);
        tick::ensure_tick(deps, &pool.name, Some(&msg.cluster), at).await?;
        run.outcome.recheck = want.to_std().ok();
    }
    Ok(run.outcome)
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
