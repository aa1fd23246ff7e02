//! The `Queue` port: where work is sent.
//!
//! The reconcile queue is FIFO with one message group per pool, so one pool is reconciled by one invocation at a
//! time while pools proceed in parallel. The power queue is a standard queue; re-checks are sent with a
//! per-message delay (at most [`MAX_DELAY`]). Delivery is at least once: every handler is idempotent.

use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsMessage};

use crate::error::Result;
use crate::messages::{PowerMessage, ReconcileMessage};

/// Messages of one SendMessageBatch, at most (SQS's limit).
pub const SEND_BATCH: usize = 10;

/// Longest delay SQS allows on a message.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// Where work is sent.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Ask for a reconcile of a pool.
    async fn reconcile(&self, message: &ReconcileMessage) -> Result<()>;
    /// Ask for a power step of a cluster after `delay` (capped at [`MAX_DELAY`]).
    async fn power(&self, message: &PowerMessage, delay: Duration) -> Result<()>;
    /// Ask for power steps now, [`SEND_BATCH`] messages to a request (SQS's SendMessageBatch, billed as one
    /// request): a reconcile's nudges of the clusters its plan touched. An error may leave some sent: each step is
    /// idempotent, and the caller sends them all again.
    async fn power_now(&self, messages: &[PowerMessage]) -> Result<()>;
    /// Puts a power message the handler received (by its receipt handle) back in the queue, hidden for `delay`
    /// (capped at [`MAX_DELAY`]): SQS's ChangeMessageVisibility. The handler then reports the message as a batch
    /// item failure, so that the event source mapping leaves it, and it is delivered again when `delay` is up, one
    /// receive more. A re-check link carries its chain on this way while its message has receives to spare.
    async fn return_power(&self, receipt: &str, delay: Duration) -> Result<()>;
    /// Puts a reconcile message the handler received back, hidden for `delay` (capped at [`MAX_DELAY`]), the same
    /// way: a reconcile that failed has its pool's messages come again after a pause that grows with their
    /// receives, rather than the queue's whole visibility timeout (which holds the pool's FIFO group meanwhile).
    async fn return_reconcile(&self, receipt: &str, delay: Duration) -> Result<()>;
}

/// The message attribute holding how many times SQS has handed a message out, this receive included.
pub const RECEIVE_COUNT: &str = "ApproximateReceiveCount";

/// How many times SQS has handed `record` out, this receive included (1 when the attribute is missing).
pub fn receives(record: &SqsMessage) -> u32 {
    record.attributes.get(RECEIVE_COUNT).and_then(|n| n.parse().ok()).unwrap_or(1)
}

/// How long a message whose handling failed stays hidden before it comes again, by its receives so far: 10 s, a
/// minute, then six (the template's visibility timeout). A fault of a moment costs seconds, not the visibility
/// timeout (for a reconcile, its pool's FIFO group held behind it; for a tick link, every cluster in motion in its
/// pool); one that lasts is not hammered; and the queue's `maxReceiveCount` still sends a message that keeps
/// failing to the dead letters.
pub fn come_again_after(receives: u32) -> Duration {
    match receives {
        0 | 1 => Duration::from_secs(10),
        2 => Duration::from_secs(60),
        _ => Duration::from_secs(360),
    }
}

/// The batch response reporting `failed` message ids (Lambda's ReportBatchItemFailures): those come back when their
/// visibility ends (the queue's timeout, or sooner where the handler put them back), the others are deleted.
pub fn batch_response(failed: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    SqsBatchResponse {
        batch_item_failures: failed.into_iter().map(|item_identifier| BatchItemFailure { item_identifier }).collect(),
    }
}
