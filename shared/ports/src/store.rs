//! The `Store` port: one pool's partition of the table, read whole, written conditionally.
//!
//! Writes are described in domain terms ([`Write`]); the adapter turns one write into one conditional
//! PutItem/DeleteItem and several into one TransactWriteItems. A lost condition is [`Error::Conflict`], never a
//! generic error. [`writes_for`] gives the writes of a planner [`Action`], computed with the planner's own
//! reference semantics ([`apiary_planner::apply_mut`]) so the table and the reference cannot disagree, and
//! [`Cond::holds`] is the reference meaning of every condition, which each adapter's condition expressions must
//! match exactly.
//!
//! A claim reads none of that whole: the partition keeps a sparse index of what a claim needs (the spares, and
//! the claims still waiting), maintained by the adapter from each item as it is written ([`spare_key`],
//! [`pending_key`]), so that a claim's reads follow what it needs, never the pool's size.
//!
//! A pool's event trail lives beside its partition, never in it: [`Write::Append`] adds an event in the same
//! transaction as the change it tells of (or alone, after it, for a cluster's progress: [`cluster_change`]), to one
//! of [`EVENT_SHARDS`] partitions of the pool's own (so a burst of claims spreads its events' writes), and
//! [`Store::events`] reads it newest first. No read of the pool's partition ever returns an event.
//!
//! The forecast's profile keeps its two weeks' worth of buckets (some 5.4 KB) in an item of its own, `PROFILE`,
//! written only when a bucket closes: the pool item, which every claim and power run reads and every reconcile that
//! changes the status writes (with its copy in the `pools` index), stays a kilobyte or so. [`writes_for`] decides
//! when the buckets are written, [`stored`] is what every adapter keeps of a pool, and [`Store::read_pool`] puts the
//! buckets back ([`with_profile`]); a pool read alone ([`Store::get`], [`Store::list_pools`]) has none, and a pool
//! written with them leaves the profile item as it is.
//!
//! No item may exceed [`MAX_ITEM_BYTES`] (DynamoDB's limit, counted as DynamoDB counts it): every adapter refuses
//! a larger one with [`Error::TooLarge`] before it reaches the table ([`check_size`]).

use apiary_planner::events::Event;
use apiary_planner::power::{in_progress, tick::Tick};
use apiary_planner::select::Labels;
use apiary_planner::{apply_mut, Action, Buckets, Claim, Cluster, NameLease, Plan, Pool, Snapshot, Timestamp};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// An item of a pool's partition.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The `POOL` item.
    Pool(Box<Pool>),
    /// A `CLUSTER#<id>` item.
    Cluster(Box<Cluster>),
    /// A `CLAIM#<name>` item.
    Claim(Box<Claim>),
    /// A `NAME#<name>` lease.
    Lease(NameLease),
    /// The `TICK` item: the pool's look at its clusters in motion.
    Tick(Box<Tick>),
    /// The `PROFILE` item: the buckets of the forecast's profile.
    Profile(Box<ProfileItem>),
    /// The pool's entry under one of its labels in the label index, outside the pool's partition ([`Key::apart`]).
    Label(LabelEntry),
    /// A claim made by selector: its name is the stack's, and this entry, outside every pool's partition, says which
    /// pool holds it.
    ClaimName(ClaimName),
    /// How far the notifications' pass has read the pool's trail, outside the pool's partition.
    Notified(Notified),
}

/// How far the notifications' pass over a pool's trail has read each of its shards: every event of a notify
/// webhook's kind up to there was sent for delivery (by its writer, or by the pass). Apart from the pool's
/// partition (`NOTIFIED#<pool>`), so no read of the pool's partition carries it and its writes never contend with
/// the pool's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notified {
    /// The pool.
    pub pool: String,
    /// Per shard of the trail ([`EVENT_SHARDS`]), the sort key of the last event looked at.
    pub through: Vec<String>,
    /// Its revision.
    pub rev: u64,
}

/// A pool's entry in the label index: claims by selector read the pools labelled `key=value` from the entries
/// under that label ([`Store::labelled`]). Written with the pool's status, as the planner's
/// [`index_step`](apiary_planner::select::index_step) moves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelEntry {
    /// The pool.
    pub pool: String,
    /// The label's key.
    pub key: String,
    /// The label's value.
    pub value: String,
}

/// Which pool holds the claim made by selector under `name` ([`Store::claim_name`]): written with the claim, on
/// condition that the name is free (or names a claim no longer there), deleted with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimName {
    /// The claim's name.
    pub name: String,
    /// The pool holding it ([`Cond::Holder`] holds on it).
    pub holder: String,
    /// Who made it.
    pub owner: String,
    /// When the claim was made (its `createdAt`): the entry's claim is the one made then, whatever a release that
    /// does not know `selector` left of it when it rewrote the claim. Absent on entries made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<apiary_planner::Timestamp>,
}

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

/// An item's key within a pool's partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// The `POOL` item.
    Pool,
    /// `CLUSTER#<id>`.
    Cluster(String),
    /// `CLAIM#<name>`.
    Claim(String),
    /// `NAME#<name>`.
    Lease(String),
    /// `TICK`.
    Tick,
    /// `PROFILE`.
    Profile,
    /// A pool's entry under one of its labels in the label index: the entry is its own key.
    Label(LabelEntry),
    /// The directory entry of a claim made by selector ([`ClaimName`]).
    ClaimName(String),
    /// How far the notifications' pass has read the pool's trail ([`Notified`]).
    Notified,
    /// An event of the pool's trail: its shard ([`event_shard`]) and its sort key there ([`event_sort_key`]).
    Event(u8, String),
}

impl Item {
    /// The item's key.
    pub fn key(&self) -> Key {
        match self {
            Item::Pool(_) => Key::Pool,
            Item::Cluster(c) => Key::Cluster(c.id.clone()),
            Item::Claim(c) => Key::Claim(c.name.clone()),
            Item::Lease(l) => Key::Lease(l.name.clone()),
            Item::Tick(_) => Key::Tick,
            Item::Profile(_) => Key::Profile,
            Item::Label(e) => Key::Label(e.clone()),
            Item::ClaimName(c) => Key::ClaimName(c.name.clone()),
            Item::Notified(_) => Key::Notified,
        }
    }

    /// The item's revision (leases have none).
    pub fn rev(&self) -> Option<u64> {
        match self {
            Item::Pool(p) => Some(p.rev),
            Item::Cluster(c) => Some(c.rev),
            Item::Claim(c) => Some(c.rev),
            Item::Tick(t) => Some(t.rev),
            Item::Profile(p) => Some(p.rev),
            Item::Notified(n) => Some(n.rev),
            Item::Lease(_) | Item::Label(_) | Item::ClaimName(_) => None,
        }
    }

    /// The item as the table stores it ([`stored`]): the domain type's own fields, camelCase.
    pub fn to_value(&self) -> Result<Value> {
        Ok(match self {
            Item::Pool(p) => serde_json::to_value(stored(p).as_ref())?,
            Item::Cluster(c) => serde_json::to_value(c)?,
            Item::Claim(c) => serde_json::to_value(c)?,
            Item::Lease(l) => serde_json::to_value(l)?,
            Item::Tick(t) => serde_json::to_value(t)?,
            Item::Profile(p) => serde_json::to_value(p)?,
            Item::Label(e) => serde_json::to_value(e)?,
            Item::ClaimName(c) => serde_json::to_value(c)?,
            Item::Notified(n) => serde_json::to_value(n)?,
        })
    }
}

impl Key {
    /// The item's sort key within its pool's partition: `POOL`, `CLUSTER#<id>`, `CLAIM#<name>`, `NAME#<name>`,
    /// `TICK`, `PROFILE`.
    pub fn sort_key(&self) -> String {
        match self {
            Key::Pool => "POOL".into(),
            Key::Cluster(id) => format!("CLUSTER#{id}"),
            Key::Claim(name) => format!("CLAIM#{name}"),
            Key::Lease(name) => format!("NAME#{name}"),
            Key::Tick => "TICK".into(),
            Key::Profile => "PROFILE".into(),
            Key::Event(_, sort) => sort.clone(),
            Key::Label(e) => format!("POOL#{}", e.pool),
            Key::ClaimName(_) => "CLAIMNAME".into(),
            Key::Notified => "NOTIFIED".into(),
        }
    }

    /// The partition of an item kept outside every pool's partition, whatever pool a write names: the label
    /// index's entries under `key=value` (`LABEL#<length of key>:<key>=<value>`, so no key and value run into
    /// another pair), and a claim name's entry (`CLAIMNAME#<name>`). `None` for an item of the pool's partition, and
    /// for an event (its pool's trail: [`event_shard`]) and the notifications' cursor ([`Notified`]), which are
    /// apart from the pool's partition in partitions named after it.
    pub fn apart(&self) -> Option<String> {
        match self {
            Key::Label(e) => Some(label_partition(&e.key, &e.value)),
            Key::ClaimName(name) => Some(format!("CLAIMNAME#{name}")),
            _ => None,
        }
    }
}

/// The partition of the label index's entries under `key=value` ([`Key::apart`]).
pub fn label_partition(key: &str, value: &str) -> String {
    format!("LABEL#{}:{key}={value}", key.len())
}

/// The condition a write holds on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// The item does not exist.
    Absent,
    /// The item is at this revision.
    Rev(u64),
    /// A cluster at this revision, unclaimed and Running: the only kind that can be assigned (seed 002).
    RevUnclaimedRunning(u64),
    /// A claim at this revision with no cluster yet.
    RevPending(u64),
    /// A lease held by this cluster id; a claim name's entry naming this pool.
    Holder(String),
    /// None: only for an index or directory entry written in a transaction whose other writes hold their
    /// conditions (a label's entry with its pool's status, a claim name's deletion with its claim's).
    Any,
}

impl Cond {
    /// Whether the condition holds on `item` (`None`: the item does not exist). This is the meaning of every
    /// condition; each adapter's condition expressions must agree with it exactly, and the planner's reference
    /// [`apply_mut`] checks the same things.
    pub fn holds(&self, item: Option<&Item>) -> bool {
        match (self, item) {
            (Cond::Absent, found) => found.is_none(),
            (Cond::Rev(r), Some(found)) => found.rev() == Some(*r),
            (Cond::RevUnclaimedRunning(r), Some(Item::Cluster(c))) => {
                c.rev == *r && c.claim.is_none() && c.is_running()
            }
            (Cond::RevPending(r), Some(Item::Claim(c))) => c.rev == *r && c.cluster.is_none(),
            (Cond::Holder(h), Some(Item::Lease(l))) => &l.holder == h,
            (Cond::Holder(h), Some(Item::ClaimName(c))) => &c.holder == h,
            (Cond::Any, _) => true,
            _ => false,
        }
    }
}

/// One conditional write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Write the whole item.
    Put(Item, Cond),
    /// Delete the item.
    Delete(Key, Cond),
    /// Write nothing; the transaction holds only if the condition does (DynamoDB's ConditionCheck).
    Check(Key, Cond),
    /// Add an event to the pool's trail, unconditionally: its key is new by construction (its subject at the
    /// revision its change writes), and the transaction's other writes hold its conditions; appended alone, it
    /// follows a change already written.
    Append(Event),
}

impl Write {
    /// The key the write concerns.
    pub fn key(&self) -> Key {
        match self {
            Write::Put(item, _) => item.key(),
            Write::Delete(key, _) | Write::Check(key, _) => key.clone(),
            Write::Append(event) => Key::Event(event_shard(event), event_sort_key(event)),
        }
    }

    /// The condition it holds on; `None` for an event, which has none.
    pub fn cond(&self) -> Option<&Cond> {
        match self {
            Write::Put(_, c) | Write::Delete(_, c) | Write::Check(_, c) => Some(c),
            Write::Append(_) => None,
        }
    }
}

/// The largest item the table accepts (DynamoDB's limit).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The size of `item` in `pool`'s partition as DynamoDB counts it: each attribute's name and value; strings by
/// their UTF-8 length, numbers at most 21 bytes, and 3 bytes plus 1 per element for maps and lists. The key
/// attributes (`PK`, `SK`, and `kind` on pool items) are included, and so is `assign`, the item's key in its
/// pool's sparse index ([`index_key`]) when it has one.
pub fn item_bytes(pool: &str, item: &Item) -> Result<usize> {
    let Value::Object(attrs) = item.to_value()? else {
        return Err(Error::Config(format!("item {} is not a map", item.key().sort_key())));
    };
    let key = item.key();
    let partition = match key {
        Key::Notified => "NOTIFIED#".len() + pool.len(),
        _ => key.apart().map_or("POOL#".len() + pool.len(), |p| p.len()),
    };
    let keys = "PK".len() + partition + "SK".len() + key.sort_key().len();
    let kind = if matches!(item, Item::Pool(_)) { "kind".len() + "pool".len() } else { 0 };
    let assign = index_key(item).map_or(0, |k| "assign".len() + k.len());
    Ok(keys + kind + assign + attrs.iter().map(|(k, v)| k.len() + value_bytes(v)).sum::<usize>())
}

/// The size of `event`'s item in `pool`'s trail as DynamoDB counts it, as [`item_bytes`] does: its attributes, its
/// keys (`EVENTS#<pool>#<shard>` and [`event_sort_key`]) and `expires`.
pub fn event_bytes(pool: &str, event: &Event) -> Result<usize> {
    let Value::Object(attrs) = serde_json::to_value(event)? else {
        return Err(Error::Config(format!("event {} is not a map", event_sort_key(event))));
    };
    let keys = "PK".len() + "EVENTS#".len() + pool.len() + 2 + "SK".len() + event_sort_key(event).len();
    let expires = "expires".len() + value_bytes(&Value::from((event.time + EVENT_RETENTION).timestamp()));
    Ok(keys + expires + attrs.iter().map(|(k, v)| k.len() + value_bytes(v)).sum::<usize>())
}

/// The size of one attribute's value as DynamoDB counts it ([`item_bytes`]).
fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 1,
        Value::Number(n) => n.to_string().trim_start_matches('-').len().div_ceil(2) + 1,
        Value::String(s) => s.len(),
        Value::Array(items) => 3 + items.iter().map(|v| value_bytes(v) + 1).sum::<usize>(),
        Value::Object(map) => 3 + map.iter().map(|(k, v)| k.len() + value_bytes(v) + 1).sum::<usize>(),
    }
}

/// Refuses a write that would store an item over [`MAX_ITEM_BYTES`].
pub fn check_size(pool: &str, write: &Write) -> Result<()> {
    let Write::Put(item, _) = write else { return Ok(()) };
    let bytes = item_bytes(pool, item)?;
    if bytes > MAX_ITEM_BYTES {
        return Err(Error::TooLarge { key: format!("{pool}/{}", item.key().sort_key()), bytes, limit: MAX_ITEM_BYTES });
    }
    Ok(())
}

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
fn profile_found(pool: &Pool) -> Option<u64> {
    pool.status.profile().filter(|p| p.has_buckets()).and_then(|p| p.kept)
}

/// The writes of a pool going from `before` to `after` at revision `expected_rev` (its new revision is
/// `after.rev`): the pool item, and the profile's item when its buckets changed (a bucket closed, or the profile
/// started afresh), when the pool held them in its own item until now (which moves them out), or when the profile
/// is gone. `after`'s profile is marked as kept at its new revision when the buckets are written.
fn pool_writes(before: &Pool, after: &mut Pool, expected_rev: u64) -> Vec<Write> {
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

/// The label index's writes of a pool whose status recorded `before` as indexed and now records `after`: the
/// entries added and those removed ([`apiary_planner::select::index_changes`]). Each holds on the pool item's
/// condition in the same transaction. A record lost (`after` is `None`: the status of a release without the index)
/// writes nothing; the next plan indexes the pool afresh.
fn label_writes(pool: &str, before: Option<&Labels>, after: Option<&Labels>) -> Vec<Write> {
    let Some(after) = after else { return vec![] };
    let (added, removed) = apiary_planner::select::index_changes(before, after);
    let entry = |(key, value): (String, String)| LabelEntry { pool: pool.to_owned(), key, value };
    let mut writes: Vec<Write> =
        removed.into_iter().map(|pair| Write::Delete(Key::Label(entry(pair)), Cond::Any)).collect();
    writes.extend(added.into_iter().map(|pair| Write::Put(Item::Label(entry(pair)), Cond::Any)));
    writes
}

/// One pool's partition in the table.
#[async_trait]
pub trait Store: Send + Sync {
    /// The pool and everything in its partition, read strongly consistently, its profile's buckets put back
    /// ([`with_profile`]); `None` if the pool does not exist.
    async fn read_pool(&self, pool: &str) -> Result<Option<Snapshot>>;
    /// The same, with the pool's tick item, which is in the partition: one read where the store reads the partition
    /// whole (DynamoDB's Query does), else [`Store::read_pool`] and a [`Store::get`] of the item.
    async fn read_pool_and_tick(&self, pool: &str) -> Result<Option<(Snapshot, Option<Tick>)>> {
        let Some(snapshot) = self.read_pool(pool).await? else { return Ok(None) };
        Ok(Some((snapshot, self.get_tick(pool).await?)))
    }
    /// One item, read strongly consistently, as it is stored (a pool without the buckets its profile keeps apart).
    async fn get(&self, pool: &str, key: &Key) -> Result<Option<Item>>;
    /// The pool item, as [`Store::get`] reads it; `None` if the pool does not exist.
    async fn get_pool(&self, pool: &str) -> Result<Option<Pool>> {
        Ok(match self.get(pool, &Key::Pool).await? {
            Some(Item::Pool(p)) => Some(*p),
            _ => None,
        })
    }
    /// The cluster `id` of `pool`, as [`Store::get`] reads it, if it exists.
    async fn get_cluster(&self, pool: &str, id: &str) -> Result<Option<Cluster>> {
        Ok(match self.get(pool, &Key::Cluster(id.to_owned())).await? {
            Some(Item::Cluster(c)) => Some(*c),
            _ => None,
        })
    }
    /// The claim `name` of `pool`, as [`Store::get`] reads it, if it exists.
    async fn get_claim(&self, pool: &str, name: &str) -> Result<Option<Claim>> {
        Ok(match self.get(pool, &Key::Claim(name.to_owned())).await? {
            Some(Item::Claim(c)) => Some(*c),
            _ => None,
        })
    }
    /// The tick item of `pool`, as [`Store::get`] reads it, if there is one.
    async fn get_tick(&self, pool: &str) -> Result<Option<Tick>> {
        Ok(match self.get(pool, &Key::Tick).await? {
            Some(Item::Tick(t)) => Some(*t),
            _ => None,
        })
    }
    /// The items of `keys` that exist, in as few requests as the table allows (DynamoDB's BatchGetItem takes 100
    /// keys): a pool's tick reads the clusters it looks at with one request, not one each. In no particular order.
    /// Read **eventually consistently** (half the read units of a strong read): an item may miss a write made a
    /// moment before, so what is read here is only ever written back under a condition on its revision, and a lost
    /// condition reads the item again with [`Store::get`]. Without a batch read, one [`Store::get`] each.
    async fn get_many(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        for key in keys {
            found.extend(self.get(pool, key).await?);
        }
        Ok(found)
    }
    /// The same, read **strongly consistently**, as [`Store::get`] reads one item: for the few items (a claim's
    /// named spares) a caller will take at once under a condition, where a stale copy would only cost it a lost
    /// write. One request where the table allows (BatchGetItem with ConsistentRead); in no particular order.
    async fn get_many_strongly(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        for key in keys {
            found.extend(self.get(pool, key).await?);
        }
        Ok(found)
    }
    /// The ids of up to `limit` spares of `pool` ([`spare_key`]), read strongly consistently from the pool's sparse
    /// index: in index order from place `from` ([`spare_place`]) on, wrapping round to the first place. Reads
    /// index entries only, never the rest of the partition: its cost follows `limit`, not the pool's size.
    async fn spares(&self, pool: &str, from: u16, limit: usize) -> Result<Vec<String>>;
    /// The names of up to `limit` of `pool`'s pending claims ahead of `claim` in line ([`line_key`]), oldest first,
    /// read strongly consistently from the same index; never `claim` itself, whether it waits already or not.
    async fn ahead(&self, pool: &str, claim: &Claim, limit: usize) -> Result<Vec<String>>;
    /// The ids of `pool`'s clusters in motion ([`moving_key`]), read strongly consistently from the same index, in
    /// id order: index entries only, so its cost follows how many clusters move, not the pool's size.
    async fn moving(&self, pool: &str) -> Result<Vec<String>>;
    /// Every pool item (not their partitions).
    async fn list_pools(&self) -> Result<Vec<Pool>>;
    /// The names of the pools with an entry under label `key=value` in the label index, read eventually
    /// consistently (an entry a moment old names a pool whose item the caller reads anyway): index entries only, so
    /// its cost follows the pools so labelled, not every pool. In name order.
    async fn labelled(&self, key: &str, value: &str) -> Result<Vec<String>>;
    /// The items of `pools` that exist (each as [`Store::get`] reads it, without the buckets its profile keeps
    /// apart), read **eventually consistently** in as few requests as the table allows (BatchGetItem across the
    /// pools' partitions): for a choice among pools (a claim by labels) that a status a moment old does not
    /// change. In no particular order. Without a batch read, one [`Store::get_pool`] each.
    async fn get_pools(&self, pools: &[String]) -> Result<Vec<Pool>> {
        let mut found = Vec::new();
        for pool in pools {
            found.extend(self.get_pool(pool).await?);
        }
        Ok(found)
    }
    /// Which pool holds the claim made by selector under `name`, read strongly consistently.
    async fn claim_name(&self, name: &str) -> Result<Option<ClaimName>> {
        // The entry is outside every pool's partition: the pool named here is not read.
        Ok(match self.get("", &Key::ClaimName(name.to_owned())).await? {
            Some(Item::ClaimName(c)) => Some(c),
            _ => None,
        })
    }
    /// Writes all of `writes` or none: one write alone, several in one transaction. A failed condition is
    /// [`Error::Conflict`]; an item over [`MAX_ITEM_BYTES`] is [`Error::TooLarge`] and nothing is written.
    async fn write(&self, pool: &str, writes: Vec<Write>) -> Result<()>;
    /// When the sweep last made a full pass over every pool (outside any pool's partition).
    async fn last_full_sweep(&self) -> Result<Option<Timestamp>>;
    /// Records a full pass at `at`, on condition that the last one recorded is still `previous`: of several
    /// sweeps deciding at once, one wins and the others see [`Error::Conflict`].
    async fn record_full_sweep(&self, previous: Option<Timestamp>, at: Timestamp) -> Result<()>;
    /// A page of `pool`'s trail, newest first, as `query` asks ([`Write::Append`] writes it). Reads only the
    /// trail's partitions, a page at a time: its cost follows the page, not the pool or its history.
    async fn events(&self, pool: &str, query: &EventQuery) -> Result<EventPage>;
    /// The events of shard `shard` of `pool`'s trail whose sort keys are after `after` and before `until`, oldest
    /// first, each with its sort key: at most `limit` (one Query page), read eventually consistently. The
    /// notifications' pass reads the trail on from where it stopped with it.
    async fn trail_between(
        &self,
        pool: &str,
        shard: u8,
        after: &str,
        until: &str,
        limit: usize,
    ) -> Result<Vec<(String, Event)>>;
}

/// `actions` cut into the groups written as one transaction each, in order: a [`Action::ReserveName`] with the
/// [`Action::CreateCluster`] of its holder that the planner puts right after it (a lease written alone, whose
/// cluster then lost its condition, would hold the name for a cluster that never came until the lease's grace
/// ran out); every other action alone.
pub fn transactions(actions: &[Action]) -> Vec<&[Action]> {
    let mut out = Vec::new();
    let mut rest = actions;
    while !rest.is_empty() {
        let paired = match rest {
            [Action::ReserveName { holder, .. }, Action::CreateCluster { cluster }, ..] => &cluster.id == holder,
            _ => false,
        };
        let (group, tail) = rest.split_at(if paired { 2 } else { 1 });
        out.push(group);
        rest = tail;
    }
    out
}

/// A cluster's change from `stored` to `written` (at its new revision) at `now`, as the power function writes it:
/// the put on `stored`'s revision with the events told in its transaction, and the events of its progress
/// ([`EventType::is_progress`](apiary_planner::events::EventType::is_progress)), each appended alone once the
/// change is written. Alone, the put is one write unit a KB of the item; in a transaction with its event it
/// was two, and the event's two.
pub fn cluster_change(stored: &Cluster, written: &Cluster, now: Timestamp) -> (Vec<Write>, Vec<Event>) {
    let (after, with): (Vec<Event>, Vec<Event>) =
        apiary_planner::events::of_cluster(stored, Some(written), now).into_iter().partition(|e| e.kind.is_progress());
    let mut writes = vec![Write::Put(Item::Cluster(Box::new(written.clone())), Cond::Rev(stored.rev))];
    writes.extend(with.into_iter().map(Write::Append));
    (writes, after)
}

/// The writes of `action` on `snapshot`, as [`writes_for`] gives them, and the events it tells the pool's trail at
/// `now` ([`apiary_planner::events::of_action`]), with what the pool's `notify` webhooks hear of them
/// ([`apiary_planner::notify::of_action`]), to be written in the same transaction.
pub fn writes_with_events(snapshot: &mut Snapshot, action: &Action, now: Timestamp) -> Result<Vec<Write>> {
    let events = apiary_planner::events::of_action(snapshot, action, now);
    let events = apiary_planner::notify::of_action(snapshot, action, events);
    let mut writes = writes_for(snapshot, action)?;
    writes.extend(events.into_iter().map(Write::Append));
    Ok(writes)
}

/// The writes that carry out `action` on `snapshot`, which is updated to the state after
/// it (as the reference [`apply_mut`] defines it). Non-write actions give no writes.
pub fn writes_for(snapshot: &mut Snapshot, action: &Action) -> Result<Vec<Write>> {
    let one = Plan { actions: vec![action.clone()], status: Default::default(), wake_at: None };
    let before = matches!(action, Action::UpdatePool { .. } | Action::DeletePool { .. }).then(|| snapshot.pool.clone());
    let selected = match action {
        Action::ReleaseClaim { claim: name, .. } => {
            snapshot.claims.iter().any(|c| &c.name == name && c.selector.is_some())
        }
        _ => false,
    };
    let kept = apply_mut(snapshot, &one).map_err(|c| Error::Conflict(c.what))?;
    let cluster = |s: &Snapshot, id: &str| s.clusters.iter().find(|c| c.id == id).cloned().map(Box::new);
    let claim = |s: &Snapshot, name: &str| s.claims.iter().find(|c| c.name == name).cloned().map(Box::new);
    let missing = |what: &str| Error::Conflict(format!("{what} vanished while applying"));
    Ok(match action {
        Action::ReleaseClaim { claim: name, expected_rev, cluster: held, .. } => {
            let mut w = vec![Write::Delete(Key::Claim(name.clone()), Cond::Rev(*expected_rev))];
            // A claim made by selector takes its name's entry along (the claim's condition holds the transaction;
            // while the claim is there its entry names no other pool).
            if selected {
                w.push(Write::Delete(Key::ClaimName(name.clone()), Cond::Any));
            }
            if let Some((id, rev)) = held {
                let c = cluster(snapshot, id).ok_or_else(|| missing(id))?;
                w.push(Write::Put(Item::Cluster(c), Cond::Rev(*rev)));
            }
            w
        }
        Action::AssignClaim { claim: name, claim_rev, cluster: id, cluster_rev, .. } => vec![
            Write::Put(
                Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?),
                Cond::RevUnclaimedRunning(*cluster_rev),
            ),
            Write::Put(Item::Claim(claim(snapshot, name).ok_or_else(|| missing(name))?), Cond::RevPending(*claim_rev)),
        ],
        Action::ReserveName { name, holder, at, replacing } => {
            let cond = replacing.clone().map_or(Cond::Absent, Cond::Holder);
            vec![Write::Put(
                Item::Lease(NameLease { name: name.clone(), holder: holder.clone(), reserved_at: *at }),
                cond,
            )]
        }
        Action::ReleaseName { name, holder } => {
            vec![Write::Delete(Key::Lease(name.clone()), Cond::Holder(holder.clone()))]
        }
        // Creating or deleting a cluster changes what maxSize and maxConcurrent bound: it holds only while the pool
        // is still at the revision the plan read, so a spec changed meanwhile cancels the rest of a stale plan.
        Action::CreateCluster { cluster: c } => vec![
            Write::Put(Item::Cluster(c.clone()), Cond::Absent),
            Write::Check(Key::Pool, Cond::Rev(snapshot.pool.rev)),
        ],
        Action::DeleteCluster { cluster: id, expected_rev, .. } => vec![
            Write::Put(Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?), Cond::Rev(*expected_rev)),
            Write::Check(Key::Pool, Cond::Rev(snapshot.pool.rev)),
        ],
        Action::SetPowerState { cluster: id, expected_rev, .. } => {
            vec![Write::Put(Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?), Cond::Rev(*expected_rev))]
        }
        Action::UpdatePool { expected_rev, .. } => match before {
            Some(before) => pool_writes(&before, &mut snapshot.pool, *expected_rev),
            None => vec![],
        },
        // The profile's item goes with the pool (a pool made again under its name starts without one).
        Action::DeletePool { expected_rev } => {
            debug_assert!(!kept);
            let found = before.as_ref().and_then(profile_found);
            let mut w = vec![Write::Delete(Key::Pool, Cond::Rev(*expected_rev))];
            w.extend(found.map(|r| Write::Delete(Key::Profile, Cond::Rev(r))));
            // And its entries in the label index.
            let indexed = before.as_ref().and_then(|p| p.status.labels_indexed.as_ref());
            w.extend(label_writes(&snapshot.pool.name, indexed, Some(&Labels::new())));
            w
        }
        Action::Deprovision { .. } | Action::CheckPower { .. } => vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_planner::Profile;
    use chrono::DateTime;

    #[test]
    fn a_name_is_written_with_the_cluster_that_takes_it_and_nothing_else_is_grouped() {
        let at = DateTime::UNIX_EPOCH;
        let reserve =
            |holder: &str| Action::ReserveName { name: "foo".into(), holder: holder.into(), at, replacing: None };
        let create =
            |id: &str| Action::CreateCluster { cluster: Box::new(Cluster::new(id, "foo", format!("{id}-x"), at)) };
        let check = |id: &str| Action::CheckPower { cluster: id.into() };
        let actions = [check("a"), reserve("b"), create("b"), create("c"), reserve("d"), create("e")];
        let sizes: Vec<usize> = transactions(&actions).iter().map(|g| g.len()).collect();
        assert_eq!(sizes, [1, 2, 1, 1, 1], "b's lease with b; d's lease is not e's");
        assert!(transactions(&[]).is_empty());
    }

    fn learned(kept: Option<u64>, buckets: bool) -> Snapshot {
        let at = DateTime::UNIX_EPOCH;
        let full = || apiary_planner::Buckets(vec![1; apiary_planner::BUCKETS]);
        let profile = Profile {
            time_zone: "UTC".into(),
            since: at,
            open: at,
            open_count: 0,
            mean: if buckets { full() } else { Buckets::default() },
            spread: if buckets { full() } else { Buckets::default() },
            worth: None,
            kept,
        };
        let demand = apiary_planner::Demand {
            claims_per_hour: 1.0,
            at,
            counted_until: at,
            counted_at_edge: vec![],
            profile: Some(profile),
        };
        let mut pool: Pool = serde_json::from_value(serde_json::json!({
            "name": "p", "createdAt": at, "rev": 7,
            "spec": {"size": 1, "platform": {"aws": {
                "region": "us-east-1", "roleArn": "arn:aws:iam::123456789012:role/r"}}}
        }))
        .expect("pool");
        pool.status.demand = Some(demand);
        Snapshot { pool, clusters: vec![], claims: vec![], leases: vec![] }
    }

    #[test]
    fn a_profile_whose_item_was_missing_is_written_afresh_and_a_deleted_pool_takes_its_profile_along() {
        // The pool keeps its buckets apart, but the read found no profile item: the planner learns afresh, and the
        // new buckets are written where nothing is (a condition on the missing revision would lose forever).
        let mut snap = learned(Some(3), false);
        let mut status = snap.pool.status.clone();
        let fresh = status.profile_mut().expect("profile");
        let full = learned(None, true).pool.status.demand.and_then(|d| d.profile).expect("profile");
        (fresh.mean, fresh.spread, fresh.kept) = (full.mean, full.spread, None);
        let action = Action::UpdatePool { expected_rev: 7, status: Box::new(status), next_wake_at: None };
        let writes = writes_for(&mut snap, &action).expect("writes");
        assert!(matches!(&writes[1], Write::Put(Item::Profile(p), Cond::Absent) if p.rev == 8), "{writes:?}");
        assert_eq!(snap.pool.status.profile().and_then(|p| p.kept), Some(8));

        let mut snap = learned(Some(3), true);
        let writes = writes_for(&mut snap, &Action::DeletePool { expected_rev: 7 }).expect("writes");
        assert_eq!(writes, [Write::Delete(Key::Pool, Cond::Rev(7)), Write::Delete(Key::Profile, Cond::Rev(3))]);
        let mut inline = learned(None, true);
        let writes = writes_for(&mut inline, &Action::DeletePool { expected_rev: 7 }).expect("writes");
        assert_eq!(writes, [Write::Delete(Key::Pool, Cond::Rev(7))], "a pool holding its own buckets has no item");
    }

    #[test]
    fn the_pool_item_never_holds_buckets_it_keeps_apart() {
        let apart = learned(Some(3), true).pool;
        let bare = stored(&apart);
        let p = bare.status.profile().expect("profile");
        assert!(p.mean.is_empty() && p.spread.is_empty() && p.kept == Some(3));
        let bytes = item_bytes("p", &Item::Pool(Box::new(apart.clone()))).expect("size");
        assert!(bytes < 1024, "{bytes}");
        // Read back with its item, the pool holds on the revision the read found.
        let item = ProfileItem { rev: 5, mean: Buckets(vec![2; apiary_planner::BUCKETS]), spread: Buckets::default() };
        let back = with_profile(bare.into_owned(), Some(item.clone()));
        let p = back.status.profile().expect("profile");
        assert_eq!((p.kept, &p.mean, &p.spread), (Some(5), &item.mean, &item.spread));
        let inline = learned(None, true).pool;
        assert_eq!(stored(&inline).as_ref(), &inline, "a pool holding its own buckets is stored as it is");
        assert!(item_bytes("p", &Item::Pool(Box::new(inline))).expect("size") > 5 * 1024);
    }
}
