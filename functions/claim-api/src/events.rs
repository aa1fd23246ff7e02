//! A pool's event trail: `GET /pools/{pool}/events`, newest first, a page at a time, for the pool's admins.

use apiary_planner::events::Event;
use apiary_ports::store::{EventQuery, EVENT_RETENTION};
use apiary_ports::Deps;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::input::name;
use crate::pools::get_pool_item;
use crate::Caller;

/// Events a page holds unless `limit` says otherwise.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// The most events a page holds.
pub(crate) const MAX_LIMIT: usize = 200;
/// The longest `page` token accepted (a sort key, encoded).
const MAX_PAGE_LEN: usize = 1024;

/// What the query string asks for.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pub(crate) claim: Option<String>,
    pub(crate) cluster: Option<String>,
    pub(crate) limit: Option<String>,
    pub(crate) page: Option<String>,
}

/// The trail of `pool`. Its admins (and stack admins) read it: it names who did what to every claim. A stack
/// admin may read the trail of a pool that is gone, which tells how it went.
pub(crate) async fn list_events(deps: &Deps, caller: &Caller, pool: &str, params: Params) -> ApiResult {
    name("pool", pool)?;
    let query = query(params)?;
    match get_pool_item(deps, pool).await {
        Ok(p) => caller.may_administer(&p, "read the events of")?,
        Err(e) if e.status == 404 && caller.admin => {}
        Err(e) => return Err(e),
    }
    let page = deps.store.events(pool, &query).await?;
    let oldest = deps.clock.now() - EVENT_RETENTION;
    // The table's TTL removes an expired event within a day or two; until then it is left out here.
    let kept: Vec<&Event> = page.events.iter().filter(|e| e.time >= oldest).collect();
    let next = page.next.filter(|_| kept.len() == page.events.len()).map(|sort| URL_SAFE_NO_PAD.encode(sort));
    let events: Vec<Value> = kept.into_iter().map(view).collect();
    Ok((200, json!({ "pool": pool, "events": events, "nextPage": next })))
}

/// An event as the API shows it: its type, time, and whom and what it concerns.
fn view(e: &Event) -> Value {
    let mut v = json!({ "time": e.time, "type": e.kind.as_str() });
    for (field, value) in
        [("principal", &e.principal), ("claim", &e.claim), ("cluster", &e.cluster), ("message", &e.message)]
    {
        if let Some(value) = value {
            v[field] = json!(value);
        }
    }
    v
}

/// The store's query for `params`, or 400 naming the parameter that does not fit.
fn query(params: Params) -> Result<EventQuery, ApiError> {
    if let Some(claim) = &params.claim {
        name("claim", claim)?;
    }
    if let Some(cluster) = &params.cluster {
        name("cluster", cluster)?;
    }
    let limit = match params.limit.as_deref() {
        None => DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return Err(ApiError::field("limit", format!("{text:?} is not a whole number from 1 to {MAX_LIMIT}"))),
        },
    };
    let before = match params.page.as_deref() {
        None => None,
        Some(token) => Some(decode_page(token).ok_or_else(|| {
            ApiError::field("page", "not a page token: pass the nextPage of the answer before, unchanged")
        })?),
    };
    Ok(EventQuery { claim: params.claim, cluster: params.cluster, before, limit })
}

/// The sort key a `page` token stands for, if it is one: base64url of a key that starts with an RFC 3339 time.
fn decode_page(token: &str) -> Option<String> {
    if token.len() > MAX_PAGE_LEN {
        return None;
    }
    let key = String::from_utf8(URL_SAFE_NO_PAD.decode(token).ok()?).ok()?;
    let (time, _) = key.split_once('#')?;
    chrono::DateTime::parse_from_rfc3339(time).ok()?;
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_token_is_a_sort_key_and_nothing_else() {
        let key = "2026-11-26T00:00:00.000000Z#job/ci-1#3#ClaimAssigned";
        assert_eq!(decode_page(&URL_SAFE_NO_PAD.encode(key)).as_deref(), Some(key));
        for bad in
            ["", "!!", &URL_SAFE_NO_PAD.encode("no time#x"), &URL_SAFE_NO_PAD.encode([0xff, 0xfe]), &"A".repeat(2000)]
        {
            assert_eq!(decode_page(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let bad = |p: Params| query(p).expect_err("refused").message;
        assert!(bad(Params { limit: Some("0".into()), ..Params::default() }).contains("limit"));
        assert!(bad(Params { limit: Some("201".into()), ..Params::default() }).contains("limit"));
        assert!(bad(Params { limit: Some("ten".into()), ..Params::default() }).contains("limit"));
        assert!(bad(Params { claim: Some("Not_A_Name".into()), ..Params::default() }).contains("claim"));
        assert!(bad(Params { cluster: Some("../x".into()), ..Params::default() }).contains("cluster"));
        assert!(bad(Params { page: Some("%%%".into()), ..Params::default() }).contains("page"));
        let q = query(Params { claim: Some("job".into()), ..Params::default() }).expect("fine");
        assert_eq!((q.limit, q.claim.as_deref(), q.shards().len()), (DEFAULT_LIMIT, Some("job"), 1));
    }
}
