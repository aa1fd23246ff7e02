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

mod index;
mod pool;
mod size;
mod trail;
mod writes;

pub use index::*;
pub use pool::*;
pub use size::*;
pub use trail::*;
pub use writes::*;

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
