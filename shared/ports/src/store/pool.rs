//! What is kept of a pool: its item without the forecast's buckets, the `PROFILE` item that holds them (written
//! only when a bucket closes), and a partition read back into a pool whole.

use super::*;

/// The buckets of a pool's forecast profile, in an item of their own
/// ([`Profile::kept`](apiary_planner::Profile::kept) names its revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileItem {
    /// The pool's revision when they were written.
    pub rev: u64,
    /// [`Profile::mean`](apiary_planner::Profile::mean).
    pub mean: Buckets,
    /// [`Profile::spread`](apiary_planner::Profile::spread).
    pub spread: Buckets,
}

/// What the table keeps of `pool` in its own item: all of it, but the profile's buckets when they are kept in the
/// profile's item ([`Profile::kept`](apiary_planner::Profile::kept)). Every adapter stores exactly this, whatever
/// a writer hands it: a pool read with its partition and written back as it is leaves the profile item to
/// [`writes_for`].
pub fn stored(pool: &Pool) -> std::borrow::Cow<'_, Pool> {
    match pool.status.profile() {
        Some(p) if p.kept.is_some() && (!p.mean.is_empty() || !p.spread.is_empty()) => {
            let mut bare = pool.clone();
            if let Some(p) = bare.status.profile_mut() {
                p.take_buckets();
            }
            std::borrow::Cow::Owned(bare)
        }
        _ => std::borrow::Cow::Borrowed(pool),
    }
}

/// A pool's partition, its items in any order, as the pool's snapshot (its profile's buckets put back:
/// [`with_profile`]) and its tick item; `None` without a pool item.
pub fn partition(items: impl IntoIterator<Item = Item>) -> Option<(Snapshot, Option<Tick>)> {
    let (mut found, mut clusters, mut claims, mut leases, mut profile, mut tick) =
        (None, vec![], vec![], vec![], None, None);
    for item in items {
        match item {
            Item::Pool(p) => found = Some(*p),
            Item::Cluster(c) => clusters.push(*c),
            Item::Claim(c) => claims.push(*c),
            Item::Lease(l) => leases.push(l),
            Item::Profile(p) => profile = Some(*p),
            Item::Tick(t) => tick = Some(*t),
            // Never in a pool's partition.
            Item::Label(_) | Item::ClaimName(_) | Item::Notified(_) => {}
        }
    }
    found.map(|pool| (Snapshot { pool: with_profile(pool, profile), clusters, claims, leases }, tick))
}

/// `pool` as its partition holds it: the buckets of its profile's own item put back, when the pool keeps them
/// there, with the revision the read found (what the next write of the item holds on). A pool whose item is
/// missing keeps none, and the planner learns its profile afresh.
pub fn with_profile(mut pool: Pool, item: Option<ProfileItem>) -> Pool {
    if let (Some(p), Some(item)) = (pool.status.profile_mut(), item) {
        if p.kept.is_some() {
            (p.mean, p.spread, p.kept) = (item.mean, item.spread, Some(item.rev));
        }
    }
    pool
}

/// The revision of `pool`'s profile item as the read found it: `None` when the pool keeps its buckets itself, or
/// when the item was missing (the buckets did not come back with the partition).
pub(super) fn profile_found(pool: &Pool) -> Option<u64> {
    pool.status.profile().filter(|p| p.has_buckets()).and_then(|p| p.kept)
}

/// The writes of a pool going from `before` to `after` at revision `expected_rev` (its new revision is
/// `after.rev`): the pool item, and the profile's item when its buckets changed (a bucket closed, or the profile
/// started afresh), when the pool held them in its own item until now (which moves them out), or when the profile
/// is gone. `after`'s profile is marked as kept at its new revision when the buckets are written.
pub(super) fn pool_writes(before: &Pool, after: &mut Pool, expected_rev: u64) -> Vec<Write> {
    let found = profile_found(before);
    let cond = found.map_or(Cond::Absent, Cond::Rev);
    let rev = after.rev;
    let mut profile_write = None;
    match after.status.profile_mut() {
        Some(p) if p.has_buckets() => {
            let same =
                found.is_some() && before.status.profile().is_some_and(|b| b.mean == p.mean && b.spread == p.spread);
            if same {
                p.kept = found;
            } else {
                p.kept = Some(rev);
                let item = ProfileItem { rev, mean: p.mean.clone(), spread: p.spread.clone() };
                profile_write = Some(Write::Put(Item::Profile(Box::new(item)), cond));
            }
        }
        // Read without its buckets: they stay where they are.
        Some(_) => {}
        None => profile_write = found.map(|_| Write::Delete(Key::Profile, cond)),
    }
    let mut writes = vec![Write::Put(Item::Pool(Box::new(after.clone())), Cond::Rev(expected_rev))];
    writes.extend(profile_write);
    writes.extend(label_writes(
        &after.name,
        before.status.labels_indexed.as_ref(),
        after.status.labels_indexed.as_ref(),
    ));
    writes
}
