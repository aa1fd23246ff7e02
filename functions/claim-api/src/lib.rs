//! The claim API: pools, claims and claimed clusters' power over HTTP (API Gateway, IAM authorization).
//!
//! The caller is the IAM principal API Gateway puts in the request context. Pools are created by the stack's
//! admins (`APIARY_ADMINS`); a pool's `access` says who else may claim from it and who may administer it
//! ([`apiary_planner::access`]), and a caller sees only the pools it may use (`GET /me` lists them). A claim is
//! read, powered and released by its owner or an admin of its pool. Errors are JSON
//! `{error, message, fields?}`: 400 naming each bad field, 403, 404 for an unknown pool or claim, 409 when the
//! request contradicts stored state, 503 when AWS is briefly unavailable. The OpenAPI document is
//! [`OPENAPI`] (`GET /openapi.json`).
//!
//! A claim is answered at once when a Running spare is free and no older claim is waiting: it picks a spare from
//! the pool's sparse index (spread by its name, so concurrent claims pick different ones), and one transaction
//! writes the claim and takes the cluster, on condition that it is still unclaimed and Running. Otherwise the
//! claim is stored Pending and the pool's reconcile assigns it, oldest claim to oldest cluster. Claims and
//! releases ask for one coalesced reconcile per pool and second.
//!
//! A claim may name a label selector instead of a pool (`PUT /claims/{claim}`): it goes to the matching pool that
//! serves it first, and is found by its name alone from then on ([`selected`]).

use std::time::Duration;

use apiary_planner::access::{self, DefaultAccess, Rights};
use apiary_planner::{DesiredPower, Pool};
use apiary_ports::Deps;
use lambda_http::{Request, RequestExt, Response};
use selected::Call;
use tracing::Instrument;

mod claims;
mod credentials;
mod error;
mod events;
mod input;
mod names;
mod pools;
mod request;
mod selected;
mod view;

pub use error::ApiError;
use error::{respond, ApiResult};
pub use request::{api_request, own_host, principal};

/// The API's OpenAPI 3 document.
pub const OPENAPI: &str = include_str!("../openapi.json");
/// Longest `?wait=` a `GET` of a claim accepts (API Gateway stops waiting at 29 s, and so does the function).
pub const MAX_WAIT: Duration = Duration::from_secs(25);

/// Handles one request.
pub async fn handle(deps: &Deps, req: Request) -> Response<lambda_http::Body> {
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let started = deps.clock.now();
    // Every line this request logs names the pool and claim its path does.
    let span = tracing::info_span!("request", pool = tracing::field::Empty, claim = tracing::field::Empty);
    let segments = api_segments(&path);
    if let ["pools", pool, rest @ ..] = segments.as_slice() {
        span.record("pool", *pool);
        if let ["claims", claim, ..] = rest {
            span.record("claim", *claim);
        }
    }
    if let ["claims", claim, ..] = segments.as_slice() {
        span.record("claim", *claim);
    }
    let response = respond(route(deps, &req, &segments).instrument(span.clone()).await);
    tracing::info!(
        parent: &span,
        method,
        path,
        status = response.status().as_u16(),
        ms = (deps.clock.now() - started).num_milliseconds(),
        "request"
    );
    response
}

/// The path's segments from the API's own root on (API Gateway may pass the stage as the first segment).
fn api_segments(path: &str) -> Vec<&str> {
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = segments
        .iter()
        .position(|s| matches!(*s, "pools" | "claims" | "me" | "openapi.json" | "version"))
        .unwrap_or(segments.len());
    segments.drain(..at);
    segments
}

async fn route(deps: &Deps, req: &Request, segments: &[&str]) -> ApiResult {
    let method = req.method().as_str();
    if segments == ["openapi.json"] && method == "GET" {
        return Ok((200, serde_json::from_str(OPENAPI).unwrap_or(serde_json::Value::Null)));
    }
    if segments == ["version"] && method == "GET" {
        return Ok((200, serde_json::json!({ "version": apiary_ports::VERSION })));
    }
    let caller = principal(req).ok_or_else(|| error::ApiError::forbidden("the request carries no caller identity"))?;
    // `AdminPrincipals` are patterns as a pool's access lists take them: an admin role names its sessions.
    let admin = deps.config.admins.iter().any(|pattern| access::matches(pattern, &caller));
    let caller = Caller { admin, arn: caller, default: deps.config.default_pool_access };
    match (method, segments) {
        ("GET", ["me"]) => pools::me(deps, &caller).await,
        ("GET", ["pools"]) => pools::list_pools(deps, &caller).await,
        ("PUT", ["pools", pool]) => pools::put_pool(deps, &caller, pool, req.body(), own_host(req).as_deref()).await,
        ("GET", ["pools", pool]) => pools::get_pool(deps, &caller, pool).await,
        ("DELETE", ["pools", pool]) => pools::delete_pool(deps, &caller, pool).await,
        ("GET", ["pools", pool, "clusters"]) => pools::list_clusters(deps, &caller, pool).await,
        ("POST", ["pools", pool, "clusters", id, "pause"]) => pools::pause_cluster(deps, &caller, pool, id, true).await,
        ("POST", ["pools", pool, "clusters", id, "unpause"]) => {
            pools::pause_cluster(deps, &caller, pool, id, false).await
        }
        ("GET", ["pools", pool, "events"]) => {
            let q = req.query_string_parameters_ref();
            let get = |k: &str| q.and_then(|q| q.first(k).map(String::from));
            let params =
                events::Params { claim: get("claim"), cluster: get("cluster"), limit: get("limit"), page: get("page") };
            events::list_events(deps, &caller, pool, params).await
        }
        ("GET", ["pools", pool, "claims"]) => claims::list_claims(deps, &caller, pool).await,
        ("PUT", ["pools", pool, "claims", claim]) => claims::put_claim(deps, &caller, pool, claim, req.body()).await,
        ("PATCH", ["pools", pool, "claims", claim]) => {
            claims::change_claim(deps, &caller, pool, claim, req.body()).await
        }
        ("GET", ["pools", pool, "claims", claim]) => {
            let wait = req.query_string_parameters_ref().and_then(|q| q.first("wait").map(String::from));
            claims::get_claim(deps, &caller, pool, claim, wait.as_deref()).await
        }
        ("DELETE", ["pools", pool, "claims", claim]) => claims::release_claim(deps, &caller, pool, claim).await,
        ("GET", ["pools", pool, "claims", claim, "credentials"]) => {
            credentials::claim_credentials(deps, &caller, pool, claim).await
        }
        ("GET", ["claims", claim, "credentials"]) => {
            selected::on_selected(deps, &caller, claim, Call::Credentials).await
        }
        ("PUT", ["claims", claim]) => selected::put_selected(deps, &caller, claim, req.body()).await,
        ("GET", ["claims", claim]) => {
            let wait = req.query_string_parameters_ref().and_then(|q| q.first("wait").map(String::from));
            selected::on_selected(deps, &caller, claim, Call::Get(wait.as_deref())).await
        }
        ("PATCH", ["claims", claim]) => selected::on_selected(deps, &caller, claim, Call::Change(req.body())).await,
        ("DELETE", ["claims", claim]) => selected::on_selected(deps, &caller, claim, Call::Release).await,
        ("POST", ["claims", claim, "hibernate"]) => {
            selected::on_selected(deps, &caller, claim, Call::Power(DesiredPower::Hibernating)).await
        }
        ("POST", ["claims", claim, "resume"]) => {
            selected::on_selected(deps, &caller, claim, Call::Power(DesiredPower::Running)).await
        }
        ("POST", ["pools", pool, "claims", claim, "hibernate"]) => {
            claims::power_claim(deps, &caller, pool, claim, DesiredPower::Hibernating).await
        }
        ("POST", ["pools", pool, "claims", claim, "resume"]) => {
            claims::power_claim(deps, &caller, pool, claim, DesiredPower::Running).await
        }
        (
            _,
            ["me"]
            | ["version"]
            | ["pools"]
            | ["pools", _]
            | ["pools", _, "clusters" | "claims" | "events"]
            | ["pools", _, "claims", _]
            | ["claims", _],
        )
        | (
            _,
            ["pools", _, "claims", _, "hibernate" | "resume" | "credentials"]
            | ["claims", _, "hibernate" | "resume" | "credentials"],
        )
        | (_, ["pools", _, "clusters", _, "pause" | "unpause"]) => {
            Err(ApiError::new(405, "MethodNotAllowed", format!("{method} is not allowed on {}", req.uri().path())))
        }
        _ => Err(ApiError::not_found(format!("no route {}", req.uri().path()))),
    }
}

/// The caller: its principal, whether it is one of the stack's admins, and what a pool without `access` allows it.
pub(crate) struct Caller {
    arn: String,
    admin: bool,
    default: DefaultAccess,
}

impl Caller {
    /// What the caller may do with `pool` ([`apiary_planner::access`]).
    pub(crate) fn rights(&self, pool: &Pool) -> Rights {
        access::rights(pool.spec.access.as_ref(), &self.arn, self.admin, self.default)
    }

    /// The caller's rights over `pool`, or 403 when it may neither claim from nor administer it.
    pub(crate) fn may_see(&self, pool: &Pool) -> Result<Rights, ApiError> {
        let rights = self.rights(pool);
        if rights.any() {
            Ok(rights)
        } else {
            Err(self.refused(pool, "use", "access.claimants or access.admins"))
        }
    }

    /// Ok when the caller may claim from `pool`, else 403 saying why.
    pub(crate) fn may_claim(&self, pool: &Pool) -> Result<(), ApiError> {
        if self.rights(pool).claim {
            Ok(())
        } else {
            Err(self.refused(pool, "claim from", "access.claimants or access.admins"))
        }
    }

    /// Ok when the caller may administer `pool` (to `what` it), else 403 saying why.
    pub(crate) fn may_administer(&self, pool: &Pool, what: &str) -> Result<(), ApiError> {
        if self.rights(pool).administer {
            Ok(())
        } else {
            Err(self.refused(pool, what, "access.admins"))
        }
    }

    fn refused(&self, pool: &Pool, what: &str, lists: &str) -> ApiError {
        let why = match (&pool.spec.access, self.default) {
            (Some(_), _) => format!("{} is not named in the pool's {lists}", self.arn),
            (None, DefaultAccess::Open) => "a pool without access may be administered by stack admins only".into(),
            (None, DefaultAccess::Admins) => {
                "the pool has no access list and the stack's DefaultPoolAccess is admins: only stack admins may use it"
                    .into()
            }
        };
        ApiError::forbidden(format!("may not {what} pool {}: {why}", pool.name))
    }
}
