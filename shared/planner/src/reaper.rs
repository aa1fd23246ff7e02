//! The reaper's rules: which of the machines Apiary made for a pool belong to no cluster of it, and when they go.
//!
//! A periodic pass per pool lists, in one filtered call, the machines that carry Apiary's mark for the pool (see
//! each platform's `marked`), and takes their infraIds. An infraId that no cluster of the pool has (deleting ones
//! included) is an orphan: a machine that outlived its cluster (a provisioning that landed after its cluster was
//! deprovisioned, a cluster item removed behind Apiary's back). Orphans are remembered in the pool's status with
//! when each was first seen; one still orphaned a grace period later is reaped (its machines deprovisioned as a
//! cluster of that infraId would be), at most `maxConcurrent` per pass. The grace is longer than any install or
//! deprovision in flight, and a cluster made after the pool was read is never taken for an orphan for longer than
//! one pass: by the next, its item is read.
//!
//! A pool being deleted makes no new cluster, so its orphans are reaped without grace, and the pool item goes only
//! once a pass made after its last cluster went found none ([`cleared`]): deleting a pool leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet};

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::model::{Pool, PoolSpec, Snapshot, Timestamp};

/// How often a pool's machines are looked at by default.
pub const REAP_EVERY: TimeDelta = TimeDelta::minutes(30);
/// How long an orphan is left alone by default before it is reaped.
pub const REAP_GRACE: TimeDelta = TimeDelta::hours(1);
/// The least a pool may set for `reaper.every` (one filtered list per pool and cloud per pass).
pub const MIN_EVERY: TimeDelta = TimeDelta::minutes(5);
/// The least a pool may set for `reaper.grace`: longer than any provisioning call, clone or deprovision in flight.
pub const MIN_GRACE: TimeDelta = TimeDelta::minutes(30);
/// How often a deleting pool's machines are listed while orphans of it remain, and a pool's while a ripe orphan
/// of it remains.
pub const WHILE_DELETING: TimeDelta = TimeDelta::minutes(1);
/// Orphans reaped at most per pass when the pool sets no `maxConcurrent`.
pub const DEFAULT_AT_A_TIME: usize = 10;

/// What the reaper remembers of a pool, kept in its status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphans {
    /// When the pool's machines were last listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Timestamp>,
    /// Each orphaned infraId, with when it was first seen orphaned.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub seen: BTreeMap<String, Timestamp>,
    /// Each orphan a pass asked to be deleted, with when it last did: the ripe orphans are taken least recently
    /// tried first, so one that cannot be deleted (a termination refused) never holds the others back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tried: BTreeMap<String, Timestamp>,
    /// The pass found the pool with no cluster left (a deleting pool goes only after such a pass found nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drained: bool,
}

/// What a pass decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// What to remember: the orphans seen now, each with when it was first seen.
    pub orphans: Orphans,
    /// The infraIds to reap now, oldest orphan first.
    pub reap: Vec<String>,
}

/// How often the pool's machines are looked at, and how long an orphan is left alone.
pub fn settings(spec: &PoolSpec) -> (TimeDelta, TimeDelta) {
    let r = spec.reaper.as_ref();
    let every = r.and_then(|r| r.every.as_ref()).and_then(|d| d.get()).unwrap_or(REAP_EVERY);
    let grace = r.and_then(|r| r.grace.as_ref()).and_then(|d| d.get()).unwrap_or(REAP_GRACE);
    (every, grace)
}

/// Whether a pass is due at `now`: every interval (nine tenths of it, so a reconcile a little early does not slip
/// a whole period), and as soon as an orphan's grace has run out. A deleting pool: once after its deletion was
/// asked, then every [`WHILE_DELETING`] until a pass finds it [`cleared`].
pub fn due(pool: &Pool, now: Timestamp) -> bool {
    let (every, grace) = settings(&pool.spec);
    let orphans = pool.status.orphans.as_ref();
    let last = orphans.and_then(|o| o.checked_at);
    if let Some(asked) = pool.deletion_requested_at {
        return last.is_none_or(|t| t < asked || (!cleared(pool) && now - t >= WHILE_DELETING));
    }
    // An orphan whose grace has run out is not left to wait for the next interval, nor looked at again sooner
    // than [`WHILE_DELETING`]: one that will not go must not make every reconcile ask for a pass.
    let ripe = orphans.is_some_and(|o| o.seen.values().any(|first| now - *first >= grace));
    let recent = last.is_some_and(|t| now - t < WHILE_DELETING);
    (ripe && !recent) || last.is_none_or(|t| now - t >= every * 9 / 10)
}

/// Whether a deleting pool's item may go: a pass made since its deletion was asked, with no cluster of the pool
/// left, found no orphan (a pass made while clusters were still draining could not see what they might leave).
pub fn cleared(pool: &Pool) -> bool {
    let Some(asked) = pool.deletion_requested_at else { return true };
    pool.status
        .orphans
        .as_ref()
        .is_some_and(|o| o.drained && o.seen.is_empty() && o.checked_at.is_some_and(|t| t >= asked))
}

/// The pass at `now` over `listed`, the infraIds of the machines that carry the pool's mark (or, from an
/// installer, the ids of the clusters it holds).
pub fn review<'a>(snapshot: &Snapshot, listed: impl IntoIterator<Item = &'a str>, now: Timestamp) -> Review {
    let (_, grace) = settings(&snapshot.pool.spec);
    // A deleting pool makes no cluster that a pass could take for an orphan: nothing to wait for.
    let grace = if snapshot.pool.deletion_requested_at.is_some() { TimeDelta::zero() } else { grace };
    // An installer keys what it holds by the cluster's id, the clouds by its infraId: either names a known cluster.
    let known: BTreeSet<&str> = snapshot.clusters.iter().flat_map(|c| [c.infra_id.as_str(), c.id.as_str()]).collect();
    let before = snapshot.pool.status.orphans.as_ref().map(|o| &o.seen);
    let seen: BTreeMap<String, Timestamp> = listed
        .into_iter()
        .filter(|id| !id.is_empty() && !known.contains(id))
        .map(|id| (id.to_owned(), before.and_then(|b| b.get(id)).copied().unwrap_or(now)))
        .collect();
    let at_a_time = snapshot
        .pool
        .spec
        .max_concurrent
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_AT_A_TIME);
    let tried_before = snapshot.pool.status.orphans.as_ref().map(|o| &o.tried);
    let last_tried = |id: &str| tried_before.and_then(|t| t.get(id)).copied();
    let mut ripe: Vec<(Option<Timestamp>, Timestamp, &String)> = seen
        .iter()
        .filter(|(_, first)| now - **first >= grace)
        .map(|(id, first)| (last_tried(id), *first, id))
        .collect();
    ripe.sort();
    let reap: Vec<String> = ripe.into_iter().take(at_a_time).map(|(_, _, id)| id.clone()).collect();
    let tried = seen
        .keys()
        .filter_map(
            |id| if reap.contains(id) { Some((id.clone(), now)) } else { last_tried(id).map(|t| (id.clone(), t)) },
        )
        .collect();
    let drained = snapshot.clusters.is_empty();
    Review { orphans: Orphans { checked_at: Some(now), seen, tried, drained }, reap }
}
