//! Claims by labels (`/claims/{claim}`): a claim names a label selector instead of a pool, and goes to the
//! matching pool that serves it first ([`apiary_planner::select`]).
//!
//! A claim by selector reads the label index's entries under each of the selector's labels (one Query each, their
//! entries only), the pool items of the pools by_labels under all of them (one batch read across their partitions), and
//! then what a claim in that pool reads:
//! its cost follows the pools that match, never the stack's pools. Its name is the stack's: an entry outside every
//! pool's partition names the pool holding it, written with the claim on condition that the name is free, so the
//! same PUT sent again answers with the same claim, two claims of one name cannot both be made, and the claim's
//! later calls (`GET`, `PATCH`, `DELETE`, hibernate, resume) find it by name alone ([`crate::names`]). The entry
//! goes with the claim.

use std::collections::BTreeSet;

use apiary_planner::select::{rank, spread, validate_selector, where_to_wait, Selector};
use apiary_planner::{DesiredPower, Pool};
use apiary_ports::store::draw;
use apiary_ports::Deps;
use lambda_http::Body;
use serde::Deserialize;

use crate::claims::{self, existing_claim, make_claim, ByLabels, Terms};
use crate::error::{ApiError, ApiResult};
use crate::input::{name, parse_body};
use crate::names::{name_holder, NameHolder};
use crate::Caller;

/// Pools with a Running spare (as their status says) a claim tries before it waits in the one that serves it
/// soonest: a spare taken since the status was written costs one pool's look, and a burst does not read every
/// matching pool's index.
const SPARE_TRIES: usize = 3;

/// `PUT /claims/{claim}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SelectorRequest {
    selector: Selector,
    #[serde(default)]
    lifetime: Option<String>,
    #[serde(default)]
    subjects: Vec<String>,
}

/// Makes a claim by selector: to a matching pool with a Running spare (drawn from the claim's name in proportion
/// to the pools' free spares, so a burst spreads over them: [`spread`]; up to [`SPARE_TRIES`] of them, until one's
/// index has a spare free), else waiting in the one that serves it soonest ([`rank`]).
pub(crate) async fn put_selected(deps: &Deps, caller: &Caller, claim: &str, body: &Body) -> ApiResult {
    name("claim", claim)?;
    let request: SelectorRequest = parse_body(body, None)?;
    validate_selector("selector", &request.selector)?;
    let terms = Terms::checked(request.lifetime, request.subjects)?;
    let cond = match name_holder(deps, claim).await? {
        NameHolder::Claim(pool, existing) => return existing_claim(deps, caller, &pool, *existing).await,
        NameHolder::Nobody { write_entry_if: cond } => cond,
    };
    let pools = matching(deps, caller, &request.selector).await?;
    let ranked = rank(&pools);
    let labels = &request.selector.match_labels;
    let mut by_labels = ByLabels { selector: labels, write_entry_if: cond, may_wait: false };
    // Pools whose status named a spare that their index no longer has (taken since their last plan).
    let mut taken = Vec::new();
    for p in spread(&ranked, draw(claim)).into_iter().take(SPARE_TRIES) {
        let cond = by_labels.write_entry_if.clone();
        if let Some(made) = make_claim(deps, caller, p, claim, &terms, Some(by_labels)).await? {
            return Ok(made);
        }
        taken.push(p.name.as_str());
        by_labels = ByLabels { selector: labels, write_entry_if: cond, may_wait: false };
    }
    // No spare to take at once: the claim waits where it is served soonest.
    let Some(first) = where_to_wait(&ranked, &taken) else {
        return Err(ApiError::field("selector", "no pool matches"));
    };
    by_labels.may_wait = true;
    let made = make_claim(deps, caller, first, claim, &terms, Some(by_labels)).await?;
    made.ok_or_else(|| ApiError::conflict(format!("claim {claim} was neither assigned nor stored")))
}

/// The pools `selector` matches that `caller` may claim from and that are not being deleted, read from the label
/// index and then their own items (the index may be a moment behind; the items decide). 400 naming `selector`
/// when none matches, 403 when the caller may claim from none of those that do.
async fn matching(deps: &Deps, caller: &Caller, selector: &Selector) -> Result<Vec<Pool>, ApiError> {
    let mut names: Option<BTreeSet<String>> = None;
    for (key, value) in &selector.match_labels {
        let under: BTreeSet<String> = deps.store.labelled(key, value).await?.into_iter().collect();
        let both: BTreeSet<String> = match names {
            None => under,
            Some(before) => before.intersection(&under).cloned().collect(),
        };
        let empty = both.is_empty();
        names = Some(both);
        if empty {
            break;
        }
    }
    let names: Vec<String> = names.unwrap_or_default().into_iter().collect();
    // One batch read of the pools by_labels under every label; their items decide.
    let mut found = deps.store.get_pools(&names).await?;
    found.retain(|p| selector.matches(&p.spec.labels) && p.deletion_requested_at.is_none());
    let labels: Vec<String> = selector.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if found.is_empty() {
        return Err(ApiError::field(
            "selector.matchLabels",
            format!("no pool carries {} (a pool's labels are its spec's `labels`)", labels.join(",")),
        ));
    }
    let matched = found.len();
    found.retain(|p| caller.rights(p).claim);
    if found.is_empty() {
        return Err(ApiError::forbidden(format!(
            "{matched} pool(s) carry {} but {} may claim from none of them (their access.claimants or access.admins)",
            labels.join(","),
            caller.arn
        )));
    }
    Ok(found)
}

/// The pool holding claim `claim` made by selector, or 404 saying how claims made in a pool are found.
async fn holder(deps: &Deps, claim: &str) -> Result<String, ApiError> {
    name("claim", claim)?;
    match deps.store.claim_name(claim).await? {
        Some(entry) => Ok(entry.holder),
        None => Err(ApiError::not_found(format!(
            "no claim {claim} made by selector; a claim made in a pool is at /pools/{{pool}}/claims/{claim}"
        ))),
    }
}

/// What a call on `/claims/{claim}` does, once its pool is found.
pub(crate) enum Call<'a> {
    Get(Option<&'a str>),
    Change(&'a Body),
    Release,
    Power(DesiredPower),
    Credentials,
}

/// A call on claim `claim` made by selector, as the same call on its pool's claim.
pub(crate) async fn on_selected(deps: &Deps, caller: &Caller, claim: &str, call: Call<'_>) -> ApiResult {
    let pool = holder(deps, claim).await?;
    match call {
        Call::Get(wait) => claims::get_claim(deps, caller, &pool, claim, wait).await,
        Call::Change(body) => claims::change_claim(deps, caller, &pool, claim, body).await,
        Call::Release => claims::release_claim(deps, caller, &pool, claim).await,
        Call::Power(to) => claims::power_claim(deps, caller, &pool, claim, to).await,
        Call::Credentials => crate::credentials::claim_credentials(deps, caller, &pool, claim).await,
    }
}
