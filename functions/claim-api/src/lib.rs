//! The claim API: pools, claims and claimed clusters' power over HTTP (API Gateway, IAM authorization).
//!
//! The caller is the IAM principal API Gateway puts in the request context. Pools are managed by admins
//! (`APIARY_ADMINS`); a claim is read, powered and released by its owner or an admin. Errors are JSON
//! `{error, message, fields?}`: 400 naming each bad field, 403, 404 for an unknown pool or claim, 409 when the
//! request contradicts stored state, 503 when AWS is briefly unavailable. The OpenAPI document is
//! [`OPENAPI`] (`GET /openapi.json`).
//!
//! A claim is answered at once when a Running spare is free: the planner picks the cluster (oldest first, after
//! older pending claims) and one transaction writes the claim and takes the cluster, on condition that it is
//! still unclaimed and Running. Otherwise the claim is stored Pending and the pool's reconcile assigns it.

use std::time::Duration;

use apiary_planner::duration::parse as parse_duration;
use apiary_planner::validate::validate_name;
use apiary_planner::{
    plan, validate_spec, Action, Claim, Cluster, DesiredPower, GoDuration, Pool, PoolSpec, PowerState, Snapshot,
};
use apiary_ports::messages::{PowerMessage, ReconcileMessage};
use apiary_ports::store::{writes_for, Cond, Item, Key, Write};
use apiary_ports::{Deps, Error as StoreError};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tracing::Instrument;

/// The API's OpenAPI 3 document.
pub const OPENAPI: &str = include_str!("../openapi.json");
/// Longest `?wait=` a `GET` of a claim accepts (API Gateway stops waiting at 29 s).
pub const MAX_WAIT: Duration = Duration::from_secs(25);
/// Lost races a request re-plans after before giving up with 503.
const MAX_ATTEMPTS: usize = 5;
/// Lost races a claim re-plans after (each one means another claim was served) before answering 503.
const CLAIM_ATTEMPTS: usize = 32;
/// How often a waiting `GET` looks at its claim.
const WAIT_POLL: Duration = Duration::from_millis(250);

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    status: u16,
    error: &'static str,
    message: String,
    fields: Vec<(String, String)>,
}

impl ApiError {
    fn new(status: u16, error: &'static str, message: impl Into<String>) -> Self {
        Self { status, error, message: message.into(), fields: vec![] }
    }
    fn field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            status: 400,
            error: "InvalidRequest",
            message: format!("{field}: {message}"),
            fields: vec![(field.into(), message)],
        }
    }
    fn not_found(what: impl Into<String>) -> Self {
        Self::new(404, "NotFound", what)
    }
    fn forbidden(what: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", what)
    }
    fn conflict(what: impl Into<String>) -> Self {
        Self::new(409, "Conflict", what)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, retryable = e.is_retryable(), "store or queue error");
        if e.is_retryable() {
            ApiError::new(503, "Unavailable", "the service is busy; try again")
        } else {
            ApiError::new(500, "Internal", "internal error")
        }
    }
}

type ApiResult = Result<(u16, Value), ApiError>;

fn respond(result: ApiResult) -> Response<Body> {
    let (status, body) = match result {
        Ok(ok) => ok,
        Err(e) => {
            let mut body = json!({"error": e.error, "message": e.message});
            if !e.fields.is_empty() {
                body["fields"] = e.fields.iter().map(|(f, m)| json!({"field": f, "message": m})).collect();
            }
            (e.status, body)
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::Text(body.to_string()))
        .unwrap_or_else(|_| Response::new(Body::Empty))
}

/// The IAM principal that signed the request, as API Gateway reports it.
pub fn principal(req: &Request) -> Option<String> {
    match req.request_context_ref()? {
        RequestContext::ApiGatewayV1(ctx) => ctx.identity.user_arn.clone().or_else(|| ctx.identity.caller.clone()),
        RequestContext::ApiGatewayV2(ctx) => ctx.authorizer.as_ref()?.iam.as_ref()?.user_arn.clone(),
        _ => None,
    }
}

/// Handles one request.
pub async fn handle(deps: &Deps, req: Request) -> Response<Body> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let started = std::time::Instant::now();
    // Every line this request logs names the pool and claim its path does.
    let span = tracing::info_span!("request", pool = tracing::field::Empty, claim = tracing::field::Empty);
    let segments = api_segments(&path);
    if let ["pools", pool, rest @ ..] = segments.as_slice() {
        span.record("pool", *pool);
        if let ["claims", claim, ..] = rest {
            span.record("claim", *claim);
        }
    }
    let response = respond(route(deps, &req, &segments).instrument(span.clone()).await);
    tracing::info!(
        parent: &span,
        method,
        path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    response
}

/// The path's segments from the API's own root on (API Gateway may pass the stage as the first segment).
fn api_segments(path: &str) -> Vec<&str> {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = segments.iter().position(|s| *s == "pools" || *s == "openapi.json").unwrap_or(segments.len());
    segments.drain(..at);
    segments
}

async fn route(deps: &Deps, req: &Request, segments: &[&str]) -> ApiResult {
    let method = req.method().as_str();
    if segments == ["openapi.json"] && method == "GET" {
        return Ok((200, serde_json::from_str(OPENAPI).unwrap_or(Value::Null)));
    }
    let caller = principal(req).ok_or_else(|| ApiError::forbidden("the request carries no caller identity"))?;
    let caller = Caller { admin: deps.config.admins.contains(&caller), arn: caller };
    match (method, segments) {
        ("GET", ["pools"]) => list_pools(deps).await,
        ("PUT", ["pools", pool]) => put_pool(deps, &caller, pool, req.body()).await,
        ("GET", ["pools", pool]) => get_pool(deps, pool).await,
        ("DELETE", ["pools", pool]) => delete_pool(deps, &caller, pool).await,
        ("GET", ["pools", pool, "clusters"]) => list_clusters(deps, pool).await,
        ("GET", ["pools", pool, "claims"]) => list_claims(deps, &caller, pool).await,
        ("PUT", ["pools", pool, "claims", claim]) => put_claim(deps, &caller, pool, claim, req.body()).await,
        ("GET", ["pools", pool, "claims", claim]) => {
            let wait = req.query_string_parameters_ref().and_then(|q| q.first("wait").map(String::from));
            get_claim(deps, &caller, pool, claim, wait.as_deref()).await
        }
        ("DELETE", ["pools", pool, "claims", claim]) => release_claim(deps, &caller, pool, claim).await,
        ("POST", ["pools", pool, "claims", claim, "hibernate"]) => {
            power_claim(deps, &caller, pool, claim, DesiredPower::Hibernating).await
        }
        ("POST", ["pools", pool, "claims", claim, "resume"]) => {
            power_claim(deps, &caller, pool, claim, DesiredPower::Running).await
        }
        (_, ["pools"] | ["pools", _] | ["pools", _, "clusters" | "claims"] | ["pools", _, "claims", _])
        | (_, ["pools", _, "claims", _, "hibernate" | "resume"]) => {
            Err(ApiError::new(405, "MethodNotAllowed", format!("{method} is not allowed on {}", req.uri().path())))
        }
        _ => Err(ApiError::not_found(format!("no route {}", req.uri().path()))),
    }
}

struct Caller {
    arn: String,
    admin: bool,
}

fn name(field: &str, value: &str) -> Result<(), ApiError> {
    validate_name(field, value).map_err(|e| ApiError::field(&e.field, e.message))
}

fn body_text(body: &Body) -> &[u8] {
    match body {
        Body::Empty => b"",
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
    }
}

/// Parses a JSON body, naming the field that does not fit.
fn parse_body<T: for<'de> Deserialize<'de>>(body: &Body, empty: Option<T>) -> Result<T, ApiError> {
    let bytes = body_text(body);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return empty.ok_or_else(|| ApiError::field("body", "a JSON body is required"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let root = path == "." || path.is_empty();
        let inner = e.into_inner().to_string();
        // serde_json adds the position; the field path says more.
        let message = inner.split(" at line ").next().unwrap_or(&inner).to_owned();
        // A missing field is named by the message, not the path (which stops at its parent).
        let missing = message.strip_prefix("missing field `").and_then(|m| m.split('`').next());
        let field = match (root, missing) {
            (true, Some(m)) => m.to_owned(),
            (false, Some(m)) => format!("{path}.{m}"),
            (true, None) => "body".to_owned(),
            (false, None) => path,
        };
        ApiError::field(&field, message)
    })
}

async fn read_pool(deps: &Deps, pool: &str) -> Result<Snapshot, ApiError> {
    name("pool", pool)?;
    deps.store.read_pool(pool).await?.ok_or_else(|| ApiError::not_found(format!("pool {pool} does not exist")))
}

async fn get_pool_item(deps: &Deps, pool: &str) -> Result<Pool, ApiError> {
    name("pool", pool)?;
    match deps.store.get(pool, &Key::Pool).await? {
        Some(Item::Pool(p)) => Ok(*p),
        _ => Err(ApiError::not_found(format!("pool {pool} does not exist"))),
    }
}

async fn reconcile_soon(deps: &Deps, pool: &str, reason: &str) -> Result<(), ApiError> {
    deps.queue.reconcile(&ReconcileMessage { pool: pool.to_owned(), reason: reason.to_owned() }).await?;
    Ok(())
}

fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

async fn list_pools(deps: &Deps) -> ApiResult {
    let mut pools = deps.store.list_pools().await?;
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((200, json!({ "pools": pools })))
}

async fn get_pool(deps: &Deps, pool: &str) -> ApiResult {
    Ok((200, to_json(&get_pool_item(deps, pool).await?)))
}

async fn put_pool(deps: &Deps, caller: &Caller, pool: &str, body: &Body) -> ApiResult {
    name("pool", pool)?;
    if !caller.admin {
        return Err(ApiError::forbidden("only an admin (APIARY_ADMINS) may create or change pools"));
    }
    let spec: PoolSpec = parse_body(body, None)?;
    if let Err(errors) = validate_spec(&spec) {
        let message = errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; ");
        return Err(ApiError {
            status: 400,
            error: "InvalidPoolSpec",
            message,
            fields: errors.into_iter().map(|e| (e.field, e.message)).collect(),
        });
    }
    for _ in 0..MAX_ATTEMPTS {
        let existing = match deps.store.get(pool, &Key::Pool).await? {
            Some(Item::Pool(p)) => Some(*p),
            _ => None,
        };
        let (next, cond, status) = match existing {
            Some(p) if p.deletion_requested_at.is_some() => {
                return Err(ApiError::conflict(format!("pool {pool} is being deleted")));
            }
            Some(p) if p.spec == spec => return Ok((200, to_json(&p))),
            Some(p) => {
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
                };
                (p, Cond::Absent, 201)
            }
        };
        match deps.store.write(pool, vec![Write::Put(Item::Pool(Box::new(next.clone())), cond)]).await {
            Ok(()) => {
                deps.schedules.sync(pool, &spec.schedules).await?;
                reconcile_soon(deps, pool, "pool-updated").await?;
                tracing::info!(pool, created = status == 201, "pool written");
                return Ok((status, to_json(&next)));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::new(503, "Unavailable", "the pool is changing too fast; try again"))
}

async fn delete_pool(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
    if !caller.admin {
        return Err(ApiError::forbidden("only an admin (APIARY_ADMINS) may delete pools"));
    }
    for _ in 0..MAX_ATTEMPTS {
        let p = get_pool_item(deps, pool).await?;
        if p.deletion_requested_at.is_some() {
            return Ok((202, to_json(&p)));
        }
        let rev = p.rev;
        let next = Pool { deletion_requested_at: Some(deps.clock.now()), rev: rev + 1, ..p };
        match deps.store.write(pool, vec![Write::Put(Item::Pool(Box::new(next.clone())), Cond::Rev(rev))]).await {
            Ok(()) => {
                deps.schedules.sync(pool, &[]).await?;
                reconcile_soon(deps, pool, "pool-deleted").await?;
                return Ok((202, to_json(&next)));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::new(503, "Unavailable", "the pool is changing too fast; try again"))
}

async fn list_clusters(deps: &Deps, pool: &str) -> ApiResult {
    let snap = read_pool(deps, pool).await?;
    let mut clusters = snap.clusters;
    clusters.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
    Ok((200, json!({ "pool": pool, "clusters": clusters })))
}

async fn list_claims(deps: &Deps, caller: &Caller, pool: &str) -> ApiResult {
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

/// A claim as the API shows it: `phase` is Pending (no cluster yet), Assigned (cluster not Running yet),
/// Ready (cluster Running) or Releasing.
fn claim_view(pool: &Pool, claim: &Claim, cluster: Option<&Cluster>) -> Value {
    let phase = match (claim.release_requested_at, cluster) {
        (Some(_), _) => "Releasing",
        (None, None) => "Pending",
        (None, Some(c)) if c.power_state == Some(PowerState::Running) => "Ready",
        (None, Some(_)) => "Assigned",
    };
    json!({
        "pool": pool.name,
        "name": claim.name,
        "owner": claim.owner,
        "phase": phase,
        "createdAt": claim.created_at,
        "assignedAt": claim.assigned_at,
        "lifetime": claim.effective_lifetime(pool.spec.claim_lifetime.as_ref()).map(apiary_planner::duration::format),
        "expiresAt": claim.expires_at(pool.spec.claim_lifetime.as_ref()),
        "cluster": cluster.map(|c| json!({
            "id": c.id,
            "clusterName": c.cluster_name,
            "infraId": c.infra_id,
            "powerState": c.power_state,
        })),
        "conditions": claim.conditions,
    })
}

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

async fn put_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, body: &Body) -> ApiResult {
    name("pool", pool)?;
    name("claim", claim)?;
    let request: ClaimRequest = parse_body(body, Some(ClaimRequest::default()))?;
    let lifetime = match request.lifetime {
        Some(text) => match parse_duration(&text) {
            Ok(d) if d > chrono::TimeDelta::zero() => Some(GoDuration::new(text)),
            Ok(_) => return Err(ApiError::field("lifetime", "must be positive")),
            Err(e) => return Err(ApiError::field("lifetime", e.to_string())),
        },
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
    Err(ApiError::new(503, "Unavailable", "too many concurrent claims on this pool; try again"))
}

async fn get_claim_item(deps: &Deps, pool: &str, claim: &str) -> Result<Claim, ApiError> {
    name("claim", claim)?;
    match deps.store.get(pool, &Key::Claim(claim.to_owned())).await? {
        Some(Item::Claim(c)) => Ok(*c),
        _ => Err(ApiError::not_found(format!("claim {claim} does not exist in pool {pool}"))),
    }
}

async fn get_cluster_item(deps: &Deps, pool: &str, id: &str) -> Result<Option<Cluster>, ApiError> {
    Ok(match deps.store.get(pool, &Key::Cluster(id.to_owned())).await? {
        Some(Item::Cluster(c)) => Some(*c),
        _ => None,
    })
}

async fn get_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, wait: Option<&str>) -> ApiResult {
    let wait = match wait {
        None => Duration::ZERO,
        Some(text) => match parse_duration(text).ok().and_then(|d| d.to_std().ok()) {
            Some(d) if d <= MAX_WAIT => d,
            Some(_) => return Err(ApiError::field("wait", format!("at most {}s", MAX_WAIT.as_secs()))),
            None => return Err(ApiError::field("wait", format!("{text:?} is not a duration like 20s"))),
        },
    };
    let p = get_pool_item(deps, pool).await?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let c = get_claim_item(deps, pool, claim).await?;
        authorize(caller, &c)?;
        let cluster = match &c.cluster {
            Some(id) => get_cluster_item(deps, pool, id).await?,
            None => None,
        };
        let ready = cluster.as_ref().is_some_and(|k| k.power_state == Some(PowerState::Running));
        if ready || tokio::time::Instant::now() >= deadline {
            return Ok((200, claim_view(&p, &c, cluster.as_ref())));
        }
        tokio::time::sleep(WAIT_POLL.min(deadline - tokio::time::Instant::now())).await;
    }
}

async fn release_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str) -> ApiResult {
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
    Err(ApiError::new(503, "Unavailable", "the claim is changing too fast; try again"))
}

async fn power_claim(deps: &Deps, caller: &Caller, pool: &str, claim: &str, to: DesiredPower) -> ApiResult {
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
                deps.queue.power(&PowerMessage { pool: pool.to_owned(), cluster: id.clone() }, Duration::ZERO).await?;
                tracing::info!(pool, claim, cluster = %id, power_state = ?to, "claimed cluster power requested");
                return Ok((202, claim_view(&p, &c, Some(&next))));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::new(503, "Unavailable", "the cluster is changing too fast; try again"))
}
