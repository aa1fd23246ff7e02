//! The `Queue` port: where work is sent.
//!
//! The reconcile queue is FIFO with one message group per pool, so one pool is reconciled by one invocation at a
//! time while pools proceed in parallel. The power queue is a standard queue; re-checks are sent with a
//! per-message delay (at most [`MAX_DELAY`]). Delivery is at least once: every handler is idempotent.

use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse};

use crate::error::Result;
use crate::messages::{PowerMessage, ReconcileMessage};

/// Longest delay SQS allows on a message.
pub const MAX_DELAY: Duration = Duration::from_secs(900);

/// Where work is sent.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Ask for a reconcile of a pool.
    async fn reconcile(&self, message: &ReconcileMessage) -> Result<()>;
    /// Ask for a power step of a cluster after `delay` (capped at [`MAX_DELAY`]).
    async fn power(&self, message: &PowerMessage, delay: Duration) -> Result<()>;
    /// Deletes a power message the handler received (by its receipt handle) before its batch ends. A re-check
    /// link deletes itself before it sends the next one, so an invocation killed in between never leaves two
    /// links of one chain in the queue. Deleting a message already deleted is not an error.
    async fn ack_power(&self, receipt: &str) -> Result<()>;
}

/// The batch response reporting `failed` message ids (Lambda's ReportBatchItemFailures): those come back after
/// the visibility timeout, the others are deleted.
pub fn batch_response(failed: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    SqsBatchResponse {
        batch_item_failures: failed.into_iter().map(|item_identifier| BatchItemFailure { item_identifier }).collect(),
    }
}
