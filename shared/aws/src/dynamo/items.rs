//! Items as the table holds them: the domain types' own fields (camelCase) with `rev` at the top level, events
//! with their TTL, and back.

use std::collections::HashMap;

use apiary_planner::events::{Event, EventType};
use apiary_ports::store::{event_shard, event_sort_key, index_key, stored, Item, Key, EVENT_RETENTION};
use apiary_ports::{Error, Result};
use aws_sdk_dynamodb::types::AttributeValue;

use super::*;

/// The attribute the table's TTL reads: when an event may be removed, in seconds since the epoch.
pub(super) const EXPIRES: &str = "expires";

/// `event` as its item in `pool`'s trail.
pub(super) fn encode_event(pool: &str, event: &Event, key: &Key) -> Result<Attrs> {
    let mut attrs: Attrs = serde_dynamo::to_item(event)
        .map_err(|source| Error::Decode { key: event_sort_key(event), source: Box::new(source) })?;
    attrs.extend(key_attrs(pool, key));
    let expires = (event.time + EVENT_RETENTION).timestamp();
    attrs.insert(EXPIRES.into(), AttributeValue::N(expires.to_string()));
    Ok(attrs)
}

pub(super) fn encode(pool: &str, item: &Item) -> Result<Attrs> {
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

pub(super) fn decode(mut attrs: Attrs) -> Result<Option<Item>> {
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

#[cfg(test)]
mod tests {

    use super::*;

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
