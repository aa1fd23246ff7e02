//! Pools: create (stack admins), change and delete (stack admins and the pool's admins), read and list (whoever
//! may use them), and their clusters, whose power management a pool's admin may pause.

use std::time::Duration;

use apiary_planner::access::Rights;
use apiary_planner::events::{self, Event, EventType};
use apiary_planner::validate::{validate_member_role, validate_urls};
use apiary_planner::{power, validate_spec, validate_update, Cluster, Pool, PoolSpec, Snapshot};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::store::{Cond, Item, Write};
use apiary_ports::Deps;
use apiary_ports::{on_conflict, retry};
use lambda_http::Body;
use serde_json::json;

use crate::error::{ApiError, ApiResult};
use crate::input::{name, parse_body};
use crate::view::{pool_view, to_json};
use crate::Caller;

/// The whole partition of `pool`, or 404.
pub(crate) async fn read_pool(deps: &Deps, pool: &str) -> Result<Snapshot, ApiError> {
    name("pool", pool)?;
    deps.store.read_pool(pool).await?.ok_or_else(|| ApiError::not_found(format!("pool {pool} does not exist")))
}

/// The pool item alone, or 404.
pub(crate) async fn get_pool_item(deps: &Deps, pool: &str) -> Result<Pool, ApiError> {
    name("pool", pool)?;
    deps.store.get_pool(pool).await?.ok_or_else(|| ApiError::not_found(format!("pool {pool} does not exist")))
}

/// One cluster item of `pool`, if it exists.
pub(crate) async fn get_cluster_item(deps: &Deps, pool: &str, id: &str) -> Result<Option<Cluster>, ApiError> {
    Ok(deps.store.get_cluster(pool, id).await?)
}

/// Asks for a reconcile of `pool`.
pub(crate) async fn reconcile_soon(deps: &Deps, pool: &str, reason: &str) -> Result<(), ApiError> {
    deps.queue.reconcile(&ReconcileMessage::new(pool, reason)).await?;
    Ok(())
}

/// Asks for a reconcile of `pool` that stands for every such request in the same second (claims and releases
/// come in bursts: one reconcile per pool and window, not one per request).
pub(crate) async fn reconcile_coalesced(deps: &Deps, pool: &str, reason: &str) -> Result<(), ApiError> {
    deps.queue.reconcile(&ReconcileMessage::coalesced(pool, reason, deps.clock.now())).await?;
    Ok(())
}

/// Every pool, sorted by name, with what `caller` may do with each.
async fn pools_of(deps: &Deps, caller: &Caller) -> Result<Vec<(Pool, Rights)>, ApiError> {
    let mut pools = deps.store.list_pools().await?;
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pools
        .into_iter()
        .map(|p| {
            let rights = caller.rights(&p);
            (p, rights)
        })
        .collect())
}

/// The pools `caller` may claim from or administer.
pub(crate) async fn list_pools(deps: &Deps, caller: &Caller) -> ApiResult {
    let pools: Vec<_> = pools_of(deps, caller)
        .await?
        .iter()
        .filter(|(_, rights)| rights.any())
        .map(|(p, _)| pool_view(p, &deps.config.stack_id))
        .collect();
    Ok((200, json!({ "pools": pools })))
}

/// What the caller may do: its principal, whether it is a stack admin, and the pools it may claim from and
/// administer.
pub(crate) async fn me(deps: &Deps, caller: &Caller) -> ApiResult {
    let pools = pools_of(deps, caller).await?;
    let named = |right: fn(&Rights) -> bool| -> Vec<&str> {
        pools.iter().filter(|(_, r)| right(r)).map(|(p, _)| p.name.as_str()).collect()
    };
    Ok((
        200,
        json!({
            "principal": caller.arn,
            "stackAdmin": caller.admin,
            "defaultPoolAccess": caller.default,
            "claim": named(|r| r.claim),
            "administer": named(|r| r.administer),
        }),
    ))
}

pub(crate) async fn get_pool(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    caller.may_see(&p)?;
    Ok((200, pool_view(&p, &deps.config.stack_id)))
}

/// Every problem of `spec`, each with its field: its own rules, then the stack's (the member roles it may name,
/// where its URLs may reach: never the stack's own API, named by the stack or the host the request came to,
/// `own_host`, which a function URL cannot be told of beforehand).
fn check_spec(deps: &Deps, spec: &PoolSpec, own_host: Option<&str>) -> Result<(), ApiError> {
    let mut errors = validate_spec(spec).err().unwrap_or_default();
    errors.extend(validate_member_role(spec, &deps.config.member_roles).err());
    let mut policy = deps.config.url_policy.clone();
    policy.denied_hosts.extend(own_host.map(str::to_owned));
    errors.extend(validate_urls(spec, &policy));
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::fields("InvalidPoolSpec", errors.into_iter().map(|e| (e.field, e.message)).collect()))
}

/// Creates a pool (stack admins) or changes one (stack admins and the pool's admins).
pub(crate) async fn put_pool(
    deps: &Deps,
    caller: &Caller,
    pool: &str,
    body: &Body,
    own_host: Option<&str>,
) -> ApiResult {
    name("pool", pool)?;
    let spec: PoolSpec = parse_body(body, None)?;
    // Checked once the caller may write the pool: a caller without the right learns nothing of the spec's faults.
    let mut validated = false;
    on_conflict!(retry::REQUEST, "the pool", async {
        let existing = deps.store.get_pool(pool).await?;
        match &existing {
            Some(p) => caller.may_administer(p, "change")?,
            None if !caller.admin => {
                return Err(ApiError::forbidden("only a stack admin (AdminPrincipals) may create pools"));
            }
            None => {}
        }
        if !validated {
            check_spec(deps, &spec, own_host)?;
            validated = true;
        }
        let before = existing.as_ref().map(|p| p.spec.clone());
        let (next, cond, status) = match existing {
            Some(p) if p.deletion_requested_at.is_some() => {
                return Err(ApiError::conflict(format!("pool {pool} is being deleted")));
            }
            Some(p) if p.spec == spec => {
                // Nothing to write, but the scheduler may have lost what an earlier PUT synced: sync again. And
                // while no plan has been made for this spec, the queue may have lost the reconcile that PUT asked
                // for (answered 503): ask again. Once planned, the same spec asks nothing.
                deps.schedules.sync(pool, &spec.schedules).await?;
                if p.status.pool_version != apiary_planner::version::pool_version(&spec) {
                    reconcile_soon(deps, pool, "pool-updated").await?;
                }
                return Ok((200, pool_view(&p, &deps.config.stack_id)));
            }
            Some(p) => {
                if let Err(errors) = validate_update(&p.spec, &spec) {
                    let fields = errors.into_iter().map(|e| (e.field, e.message)).collect();
                    return Err(ApiError::fields("InvalidPoolSpec", fields));
                }
                let rev = p.rev;
                (Pool { spec: spec.clone(), rev: rev + 1, ..p }, Cond::Rev(rev), 200)
            }
            None => {
                let p = Pool {
                    name: pool.to_owned(),
                    spec: spec.clone(),
                    status: Default::default(),
                    next_wake_at: None,
                    deletion_requested_at: None,
                    created_at: deps.clock.now(),
                    rev: 0,
                    later: Default::default(),
                };
                (p, Cond::Absent, 201)
            }
        };
        let said = events::pool_written(before.as_ref(), &next, &caller.arn, deps.clock.now());
        let writes = vec![Write::Put(Item::Pool(Box::new(next.clone())), cond), Write::Append(said)];
        deps.store.write(pool, writes).await?;
        deps.schedules.sync(pool, &spec.schedules).await?;
        reconcile_soon(deps, pool, "pool-updated").await?;
        tracing::info!(pool, created = status == 201, "pool written");
        Ok((status, pool_view(&next, &deps.config.stack_id)))
    })
    .map_err(|e: ApiError| e.kept_changing("the pool"))
}

pub(crate) async fn delete_pool(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    on_conflict!(retry::REQUEST, "the pool", async {
        let p = get_pool_item(deps, pool).await?;
        caller.may_administer(&p, "delete")?;
        if p.deletion_requested_at.is_some() {
            return Ok((202, pool_view(&p, &deps.config.stack_id)));
        }
        let (rev, now) = (p.rev, deps.clock.now());
        let next = Pool { deletion_requested_at: Some(now), rev: rev + 1, ..p };
        let said = Event::new(EventType::PoolDeletionRequested, now, next.rev).by(&caller.arn);
        let writes = vec![Write::Put(Item::Pool(Box::new(next.clone())), Cond::Rev(rev)), Write::Append(said)];
        deps.store.write(pool, writes).await?;
        deps.schedules.sync(pool, &[]).await?;
        reconcile_soon(deps, pool, "pool-deleted").await?;
        Ok((202, pool_view(&next, &deps.config.stack_id)))
    })
    .map_err(|e: ApiError| e.kept_changing("the pool"))
}

/// Tells the functions of a cluster's pause or unpause: the power function carries on where it stopped (an
/// unpause), and the pool counts its spares again (a paused cluster is neither assignable nor a spare).
async fn pause_told(deps: &Deps, pool: &str, id: &str, paused: bool) -> Result<(), ApiError> {
    if !paused {
        deps.queue.power(&PowerMessage::nudge(pool, id.to_owned()), Duration::ZERO).await?;
    }
    reconcile_soon(deps, pool, if paused { "cluster-paused" } else { "cluster-unpaused" }).await
}

pub(crate) async fn list_clusters(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    let snap = read_pool(deps, pool).await?;
    caller.may_see(&snap.pool)?;
    let mut clusters = snap.clusters;
    clusters.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
    Ok((200, json!({ "pool": pool, "clusters": clusters })))
}

/// Pauses (`paused`) or unpauses power management of one cluster, for admins (seed 004's PowerStatePaused): while
/// paused Apiary neither starts nor stops it and does not assign it. Idempotent; 200 with the cluster.
pub(crate) async fn pause_cluster(deps: &Deps, caller: &Caller, pool: &str, id: &str, paused: bool) -> ApiResult {
    name("cluster", id)?;
    let p = get_pool_item(deps, pool).await?;
    caller.may_administer(&p, if paused { "pause clusters of" } else { "unpause clusters of" })?;
    on_conflict!(retry::REQUEST, "the cluster", async {
        let Some(stored) = get_cluster_item(deps, pool, id).await? else {
            return Err(ApiError::not_found(format!("cluster {id} does not exist in pool {pool}")));
        };
        if stored.deleting {
            return Err(ApiError::conflict(format!("cluster {id} is being deleted")));
        }
        let mut next = stored.clone();
        let now = deps.clock.now();
        let changed = if paused { power::pause(&mut next, now) } else { power::unpause(&mut next, now) };
        if !changed {
            // Asked before: asked again, in case the queue did not take that ask's messages (answered 503).
            pause_told(deps, pool, id, paused).await?;
            return Ok((200, to_json(&stored)));
        }
        next.rev = stored.rev + 1;
        let kind = if paused { EventType::ClusterPaused } else { EventType::ClusterUnpaused };
        let said = Event::new(kind, now, next.rev).by(&caller.arn).cluster(id);
        let writes =
            vec![Write::Put(Item::Cluster(Box::new(next.clone())), Cond::Rev(stored.rev)), Write::Append(said)];
        deps.store.write(pool, writes).await?;
        pause_told(deps, pool, id, paused).await?;
        tracing::info!(pool, cluster = id, paused, "cluster power management changed");
        Ok((200, to_json(&next)))
    })
    .map_err(|e: ApiError| e.kept_changing("the cluster"))
}
