//! DynamoDB write units, counted write by write as the table bills them on demand: the writes are the ones the
//! functions send (`apiary_ports::store`), each item at its size as DynamoDB counts it.
//!
//! - A unit per KB (rounded up) of each item put, deleted or checked, and of each event appended; twice that when
//!   the writes go together in a transaction (more than one write, as the store sends them).
//! - A pool item's copy in the `pools` index (all attributes projected): its units again.
//! - The `assign` index (keys only): an entry added or removed is a unit (in a transaction, two). A write that
//!   leaves an item's entry as it was writes nothing there.

use apiary_planner::Snapshot;
use apiary_ports::store::{event_bytes, index_key, item_bytes, Item, Key, Write};

/// The pool's name in the simulated table's keys.
const POOL: &str = "sim";

/// The write units of `writes` sent together, over the items as `before` has them.
pub fn of(before: &Snapshot, writes: &[Write]) -> usize {
    of_items(|key| stored(before, key), writes)
}

/// The same, with `stored` giving each item as it was before the writes.
pub fn of_items(stored: impl Fn(&Key) -> Option<Item>, writes: &[Write]) -> usize {
    let each = if writes.len() > 1 { 2 } else { 1 };
    writes.iter().map(|w| one(&stored, w)).sum::<usize>() * each
}

/// The units of one write, outside a transaction.
fn one(stored: &impl Fn(&Key) -> Option<Item>, write: &Write) -> usize {
    match write {
        Write::Put(item, _) => {
            let units = kb(item_bytes(POOL, item).unwrap_or(0));
            let copy = if matches!(item, Item::Pool(_)) { units } else { 0 };
            units + copy + entries(stored(&item.key()).as_ref().and_then(index_key), index_key(item))
        }
        Write::Delete(key, _) | Write::Check(key, _) => {
            let old = stored(key);
            let units = old.as_ref().map_or(1, |i| kb(item_bytes(POOL, i).unwrap_or(0)));
            let gone = matches!(write, Write::Delete(..));
            units + if gone { entries(old.as_ref().and_then(index_key), None) } else { 0 }
        }
        Write::Append(event) => kb(event_bytes(POOL, event).unwrap_or(0)),
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

/// Units of `bytes`: one per KB, at least one.
pub(crate) fn kb(bytes: usize) -> usize {
    bytes.div_ceil(1024).max(1)
}
