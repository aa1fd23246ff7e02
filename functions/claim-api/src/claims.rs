//! Claims: make one (assigned at once when a Running spare is free), read it (optionally waiting until it is
//! Ready), release it, hibernate or resume its cluster, list them.

use std::time::Duration;

use apiary_planner::duration::parse as parse_duration;
use apiary_planner::validate::limits::MAX_DURATION_LEN;
use apiary_planner::validate::validate_lifetime;
use apiary_planner::{plan, Action, Claim, ClaimPhase, Cluster, DesiredPower, GoDuration};
use apiary_ports::messages::PowerMessage;
use apiary_ports::store::{writes_for, Cond, Item, Key, Write};
use apiary_ports::{Deps, Error as StoreError};
use lambda_http::Body;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ApiError, ApiResult};
use crate::input::{name, parse_body};
use crate::pools::{get_pool_item, read_pool, reconcile_soon};
use crate::view::claim_view;
use crate::{Caller, MAX_ATTEMPTS, MAX_WAIT};

/// Lost races a claim re-plans after (each one means another claim was served) before answering 503.
const CLAIM_ATTEMPTS: usize = 32;
/// How often a waiting `GET` looks at its claim.
const WAIT_POLL: Duration = Duration::from_millis(250);

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ClaimRequest {
    /// How long the claim may hold its cluster (capped by the pool's claimLifetime.maximum).
    #[serde(default)]
    lifetime: Option<String>,
}

fn authorize(caller: &Caller, claim: &Claim) -> Result<(), ApiError> {
    if caller.admin || caller.arn == claim.owner {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("claim {} belongs to another principal", claim.name)))
    }
}

pub(crate) async fn list_claims(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    let snap = read_pool(deps, pool).await?;
    let claims: Vec<Value> = snap
        .claims
        .iter()
        .filter(|c| caller.admin || c.owner == caller.arn)
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
    let lifetime = match request.lifetime {
        Some(text) => {
            validate_lifetime("lifetime", &text).map_err(|e| ApiError::field(&e.field, e.message))?;
            Some(GoDuration::new(text))
        }
        None => None,
    };
    // Each lost race means another claim won a spare: re-read and try for the next, until none is left.
    for _ in 0..CLAIM_ATTEMPTS {
        let mut snap = read_pool(deps, pool).await?;
        if snap.pool.deletion_requested_at.is_some() {
            return Err(ApiError::conflict(format!("pool {pool} is being deleted")));
        }
        if let Some(existing) = snap.claims.iter().find(|c| c.name == claim) {
            if existing.owner != caller.arn {
                return Err(ApiError::conflict(format!("claim {claim} exists and belongs to another principal")));
            }
            let cluster = existing.cluster.as_ref().and_then(|id| snap.clusters.iter().find(|k| &k.id == id));
            return Ok((if cluster.is_some() { 201 } else { 202 }, claim_view(&snap.pool, existing, cluster)));
        }
        let now = deps.clock.now();
        let mut new = Claim::new(claim, caller.arn.clone(), now);
        new.lifetime = lifetime.clone();
        snap.claims.push(new.clone());
        let planned = plan(&snap, now, deps.clock.seed());
        let assign =
            planned.actions.into_iter().find(|a| matches!(a, Action::AssignClaim { claim: c, .. } if c == claim));
        let writes = match &assign {
            Some(action) => {
                let mut writes = writes_for(&mut snap, action)?;
                // The claim item is new: its condition is absence, not a revision.
                for w in &mut writes {
                    if let Write::Put(Item::Claim(_), cond) = w {
                        *cond = Cond::Absent;
                    }
                }
                writes
            }
            None => vec![Write::Put(Item::Claim(Box::new(new.clone())), Cond::Absent)],
        };
        match deps.store.write(pool, writes).await {
            Ok(()) => {}
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
        if let Some(Action::AssignClaim { at, .. }) = &assign {
            deps.metrics.emit(apiary_ports::metrics::claim_assigned(&deps.config.stack, pool, &new, *at));
        }
        // Either way the pool has work: resume the next spare, or find this claim a cluster.
        reconcile_soon(deps, pool, "claim").await?;
        let stored = snap.claims.iter().find(|c| c.name == claim).cloned().unwrap_or(new);
        let cluster = stored.cluster.as_ref().and_then(|id| snap.clusters.iter().find(|k| &k.id == id));
        tracing::info!(pool, claim, owner = %caller.arn, cluster = cluster.map(|c| c.id.as_str()), "claim stored");
        return Ok((if cluster.is_some() { 201 } else { 202 }, claim_view(&snap.pool, &stored, cluster)));
    }
    Err(ApiError::busy("too many concurrent claims on this pool; try again"))
}

async fn get_claim_item(deps: &Deps, pool: &str, claim: &str) -> Result<Claim, ApiError> {
    name("claim", claim)?;
    match deps.store.get(pool, &Key::Claim(claim.to_owned())).await? {
        Some(Item::Claim(c)) => Ok(*c),
        _ => Err(ApiError::not_found(format!("claim {claim} does not exist in pool {pool}"))),
    }
}

pub(crate) async fn get_cluster_item(deps: &Deps, pool: &str, id: &str) -> Result<Option<Cluster>, ApiError> {
    Ok(match deps.store.get(pool, &Key::Cluster(id.to_owned())).await? {
        Some(Item::Cluster(c)) => Some(*c),
        _ => None,
    })
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
    loop {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &c)?;
        let cluster = match &c.cluster {
            Some(id) => get_cluster_item(deps, pool, id).await?,
            None => None,
        };
        let now = deps.clock.now();
        if c.phase(cluster.as_ref()) == ClaimPhase::Ready || now >= deadline {
            return Ok((200, claim_view(&p, &c, cluster.as_ref())));
        }
        deps.clock.sleep(WAIT_POLL.min((deadline - now).to_std().unwrap_or_default())).await;
    }
}

pub(crate) async fn release_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    for _ in 0..MAX_ATTEMPTS {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &c)?;
        if c.release_requested_at.is_some() {
            return Ok((202, claim_view(&p, &c, None)));
        }
        let rev = c.rev;
        let next = Claim { release_requested_at: Some(deps.clock.now()), rev: rev + 1, ..c };
        match deps.store.write(pool, vec![Write::Put(Item::Claim(Box::new(next.clone())), Cond::Rev(rev))]).await {
            Ok(()) => {
                reconcile_soon(deps, pool, "release").await?;
                tracing::info!(pool, claim, "claim release requested");
                return Ok((202, claim_view(&p, &next, None)));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::busy("the claim is changing too fast; try again"))
}

pub(crate) async fn power_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, to: DesiredPower) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    for _ in 0..MAX_ATTEMPTS {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &c)?;
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
            return Ok((202, claim_view(&p, &c, Some(&cluster))));
        }
        let rev = cluster.rev;
        let next = Cluster { spec_power_state: Some(to), rev: rev + 1, ..cluster };
        match deps.store.write(pool, vec![Write::Put(Item::Cluster(Box::new(next.clone())), Cond::Rev(rev))]).await {
            Ok(()) => {
                let nudge = PowerMessage { pool: pool.to_owned(), cluster: id.clone(), check: None };
                deps.queue.power(&nudge, Duration::ZERO).await?;
                tracing::info!(pool, claim, cluster = %id, power_state = ?to, "claimed cluster power requested");
                return Ok((202, claim_view(&p, &c, Some(&next))));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::busy("the cluster is changing too fast; try again"))
}
