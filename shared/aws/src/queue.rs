//! The SQS adapter of the [`Queue`] port.
//!
//! The reconcile queue is FIFO with `MessageGroupId = pool`, so one pool is reconciled by one invocation at a
//! time while pools proceed in parallel. Each send has its own deduplication id: SQS drops the SDK's retries of
//! one send, never a later request that may carry news; except a coalesced request
//! ([`ReconcileMessage::coalesced`]), whose id names its pool and window, so that SQS keeps one message of a
//! burst (and the reconcile waits for the window's end before reading). A process sends such a request once: SQS
//! would drop a second send with the same id (its deduplication interval is five minutes; a window lasts a
//! second), so the adapter does not make it, and a burst of claims on one instance costs one send per window,
//! not one per claim. The power queue is a standard queue;
//! re-checks are sent with a per-message delay (at most 900 s, SQS's limit).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;

use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::queue::{Queue, MAX_DELAY, SEND_BATCH};
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
    /// Per pool, the deduplication id of the last coalesced request this process sent.
    coalesced: Mutex<HashMap<String, String>>,
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
            coalesced: Mutex::new(HashMap::new()),
        }
    }

    /// The deduplication id of the last coalesced request this process sent for `pool`.
    fn sent_coalesced(&self, pool: &str) -> Option<String> {
        self.coalesced.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(pool).cloned()
    }

    /// Hides the message of `receipt` on the queue at `url` for `delay` from now (ChangeMessageVisibility).
    async fn change_visibility(&self, url: &str, receipt: &str, delay: Duration) -> Result<()> {
        count("sqs:ChangeMessageVisibility");
        self.client
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(receipt)
            .visibility_timeout(delay.min(MAX_DELAY).as_secs() as i32)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:ChangeMessageVisibility", e))?;
        Ok(())
    }
}

#[async_trait]
impl Queue for SqsQueue {
    async fn reconcile(&self, message: &ReconcileMessage) -> Result<()> {
        let coalesced = message.dedup_id();
        if coalesced.is_some() && self.sent_coalesced(&message.pool).as_ref() == coalesced.as_ref() {
            return Ok(());
        }
        let n = self.sends.fetch_add(1, Ordering::Relaxed);
        count("sqs:SendMessage");
        self.client
            .send_message()
            .queue_url(&self.reconcile_url)
            .message_group_id(&message.pool)
            .message_deduplication_id(coalesced.clone().unwrap_or_else(|| format!("{:016x}-{n}", self.process)))
            .message_body(serde_json::to_string(message)?)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:SendMessage", e))?;
        if let Some(id) = coalesced {
            self.coalesced.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(message.pool.clone(), id);
        }
        Ok(())
    }

    async fn return_power(&self, receipt: &str, delay: Duration) -> Result<()> {
        self.change_visibility(&self.power_url, receipt, delay).await
    }

    async fn return_reconcile(&self, receipt: &str, delay: Duration) -> Result<()> {
        self.change_visibility(&self.reconcile_url, receipt, delay).await
    }

    async fn power_now(&self, messages: &[PowerMessage]) -> Result<()> {
        for batch in messages.chunks(SEND_BATCH) {
            let mut entries = Vec::with_capacity(batch.len());
            for (i, message) in batch.iter().enumerate() {
                let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(serde_json::to_string(message)?)
                    .build()
                    .map_err(|e| batch_error(e.to_string(), false))?;
                entries.push(entry);
            }
            count("sqs:SendMessageBatch");
            let out = self
                .client
                .send_message_batch()
                .queue_url(&self.power_url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| crate::error::aws("sqs:SendMessageBatch", e))?;
            if let Some(failed) = out.failed.first() {
                let why = failed.message.as_deref().unwrap_or(&failed.code);
                let message = format!("{} of {} messages not sent: {why}", out.failed.len(), batch.len());
                return Err(batch_error(message, !failed.sender_fault));
            }
        }
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

/// A SendMessageBatch that did not send every message.
fn batch_error(message: String, retryable: bool) -> apiary_ports::Error {
    apiary_ports::Error::Service { op: "sqs:SendMessageBatch", message, retryable, source: None }
}

/// Receives batches from a queue the way Lambda's event source mapping does, for running the functions outside
/// Lambda: long polls, hands a whole batch to a handler as an [`SqsEvent`] (each message with its receive count),
/// then deletes every message except the batch item failures the handler reported (those come back after the
/// visibility timeout, or the one the handler gave them).
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
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(|e| crate::error::aws("sqs:ReceiveMessage", e))?;
        let mut event = SqsEvent::default();
        for m in out.messages.unwrap_or_default() {
            let attributes = m.attributes.unwrap_or_default().into_iter().map(|(k, v)| (k.as_str().to_owned(), v));
            event.records.push(SqsMessage {
                message_id: m.message_id,
                receipt_handle: m.receipt_handle,
                body: m.body,
                attributes: attributes.collect(),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::{TimeDelta, TimeZone, Utc};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An SQS endpoint that answers every request as a sent message; the bodies it was sent.
    async fn sqs_endpoint() -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let bodies = Arc::new(Mutex::new(vec![]));
        let seen = bodies.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buffer = vec![];
                    let mut chunk = [0u8; 4096];
                    while let Ok(n @ 1..) = stream.read(&mut chunk).await {
                        buffer.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buffer).to_string();
                        let Some(end) = text.find("\r\n\r\n") else { continue };
                        let length = text[..end]
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                            .and_then(|n| n.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if buffer.len() < end + 4 + length {
                            continue;
                        }
                        seen.lock().expect("bodies").push(text[end + 4..end + 4 + length].to_owned());
                        buffer.drain(..end + 4 + length);
                        let answer = r#"{"MessageId":"m","SequenceNumber":"1"}"#;
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\r\n",
                            answer.len()
                        );
                        if stream.write_all(format!("{head}{answer}").as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}"), bodies)
    }

    /// SQS keeps one message per deduplication id for five minutes: a coalesced request sent again in its window
    /// would be dropped there, so the adapter does not send it; any other request is sent every time.
    #[tokio::test]
    async fn a_coalesced_request_is_sent_once_per_pool_and_window() {
        let (endpoint, bodies) = sqs_endpoint().await;
        let sdk = aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::new("k", "s", None, None, "test"))
            .endpoint_url(endpoint)
            .build();
        let queue = SqsQueue::new(Client::from_conf(sdk), &Config::named("apiary", &[]));
        let t = Utc.with_ymd_and_hms(2026, 11, 25, 9, 0, 0).single().expect("time");
        let ms = TimeDelta::milliseconds;
        let sends = [
            ReconcileMessage::coalesced("a", "claim", t + ms(100)),
            ReconcileMessage::coalesced("a", "release", t + ms(900)),
            ReconcileMessage::coalesced("b", "claim", t + ms(900)),
            ReconcileMessage::coalesced("a", "claim", t + ms(1_000)),
            ReconcileMessage::coalesced("a", "claim", t + ms(1_999)),
            ReconcileMessage::new("a", "spec"),
            ReconcileMessage::new("a", "spec"),
        ];
        for message in &sends {
            queue.reconcile(message).await.expect("sent");
        }
        let sent: Vec<(String, String)> = bodies
            .lock()
            .expect("bodies")
            .iter()
            .map(|body| {
                let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
                let message: ReconcileMessage =
                    serde_json::from_str(body["MessageBody"].as_str().expect("body")).expect("message");
                (message.pool, message.reason)
            })
            .collect();
        let expected = [("a", "claim"), ("b", "claim"), ("a", "claim"), ("a", "spec"), ("a", "spec")];
        assert_eq!(sent, expected.map(|(p, r)| (p.to_owned(), r.to_owned())));
    }
}
