//! What one power message did, and how the queue handed it over.

use std::time::Duration;

/// What one power message did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The cluster was written (for a tick: some cluster it looked at).
    pub written: bool,
    /// When the cluster's next look is wanted (the pool's tick makes it), if any; for a tick, when its next link
    /// is due.
    pub recheck: Option<Duration>,
    /// A reconcile of the pool was enqueued.
    pub woke_pool: bool,
    /// A tick: the clusters it looked at.
    pub looked: Vec<String>,
    /// The cluster's item was deleted (deprovisioned).
    pub removed: bool,
    /// The message was a stale re-check link and ended without a look.
    pub dropped: bool,
    /// The infraIds whose machines a reap message's pass deprovisioned (their cluster is gone).
    pub reaped: Vec<String>,
    /// A tick link carried its chain on in its own message, put back in the queue until its next look: the batch
    /// reports the message as a failure, so that the event source mapping leaves it.
    pub returned: bool,
    /// A look found the cluster (for a tick: one it looked at) come up: an install or a resume done.
    pub came_up: bool,
    /// A notification's attempt: what became of it.
    pub notified: Option<crate::notice::Attempted>,
    /// The notifications' pass: how many it sent that no writer had.
    pub passed: usize,
}

/// A power message as the queue handed it over.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// Its receipt handle.
    pub receipt: &'a str,
    /// How many times SQS has handed it out, this time included.
    pub receives: u32,
}
