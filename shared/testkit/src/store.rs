//! The [`Store`] port in memory, with DynamoDB's semantics: every write conditional ([`Cond::holds`]), several
//! writes all or nothing, at most one write per item in a transaction, items over 400 KB refused, reads strongly
//! consistent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use apiary_planner::{Pool, Snapshot, Timestamp};
use apiary_ports::store::{check_size, Item, Key, Store, Write};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::hook::{enter, leave, Hook, Op};

/// DynamoDB's limit on the items of one TransactWriteItems.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// Every pool's partition, by sort key, and the sweep's item.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    /// Pool name → sort key → item.
    pub pools: BTreeMap<String, BTreeMap<String, Item>>,
    /// The sweep's last full pass.
    pub last_full_sweep: Option<Timestamp>,
}

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
    let (mut pool, mut clusters, mut claims, mut leases) = (None, vec![], vec![], vec![]);
    for item in items.values() {
        match item {
            Item::Pool(p) => pool = Some((**p).clone()),
            Item::Cluster(c) => clusters.push((**c).clone()),
            Item::Claim(c) => claims.push((**c).clone()),
            Item::Lease(l) => leases.push(l.clone()),
        }
    }
    pool.map(|pool| Snapshot { pool, clusters, claims, leases })
}

/// The table.
pub struct MemStore {
    hook: Arc<dyn Hook>,
    tables: Mutex<Tables>,
    writes: std::sync::atomic::AtomicU64,
}

impl MemStore {
    /// An empty table whose calls pass through `hook`.
    pub fn new(hook: Arc<dyn Hook>) -> Self {
        Self { hook, tables: Mutex::new(Tables::default()), writes: Default::default() }
    }

    /// Successful writes so far (a checker looks again only when this moved).
    pub fn writes(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A copy of everything stored (no hook: for tests and invariant checks).
    pub fn tables(&self) -> Tables {
        self.lock().clone()
    }

    /// Stores `item` in `pool`'s partition unconditionally (test setup; no hook).
    pub fn put(&self, pool: &str, item: Item) {
        self.lock().pools.entry(pool.to_owned()).or_default().insert(item.key().sort_key(), item);
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
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
        let mut keys: Vec<String> = writes.iter().map(|w| w.key().sort_key()).collect();
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
        let partition = tables.pools.entry(pool.to_owned()).or_default();
        // All conditions first: nothing is written unless every one holds.
        for w in &writes {
            let key = w.key().sort_key();
            if !w.cond().holds(partition.get(&key)) {
                let what = format!("{pool}/{key}: {:?}", w.cond());
                if partition.is_empty() {
                    tables.pools.remove(pool);
                }
                return Err(Error::Conflict(what));
            }
        }
        for w in writes {
            match w {
                Write::Put(item, _) => {
                    partition.insert(item.key().sort_key(), item);
                }
                Write::Delete(key, _) => {
                    partition.remove(&key.sort_key());
                }
                Write::Check(..) => {}
            }
        }
        if partition.is_empty() {
            tables.pools.remove(pool);
        }
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl Store for MemStore {
    async fn read_pool(&self, pool: &str) -> Result<Option<Snapshot>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let snap = self.lock().snapshot(pool);
        leave(self.hook.as_ref(), Op::Read, Ok(snap))
    }

    async fn get(&self, pool: &str, key: &Key) -> Result<Option<Item>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let item = self.lock().pools.get(pool).and_then(|p| p.get(&key.sort_key())).cloned();
        leave(self.hook.as_ref(), Op::Read, Ok(item))
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
            .collect();
        leave(self.hook.as_ref(), Op::Read, Ok(pools))
    }

    async fn write(&self, pool: &str, writes: Vec<Write>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        enter(self.hook.as_ref(), Op::Write).await?;
        let result = self.apply(pool, writes);
        leave(self.hook.as_ref(), Op::Write, result)
    }

    async fn last_full_sweep(&self) -> Result<Option<Timestamp>> {
        enter(self.hook.as_ref(), Op::Read).await?;
        let last = self.lock().last_full_sweep;
        leave(self.hook.as_ref(), Op::Read, Ok(last))
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
