//! Where a pool's event trail is kept: its shards beside the pool's partition, each event's sort key, and the
//! queries and pages [`Store::events`](super::Store::events) reads it by.

use super::*;

/// How many partitions a pool's trail is spread over: a burst of 500 claims a second writes two events each, some
/// 2 000 write units a second in transactions, a quarter of what eight partitions take (1 000 each).
pub const EVENT_SHARDS: u8 = 8;

/// How long an event is kept: the table's TTL removes it after this (within a day or two), and reads leave out
/// what is older even before it is removed.
pub const EVENT_RETENTION: chrono::TimeDelta = chrono::TimeDelta::days(14);

/// The partition of the pool's trail `event` goes to: drawn from its claim, else its cluster, so a claim's events
/// are all in one partition (a trail filtered by claim reads one partition, not every one).
pub fn event_shard(event: &Event) -> u8 {
    shard_of(event.claim.as_deref().or(event.cluster.as_deref()).unwrap_or(""))
}

/// The shard the events of claim (or, with none, cluster) `subject` are in.
pub fn shard_of(subject: &str) -> u8 {
    (draw(subject) % u64::from(EVENT_SHARDS)) as u8
}

/// `event`'s sort key in its partition: its time (RFC 3339 in UTC with fixed digits, so keys sort by time), then
/// its claim and cluster, the revision written and its type, which make it unique.
pub fn event_sort_key(event: &Event) -> String {
    let key = format!(
        "{}#{}#{}#{}",
        event.time.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        event.subject(),
        event.rev,
        event.kind.as_str()
    );
    // A delivery's attempts are told apart by their hook and number, however close in time.
    match &event.delivery {
        Some(d) => format!("{key}#{}.{}", d.hook, d.attempt),
        None => key,
    }
}

/// The sort key of the first event of the trail at or after `time` (a bound of a read by time).
pub fn time_key(time: Timestamp) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// What to read of a pool's trail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only the events of this claim.
    pub claim: Option<String>,
    /// Only the events of this cluster.
    pub cluster: Option<String>,
    /// Only events older than this sort key (the `next` of the page before).
    pub before: Option<String>,
    /// At most this many.
    pub limit: usize,
}

impl EventQuery {
    /// Whether `event` is one the query asks for (the cursor aside).
    pub fn matches(&self, event: &Event) -> bool {
        self.claim.as_ref().is_none_or(|c| event.claim.as_ref() == Some(c))
            && self.cluster.as_ref().is_none_or(|c| event.cluster.as_ref() == Some(c))
    }

    /// The shards that may hold what the query asks for: the claim's alone when it names one, else every one.
    pub fn shards(&self) -> Vec<u8> {
        match &self.claim {
            Some(claim) => vec![shard_of(claim)],
            None => (0..EVENT_SHARDS).collect(),
        }
    }
}

/// A page of a pool's trail, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventPage {
    /// The events.
    pub events: Vec<Event>,
    /// The sort key to read on from ([`EventQuery::before`]), when there may be older events.
    pub next: Option<String>,
}
