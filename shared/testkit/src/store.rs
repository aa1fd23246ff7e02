//! The [`Store`] port in memory, with DynamoDB's semantics: every write conditional ([`Cond::holds`]), several
//! writes all or nothing, at most one write per item in a transaction, items over 400 KB refused, reads strongly
//! consistent, and the partition's sparse index of spares, clusters in motion and pending claims ([`index_key`]).
//!
//! A pool's trail is kept beside its partition, by shard and sort key as the adapter keeps it, and read newest
//! first a page at a time ([`Store::events`]).
//!
//! It counts what each caller costs as DynamoDB would bill it ([`StoreStats`]): reads, the items (or index
//! entries) they return, write attempts and lost conditions, so tests can hold a request's cost flat as a pool
//! grows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use apiary_planner::events::Event;
use apiary_planner::power::tick::Tick;
use apiary_planner::{Claim, Pool, Snapshot, Timestamp};
use apiary_ports::store::{
    check_size, event_shard, event_sort_key, index_key, label_partition, line_key, partition, spare_place, stored,
    EventPage, EventQuery, Item, Key, Store, Write,
};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::hook::{enter, leave, Hook, Op};

/// DynamoDB's limit on the items of one TransactWriteItems.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// Every pool's partition, by sort key, and the sweep's item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    /// Pool name → sort key → item; and the partitions apart from every pool's ([`Key::apart`]: the label index's,
    /// claim names'), by their partition keys.
    pub pools: BTreeMap<String, BTreeMap<String, Item>>,
    /// The sweep's last full pass.
    pub last_full_sweep: Option<Timestamp>,
}

/// Pool name → (shard, sort key) → event: each pool's trail, kept apart from [`Tables`] (which tests copy after
/// every step) since it only grows.
type Trails = BTreeMap<String, BTreeMap<(u8, String), Event>>;

impl Tables {
    /// The partition of `pool` as a snapshot (as `read_pool` returns it); `None` without a pool item.
    pub fn snapshot(&self, pool: &str) -> Option<Snapshot> {
        snapshot(self.pools.get(pool)?)
    }

    /// Every partition that has a pool item, as snapshots.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.pools.values().filter_map(snapshot).collect()
    }
}

fn snapshot(items: &BTreeMap<String, Item>) -> Option<Snapshot> {
    partition(items.values().cloned()).map(|(snapshot, _)| snapshot)
}

/// The partition `key` of a write naming `pool` is kept in: the pool's, or the one apart it names ([`Key::apart`]:
/// the label index's entries, claim names), under its partition key (which no pool's name can be).
fn home(pool: &str, key: &Key) -> String {
    match key {
        Key::Notified => format!("NOTIFIED#{pool}"),
        _ => key.apart().unwrap_or_else(|| pool.to_owned()),
    }
}

/// `item` as the table keeps it ([`stored`]).
fn as_stored(item: Item) -> Item {
    match item {
        Item::Pool(p) => Item::Pool(Box::new(stored(&p).into_owned())),
        other => other,
    }
}

/// What the table was asked for, counted as DynamoDB bills it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Read calls: Query (a whole partition, or a page of the index), GetItem.
    pub reads: u64,
    /// Items those reads returned (index entries for an index query).
    pub items_read: u64,
    /// Write calls (PutItem, DeleteItem, TransactWriteItems), whether their conditions held or not.
    pub write_attempts: u64,
    /// Write calls whose condition did not hold.
    pub conflicts: u64,
}

impl std::ops::Sub for StoreStats {
    type Output = StoreStats;
    fn sub(self, before: StoreStats) -> StoreStats {
        StoreStats {
            reads: self.reads - before.reads,
            items_read: self.items_read - before.items_read,
            write_attempts: self.write_attempts - before.write_attempts,
            conflicts: self.conflicts - before.conflicts,
        }
    }
}

/// The table.
pub struct MemStore {
    hook: Arc<dyn Hook>,
    tables: Mutex<Tables>,
    trails: Mutex<Trails>,
    writes: std::sync::atomic::AtomicU64,
    stats: Mutex<StoreStats>,
}

impl MemStore {
    /// An empty table whose calls pass through `hook`.
    pub fn new(hook: Arc<dyn Hook>) -> Self {
        Self {
            hook,
            tables: Mutex::new(Tables::default()),
            trails: Mutex::new(Trails::default()),
            writes: Default::default(),
            stats: Default::default(),
        }
    }

    /// Successful writes so far (a checker looks again only when this moved).
    pub fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A copy of everything stored (no hook: for tests and invariant checks).
    pub fn tables(&self) -> Tables {
        self.lock().clone()
    }

    /// Whether an event of `pool`'s trail is one `wanted` looks for (no hook: for invariant checks).
    pub fn trail_has(&self, pool: &str, wanted: impl Fn(&Event) -> bool) -> bool {
        self.trails().get(pool).is_some_and(|trail| trail.values().any(wanted))
    }

    /// Every event of `pool`'s trail with its sort key, oldest first per shard (no hook: for invariant checks).
    pub fn trail(&self, pool: &str) -> Vec<(String, Event)> {
        let trails = self.trails();
        trails.get(pool).into_iter().flat_map(|t| t.iter().map(|((_, k), e)| (k.clone(), e.clone()))).collect()
    }

    fn trails(&self) -> std::sync::MutexGuard<'_, Trails> {
        self.trails.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores `item` in `pool`'s partition unconditionally (test setup; no hook).
    pub fn put(&self, pool: &str, item: Item) {
        self.lock().pools.entry(pool.to_owned()).or_default().insert(item.key().sort_key(), as_stored(item));
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Removes the item `key` of `pool`'s partition behind every function's back (an operator's slip; no hook).
    pub fn remove(&self, pool: &str, key: &Key) {
        if let Some(items) = self.lock().pools.get_mut(pool) {
            items.remove(&key.sort_key());
        }
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// What was asked of the table so far (subtract two to get one request's cost).
    pub fn stats(&self) -> StoreStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn count_read(&self, items: usize) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.reads += 1;
        stats.items_read += items as u64;
    }

    fn count_write(&self, result: &Result<()>) {
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        stats.write_attempts += 1;
        stats.conflicts += u64::from(matches!(result, Err(Error::Conflict(_))));
    }

    /// The index entries of `pool` in key order: each spare's, each cluster's in motion and each pending claim's
    /// key, with its id or name.
    fn index(&self, pool: &str) -> Vec<(String, String)> {
        let tables = self.lock();
        let mut entries: Vec<(String, String)> = tables
            .pools
            .get(pool)
            .into_iter()
            .flat_map(|p| p.values())
            .filter_map(|item| {
                let id = match item {
                    Item::Cluster(c) => c.id.clone(),
                    Item::Claim(c) => c.name.clone(),
                    _ => return None,
                };
                index_key(item).map(|k| (k, id))
            })
            .collect();
        entries.sort();
        entries
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, pool: &str, writes: Vec<Write>) -> Result<()> {
        if writes.len() > MAX_TRANSACTION_ITEMS {
            return Err(Error::service(
                "dynamodb:TransactWriteItems",
                format!("{} items, over the limit of {MAX_TRANSACTION_ITEMS}", writes.len()),
                false,
            ));
        }
        let mut keys: Vec<(String, String)> =
            writes.iter().map(|w| (home(pool, &w.key()), w.key().sort_key())).collect();
        keys.sort();
        if keys.windows(2).any(|k| k[0] == k[1]) {
            return Err(Error::service(
                "dynamodb:TransactWriteItems",
                "transaction request cannot include multiple operations on one item",
                false,
            ));
        }
        for w in &writes {
            check_size(pool, w)?;
        }
        let mut tables = self.lock();
        // All conditions first: nothing is written unless every one holds.
        for w in &writes {
            let (home, key) = (home(pool, &w.key()), w.key().sort_key());
            let Some(cond) = w.cond() else { continue };
            if !cond.holds(tables.pools.get(&home).and_then(|p| p.get(&key))) {
                return Err(Error::Conflict(format!("{home}/{key}: {cond:?}")));
            }
        }
        for w in writes {
            let at = home(pool, &w.key());
            match w {
                Write::Put(item, _) => {
                    tables.pools.entry(at).or_default().insert(item.key().sort_key(), as_stored(item));
                }
                Write::Delete(key, _) => {
                    if let Some(partition) = tables.pools.get_mut(&at) {
                        partition.remove(&key.sort_key());
                        if partition.is_empty() {
                            tables.pools.remove(&at);
                        }
                    }
                }
                Write::Check(..) => {}
                Write::Append(event) => {
                    let key = (event_shard(&event), event_sort_key(&event));
                    self.trails().entry(pool.to_owned()).or_default().insert(key, event);
                }
            }
        }
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl Store for MemStore {
    async fn read_pool(&self, pool: &str) -> Result<Option<Snapshot>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let (snap, items) = {
            let tables = self.lock();
            (tables.snapshot(pool), tables.pools.get(pool).map_or(0, BTreeMap::len))
        };
        self.count_read(items);
        leave(self.hook.as_ref(), Op::Read, Ok(snap))
    }

    /// As DynamoDB reads it: one read of the partition, the tick item with the rest.
    async fn read_pool_and_tick(&self, pool: &str) -> Result<Option<(Snapshot, Option<Tick>)>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let (read, items) = {
            let tables = self.lock();
            let items = tables.pools.get(pool);
            (items.and_then(|p| partition(p.values().cloned())), items.map_or(0, BTreeMap::len))
        };
        self.count_read(items);
        leave(self.hook.as_ref(), Op::Read, Ok(read))
    }

    async fn get(&self, pool: &str, key: &Key) -> Result<Option<Item>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let item = self.lock().pools.get(&home(pool, key)).and_then(|p| p.get(&key.sort_key())).cloned();
        self.count_read(usize::from(item.is_some()));
        leave(self.hook.as_ref(), Op::Read, Ok(item))
    }

    async fn get_many_strongly(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        // Every read here is strong: one request, as the adapter's batch read.
        self.get_many(pool, keys).await
    }

    async fn get_many(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let found: Vec<Item> = {
            let tables = self.lock();
            let partition = tables.pools.get(pool);
            keys.iter().filter_map(|k| partition.and_then(|p| p.get(&k.sort_key())).cloned()).collect()
        };
        self.count_read(found.len());
        leave(self.hook.as_ref(), Op::Read, Ok(found))
    }

    async fn spares(&self, pool: &str, from: u16, limit: usize) -> Result<Vec<String>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let start = spare_place(from);
        let spares: Vec<(String, String)> = self.index(pool).into_iter().filter(|(k, _)| k.starts_with("S#")).collect();
        // As the adapter queries: from the place on, then (a second query) from the first place up to it.
        let (after, before): (Vec<_>, Vec<_>) = spares.into_iter().partition(|(k, _)| *k >= start);
        let first: Vec<String> = after.into_iter().take(limit).map(|(_, id)| id).collect();
        self.count_read(first.len());
        let mut ids = first;
        if ids.len() < limit && !before.is_empty() {
            let rest: Vec<String> = before.into_iter().take(limit - ids.len()).map(|(_, id)| id).collect();
            self.count_read(rest.len());
            ids.extend(rest);
        }
        leave(self.hook.as_ref(), Op::Read, Ok(ids))
    }

    async fn ahead(&self, pool: &str, claim: &Claim, limit: usize) -> Result<Vec<String>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let own = line_key(claim);
        let names: Vec<String> = self
            .index(pool)
            .into_iter()
            .filter(|(k, _)| k.starts_with("P#") && *k < own)
            .take(limit)
            .map(|(_, name)| name)
            .collect();
        self.count_read(names.len());
        leave(self.hook.as_ref(), Op::Read, Ok(names))
    }

    async fn moving(&self, pool: &str) -> Result<Vec<String>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let ids: Vec<String> =
            self.index(pool).into_iter().filter(|(k, _)| k.starts_with("M#")).map(|(_, id)| id).collect();
        self.count_read(ids.len());
        leave(self.hook.as_ref(), Op::Read, Ok(ids))
    }

    async fn list_pools(&self) -> Result<Vec<Pool>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let pools = self
            .lock()
            .pools
            .values()
            .filter_map(|p| match p.get("POOL") {
                Some(Item::Pool(pool)) => Some((**pool).clone()),
                _ => None,
            })
            .collect::<Vec<Pool>>();
        self.count_read(pools.len());
        leave(self.hook.as_ref(), Op::Read, Ok(pools))
    }

    async fn get_pools(&self, pools: &[String]) -> Result<Vec<Pool>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let found: Vec<Pool> = {
            let tables = self.lock();
            pools
                .iter()
                .filter_map(|p| match tables.pools.get(p).and_then(|items| items.get("POOL")) {
                    Some(Item::Pool(pool)) => Some((**pool).clone()),
                    _ => None,
                })
                .collect()
        };
        // One request, as the adapter's batch read.
        self.count_read(found.len());
        leave(self.hook.as_ref(), Op::Read, Ok(found))
    }

    async fn labelled(&self, key: &str, value: &str) -> Result<Vec<String>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let pools: Vec<String> = self
            .lock()
            .pools
            .get(&label_partition(key, value))
            .into_iter()
            .flat_map(|entries| entries.values())
            .filter_map(|item| if let Item::Label(e) = item { Some(e.pool.clone()) } else { None })
            .collect();
        self.count_read(pools.len());
        leave(self.hook.as_ref(), Op::Read, Ok(pools))
    }

    async fn write(&self, pool: &str, writes: Vec<Write>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        enter(self.hook.as_ref(), Op::Write).await?;
        let result = self.apply(pool, writes);
        self.count_write(&result);
        leave(self.hook.as_ref(), Op::Write, result)
    }

    async fn last_full_sweep(&self) -> Result<Option<Timestamp>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let last = self.lock().last_full_sweep;
        leave(self.hook.as_ref(), Op::Read, Ok(last))
    }

    async fn events(&self, pool: &str, query: &EventQuery) -> Result<EventPage> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let shards = query.shards();
        let mut found: Vec<(String, Event)> = {
            self.trails()
                .get(pool)
                .into_iter()
                .flat_map(|trail| trail.iter())
                .filter(|((shard, sort), e)| {
                    shards.contains(shard) && query.before.as_ref().is_none_or(|b| sort < b) && query.matches(e)
                })
                .map(|((_, sort), e)| (sort.clone(), e.clone()))
                .collect()
        };
        found.sort_by(|a, b| b.0.cmp(&a.0));
        let more = found.len() > query.limit;
        found.truncate(query.limit);
        // One query per shard read, each returning what it matched.
        for _ in 1..shards.len() {
            self.count_read(0);
        }
        self.count_read(found.len());
        let next = if more { found.last().map(|(sort, _)| sort.clone()) } else { None };
        let page = EventPage { events: found.into_iter().map(|(_, e)| e).collect(), next };
        leave(self.hook.as_ref(), Op::Read, Ok(page))
    }

    async fn trail_between(
        &self,
        pool: &str,
        shard: u8,
        after: &str,
        until: &str,
        limit: usize,
    ) -> Result<Vec<(String, Event)>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        if after >= until {
            self.count_read(0);
            return leave(self.hook.as_ref(), Op::Read, Ok(vec![]));
        }
        let found: Vec<(String, Event)> = self
            .trails()
            .get(pool)
            .into_iter()
            .flat_map(|trail| trail.range((shard, after.to_owned())..(shard, until.to_owned())))
            .filter(|((_, sort), _)| sort.as_str() > after)
            .take(limit)
            .map(|((_, sort), e)| (sort.clone(), e.clone()))
            .collect();
        self.count_read(found.len());
        leave(self.hook.as_ref(), Op::Read, Ok(found))
    }

    async fn record_full_sweep(&self, previous: Option<Timestamp>, at: Timestamp) -> Result<()> {
        enter(self.hook.as_ref(), Op::Write).await?;
        let result = {
            let mut tables = self.lock();
            if tables.last_full_sweep == previous {
                tables.last_full_sweep = Some(at);
                self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            } else {
                Err(Error::Conflict(format!("sweep: last full {:?}, not {previous:?}", tables.last_full_sweep)))
            }
        };
        leave(self.hook.as_ref(), Op::Write, result)
    }
}
