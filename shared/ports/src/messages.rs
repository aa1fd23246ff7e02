//! Every message Apiary puts on a queue or receives from a schedule. Bodies are JSON of these types; a field a
//! later release adds is read past, so a message sent while an update is under way is handled by either release.

use apiary_planner::Timestamp;
use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

/// Reconcile one pool (reconcile queue, FIFO, group = pool). Sent by the claim API, the power function, the sweep
/// and the pool's own schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileMessage {
    /// The pool.
    pub pool: String,
    /// Why, for logs: `claim`, `pool-updated`, `power`, `sweep`, `schedule`, ….
    #[serde(default)]
    pub reason: String,
    /// A coalesced request ([`Self::coalesced`]): every request for the pool in the same window is one message,
    /// and its reconcile reads the pool no earlier than this, the window's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
}

/// How long a window of coalesced reconcile requests lasts ([`ReconcileMessage::coalesced`]).
pub const COALESCE_WINDOW: TimeDelta = TimeDelta::seconds(1);

/// How far apart two hosts' clocks may be when a coalesced reconcile decides that its window has ended.
pub const CLOCK_SKEW: TimeDelta = TimeDelta::milliseconds(100);

impl ReconcileMessage {
    /// A request to reconcile `pool` now.
    pub fn new(pool: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { pool: pool.into(), reason: reason.into(), not_before: None }
    }

    /// A request to reconcile `pool` once for everything that happens to it in the window of
    /// [`COALESCE_WINDOW`] holding `now`: a burst of claims or releases costs one reconcile a window, not one each.
    /// The queue keeps one message per pool and window ([`Self::dedup_id`]); its reconcile waits for the window's
    /// end before it reads, so it sees what every request of the window wrote before sending.
    pub fn coalesced(pool: impl Into<String>, reason: impl Into<String>, now: Timestamp) -> Self {
        let window = COALESCE_WINDOW.num_milliseconds();
        let end = (now.timestamp_millis().div_euclid(window) + 1) * window;
        // A little past the end, for the clocks of the senders and the reconcile (NTP keeps them within this).
        let not_before = chrono::DateTime::from_timestamp_millis(end).unwrap_or(now) + CLOCK_SKEW;
        Self { pool: pool.into(), reason: reason.into(), not_before: Some(not_before) }
    }

    /// The queue's deduplication id of a coalesced request: the same for every request of one pool and window.
    /// `None` for a request that must not be merged with another.
    pub fn dedup_id(&self) -> Option<String> {
        self.not_before.map(|t| format!("{}@{}", self.pool, t.timestamp_millis()))
    }
}

/// Drive one cluster's power state machine one step (power queue, standard, delayed re-checks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PowerMessage {
    /// The pool.
    pub pool: String,
    /// The cluster id.
    pub cluster: String,
    /// The link of the pool's tick chain this message continues, or `None` for a nudge (from a reconcile, the
    /// claim API or the sweep): see `apiary_planner::power::chain`. Only a tick's message carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<u64>,
    /// Not about one cluster: the reaper's pass over the pool is due (`cluster` is empty). The power function
    /// makes it, being the one that reaches the pool's cloud.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reap: bool,
    /// Not about one cluster: the pool's tick (`cluster` is empty), which looks at every cluster of the pool in
    /// motion (`apiary_planner::power::tick`); `check` is its chain's link, or `None` for a nudge of the tick.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tick: bool,
    /// Not about one cluster: a notification to deliver to one of the pool's `notify` webhooks (`cluster` is
    /// empty; see [`crate::notify`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Box<NoticeMessage>>,
    /// Not about one cluster: the notifications' pass over the pool's trail is due (`cluster` is empty), asked for
    /// by the sweep: it sends what no writer did ([`crate::notify`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notices: bool,
}

/// One attempt to deliver the notification of an event to one of a pool's `notify` webhooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeMessage {
    /// The event, as the trail has it (with its [`Notice`](apiary_planner::notify::Notice)).
    pub event: apiary_planner::events::Event,
    /// Which of the pool's hooks (its place in `notify`).
    pub hook: u8,
    /// The hook as the pool named it when the event was sent: the attempts go where the event was to be told, and
    /// none reads the pool (a burst of claims' notifications would otherwise read its partition once each).
    pub to: apiary_planner::notify::NotifyHook,
    /// Which attempt, from 1.
    pub attempt: u8,
    /// Not before then: a retry whose wait is longer than a message's longest delay comes early, and is sent
    /// again for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<Timestamp>,
}

impl PowerMessage {
    /// A nudge of cluster `cluster` of `pool`: step it now.
    pub fn nudge(pool: impl Into<String>, cluster: impl Into<String>) -> Self {
        Self {
            pool: pool.into(),
            cluster: cluster.into(),
            check: None,
            reap: false,
            tick: false,
            notice: None,
            notices: false,
        }
    }

    /// An attempt to deliver a notification of `pool`.
    pub fn deliver(pool: impl Into<String>, notice: NoticeMessage) -> Self {
        Self { notice: Some(Box::new(notice)), ..Self::nudge(pool, "") }
    }

    /// The notifications' pass over `pool`'s trail.
    pub fn notices(pool: impl Into<String>) -> Self {
        Self { notices: true, ..Self::nudge(pool, "") }
    }

    /// A link of `pool`'s tick (`check`), or a nudge of it (`None`): look at the pool's clusters in motion.
    pub fn tick(pool: impl Into<String>, check: Option<u64>) -> Self {
        Self { check, tick: true, ..Self::nudge(pool, "") }
    }

    /// The reaper's pass over `pool`.
    pub fn reap(pool: impl Into<String>) -> Self {
        Self { reap: true, ..Self::nudge(pool, "") }
    }
}

/// The sweep's input from its schedule. EventBridge Scheduler sends whatever the schedule's input says; the sweep
/// needs nothing from it, so any JSON is accepted.
pub type SweepEvent = serde_json::Value;
