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

use apiary_planner::events::{Event, EventType};
use apiary_planner::power::tick::Tick;
use apiary_planner::{Claim, Pool, Snapshot};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, KeysAndAttributes, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;

use apiary_planner::Timestamp;
use apiary_ports::store::{
    check_size, event_shard, event_sort_key, index_key, label_partition, line_key, partition, spare_place, stored,
    Cond, EventPage, EventQuery, Item, Key, Store, Write, EVENT_RETENTION,
};
use apiary_ports::{Error, Result};

use crate::calls::count;

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

/// The attribute the table's TTL reads: when an event may be removed, in seconds since the epoch.
const EXPIRES: &str = "expires";

/// `event` as its item in `pool`'s trail.
fn encode_event(pool: &str, event: &Event, key: &Key) -> Result<Attrs> {
    let mut attrs: Attrs = serde_dynamo::to_item(event)
        .map_err(|source| Error::Decode { key: event_sort_key(event), source: Box::new(source) })?;
    attrs.extend(key_attrs(pool, key));
    let expires = (event.time + EVENT_RETENTION).timestamp();
    attrs.insert(EXPIRES.into(), AttributeValue::N(expires.to_string()));
    Ok(attrs)
}

fn encode(pool: &str, item: &Item) -> Result<Attrs> {
    let key = item.key();
    let encoded = match item {
        Item::Pool(p) => serde_dynamo::to_item(stored(p).as_ref()),
        Item::Cluster(c) => serde_dynamo::to_item(c.as_ref()),
        Item::Claim(c) => serde_dynamo::to_item(c.as_ref()),
        Item::Lease(l) => serde_dynamo::to_item(l),
        Item::Tick(t) => serde_dynamo::to_item(t.as_ref()),
        Item::Profile(p) => serde_dynamo::to_item(p.as_ref()),
        Item::Label(e) => serde_dynamo::to_item(e),
        Item::ClaimName(c) => serde_dynamo::to_item(c),
        Item::Notified(n) => serde_dynamo::to_item(n),
    };
    let mut attrs: Attrs = encoded.map_err(|source| Error::Decode { key: sk(&key), source: Box::new(source) })?;
    attrs.extend(key_attrs(pool, &key));
    if let Item::Pool(_) = item {
        attrs.insert("kind".into(), s("pool"));
    }
    if let Some(key) = index_key(item) {
        attrs.insert(ASSIGN_INDEX.into(), s(key));
    }
    Ok(attrs)
}

fn decode(mut attrs: Attrs) -> Result<Option<Item>> {
    let sk = match attrs.get("SK") {
        Some(AttributeValue::S(sk)) => sk.clone(),
        _ => return Ok(None),
    };
    // The table's own attributes are not the item's: left in, a type that keeps the fields it does not know
    // ([`apiary_planner::Later`]) would take them for a later release's.
    for own in ["PK", "SK", "kind", ASSIGN_INDEX] {
        attrs.remove(own);
    }
    let bad = |source: serde_dynamo::Error| Error::Decode { key: sk.clone(), source: Box::new(source) };
    let item = if sk == "POOL" {
        Item::Pool(Box::new(serde_dynamo::from_item(attrs).map_err(bad)?))
    } else if sk.starts_with("CLUSTER#") {
        Item::Cluster(Box::new(serde_dynamo::from_item(attrs).map_err(bad)?))
    } else if sk.starts_with("CLAIM#") {
        Item::Claim(Box::new(serde_dynamo::from_item(attrs).map_err(bad)?))
    } else if sk.starts_with("NAME#") {
        Item::Lease(serde_dynamo::from_item(attrs).map_err(bad)?)
    } else if sk == "TICK" {
        Item::Tick(Box::new(serde_dynamo::from_item(attrs).map_err(bad)?))
    } else if sk == "PROFILE" {
        Item::Profile(Box::new(serde_dynamo::from_item(attrs).map_err(bad)?))
    } else if sk.starts_with("POOL#") {
        Item::Label(serde_dynamo::from_item(attrs).map_err(bad)?)
    } else if sk == "CLAIMNAME" {
        Item::ClaimName(serde_dynamo::from_item(attrs).map_err(bad)?)
    } else if sk == "NOTIFIED" {
        Item::Notified(serde_dynamo::from_item(attrs).map_err(bad)?)
    } else {
        return Ok(None);
    };
    Ok(Some(item))
}

/// The attributes `item` of `pool` is stored as, as a write puts them: what the release fixtures keep
/// (`shared/aws/tests/releases.rs`).
pub fn stored_item(pool: &str, item: &Item) -> Result<HashMap<String, AttributeValue>> {
    encode(pool, item)
}

/// The item stored as `attrs`, as a read decodes it (`None`: an item of no kind Apiary reads).
pub fn read_item(attrs: HashMap<String, AttributeValue>) -> Result<Option<Item>> {
    decode(attrs)
}

/// `event` of `pool`'s trail as stored, as a write appends it.
pub fn stored_event(pool: &str, event: &Event) -> Result<HashMap<String, AttributeValue>> {
    encode_event(pool, event, &Key::Event(event_shard(event), event_sort_key(event)))
}

/// The event stored as `attrs`, as a read of the trail decodes it; `None` for a kind of event this release does
/// not know (a later release's, told during an update): a page of the trail leaves it out.
pub fn read_event(attrs: HashMap<String, AttributeValue>) -> Result<Option<Event>> {
    let text = |name: &str| match attrs.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    };
    let (sort, kind) = (text("SK"), text("type"));
    match serde_dynamo::from_item(attrs) {
        Ok(event) => Ok(Some(event)),
        Err(_) if serde_json::from_value::<EventType>(serde_json::Value::String(kind)).is_err() => Ok(None),
        Err(source) => Err(Error::Decode { key: sort, source: Box::new(source) }),
    }
}

/// A condition expression with its names and values (none for [`Cond::Any`]).
struct Condition {
    expression: Option<String>,
    names: HashMap<String, String>,
    values: Attrs,
}

/// The condition expression of `cond`: each must hold exactly when [`Cond::holds`] does (`tests/store.rs` checks
/// every one against the emulator).
fn condition(cond: &Cond) -> Condition {
    let n = |pairs: &[(&str, &str)]| pairs.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect();
    let rev = |r: u64| ("#rev", AttributeValue::N(r.to_string()));
    let (expression, names, values): (&str, HashMap<String, String>, Vec<(&str, AttributeValue)>) = match cond {
        Cond::Absent => ("attribute_not_exists(PK)", HashMap::new(), vec![]),
        Cond::Rev(r) => ("#rev = :rev", n(&[("#rev", "rev")]), vec![(":rev", rev(*r).1)]),
        // Cond::holds: at this revision, unclaimed, and Running as Cluster::is_running means it (installed too).
        Cond::RevUnclaimedRunning(r) => (
            "#rev = :rev AND attribute_not_exists(#claim) AND attribute_exists(#installed) AND #power = :running",
            n(&[("#rev", "rev"), ("#claim", "claim"), ("#installed", "installedAt"), ("#power", "powerState")]),
            vec![(":rev", rev(*r).1), (":running", s("Running"))],
        ),
        Cond::RevPending(r) => (
            "#rev = :rev AND attribute_not_exists(#cluster)",
            n(&[("#rev", "rev"), ("#cluster", "cluster")]),
            vec![(":rev", rev(*r).1)],
        ),
        Cond::Holder(h) => ("#holder = :holder", n(&[("#holder", "holder")]), vec![(":holder", s(h.clone()))]),
        Cond::Any => ("", HashMap::new(), vec![]),
    };
    Condition {
        expression: (!expression.is_empty()).then(|| expression.to_owned()),
        names,
        values: values.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    }
}

fn opt<T>(m: HashMap<String, T>) -> Option<HashMap<String, T>> {
    (!m.is_empty()).then_some(m)
}

impl DynamoStore {
    /// The store over `table`.
    pub fn new(client: Client, table: String) -> Self {
        Self { client, table }
    }

    async fn write_one(&self, pool: &str, write: Write) -> Result<()> {
        match write {
            Write::Check(..) => self.transact(pool, vec![write]).await,
            Write::Append(ref event) => {
                count("dynamodb:PutItem");
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(encode_event(pool, event, &write.key())?))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| crate::error::aws("dynamodb:PutItem", e))
            }
            Write::Put(item, cond) => {
                let c = condition(&cond);
                count("dynamodb:PutItem");
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(encode(pool, &item)?))
                    .set_condition_expression(c.expression)
                    .set_expression_attribute_names(opt(c.names))
                    .set_expression_attribute_values(opt(c.values))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| write_error("dynamodb:PutItem", || format!("{pool}/{}: {cond:?}", sk(&item.key())), e))
            }
            Write::Delete(key, cond) => {
                let c = condition(&cond);
                count("dynamodb:DeleteItem");
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(key_attrs(pool, &key)))
                    .set_condition_expression(c.expression)
                    .set_expression_attribute_names(opt(c.names))
                    .set_expression_attribute_values(opt(c.values))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| write_error("dynamodb:DeleteItem", || format!("{pool}/{}: {cond:?}", sk(&key)), e))
            }
        }
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

    async fn transact(&self, pool: &str, writes: Vec<Write>) -> Result<()> {
        let mut items = Vec::with_capacity(writes.len());
        for w in &writes {
            let item = match w {
                Write::Put(item, cond) => {
                    let c = condition(cond);
                    let put = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(encode(pool, item)?))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().put(put).build()
                }
                Write::Delete(key, cond) => {
                    let c = condition(cond);
                    let delete = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(pool, key)))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().delete(delete).build()
                }
                Write::Append(event) => {
                    let put = Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(encode_event(pool, event, &w.key())?))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().put(put).build()
                }
                Write::Check(key, cond) => {
                    let c = condition(cond);
                    let check = ConditionCheck::builder()
                        .table_name(&self.table)
                        .set_key(Some(key_attrs(pool, key)))
                        .set_condition_expression(c.expression)
                        .set_expression_attribute_names(opt(c.names))
                        .set_expression_attribute_values(opt(c.values))
                        .build()
                        .map_err(|e| crate::error::build("dynamodb:TransactWriteItems", e))?;
                    TransactWriteItem::builder().condition_check(check).build()
                }
            };
            items.push(item);
        }
        count("dynamodb:TransactWriteItems");
        match self.client.transact_write_items().set_transact_items(Some(items)).send().await {
            Ok(_) => Ok(()),
            Err(SdkError::ServiceError(se)) if lost_condition(se.err()) => {
                Err(Error::Conflict(format!("{pool}: transaction of {} writes cancelled", writes.len())))
            }
            Err(e) => {
                let throttled = matches!(&e, SdkError::ServiceError(se) if throttled(se.err()));
                let mut err = crate::error::aws("dynamodb:TransactWriteItems", e);
                if let Error::Service { retryable, .. } = &mut err {
                    *retryable |= throttled;
                }
                Err(err)
            }
        }
    }
}

/// A failed single write: a lost condition is a [`Error::Conflict`] described by `what`, anything else an AWS error.
fn write_error<E, R>(op: &'static str, what: impl FnOnce() -> String, e: SdkError<E, R>) -> Error
where
    E: std::error::Error + Send + Sync + 'static + aws_smithy_types::error::metadata::ProvideErrorMetadata,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match &e {
        SdkError::ServiceError(se) if se.err().code() == Some("ConditionalCheckFailedException") => {
            Error::Conflict(what())
        }
        _ => crate::error::aws(op, e),
    }
}

/// A transaction cancelled because a condition failed (or another transaction held an item: also a lost race).
fn lost_condition(err: &TransactWriteItemsError) -> bool {
    match err {
        TransactWriteItemsError::TransactionCanceledException(e) => {
            e.cancellation_reasons()
                .iter()
                .any(|r| matches!(r.code(), Some("ConditionalCheckFailed") | Some("TransactionConflict")))
                || e.cancellation_reasons().is_empty()
        }
        _ => false,
    }
}

/// A transaction cancelled because an item's partition was past its throughput (a burst of claims on one pool):
/// nothing was written, and the same transaction may be tried again.
fn throttled(err: &TransactWriteItemsError) -> bool {
    match err {
        TransactWriteItemsError::TransactionCanceledException(e) => e.cancellation_reasons().iter().any(|r| {
            matches!(
                r.code(),
                Some("ThrottlingError") | Some("ProvisionedThroughputExceeded") | Some("RequestLimitExceeded")
            )
        }),
        _ => false,
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

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::error::TransactionCanceledException;
    use aws_sdk_dynamodb::types::CancellationReason;

    use super::*;

    fn cancelled(codes: &[&str]) -> TransactWriteItemsError {
        let reasons = codes.iter().map(|c| CancellationReason::builder().code(*c).build()).collect();
        TransactWriteItemsError::TransactionCanceledException(
            TransactionCanceledException::builder().set_cancellation_reasons(Some(reasons)).build(),
        )
    }

    /// DynamoDB names each item's reason, `None` for the items that were fine.
    #[test]
    fn a_cancelled_transaction_is_a_lost_race_or_a_throttle_by_its_reasons() {
        let race = cancelled(&["None", "ConditionalCheckFailed"]);
        assert!(lost_condition(&race) && !throttled(&race));
        let busy = cancelled(&["ThrottlingError", "None"]);
        assert!(throttled(&busy) && !lost_condition(&busy));
        let invalid = cancelled(&["ValidationError"]);
        assert!(!throttled(&invalid) && !lost_condition(&invalid));
    }

    /// The tick item's looks go to the table as numbers (whole seconds), and one written as text reads back.
    #[test]
    fn the_tick_items_looks_are_numbers_in_the_table_and_text_ones_still_read() {
        let at = Timestamp::from_timestamp(1_795_683_614, 250_000_000).expect("time");
        let tick = Tick { rev: 2, due: [("ci-abcde".to_string(), at)].into(), ..Tick::default() };
        let mut attrs = encode("ci", &Item::Tick(Box::new(tick))).expect("encode");
        let Some(AttributeValue::M(due)) = attrs.get("due") else { panic!("due is a map: {attrs:?}") };
        assert_eq!(due.get("ci-abcde"), Some(&AttributeValue::N("1795683614".into())));
        let Ok(Some(Item::Tick(back))) = decode(attrs.clone()) else { panic!("decodes") };
        assert_eq!(back.due["ci-abcde"].timestamp(), 1_795_683_614);
        let text = AttributeValue::S("2026-11-26T09:00:14.250Z".into());
        attrs.insert("due".into(), AttributeValue::M([("ci-abcde".to_string(), text)].into()));
        let Ok(Some(Item::Tick(old))) = decode(attrs) else { panic!("a text time decodes") };
        assert_eq!(old.due["ci-abcde"].timestamp_subsec_millis(), 250);
    }
}
