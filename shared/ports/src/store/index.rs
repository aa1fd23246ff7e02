//! The partition's sparse index of what a claim and a tick need (the spares, the clusters in motion, the claims
//! waiting), and the labels index across pools: each entry's key, kept by the adapter from the item written.

use super::*;

/// How many places the spares are spread over in the pool's index ([`spare_key`]): concurrent claims start
/// reading at different places, so they pick different spares.
pub const SPREAD: u16 = 256;

/// Where `cluster` stands in its pool's sparse index of what a claim needs, if it is there at all: a spare
/// ([`Cluster::is_assignable`], and no power transition under way) is `S#<place>#<id>`, its place ([`spread`]
/// of its id, two hex digits) spreading the spares evenly over [`SPREAD`] places. Every adapter stores exactly
/// these keys, so the index and the items can never disagree on what is a spare. A Running spare the reconcile
/// has just asked to hibernate is not one: it is in motion ([`moving_key`]), and a claim waiting for it is
/// served by the reconcile, which asks it to run again.
pub fn spare_key(cluster: &Cluster) -> Option<String> {
    (cluster.is_assignable() && !in_progress(cluster)).then(|| format!("S#{:02x}#{}", spread(&cluster.id), cluster.id))
}

/// Where `cluster` stands in the same index when the power function has work on it ([`in_progress`]: installing,
/// resuming, stopping, being deprovisioned): `M#<id>`. The pool's tick reads this part of the index to find the
/// clusters it looks at ([`Store::moving`]).
pub fn moving_key(cluster: &Cluster) -> Option<String> {
    in_progress(cluster).then(|| format!("M#{}", cluster.id))
}

/// The key `item` has in its pool's sparse index, if any: a spare or a cluster in motion, or a pending claim.
pub fn index_key(item: &Item) -> Option<String> {
    match item {
        Item::Cluster(c) => spare_key(c).or_else(|| moving_key(c)),
        Item::Claim(c) => pending_key(c),
        Item::Pool(_)
        | Item::Lease(_)
        | Item::Tick(_)
        | Item::Profile(_)
        | Item::Label(_)
        | Item::ClaimName(_)
        | Item::Notified(_) => None,
    }
}

/// Where `claim` stands in the same index: a pending claim ([`Claim::is_pending`]) is `P#<createdAt>#<name>`
/// (RFC 3339 in UTC with fixed digits, so the keys sort oldest first).
pub fn pending_key(claim: &Claim) -> Option<String> {
    claim.is_pending().then(|| line_key(claim))
}

/// `claim`'s place in its pool's line of pending claims ([`pending_key`]), whether or not it waits there: claims
/// wait in line by arrival, then by name.
pub fn line_key(claim: &Claim) -> String {
    format!("P#{}#{}", claim.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true), claim.name)
}

/// The first key of place `from` (taken modulo [`SPREAD`]) in the spares' part of the index.
pub fn spare_place(from: u16) -> String {
    format!("S#{:02x}", from % SPREAD)
}

/// `name`'s place among [`SPREAD`] ([`draw`] modulo it).
pub fn spread(name: &str) -> u16 {
    (draw(name) % u64::from(SPREAD)) as u16
}

/// A number drawn from `name`, the same on every machine and in every process, every bit of it depending on
/// every byte: FNV-1a, then SplitMix64's finalizer (FNV-1a alone leaves its low bits to the bytes' low bits, so
/// names that differ in one character would crowd into a few places).
pub fn draw(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The partition of the label index's entries under `key=value` ([`Key::apart`]).
pub fn label_partition(key: &str, value: &str) -> String {
    format!("LABEL#{}:{key}={value}", key.len())
}

/// The label index's writes of a pool whose status recorded `before` as indexed and now records `after`: the
/// entries added and those removed ([`apiary_planner::select::index_changes`]). Each holds on the pool item's
/// condition in the same transaction. A record lost (`after` is `None`: the status of a release without the index)
/// writes nothing; the next plan indexes the pool afresh.
pub(super) fn label_writes(pool: &str, before: Option<&Labels>, after: Option<&Labels>) -> Vec<Write> {
    let Some(after) = after else { return vec![] };
    let (added, removed) = apiary_planner::select::index_changes(before, after);
    let entry = |(key, value): (String, String)| LabelEntry { pool: pool.to_owned(), key, value };
    let mut writes: Vec<Write> =
        removed.into_iter().map(|pair| Write::Delete(Key::Label(entry(pair)), Cond::Any)).collect();
    writes.extend(added.into_iter().map(|pair| Write::Put(Item::Label(entry(pair)), Cond::Any)));
    writes
}
