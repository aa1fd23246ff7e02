//! The size of an item as DynamoDB counts it, and the refusal of one over its limit before it reaches the table.

use super::*;

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
pub(super) fn value_bytes(v: &Value) -> usize {
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
