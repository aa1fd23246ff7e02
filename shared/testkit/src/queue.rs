//! The [`Queue`] port in memory, with SQS's semantics as Lambda's event source mapping sees them:
//!
//! - at least once: a received message stays in the queue, invisible for the visibility timeout, until it is
//!   deleted; what a handler did not delete (it failed, reported the message as a batch item failure, or was
//!   killed) is delivered again when the timeout passes;
//! - per-message delays on the power queue (standard), capped at [`MAX_DELAY`], and a received message put back
//!   hidden for a while (ChangeMessageVisibility), each receive counted in the message's `ApproximateReceiveCount`;
//! - on the reconcile queue (FIFO): messages of one group are delivered in the order sent, and no message of a
//!   group is delivered while another of it is in flight;
//! - after [`MAX_RECEIVES`] receives a message moves to the dead-letter queue instead (the template's
//!   maxReceiveCount);
//! - a standard queue may deliver a message twice (the hook decides when);
//! - the FIFO queue accepts a message whose deduplication id it accepted in the last five minutes, and drops it
//!   ([`ReconcileMessage::dedup_id`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_planner::Timestamp;
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::queue::{Queue, MAX_DELAY, RECEIVE_COUNT, SEND_BATCH};
use apiary_ports::Result;
use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::TimeDelta;

use crate::hook::{enter, leave, Hook, Op};
use crate::time::Time;

/// How long the FIFO queue remembers a deduplication id (SQS's interval).
pub const DEDUP_INTERVAL: TimeDelta = TimeDelta::minutes(5);

/// Receives before a message moves to the dead-letter queue (the template's maxReceiveCount).
pub use apiary_planner::power::chain::MAX_RECEIVES;

/// Which queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueName {
    /// The FIFO reconcile queue, one group per pool.
    Reconcile,
    /// The standard power queue.
    Power,
}

/// A message in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its id (also its message id in events).
    pub id: u64,
    /// The queue.
    pub queue: QueueName,
    /// Its body (JSON of a message type).
    pub body: String,
    /// Its message group (the reconcile queue's pool).
    pub group: Option<String>,
    /// When it was sent.
    pub sent_at: Timestamp,
    /// When it may next be delivered (its delay, or the end of its visibility timeout).
    pub visible_at: Timestamp,
    /// Times it was received.
    pub receives: u32,
    /// The receipt of its latest receive, while it is in flight.
    pub receipt: Option<u64>,
}

impl Message {
    /// Whether it is invisible because a consumer holds it.
    pub fn in_flight(&self, now: Timestamp) -> bool {
        self.receipt.is_some() && self.visible_at > now
    }
}

#[derive(Debug, Default)]
struct Queues {
    messages: Vec<Message>,
    /// Messages sent so far (a checker looks again only when this moved).
    sent: u64,
    dead: Vec<Message>,
    /// Deduplication ids accepted on the FIFO queue, and when.
    dedup: std::collections::HashMap<String, Timestamp>,
    /// Messages accepted but dropped as duplicates.
    deduplicated: u64,
    /// Batches sent at once (SendMessageBatch).
    batches: u64,
    next_id: u64,
    next_receipt: u64,
}

/// Both queues.
pub struct MemQueue {
    time: Arc<Time>,
    hook: Arc<dyn Hook>,
    queues: Mutex<Queues>,
}

impl MemQueue {
    /// Empty queues on `time`, whose calls pass through `hook`.
    pub fn new(time: Arc<Time>, hook: Arc<dyn Hook>) -> Self {
        Self { time, hook, queues: Mutex::new(Queues::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, queue: QueueName, body: String, group: Option<String>, delay: TimeDelta) {
        let now = self.time.now();
        let delay = delay + self.hook.send_delay();
        let mut q = self.lock();
        q.next_id += 1;
        q.sent += 1;
        let id = q.next_id;
        q.messages.push(Message {
            id,
            queue,
            body,
            group,
            sent_at: now,
            visible_at: now + delay,
            receives: 0,
            receipt: None,
        });
    }

    /// Every message in `queue` not yet deleted (in flight or not), oldest first.
    pub fn messages(&self, queue: QueueName) -> Vec<Message> {
        self.lock().messages.iter().filter(|m| m.queue == queue).cloned().collect()
    }

    /// Messages sent so far.
    pub fn sent(&self) -> u64 {
        self.lock().sent
    }

    /// Batches of power messages sent at once (each a SendMessageBatch request).
    pub fn batches(&self) -> u64 {
        self.lock().batches
    }

    /// Messages the FIFO queue accepted and dropped as duplicates of one accepted in the last five minutes.
    pub fn deduplicated(&self) -> u64 {
        self.lock().deduplicated
    }

    /// Messages moved to the dead-letter queues.
    pub fn dead_letters(&self) -> Vec<Message> {
        self.lock().dead.clone()
    }

    /// When the next message not yet deliverable becomes deliverable (a delay or a visibility timeout ends).
    pub fn next_visible(&self) -> Option<Timestamp> {
        let now = self.time.now();
        self.lock().messages.iter().map(|m| m.visible_at).filter(|t| *t > now).min()
    }

    /// Receives a batch of up to `max` messages from `queue`, hiding them for `visibility`, as an event for a
    /// handler. `pick(n)` chooses among `n` candidates (the index of the one to take; `|_| 0` takes the oldest):
    /// a standard queue may deliver any visible message, a FIFO one only the oldest of a group with none in
    /// flight, and the batch stays within that group. Empty when nothing is deliverable.
    pub fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: TimeDelta,
        pick: &mut dyn FnMut(usize) -> usize,
    ) -> SqsEvent {
        let now = self.time.now();
        let mut q = self.lock();
        let mut event = SqsEvent::default();
        let mut group: Option<Option<String>> = None;
        let mut batch: Vec<u64> = vec![];
        // FIFO: a group with a message in flight before this batch delivers nothing.
        let busy_groups: Vec<Option<String>> =
            q.messages.iter().filter(|m| m.queue == queue && m.in_flight(now)).map(|m| m.group.clone()).collect();
        while event.records.len() < max {
            let candidates: Vec<usize> = q
                .messages
                .iter()
                .enumerate()
                .filter(|(_, m)| m.queue == queue && m.visible_at <= now && !batch.contains(&m.id))
                .filter(|(i, m)| match queue {
                    QueueName::Power => true,
                    // FIFO: the oldest of its group still to deliver, the group not in flight, and the batch's own.
                    QueueName::Reconcile => {
                        !busy_groups.contains(&m.group)
                            && group.as_ref().is_none_or(|g| g == &m.group)
                            && !q.messages[..*i]
                                .iter()
                                .any(|o| o.queue == queue && o.group == m.group && !batch.contains(&o.id))
                    }
                })
                .map(|(i, _)| i)
                .collect();
            if candidates.is_empty() {
                break;
            }
            let i = candidates[pick(candidates.len()).min(candidates.len() - 1)];
            if q.messages[i].receives >= MAX_RECEIVES {
                let dead = q.messages.remove(i);
                q.dead.push(dead);
                continue;
            }
            q.next_receipt += 1;
            let receipt = q.next_receipt;
            let duplicate = queue == QueueName::Power && self.hook.duplicate();
            let m = &mut q.messages[i];
            batch.push(m.id);
            m.receives += 1;
            m.receipt = Some(receipt);
            m.visible_at = now + visibility;
            group = Some(m.group.clone());
            event.records.push(SqsMessage {
                message_id: Some(m.id.to_string()),
                receipt_handle: Some(receipt.to_string()),
                body: Some(m.body.clone()),
                attributes: [(RECEIVE_COUNT.to_owned(), m.receives.to_string())].into(),
                ..Default::default()
            });
            if duplicate {
                // At least once: the same message is delivered again, to another consumer.
                let mut copy = q.messages[i].clone();
                copy.receipt = None;
                copy.visible_at = now;
                q.next_id += 1;
                copy.id = q.next_id;
                q.messages.push(copy);
            }
        }
        event
    }

    /// Deletes the messages of `event` that `response` does not report as failed, as the event source mapping
    /// does after a handler returns. A message received again since (its receipt is stale) is left alone.
    pub fn settle(&self, event: &SqsEvent, response: &SqsBatchResponse) {
        let failed: Vec<&str> = response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
        let mut q = self.lock();
        for r in &event.records {
            let (Some(id), Some(receipt)) = (r.message_id.as_deref(), r.receipt_handle.as_deref()) else { continue };
            if failed.contains(&id) {
                continue;
            }
            q.messages
                .retain(|m| !(m.id.to_string() == id && m.receipt.map(|x| x.to_string()).as_deref() == Some(receipt)));
        }
    }

    /// Receives and deletes every message of `queue` deliverable now, in order, returning their bodies (unit
    /// tests read what a handler sent).
    pub fn take(&self, queue: QueueName) -> Vec<String> {
        let now = self.time.now();
        let mut q = self.lock();
        let (taken, kept): (Vec<Message>, Vec<Message>) =
            std::mem::take(&mut q.messages).into_iter().partition(|m| m.queue == queue && m.visible_at <= now);
        q.messages = kept;
        taken.into_iter().map(|m| m.body).collect()
    }

    /// The power messages of `queue` deliverable now, decoded, after [`Self::take`].
    pub fn take_power(&self) -> Vec<PowerMessage> {
        self.take(QueueName::Power).iter().filter_map(|b| serde_json::from_str(b).ok()).collect()
    }

    /// The reconcile messages deliverable now, decoded, after [`Self::take`].
    pub fn take_reconcile(&self) -> Vec<ReconcileMessage> {
        self.take(QueueName::Reconcile).iter().filter_map(|b| serde_json::from_str(b).ok()).collect()
    }

    /// Hides the message of `queue` received with `receipt` for `delay` from now, as ChangeMessageVisibility does.
    async fn return_to(&self, queue: QueueName, receipt: &str, delay: Duration) -> Result<()> {
        enter(self.hook.as_ref(), Op::Send).await?;
        let receipt: Option<u64> = receipt.parse().ok();
        let delay = TimeDelta::from_std(delay.min(MAX_DELAY)).unwrap_or_default();
        let visible_at = self.time.now() + TimeDelta::seconds(delay.num_seconds());
        let mut q = self.lock();
        // A receipt that is not the message's latest (it was received again since) changes nothing, as in SQS.
        let held = q.messages.iter_mut().find(|m| m.queue == queue && m.receipt == receipt && receipt.is_some());
        if let Some(m) = held {
            m.visible_at = visible_at;
        }
        drop(q);
        leave(self.hook.as_ref(), Op::Send, Ok(()))
    }
}

#[async_trait]
impl Queue for MemQueue {
    async fn reconcile(&self, message: &ReconcileMessage) -> Result<()> {
        enter(self.hook.as_ref(), Op::Send).await?;
        let body = serde_json::to_string(message)?;
        if let Some(id) = message.dedup_id() {
            let now = self.time.now();
            let mut q = self.lock();
            q.dedup.retain(|_, at| *at + DEDUP_INTERVAL > now);
            if q.dedup.contains_key(&id) {
                q.deduplicated += 1;
                return leave(self.hook.as_ref(), Op::Send, Ok(()));
            }
            q.dedup.insert(id, now);
        }
        self.push(QueueName::Reconcile, body, Some(message.pool.clone()), TimeDelta::zero());
        leave(self.hook.as_ref(), Op::Send, Ok(()))
    }

    async fn return_power(&self, receipt: &str, delay: Duration) -> Result<()> {
        self.return_to(QueueName::Power, receipt, delay).await
    }

    async fn return_reconcile(&self, receipt: &str, delay: Duration) -> Result<()> {
        self.return_to(QueueName::Reconcile, receipt, delay).await
    }

    async fn power_now(&self, messages: &[PowerMessage]) -> Result<()> {
        for batch in messages.chunks(SEND_BATCH) {
            // One request a batch: it fails, or lands, as a whole.
            enter(self.hook.as_ref(), Op::Send).await?;
            for message in batch {
                self.push(QueueName::Power, serde_json::to_string(message)?, None, TimeDelta::zero());
            }
            self.lock().batches += 1;
            leave(self.hook.as_ref(), Op::Send, Ok(()))?;
        }
        Ok(())
    }

    async fn power(&self, message: &PowerMessage, delay: Duration) -> Result<()> {
        enter(self.hook.as_ref(), Op::Send).await?;
        let body = serde_json::to_string(message)?;
        let delay = TimeDelta::from_std(delay.min(MAX_DELAY)).unwrap_or_default();
        // SQS delays are whole seconds.
        let delay = TimeDelta::seconds(delay.num_seconds());
        self.push(QueueName::Power, body, None, delay);
        leave(self.hook.as_ref(), Op::Send, Ok(()))
    }
}
