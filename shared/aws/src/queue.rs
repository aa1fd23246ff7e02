//! The SQS adapter of the [`Queue`] port.
//!
//! The reconcile queue is FIFO with `MessageGroupId = pool`, so one pool is reconciled by one invocation at a
//! time while pools proceed in parallel. Each send has its own deduplication id: SQS drops the SDK's retries of
//! one send, never a later request that may carry news; except a coalesced request
//! ([`ReconcileMessage::coalesced`]), whose id names its pool and window, so that SQS keeps one message of a
//! burst (and the reconcile waits for the window's end before reading). The power queue is a standard queue;
//! re-checks are sent with a per-message delay (at most 900 s, SQS's limit).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;

use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::queue::{Queue, MAX_DELAY};
use apiary_ports::{Config, Result};

use crate::calls::count;

/// The two SQS queues.
#[derive(Debug)]
pub struct SqsQueue {
    client: Client,
    reconcile_url: String,
    power_url: String,
    sends: AtomicU64,
    process: u64,
}

impl SqsQueue {
    /// The queues named by `config`.
    pub fn new(client: Client, config: &Config) -> Self {
        use std::hash::{BuildHasher, Hasher};
        // Distinguishes this process's deduplication ids from another's.
        let process = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Self {
            client,
            reconcile_url: config.reconcile_queue_url.clone(),
            power_url: config.power_queue_url.clone(),
            sends: AtomicU64::new(0),
            process,
        }
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn reconcile(&self, message: &ReconcileMessage) -> Result<()> {
        let n = self.sends.fetch_add(1, Ordering::Relaxed);
        count("sqs:SendMessage");
        self.client
            .send_message()
            .queue_url(&self.reconcile_url)
            .message_group_id(&message.pool)
            .message_deduplication_id(message.dedup_id().unwrap_or_else(|| format!("{:016x}-{n}", self.process)))
            .message_body(serde_json::to_string(message)?)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:SendMessage", e))?;
        Ok(())
    }

    async fn ack_power(&self, receipt: &str) -> Result<()> {
        count("sqs:DeleteMessage");
        self.client
            .delete_message()
            .queue_url(&self.power_url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:DeleteMessage", e))?;
        Ok(())
    }

    async fn power(&self, message: &PowerMessage, delay: Duration) -> Result<()> {
        let delay = delay.min(MAX_DELAY).as_secs() as i32;
        count("sqs:SendMessage");
        self.client
            .send_message()
            .queue_url(&self.power_url)
            .delay_seconds(delay)
            .message_body(serde_json::to_string(message)?)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:SendMessage", e))?;
        Ok(())
    }
}

/// Receives batches from a queue the way Lambda's event source mapping does, for running the functions outside
/// Lambda: long polls, hands a whole batch to a handler as an [`SqsEvent`], then deletes every message except the
/// batch item failures the handler reported (those come back after the visibility timeout).
#[derive(Debug, Clone)]
pub struct Poller {
    client: Client,
    url: String,
}

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};

impl Poller {
    /// A poller of the queue at `url`.
    pub fn new(sdk: &aws_config::SdkConfig, url: &str) -> Self {
        Self { client: Client::new(sdk), url: url.to_owned() }
    }

    /// Waits up to `wait` for a batch of up to `max` messages.
    pub async fn receive(&self, max: i32, wait: Duration) -> Result<SqsEvent> {
        count("sqs:ReceiveMessage");
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait.as_secs() as i32)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:ReceiveMessage", e))?;
        let mut event = SqsEvent::default();
        for m in out.messages.unwrap_or_default() {
            event.records.push(SqsMessage {
                message_id: m.message_id,
                receipt_handle: m.receipt_handle,
                body: m.body,
                ..Default::default()
            });
        }
        Ok(event)
    }

    /// Deletes the messages of `event` that `response` does not report as failed.
    pub async fn settle(&self, event: &SqsEvent, response: &SqsBatchResponse) -> Result<()> {
        let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        let done: Vec<_> = event
            .records
            .iter()
            .filter(|r| !failed.contains(&r.message_id.as_deref().unwrap_or_default()))
            .filter_map(|r| {
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(r.message_id.clone()?)
                    .receipt_handle(r.receipt_handle.clone()?)
                    .build()
                    .ok()
            })
            .collect();
        if done.is_empty() {
            return Ok(());
        }
        count("sqs:DeleteMessageBatch");
        self.client
            .delete_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(done))
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:DeleteMessageBatch", e))?;
        Ok(())
    }
}
