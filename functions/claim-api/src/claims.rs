//! Claims: make one (assigned at once when a Running spare is free), read it (optionally waiting until it is
//! Ready), change its lifetime or who shares it, release it, hibernate or resume its cluster, list them. A claim
//! is its owner's and its subjects' to use, and its pool's admins'.
//!
//! Making a claim reads what it needs and nothing more: the pool item, the claims waiting ahead of it (up to a
//! page), the oldest spare the pool item names (or, once it met another claim, one page of its spares from the
//! partition's sparse index) and the spare it picks; never the whole partition. So its cost follows the claims,
//! not the pool's size, a lone claim gets the oldest spare, and concurrent claims pick different spares.

use std::time::Duration;

use apiary_planner::duration::parse as parse_duration;
use apiary_planner::events::{self, Event, EventType};
use apiary_planner::validate::limits::MAX_DURATION_LEN;
use apiary_planner::validate::{validate_claim_lifetime, validate_lifetime, validate_subjects};
use apiary_planner::waiting;
use apiary_planner::{Action, Claim, ClaimPhase, Cluster, DesiredPower, GoDuration, Pool, Snapshot};
use apiary_ports::messages::PowerMessage;
use apiary_ports::store::{draw, spare_key, writes_with_events, ClaimName, Cond, Item, Key, Write, SPREAD};
use apiary_ports::{on_conflict, retry};
use apiary_ports::{Deps, Error as StoreError};
use lambda_http::Body;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::input::{name, parse_body};
use crate::pools::{get_cluster_item, get_pool_item, read_pool, reconcile_coalesced};
use crate::view::claim_view;
use crate::{Caller, MAX_WAIT};

/// Spares a claim reads from the pool's index at once: enough to spread concurrent claims over, and one small
/// page whatever the pool's size.
const SPARES_PAGE: usize = 16;
/// Spares a claim may lose to other claims (each loss means another claim was served) before it waits in line.
const CLAIM_TRIES: u32 = 64;
/// Pages of spares, each refused whole, a claim may read (up to 17 reads each) before it waits in line.
const LOST_PAGES: u32 = 8;
/// Writes a claim may lose in all before it gives up (503, try again): past its racing it writes only its place in
/// line, which loses only to a claim of its name, so a loss past this many is something no retry here mends.
const MAX_WRITES: u32 = CLAIM_TRIES * 2;
/// How long a claim may race for a spare before it waits in line (202) instead: never a 503 under contention.
/// Its answer must come within API Gateway's 29 s; the pending write that follows takes a moment.
const CLAIM_BUDGET: chrono::TimeDelta = chrono::TimeDelta::seconds(20);
/// A claim that lost a spare waits up to this many milliseconds per loss (at most four) before its next try.
const JITTER_MS: u64 = 20;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimRequest {
    /// How long the claim may hold its cluster (capped by the pool's claimLifetime.maximum).
    #[serde(default)]
    lifetime: Option<String>,
    /// Who may use the claim beside its owner.
    #[serde(default)]
    subjects: Vec<String>,
}

/// A change to a held claim (`PATCH`): its lifetime, who shares it, or both.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimChange {
    #[serde(default)]
    lifetime: Option<String>,
    #[serde(default)]
    subjects: Option<Vec<String>>,
}

/// A claim is its owner's and its subjects', and its pool's admins': the owner keeps it even after leaving the
/// pool's claimants, and so does a subject who is none.
pub(crate) fn authorize(caller: &Caller, pool: &Pool, claim: &Claim) -> Result<(), ApiError> {
    if claim.shared_with(&caller.arn) || caller.rights(pool).administer {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("claim {} belongs to another principal", claim.name)))
    }
}

/// `subjects` checked as a claim's (`field` names them in an error).
fn checked_subjects(field: &str, subjects: Vec<String>) -> Result<Vec<String>, ApiError> {
    validate_subjects(field, &subjects)?;
    Ok(subjects)
}

pub(crate) async fn list_claims(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    let snap = read_pool(deps, pool).await?;
    let rights = caller.may_see(&snap.pool)?;
    let claims: Vec<Value> = snap
        .claims
        .iter()
        .filter(|c| rights.administer || c.shared_with(&caller.arn))
        .map(|c| {
            claim_view(&snap.pool, c, c.cluster.as_ref().and_then(|id| snap.clusters.iter().find(|k| &k.id == id)))
        })
        .collect();
    Ok((200, json!({ "pool": pool, "claims": claims })))
}

pub(crate) async fn put_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, body: &Body) -> ApiResult {
    name("pool", pool)?;
    name("claim", claim)?;
    let request: ClaimRequest = parse_body(body, Some(ClaimRequest::default()))?;
    let terms = Terms::checked(request.lifetime, request.subjects)?;
    let p = get_pool_item(deps, pool).await?;
    caller.may_claim(&p)?;
    if p.deletion_requested_at.is_some() {
        return Err(ApiError::conflict(format!("pool {pool} is being deleted")));
    }
    let made = make_claim(deps, caller, &p, claim, &terms, None).await?;
    made.ok_or_else(|| ApiError::conflict(format!("claim {claim} was neither assigned nor stored")))
}

/// What a new claim asks for besides its pool: its lifetime and who shares it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Terms {
    lifetime: Option<GoDuration>,
    subjects: Vec<String>,
}

impl Terms {
    /// A claim request's `lifetime` and `subjects`, each checked (400 naming it).
    pub(crate) fn checked(lifetime: Option<String>, subjects: Vec<String>) -> Result<Self, ApiError> {
        let lifetime = match lifetime {
            Some(text) => {
                validate_lifetime("lifetime", &text)?;
                Some(GoDuration::new(text))
            }
            None => None,
        };
        Ok(Self { lifetime, subjects: checked_subjects("subjects", subjects)? })
    }
}

/// How a claim made by selector holds its name, which is the stack's: its labels, the condition its name's entry
/// is written on (absent, or still naming the pool of a claim no longer there), and whether it may wait in the
/// pool it tries (else a pool with no spare to give at once answers `None`, and the selector tries the next).
pub(crate) struct ByLabels<'a> {
    pub(crate) selector: &'a apiary_planner::select::Labels,
    pub(crate) write_entry_if: Cond,
    pub(crate) may_wait: bool,
}

/// Makes claim `claim` of `caller` in pool `p` (which the caller may claim from): assigned a Running spare at
/// once when one is free and no older claim waits, else stored Pending for the reconcile to serve in order. A
/// claim made by selector also writes its name's entry ([`ByLabels`]), and answers `None` instead of waiting where it
/// may not. A claim that exists already is answered as it was made.
pub(crate) async fn make_claim(
    deps: &Deps,
    caller: &Caller,
    p: &Pool,
    claim: &str,
    terms: &Terms,
    mut by_labels: Option<ByLabels<'_>>,
) -> Result<Option<(u16, Value)>, ApiError> {
    let pool = p.name.as_str();
    let started = deps.clock.now();
    let (mut tries, mut lost_pages) = (0u32, 0u32);
    loop {
        let now = deps.clock.now();
        // Made when it arrived, whatever its tries cost: claims wait in line by arrival.
        let mut new = Claim::new(claim, caller.arn.clone(), started);
        new.lifetime = terms.lifetime.clone();
        new.subjects = terms.subjects.clone();
        new.selector = by_labels.as_ref().map(|n| n.selector.clone());
        // 1. Pick: past its budget a claim stops racing and waits in line: the reconcile serves it in order.
        let racing = tries < CLAIM_TRIES && lost_pages < LOST_PAGES && now - started < CLAIM_BUDGET;
        let spare = if racing { pick_spare(deps, p, &new, tries).await? } else { Pick::Wait };
        // 2. The writes: the claim with its spare, or the claim waiting.
        let (mut writes, assigned) = match spare {
            // Every spare of its page went to other claims: a lost try, like a lost transaction.
            Pick::AllTaken => {
                tries += 1;
                lost_pages += 1;
                backoff(deps, tries).await;
                continue;
            }
            Pick::Spare(cluster) => {
                let (writes, assigned) = assignment(p, *cluster, new.clone(), now)?;
                (writes, Some(assigned))
            }
            // A claim by selector that may not wait here tries the next pool.
            Pick::Wait if by_labels.as_ref().is_some_and(|n| !n.may_wait) => return Ok(None),
            Pick::Wait => {
                let created = Write::Append(events::claim_created(&new));
                (vec![Write::Put(Item::Claim(Box::new(new.clone())), Cond::Absent), created], None)
            }
        };
        if let Some(n) = &by_labels {
            writes.push(name_entry(claim, pool, caller, &new, n));
        }
        // 3. Write, all or nothing.
        let notices = apiary_ports::notify::to_notify(&writes);
        match deps.store.write(pool, writes).await {
            Ok(()) => apiary_ports::notify::after_write(deps, pool, &p.spec, &notices).await,
            Err(StoreError::Conflict(_)) => {
                // The claim exists already (a PUT again), or another claim took the spare first: try the next.
                if let Some(existing) = made_before(deps, caller, p, claim, &mut by_labels).await? {
                    return Ok(Some(existing));
                }
                if tries >= MAX_WRITES {
                    return Err(ApiError::busy(format!("claim {claim} kept losing its writes; try again")));
                }
                // The first try is on the oldest spare, which every claim of a burst tries: losing it says only
                // that others claim too, and the next try spreads at once.
                if tries > 0 {
                    backoff(deps, tries + 1).await;
                }
                tries += 1;
                continue;
            }
            // A throttled partition (a burst past its write units) or a lost answer, past the SDK's own retries:
            // nothing or the whole transaction landed, so trying again is safe while the claim has time.
            Err(e) if e.is_retryable() && deps.clock.now() - started < CLAIM_BUDGET => {
                tracing::warn!(pool, claim, error = %e, "claim write failed; trying again");
                tries += 1;
                backoff(deps, tries).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        // 4. Answer: 201 with its cluster, or 202 to wait.
        let made = Made { claim: new, assigned, by_labels: by_labels.is_some(), tries, now };
        return stored(deps, caller, p, made).await.map(Some);
    }
}

/// The entry that holds a claim by labels' name for pool `pool`, written with the claim on its condition.
fn name_entry(claim: &str, pool: &str, caller: &Caller, new: &Claim, n: &ByLabels<'_>) -> Write {
    let entry = ClaimName {
        name: claim.to_owned(),
        holder: pool.to_owned(),
        owner: caller.arn.clone(),
        created_at: Some(new.created_at),
    };
    Write::Put(Item::ClaimName(entry), n.write_entry_if.clone())
}

/// After a lost write: the claim's answer when it was made already (by this request sent before, or under its
/// name by labels), else `None` to try again. A claim by labels learns its name's entry's new condition.
async fn made_before(
    deps: &Deps,
    caller: &Caller,
    p: &Pool,
    claim: &str,
    by_labels: &mut Option<ByLabels<'_>>,
) -> Result<Option<(u16, Value)>, ApiError> {
    let pool = p.name.as_str();
    let Some(n) = by_labels else {
        return match deps.store.get_claim(pool, claim).await? {
            Some(existing) => existing_claim(deps, caller, p, existing).await.map(Some),
            None => Ok(None),
        };
    };
    // Its name may have been taken meanwhile, by this claim sent again or by another.
    match crate::names::name_holder(deps, claim).await? {
        crate::names::NameHolder::Claim(holder, existing) => {
            return existing_claim(deps, caller, &holder, *existing).await.map(Some);
        }
        crate::names::NameHolder::Nobody { write_entry_if } => n.write_entry_if = write_entry_if,
    }
    // A claim made at this pool's own path under that name: this pool cannot hold this one.
    if deps.store.get_claim(pool, claim).await?.is_some() {
        return Err(ApiError::conflict(format!(
            "pool {pool} holds a claim {claim} made at its own path: a claim by labels needs a name no claim of the \
             pool it goes to has"
        )));
    }
    Ok(None)
}

/// A claim as its write landed: with its spare's cluster when it took one.
struct Made {
    claim: Claim,
    assigned: Option<(Claim, Cluster)>,
    by_labels: bool,
    tries: u32,
    now: apiary_planner::Timestamp,
}

/// The answer to a claim just stored: 201 with its cluster, or 202 with when to look again. Either way the pool has
/// work (resume the next spare, or find this claim a cluster): a reconcile, once per window.
async fn stored(deps: &Deps, caller: &Caller, p: &Pool, made: Made) -> Result<(u16, Value), ApiError> {
    let pool = p.name.as_str();
    let (stored, cluster) = match made.assigned {
        Some((claim, cluster)) => {
            deps.metrics.emit(apiary_ports::metrics::claim_assigned(&deps.config.stack, pool, &claim, made.now));
            (claim, Some(cluster))
        }
        None => (made.claim, None),
    };
    reconcile_coalesced(deps, pool, "claim").await?;
    tracing::info!(
        pool,
        claim = stored.name,
        owner = %caller.arn,
        cluster = cluster.as_ref().map(|c| c.id.as_str()),
        selector = made.by_labels,
        tries = made.tries,
        "claim stored"
    );
    let view = claim_view(p, &stored, cluster.as_ref());
    Ok(match cluster {
        Some(_) => (201, view),
        // Made while older claims wait for the pool's tick: the first look can wait for it too.
        None => (202, with_hint(view, hint(deps, p, &stored).await)),
    })
}

/// A jittered pause after a claim's `tries`-th lost try: up to [`JITTER_MS`] per loss, at most four.
async fn backoff(deps: &Deps, tries: u32) {
    let jitter = deps.clock.seed() % (JITTER_MS * u64::from(tries.min(4)));
    deps.clock.sleep(Duration::from_millis(jitter)).await;
}

/// What a claim's try found.
enum Pick {
    /// A spare to take.
    Spare(Box<Cluster>),
    /// No spare, or older claims waiting (they come first, FIFO, and the reconcile serves them in order).
    Wait,
    /// Spares, but every one of its page refused (taken by another claim since the index was read): try again.
    AllTaken,
}

/// A spare for `claim` on its `tries`-th try, or why there is none.
///
/// Claims already waiting in line come first (seed 000's FIFO): the reconcile gives them the oldest spares. So a
/// claim counts the claims ahead of it (up to a page) and takes a spare only while the pool has more spares than
/// that, leaving the oldest to them; one claim waiting never makes the claims behind it wait while spares remain.
///
/// A claim that meets no other takes the oldest Running spare still free, as seed 000 orders them and the planner
/// assigns them: the first of the pool's `nextSpares` (the plan's list, oldest first) whose item, read strongly,
/// is still a spare ([`oldest_named`]). Claims that lost their first try to another claim, or that
/// found others waiting, spread over the spares instead of racing for the next oldest: each reads one page of the
/// pool's index from a place drawn from its name and try, and takes one of that page drawn the same way, so a
/// burst of N claims on N spares costs about 2N transactions (the first try of each, on the oldest, then about one
/// each), not N².
async fn pick_spare(deps: &Deps, pool: &Pool, claim: &Claim, tries: u32) -> Result<Pick, ApiError> {
    let ahead = deps.store.ahead(&pool.name, claim, SPARES_PAGE).await?.len();
    if ahead >= SPARES_PAGE {
        // A line longer than a page of spares: the reconcile serves it, and this claim behind it.
        return Ok(Pick::Wait);
    }
    if tries == 0 && ahead == 0 {
        if let Some(oldest) = oldest_named(deps, pool).await? {
            return Ok(Pick::Spare(Box::new(oldest)));
        }
    }
    let drawn = draw(&format!("{}/{tries}", claim.name));
    let place = (drawn % u64::from(SPREAD)) as u16;
    let ids = deps.store.spares(&pool.name, place, SPARES_PAGE).await?;
    // A page not full is every spare the pool has: none left once each claim ahead has its own.
    if ids.len() <= ahead {
        return Ok(Pick::Wait);
    }
    // The oldest spares are the claims' ahead (as the pool's status names them): the others are free to take.
    let theirs = &pool.status.next_spares[..ahead.min(pool.status.next_spares.len())];
    let free: Vec<&String> = ids.iter().filter(|id| !theirs.contains(id)).collect();
    if free.is_empty() {
        return Ok(Pick::AllTaken);
    }
    let first = ((drawn >> 16) % free.len() as u64) as usize;
    for k in 0..free.len() {
        let id = free[(first + k) % free.len()];
        // The index says spare; the item, read strongly, and the pool's rules decide.
        if let Some(cluster) = get_cluster_item(deps, &pool.name, id).await? {
            if pool.spec.may_assign(&cluster) {
                return Ok(Pick::Spare(Box::new(cluster)));
            }
        }
    }
    Ok(Pick::AllTaken)
}

/// The first of `pool`'s `nextSpares` still a spare, read strongly: the oldest alone (a lone claim finds it free,
/// one read unit), then, when it is taken (the list is as old as the last reconcile, and a burst has begun), the
/// others in one request.
async fn oldest_named(deps: &Deps, pool: &Pool) -> Result<Option<Cluster>, ApiError> {
    let free = |c: &Cluster| spare_key(c).is_some() && pool.spec.may_assign(c);
    let Some((first, rest)) = pool.status.next_spares.split_first() else { return Ok(None) };
    if let Some(cluster) = get_cluster_item(deps, &pool.name, first).await?.filter(free) {
        return Ok(Some(cluster));
    }
    if rest.is_empty() {
        return Ok(None);
    }
    let keys: Vec<Key> = rest.iter().map(|id| Key::Cluster(id.clone())).collect();
    let read = deps.store.get_many_strongly(&pool.name, &keys).await?;
    let mut named: Vec<Cluster> = read
        .into_iter()
        .filter_map(|item| match item {
            Item::Cluster(c) => Some(*c),
            _ => None,
        })
        .filter(free)
        .collect();
    named.sort_by_key(|c| rest.iter().position(|id| *id == c.id));
    Ok(named.into_iter().next())
}

/// The writes assigning `cluster` to the new `claim` at `at`, computed by the planner's own meaning of an
/// assignment ([`writes_for`]): the cluster on condition that it is still at its revision, unclaimed and Running,
/// the claim on condition that it does not exist yet. Also the claim and cluster as written.
fn assignment(
    pool: &Pool,
    cluster: Cluster,
    claim: Claim,
    at: apiary_planner::Timestamp,
) -> Result<(Vec<Write>, (Claim, Cluster)), ApiError> {
    let action = Action::AssignClaim {
        claim: claim.name.clone(),
        claim_rev: claim.rev,
        cluster: cluster.id.clone(),
        cluster_rev: cluster.rev,
        at,
    };
    let created = events::claim_created(&claim);
    let owner = claim.owner.clone();
    let mut snap = Snapshot { pool: pool.clone(), clusters: vec![cluster], claims: vec![claim], leases: vec![] };
    let mut writes = writes_with_events(&mut snap, &action, at)?;
    for w in &mut writes {
        match w {
            Write::Put(Item::Claim(_), cond) => *cond = Cond::Absent,
            // The claimant's request made the claim and got it its cluster.
            Write::Append(e) => e.principal = Some(owner.clone()),
            _ => {}
        }
    }
    writes.push(Write::Append(created));
    let (Some(claim), Some(cluster)) = (snap.claims.pop(), snap.clusters.pop()) else {
        return Err(StoreError::Conflict("assignment lost its items".into()).into());
    };
    Ok((writes, (claim, cluster)))
}

/// The answer to a PUT of a claim that exists: the same as when it was made, if the caller made it.
pub(crate) async fn existing_claim(deps: &Deps, caller: &Caller, pool: &Pool, existing: Claim) -> ApiResult {
    if existing.owner != caller.arn {
        return Err(ApiError::conflict(format!("claim {} exists and belongs to another principal", existing.name)));
    }
    let cluster = match &existing.cluster {
        Some(id) => get_cluster_item(deps, &pool.name, id).await?,
        None => None,
    };
    // The PUT that stored it may have been answered with an error because the reconcile it asks for (to find the
    // claim a cluster, or to resume the pool's next spare) could not be asked for, and nothing else may ask before
    // the sweep's next full pass. Asking again costs a message, once per window.
    reconcile_coalesced(deps, &pool.name, "claim").await?;
    let view = claim_view(pool, &existing, cluster.as_ref());
    if cluster.is_some() {
        return Ok((201, view));
    }
    Ok((202, with_hint(view, hint(deps, pool, &existing).await)))
}

pub(crate) async fn get_claim_item(deps: &Deps, pool: &str, claim: &str) -> Result<Claim, ApiError> {
    name("claim", claim)?;
    let found = deps.store.get_claim(pool, claim).await?;
    found.ok_or_else(|| ApiError::not_found(format!("claim {claim} does not exist in pool {pool}")))
}

/// When the claimant of `claim` should look at it again ([`waiting::hint`]), as `pool` (the pool item as read) and
/// its tick item say now: the tick item is read (GetItem, as every other read of the claim API) only where the
/// pool's status says nothing but the tick can bring the claim a cluster. The hint is advice: a read that fails
/// (past the SDK's retries) leaves the answer without it, and the claimant looks on its own gaps.
async fn hint(deps: &Deps, pool: &Pool, claim: &Claim) -> Option<Duration> {
    if !waiting::tick_brings(claim, &pool.status) {
        return None;
    }
    let tick = match deps.store.get_tick(&pool.name).await {
        Ok(tick) => tick,
        Err(e) => {
            tracing::warn!(pool = %pool.name, claim = %claim.name, error = %e, "tick item not read; no hint");
            return None;
        }
    };
    waiting::hint(deps.clock.now(), claim, pool, tick.as_ref())
}

/// A claim's `view` with `retryAfterSeconds`, when there is a `hint`: in seconds, to the millisecond.
fn with_hint(mut view: Value, hint: Option<Duration>) -> Value {
    if let Some(after) = hint {
        view["retryAfterSeconds"] = json!(after.as_millis() as f64 / 1000.0);
    }
    view
}

pub(crate) async fn get_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, wait: Option<&str>) -> ApiResult {
    let wait = match wait {
        None => Duration::ZERO,
        Some(text) if text.len() > MAX_DURATION_LEN => {
            return Err(ApiError::field("wait", format!("at most {MAX_DURATION_LEN} characters")));
        }
        Some(text) => match parse_duration(text).ok().and_then(|d| d.to_std().ok()) {
            Some(d) if d <= MAX_WAIT => d,
            Some(_) => return Err(ApiError::field("wait", format!("at most {}s", MAX_WAIT.as_secs()))),
            None => return Err(ApiError::field("wait", format!("{text:?} is not a duration like 20s"))),
        },
    };
    let p = get_pool_item(deps, pool).await?;
    let deadline = deps.clock.now() + chrono::TimeDelta::from_std(wait).unwrap_or_default();
    // The looks a claimant takes ([`waiting`]), inside this one request.
    let mut poll = waiting::FIRST;
    loop {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &p, &c)?;
        let cluster = match &c.cluster {
            Some(id) => get_cluster_item(deps, pool, id).await?,
            None => None,
        };
        let hint = hint(deps, &p, &c).await;
        let now = deps.clock.now();
        if c.phase(cluster.as_ref()) == ClaimPhase::Ready || now >= deadline {
            return Ok((200, with_hint(claim_view(&p, &c, cluster.as_ref()), hint)));
        }
        deps.clock.sleep(hint.unwrap_or(poll).min((deadline - now).to_std().unwrap_or_default())).await;
        poll = waiting::next(poll);
    }
}

/// Changes a held claim's lifetime (its owner, a subject or a pool admin; longer or shorter, at most the pool's
/// `claimLifetime.maximum`) or its subjects (the owner or a pool admin). 200 with the claim as it now is; the same
/// change again changes nothing. A shorter lifetime already past ends the claim at the reconcile this asks for, as
/// an expired one ends.
pub(crate) async fn change_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, body: &Body) -> ApiResult {
    name("pool", pool)?;
    name("claim", claim)?;
    let change: ClaimChange = parse_body(body, None)?;
    if change.lifetime.is_none() && change.subjects.is_none() {
        return Err(ApiError::field("body", "name lifetime, subjects or both"));
    }
    let subjects = change.subjects.map(|s| checked_subjects("subjects", s)).transpose()?;
    let p = get_pool_item(deps, pool).await?;
    let lifetime = match change.lifetime {
        Some(text) => {
            validate_claim_lifetime("lifetime", &text, p.spec.claim_lifetime.as_ref())?;
            Some(GoDuration::new(text))
        }
        None => None,
    };
    on_conflict!(retry::REQUEST, "the claim", async {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &p, &c)?;
        if subjects.is_some() && caller.arn != c.owner && !caller.rights(&p).administer {
            return Err(ApiError::forbidden(format!(
                "only the owner of claim {claim} and the pool's admins may change its subjects"
            )));
        }
        if c.release_requested_at.is_some() {
            return Err(ApiError::conflict(format!("claim {claim} is being released")));
        }
        let mut next = c.clone();
        let mut said = vec![];
        if let Some(l) = lifetime.as_ref().filter(|l| c.lifetime.as_ref() != Some(*l)) {
            next.lifetime = Some(l.clone());
            let ends = next.expires_at(p.spec.claim_lifetime.as_ref());
            said.push(match ends {
                Some(at) => {
                    format!("lifetime {} (ends {})", l.text(), at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                }
                None => format!("lifetime {}", l.text()),
            });
        }
        if let Some(s) = subjects.as_ref().filter(|s| **s != c.subjects) {
            next.subjects = s.clone();
            said.push(if s.is_empty() { "subjects none".into() } else { format!("subjects {}", s.join(", ")) });
        }
        let cluster = match &c.cluster {
            Some(id) => get_cluster_item(deps, pool, id).await?,
            None => None,
        };
        if said.is_empty() {
            // Asked before: a lifetime's reconcile is asked again, in case the queue did not take that ask's message.
            if lifetime.is_some() {
                reconcile_coalesced(deps, pool, "claim-changed").await?;
            }
            return Ok((200, claim_view(&p, &c, cluster.as_ref())));
        }
        next.rev = c.rev + 1;
        let mut event = Event::new(EventType::ClaimChanged, deps.clock.now(), next.rev)
            .by(&caller.arn)
            .claim(claim)
            .saying(said.join("; "));
        if let Some(id) = &next.cluster {
            event = event.cluster(id);
        }
        let writes = vec![Write::Put(Item::Claim(Box::new(next.clone())), Cond::Rev(c.rev)), Write::Append(event)];
        deps.store.write(pool, writes).await?;
        if next.lifetime != c.lifetime {
            // The pool's next look at the claim's end moves with it: the reconcile plans it anew.
            reconcile_coalesced(deps, pool, "claim-changed").await?;
        }
        tracing::info!(pool, claim, by = %caller.arn, change = %said.join("; "), "claim changed");
        Ok((200, claim_view(&p, &next, cluster.as_ref())))
    })
    .map_err(|e: ApiError| e.kept_changing("the claim"))
}

pub(crate) async fn release_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    on_conflict!(retry::REQUEST, "the claim", async {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &p, &c)?;
        if c.release_requested_at.is_some() {
            // Asked before: the reconcile is asked again, in case the queue did not take that ask's message.
            reconcile_coalesced(deps, pool, "release").await?;
            return Ok((202, claim_view(&p, &c, None)));
        }
        let (rev, now) = (c.rev, deps.clock.now());
        let next = Claim { release_requested_at: Some(now), rev: rev + 1, ..c };
        let mut said = Event::new(EventType::ClaimReleaseRequested, now, next.rev).by(&caller.arn).claim(claim);
        if let Some(id) = &next.cluster {
            said = said.cluster(id);
        }
        let writes = vec![Write::Put(Item::Claim(Box::new(next.clone())), Cond::Rev(rev)), Write::Append(said)];
        deps.store.write(pool, writes).await?;
        reconcile_coalesced(deps, pool, "release").await?;
        tracing::info!(pool, claim, "claim release requested");
        Ok((202, claim_view(&p, &next, None)))
    })
    .map_err(|e: ApiError| e.kept_changing("the claim"))
}

pub(crate) async fn power_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, to: DesiredPower) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    on_conflict!(retry::REQUEST, "the cluster", async {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &p, &c)?;
        if c.release_requested_at.is_some() {
            return Err(ApiError::conflict(format!("claim {claim} is being released")));
        }
        let Some(id) = c.cluster.clone() else {
            return Err(ApiError::conflict(format!("claim {claim} has no cluster yet")));
        };
        let Some(cluster) = get_cluster_item(deps, pool, &id).await? else {
            return Err(ApiError::conflict(format!("cluster {id} of claim {claim} no longer exists")));
        };
        if cluster.spec_power_state == Some(to) {
            // Asked before: while the machines are not there yet, the power function is asked again, in case the
            // queue did not take that ask's message.
            if apiary_planner::power::in_progress(&cluster) {
                deps.queue.power(&PowerMessage::nudge(pool, id), Duration::ZERO).await?;
            }
            return Ok((202, claim_view(&p, &c, Some(&cluster))));
        }
        let rev = cluster.rev;
        let next = Cluster { spec_power_state: Some(to), rev: rev + 1, ..cluster };
        let asked = if to == DesiredPower::Hibernating { "hibernate" } else { "resume" };
        let said = Event::new(EventType::PowerRequested, deps.clock.now(), next.rev)
            .by(&caller.arn)
            .claim(claim)
            .cluster(&id)
            .saying(asked);
        let writes = vec![Write::Put(Item::Cluster(Box::new(next.clone())), Cond::Rev(rev)), Write::Append(said)];
        deps.store.write(pool, writes).await?;
        let nudge = PowerMessage::nudge(pool, id.clone());
        deps.queue.power(&nudge, Duration::ZERO).await?;
        tracing::info!(pool, claim, cluster = %id, power_state = ?to, "claimed cluster power requested");
        Ok((202, claim_view(&p, &c, Some(&next))))
    })
    .map_err(|e: ApiError| e.kept_changing("the cluster"))
}
