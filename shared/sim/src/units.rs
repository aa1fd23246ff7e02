//! DynamoDB write units, counted write by write as the table bills them on demand: the writes are the ones the
//! functions send (`apiary_ports::store`), each item at its size as DynamoDB counts it.
//!
//! - A unit per KB (rounded up) of each item put, deleted or checked, and of each event appended; twice that when
//!   the writes go together in a transaction (more than one write, as the store sends them).
//! - A pool item's copy in the `pools` index (all attributes projected): its units again.
//! - The `assign` index (keys only): an entry added or removed is a unit (in a transaction, two). A write that
//!   leaves an item's entry as it was writes nothing there.
//!
//! And the read units of the one read that weighs with the pool's size, a reconcile's strongly consistent Query of
//! the pool's partition ([`Partition`]): every item under the pool's key, their sizes summed, a unit per 4 KB.

use std::collections::HashMap;

use apiary_planner::power::tick::Tick;
use apiary_planner::{Snapshot, Timestamp};
use apiary_ports::store::{event_bytes, index_key, item_bytes, stored as stored_pool, Item, Key, ProfileItem, Write};
use serde::Serialize;

/// The pool's name in the simulated table's keys.
const POOL: &str = "sim";

/// Write units by what they wrote: the items themselves (put, deleted or checked), their copies in the `pools`
/// index, entries of the `assign` index, and the events appended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Parts {
    /// Items put, deleted or checked.
    pub items: usize,
    /// Pool items' copies in the `pools` index.
    pub copies: usize,
    /// Entries of the `assign` index added or removed.
    pub entries: usize,
    /// Events appended to the pool's trail.
    pub events: usize,
}

impl Parts {
    /// All of them.
    pub fn total(&self) -> usize {
        self.items + self.copies + self.entries + self.events
    }

    fn times(self, n: usize) -> Self {
        Self { items: self.items * n, copies: self.copies * n, entries: self.entries * n, events: self.events * n }
    }
}

impl std::ops::AddAssign for Parts {
    fn add_assign(&mut self, o: Self) {
        *self = Self {
            items: self.items + o.items,
            copies: self.copies + o.copies,
            entries: self.entries + o.entries,
            events: self.events + o.events,
        };
    }
}

/// The write units of `writes` sent together, over the items as `before` has them.
pub fn of(before: &Snapshot, writes: &[Write]) -> Parts {
    of_items(|key| stored(before, key), writes)
}

/// The same, with `stored` giving each item as it was before the writes.
pub fn of_items(stored: impl Fn(&Key) -> Option<Item>, writes: &[Write]) -> Parts {
    let each = if writes.len() > 1 { 2 } else { 1 };
    let mut parts = Parts::default();
    for write in writes {
        parts += one(&stored, write);
    }
    parts.times(each)
}

/// The units of one write, outside a transaction.
fn one(stored: &impl Fn(&Key) -> Option<Item>, write: &Write) -> Parts {
    match write {
        Write::Put(item, _) => {
            let items = kb(size(item));
            let copies = if matches!(item, Item::Pool(_)) { items } else { 0 };
            let entries = entries(stored(&item.key()).as_ref().and_then(index_key), index_key(item));
            Parts { items, copies, entries, events: 0 }
        }
        Write::Delete(key, _) | Write::Check(key, _) => {
            let old = stored(key);
            let items = old.as_ref().map_or(1, |i| kb(size(i)));
            let gone = matches!(write, Write::Delete(..));
            let entries = if gone { entries(old.as_ref().and_then(index_key), None) } else { 0 };
            Parts { items, entries, ..Parts::default() }
        }
        Write::Append(event) => Parts { events: kb(event_bytes(POOL, event).unwrap_or(0)), ..Parts::default() },
    }
}

/// Entries of the `assign` index written when an item's key there goes from `old` to `new`.
fn entries(old: Option<String>, new: Option<String>) -> usize {
    if old == new {
        0
    } else {
        usize::from(old.is_some()) + usize::from(new.is_some())
    }
}

/// The item under `key` in `before`, if the simulated pool has it.
pub fn stored(before: &Snapshot, key: &Key) -> Option<Item> {
    match key {
        Key::Cluster(id) => before.clusters.iter().find(|c| &c.id == id).map(|c| Item::Cluster(Box::new(c.clone()))),
        Key::Claim(name) => before.claims.iter().find(|c| &c.name == name).map(|c| Item::Claim(Box::new(c.clone()))),
        Key::Pool => Some(Item::Pool(Box::new(before.pool.clone()))),
        _ => None,
    }
}

/// What a reconcile's Query of the pool's partition reads: the pool item (without the profile's buckets), the
/// profile's item, the tick item, each cluster, claim and lease, each at its size as the table counts it
/// ([`item_bytes`]). The pool, clusters and claims are weighed again only when their revision moves (every write
/// moves it), the profile's item when a bucket closes.
#[derive(Debug, Default)]
pub struct Partition {
    /// Each cluster's size at the revision it was last weighed, by id.
    clusters: HashMap<String, (u64, usize)>,
    /// Each claim's, by name.
    claims: HashMap<String, (u64, usize)>,
    /// The profile item's size as of its open bucket (its buckets change only when one closes).
    profile: Option<((Timestamp, Timestamp), usize)>,
    /// The pool item's size at its revision.
    pool: Option<(u64, usize)>,
}

impl Partition {
    /// Read units of the Query of the partition as `read` holds it (the profile's buckets in their own item), with
    /// the pool's `tick`: a unit per 4 KB of all its items together, at least one.
    pub fn read_units(&mut self, read: &Snapshot, tick: &Tick) -> usize {
        let pool = match self.pool {
            Some((rev, b)) if rev == read.pool.rev => b,
            _ => size(&Item::Pool(Box::new(stored_pool(&read.pool).into_owned()))),
        };
        self.pool = Some((read.pool.rev, pool));
        let mut bytes = pool + size(&Item::Tick(Box::new(tick.clone())));
        if let Some(p) = read.pool.status.profile().filter(|p| p.has_buckets()) {
            let (rev, open) = (p.kept.unwrap_or(read.pool.rev), (p.since, p.open));
            let weighed = match self.profile {
                Some((at, b)) if at == open => b,
                _ => {
                    size(&Item::Profile(Box::new(ProfileItem { rev, mean: p.mean.clone(), spread: p.spread.clone() })))
                }
            };
            self.profile = Some((open, weighed));
            bytes += weighed;
        }
        for c in &read.clusters {
            bytes += weigh(&mut self.clusters, &c.id, c.rev, || Item::Cluster(Box::new(c.clone())));
        }
        for c in &read.claims {
            bytes += weigh(&mut self.claims, &c.name, c.rev, || Item::Claim(Box::new(c.clone())));
        }
        bytes += read.leases.iter().map(|l| size(&Item::Lease(l.clone()))).sum::<usize>();
        // Items gone from the pool leave their sizes behind: forget them now and then.
        for (sizes, now) in [(&mut self.clusters, read.clusters.len()), (&mut self.claims, read.claims.len())] {
            if sizes.len() > 4 * now + 64 {
                sizes.clear();
            }
        }
        bytes.div_ceil(4096).max(1)
    }
}

/// The size of the item `id` at `rev`, weighed once per revision.
fn weigh(sizes: &mut HashMap<String, (u64, usize)>, id: &str, rev: u64, item: impl FnOnce() -> Item) -> usize {
    match sizes.get(id) {
        Some((at, bytes)) if *at == rev => *bytes,
        _ => {
            let bytes = size(&item());
            sizes.insert(id.to_string(), (rev, bytes));
            bytes
        }
    }
}

/// An item's size in the simulated pool's partition, as the table counts it.
pub(crate) fn size(item: &Item) -> usize {
    item_bytes(POOL, item).unwrap_or(0)
}

/// Units of `bytes`: one per KB, at least one.
pub(crate) fn kb(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}
