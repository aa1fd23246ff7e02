//! The DynamoDB adapter of [`Store`]: one table, one partition per pool (docs/concepts.md, "How it runs").
//!
//! | item | PK | SK |
//! |---|---|---|
//! | pool | `POOL#<pool>` | `POOL` (also `kind = pool`, for the `pools` index) |
//! | cluster | `POOL#<pool>` | `CLUSTER#<id>` |
//! | claim | `POOL#<pool>` | `CLAIM#<name>` |
//! | name lease | `POOL#<pool>` | `NAME#<clusterName>` |
//! | the pool's tick | `POOL#<pool>` | `TICK` |
//! | the pool's forecast profile | `POOL#<pool>` | `PROFILE` |
//! | a label index entry | `LABEL#<len(key)>:<key>=<value>` | `POOL#<pool>` |
//! | a claim made by selector's name | `CLAIMNAME#<name>` | `CLAIMNAME` |
//! | how far the notifications' pass read the pool's trail | `NOTIFIED#<pool>` | `NOTIFIED` |
//! | event | `EVENTS#<pool>#<shard>` | `<time>#<subject>#<rev>#<type>` ([`event_sort_key`]), with `expires` (TTL) |
//!
//! A pool's trail is in partitions of its own ([`EVENT_SHARDS`](apiary_ports::store::EVENT_SHARDS) of them), so no
//! read of the pool's partition (the reconcile's, the claim's) ever returns an event; the table's TTL on `expires`
//! removes an event [`EVENT_RETENTION`] after it happened.
//!
//! Items are the domain types' own fields (camelCase), with `rev` at the top level for conditions.
//! `AttributeValue` never leaves this module.
//!
//! The local secondary index `assign` (keys only) is the partition's sparse index of what a claim and the pool's
//! tick need: a spare cluster, a cluster in motion or a pending claim carries `assign` ([`index_key`]), computed
//! from the item on every write, so the index and the items agree by construction; every other item leaves it
//! out. A local
//! index, unlike a global one, is read strongly consistently, so a claim never picks a spare already taken
//! nor misses one just made. (It also keeps a pool's items in one partition of at most 10 GB: some eight
//! million clusters.)

use std::collections::HashMap;

use apiary_planner::events::Event;
use apiary_planner::power::tick::Tick;
use apiary_planner::{Claim, Pool, Snapshot};
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use aws_sdk_dynamodb::Client;

use apiary_planner::Timestamp;
use apiary_ports::store::{
    check_size, label_partition, line_key, partition, spare_place, EventPage, EventQuery, Item, Key, Store, Write,
};
use apiary_ports::{Error, Result};

use crate::calls::count;

mod items;
mod writes;

use items::*;
pub use items::{read_event, read_item, stored_event, stored_item};
use writes::*;

type Attrs = HashMap<String, AttributeValue>;

/// Name of the sparse index over pool items.
pub const POOLS_INDEX: &str = "pools";

/// Name of the sparse local index of spares and pending claims, and of its sort key attribute.
pub const ASSIGN_INDEX: &str = "assign";

/// The table.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
}

fn pk(pool: &str) -> String {
    format!("POOL#{pool}")
}

fn sk(key: &Key) -> String {
    key.sort_key()
}

/// The partition and sort key of the sweep's own item, outside every pool's partition (and without `kind`, so
/// it is not in the `pools` index).
const SWEEP_KEY: &str = "SWEEP";

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

/// The partition key of shard `shard` of `pool`'s trail.
fn events_pk(pool: &str, shard: u8) -> String {
    format!("EVENTS#{pool}#{shard}")
}

fn key_attrs(pool: &str, key: &Key) -> Attrs {
    let partition = match key {
        Key::Event(shard, _) => events_pk(pool, *shard),
        Key::Notified => format!("NOTIFIED#{pool}"),
        _ => key.apart().unwrap_or_else(|| pk(pool)),
    };
    HashMap::from([("PK".to_owned(), s(partition)), ("SK".to_owned(), s(sk(key)))])
}

/// The keys one BatchGetItem takes.
const BATCH_GET_KEYS: usize = 100;
/// Requests for one batch's keys, the first included, before the keys still unprocessed are an error.
const BATCH_GET_ATTEMPTS: u32 = 5;

/// How many events a filtered read of one shard looks at a page.
const EVENT_PAGE: usize = 100;
/// How many pages a read of one shard looks at, at most.
const EVENT_PAGES: usize = 4;

impl DynamoStore {
    /// The store over `table`.
    pub fn new(client: Client, table: String) -> Self {
        Self { client, table }
    }

    /// A strongly consistent Query of `pool`'s entries of the `assign` index between `low` and `high`.
    fn assign_query(&self, pool: &str, low: &str, high: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .index_name(ASSIGN_INDEX)
            .consistent_read(true)
            .key_condition_expression("PK = :pk AND #assign BETWEEN :low AND :high")
            .expression_attribute_names("#assign", ASSIGN_INDEX)
            .expression_attribute_values(":pk", s(pk(pool)))
            .expression_attribute_values(":low", s(low))
            .expression_attribute_values(":high", s(high))
    }

    /// The items of `keys` (each with its partition key: [`key_attrs`]) that exist, with BatchGetItem (100 keys a
    /// request), read strongly or eventually consistently; what the table could not read at once is asked for
    /// again. `what` names them in an error.
    async fn batch_get(&self, what: &str, keys: Vec<Attrs>, consistent: bool) -> Result<Vec<Item>> {
        let mut found = Vec::new();
        for chunk in keys.chunks(BATCH_GET_KEYS) {
            let mut pending: Vec<Attrs> = chunk.to_vec();
            let mut attempts = 0;
            while !pending.is_empty() {
                if attempts == BATCH_GET_ATTEMPTS {
                    let message = format!("{} keys of {what} left unprocessed", pending.len());
                    return Err(Error::service("dynamodb:BatchGetItem", message, true));
                }
                if attempts > 0 {
                    // What the table could not read at once (throttled, or over 16 MB) is asked for again.
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempts)).await;
                }
                attempts += 1;
                let wanted = KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(consistent)
                    .build()
                    .map_err(|e| crate::error::build("dynamodb:BatchGetItem", e))?;
                count("dynamodb:BatchGetItem");
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&self.table, wanted)
                    .send()
                    .await
                    .map_err(|e| crate::error::aws("dynamodb:BatchGetItem", e))?;
                for attrs in out.responses.and_then(|mut r| r.remove(&self.table)).unwrap_or_default() {
                    found.extend(decode(attrs)?);
                }
                pending =
                    out.unprocessed_keys.and_then(|mut u| u.remove(&self.table)).map(|k| k.keys).unwrap_or_default();
            }
        }
        Ok(found)
    }

    /// Up to `limit` entries of the `assign` index between `low` and `high` (bounds that are never keys themselves),
    /// as (key, id or name), in one page.
    async fn assign_entries(&self, pool: &str, low: &str, high: &str, limit: usize) -> Result<Vec<(String, String)>> {
        if limit == 0 {
            return Ok(vec![]);
        }
        let query = self.assign_query(pool, low, high).limit(i32::try_from(limit).unwrap_or(i32::MAX));
        let page = query_page(&query, None).await?;
        let mut entries = vec![];
        for attrs in page.items.unwrap_or_default() {
            let (Some(AttributeValue::S(key)), Some(AttributeValue::S(sk))) =
                (attrs.get(ASSIGN_INDEX), attrs.get("SK"))
            else {
                continue;
            };
            let id = sk.split_once('#').map_or(sk.as_str(), |(_, id)| id);
            entries.push((key.clone(), id.to_owned()));
        }
        Ok(entries)
    }

    /// The ids of up to `limit` spares between `low` and `high`.
    async fn assign_page(&self, pool: &str, low: &str, high: &str, limit: usize) -> Result<Vec<String>> {
        Ok(self.assign_entries(pool, low, high, limit).await?.into_iter().map(|(_, id)| id).collect())
    }

    /// Up to `want` events of shard `shard` of `pool`'s trail that `query` asks for, newest first, as (sort key,
    /// event); and, when it stopped before the shard's oldest event, the last sort key it looked at (older ones
    /// were not). A query with a filter looks at [`EVENT_PAGE`] events a page, at most [`EVENT_PAGES`] pages (in each
    /// shard).
    async fn shard_events(
        &self,
        pool: &str,
        shard: u8,
        query: &EventQuery,
        want: usize,
    ) -> Result<(Vec<(String, Event)>, Option<String>)> {
        let mut q = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .scan_index_forward(false)
            .expression_attribute_values(":pk", s(events_pk(pool, shard)));
        q = match &query.before {
            Some(before) => q
                .key_condition_expression("PK = :pk AND SK < :before")
                .expression_attribute_values(":before", s(before.clone())),
            None => q.key_condition_expression("PK = :pk"),
        };
        let mut filters = vec![];
        if let Some(claim) = &query.claim {
            filters.push("#claim = :claim");
            q = q.expression_attribute_names("#claim", "claim").expression_attribute_values(":claim", s(claim.clone()));
        }
        if let Some(cluster) = &query.cluster {
            filters.push("#cluster = :cluster");
            q = q
                .expression_attribute_names("#cluster", "cluster")
                .expression_attribute_values(":cluster", s(cluster.clone()));
        }
        let page_size = if filters.is_empty() { want } else { EVENT_PAGE.max(want) };
        if !filters.is_empty() {
            q = q.filter_expression(filters.join(" AND "));
        }
        q = q.limit(i32::try_from(page_size).unwrap_or(i32::MAX));
        let (mut found, mut start) = (vec![], None);
        for _ in 0..EVENT_PAGES {
            let page = query_page(&q, start).await?;
            for attrs in page.items.unwrap_or_default() {
                let Some(AttributeValue::S(sort)) = attrs.get("SK").cloned() else { continue };
                let Some(event) = read_event(attrs)? else {
                    tracing::warn!(item = sort, "an event of a kind this release does not know, left out");
                    continue;
                };
                found.push((sort, event));
            }
            start = page.last_evaluated_key;
            if start.is_none() || found.len() >= want {
                break;
            }
        }
        let stopped = start.and_then(|k| match k.get("SK") {
            Some(AttributeValue::S(sort)) => Some(sort.clone()),
            _ => None,
        });
        Ok((found, stopped))
    }
}

/// One page of `query` from `start` (none: the first).
async fn query_page(
    query: &QueryFluentBuilder,
    start: Option<Attrs>,
) -> Result<aws_sdk_dynamodb::operation::query::QueryOutput> {
    count("dynamodb:Query");
    query.clone().set_exclusive_start_key(start).send().await.map_err(|e| crate::error::aws("dynamodb:Query", e))
}

/// Every item `query` finds, all pages, decoded.
async fn query_all(query: QueryFluentBuilder) -> Result<Vec<Item>> {
    let mut start = None;
    let mut items = vec![];
    loop {
        let page = query_page(&query, start).await?;
        for attrs in page.items.unwrap_or_default() {
            items.extend(decode(attrs)?);
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(items);
        }
    }
}

#[async_trait]
impl Store for DynamoStore {
    async fn read_pool(&self, pool: &str) -> Result<Option<Snapshot>> {
        Ok(self.read_pool_and_tick(pool).await?.map(|(snapshot, _)| snapshot))
    }

    /// One strongly consistent Query of the partition: the tick item comes with the rest.
    async fn read_pool_and_tick(&self, pool: &str) -> Result<Option<(Snapshot, Option<Tick>)>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .consistent_read(true)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(pk(pool)));
        Ok(partition(query_all(query).await?))
    }

    async fn get(&self, pool: &str, key: &Key) -> Result<Option<Item>> {
        count("dynamodb:GetItem");
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .set_key(Some(key_attrs(pool, key)))
            .send()
            .await
            .map_err(|e| crate::error::aws("dynamodb:GetItem", e))?;
        match out.item {
            Some(attrs) => decode(attrs),
            None => Ok(None),
        }
    }

    async fn get_many(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        // Eventually consistent (`Store::get_many`): every write of what is read here is conditional.
        self.batch_get(pool, keys.iter().map(|k| key_attrs(pool, k)).collect(), false).await
    }

    async fn get_many_strongly(&self, pool: &str, keys: &[Key]) -> Result<Vec<Item>> {
        self.batch_get(pool, keys.iter().map(|k| key_attrs(pool, k)).collect(), true).await
    }

    async fn spares(&self, pool: &str, from: u16, limit: usize) -> Result<Vec<String>> {
        let start = spare_place(from);
        // From the place to the end of the spares ("S#" then '~', past every hex digit), then from the first place.
        let mut ids = self.assign_page(pool, &start, "S#~", limit).await?;
        if ids.len() < limit && start != spare_place(0) {
            let before = self.assign_page(pool, "S#", &start, limit - ids.len()).await?;
            ids.extend(before);
        }
        Ok(ids)
    }

    async fn ahead(&self, pool: &str, claim: &Claim, limit: usize) -> Result<Vec<String>> {
        // BETWEEN takes its bounds in: one more, for the claim's own entry if it waits already.
        let own = line_key(claim);
        let entries = self.assign_entries(pool, "P#", &own, limit.saturating_add(1)).await?;
        Ok(entries.into_iter().filter(|(key, _)| *key != own).map(|(_, name)| name).take(limit).collect())
    }

    async fn moving(&self, pool: &str) -> Result<Vec<String>> {
        let query = self.assign_query(pool, "M#", "M#~");
        let (mut start, mut ids) = (None, vec![]);
        loop {
            let page = query_page(&query, start).await?;
            for attrs in page.items.unwrap_or_default() {
                if let Some(AttributeValue::S(key)) = attrs.get(ASSIGN_INDEX) {
                    ids.extend(key.strip_prefix("M#").map(str::to_owned));
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(ids);
            }
        }
    }

    async fn list_pools(&self) -> Result<Vec<Pool>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(POOLS_INDEX)
            .key_condition_expression("kind = :pool")
            .expression_attribute_values(":pool", s("pool"));
        let items = query_all(query).await?;
        Ok(items.into_iter().filter_map(|i| if let Item::Pool(p) = i { Some(*p) } else { None }).collect())
    }

    async fn get_pools(&self, pools: &[String]) -> Result<Vec<Pool>> {
        let keys = pools.iter().map(|p| key_attrs(p, &Key::Pool)).collect();
        let items = self.batch_get("the pools", keys, false).await?;
        Ok(items.into_iter().filter_map(|i| if let Item::Pool(p) = i { Some(*p) } else { None }).collect())
    }

    async fn labelled(&self, key: &str, value: &str) -> Result<Vec<String>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("PK = :pk")
            .expression_attribute_values(":pk", s(label_partition(key, value)));
        let items = query_all(query).await?;
        Ok(items.into_iter().filter_map(|i| if let Item::Label(e) = i { Some(e.pool) } else { None }).collect())
    }

    async fn write(&self, pool: &str, mut writes: Vec<Write>) -> Result<()> {
        for w in &writes {
            check_size(pool, w)?;
        }
        match writes.len() {
            0 => Ok(()),
            1 => self.write_one(pool, writes.remove(0)).await,
            _ => self.transact(pool, writes).await,
        }
    }

    async fn events(&self, pool: &str, query: &EventQuery) -> Result<EventPage> {
        if query.limit == 0 {
            return Ok(EventPage::default());
        }
        let mut found = vec![];
        // Below the newest of the shards' stopping points, a shard's events were not all looked at: the page ends
        // there, and the next one starts from it.
        let mut boundary: Option<String> = None;
        for shard in query.shards() {
            let (events, stopped) = self.shard_events(pool, shard, query, query.limit).await?;
            found.extend(events);
            if let Some(stopped) = stopped {
                boundary = boundary.max(Some(stopped));
            }
        }
        if let Some(b) = &boundary {
            found.retain(|(sort, _)| sort >= b);
        }
        found.sort_by(|a, b| b.0.cmp(&a.0));
        let next = if found.len() > query.limit {
            found.truncate(query.limit);
            found.last().map(|(sort, _)| sort.clone())
        } else {
            boundary
        };
        Ok(EventPage { events: found.into_iter().map(|(_, e)| e).collect(), next })
    }

    async fn trail_between(
        &self,
        pool: &str,
        shard: u8,
        after: &str,
        until: &str,
        limit: usize,
    ) -> Result<Vec<(String, Event)>> {
        if after >= until || limit == 0 {
            return Ok(vec![]);
        }
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("PK = :pk AND SK BETWEEN :after AND :until")
            .expression_attribute_values(":pk", s(events_pk(pool, shard)))
            .expression_attribute_values(":after", s(after))
            .expression_attribute_values(":until", s(until))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX));
        let page = query_page(&q, None).await?;
        let mut found = vec![];
        for attrs in page.items.unwrap_or_default() {
            let Some(AttributeValue::S(sort)) = attrs.get("SK").cloned() else { continue };
            // BETWEEN takes its bounds in; the read is of what comes after the first and before the last.
            if sort.as_str() <= after || sort.as_str() >= until {
                continue;
            }
            match read_event(attrs)? {
                Some(event) => found.push((sort, event)),
                None => tracing::warn!(item = sort, "an event of a kind this release does not know, left out"),
            }
        }
        Ok(found)
    }

    async fn last_full_sweep(&self) -> Result<Option<Timestamp>> {
        count("dynamodb:GetItem");
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .consistent_read(true)
            .key("PK", s(SWEEP_KEY))
            .key("SK", s(SWEEP_KEY))
            .send()
            .await
            .map_err(|e| crate::error::aws("dynamodb:GetItem", e))?;
        let Some(AttributeValue::S(at)) = out.item.as_ref().and_then(|i| i.get("lastFullAt")) else { return Ok(None) };
        at.parse::<Timestamp>().map(Some).map_err(|e| Error::Decode { key: SWEEP_KEY.into(), source: Box::new(e) })
    }

    async fn record_full_sweep(&self, previous: Option<Timestamp>, at: Timestamp) -> Result<()> {
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("PK", s(SWEEP_KEY))
            .item("SK", s(SWEEP_KEY))
            .item("lastFullAt", s(at.to_rfc3339()));
        let put = match previous {
            None => put.condition_expression("attribute_not_exists(PK)"),
            Some(p) => put
                .condition_expression("#last = :previous")
                .expression_attribute_names("#last", "lastFullAt")
                .expression_attribute_values(":previous", s(p.to_rfc3339())),
        };
        count("dynamodb:PutItem");
        put.send()
            .await
            .map(drop)
            .map_err(|e| write_error("dynamodb:PutItem", || format!("sweep: last full {previous:?}"), e))
    }
}
