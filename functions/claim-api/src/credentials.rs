//! A claimed cluster's credentials (`GET …/claims/{claim}/credentials`): the secrets its installer named in its
//! outputs (each output ending in `SecretArn`: `kubeconfigSecretArn`, `kubeadminPasswordSecretArn`), read with the
//! claim API's own role for the claim's owner, its subjects and its pool's admins only, so that a claimant needs no
//! Secrets Manager permission of its own, and no claimant reads another claim's cluster. A secret is read only if
//! it is tagged for the claim's pool, as every secret Apiary reads; its value goes in this answer and nowhere else.

use apiary_planner::secret_tags::secret_serves;
use apiary_planner::ClaimPhase;
use apiary_ports::Deps;
use serde_json::{json, Map, Value};

use crate::claims::{authorize, get_claim_item};
use crate::error::{ApiError, ApiResult};
use crate::pools::{get_cluster_item, get_pool_item};
use crate::Caller;

/// The suffix of an output that names a credential's secret.
const SECRET_ARN: &str = "SecretArn";

/// `GET /pools/{pool}/claims/{claim}/credentials`.
pub(crate) async fn claim_credentials(deps: &Deps, caller: &Caller, pool: &str, claim: &str) -> ApiResult {
    let p = get_pool_item(deps, pool).await?;
    let c = get_claim_item(deps, pool, claim).await?;
    authorize(caller, &p, &c)?;
    let cluster = match &c.cluster {
        Some(id) => get_cluster_item(deps, pool, id).await?,
        None => None,
    };
    let Some(cluster) = cluster.filter(|cl| c.phase(Some(cl)) == ClaimPhase::Ready) else {
        return Err(ApiError::conflict(format!(
            "claim {claim} is not Ready: its cluster's credentials are handed out once it is"
        )));
    };
    let named: Vec<(&str, &String)> = cluster
        .outputs
        .iter()
        .filter_map(|(key, arn)| key.strip_suffix(SECRET_ARN).filter(|n| !n.is_empty()).map(|n| (n, arn)))
        .collect();
    if named.is_empty() {
        return Err(ApiError::not_found(format!(
            "cluster {} names no credentials: its installer gave no output ending in {SECRET_ARN}",
            cluster.id
        )));
    }
    let mut credentials = Map::new();
    for (name, arn) in named {
        let tags = deps.secrets.tags(arn).await.map_err(|e| unreadable(name, arn, e))?;
        if let Err(why) = secret_serves(arn, &tags, pool) {
            return Err(ApiError::new(502, "CredentialsRefused", format!("{name}: {why}")));
        }
        let value = deps.secrets.secret(arn).await.map_err(|e| unreadable(name, arn, e))?;
        credentials.insert(name.to_owned(), Value::String(value.expose().to_owned()));
    }
    Ok((200, json!({"pool": pool, "claim": claim, "cluster": cluster.id, "credentials": credentials})))
}

/// A secret that could not be read: busy when trying again may help, else a 502 naming the secret (never a value).
fn unreadable(name: &str, arn: &str, e: apiary_ports::Error) -> ApiError {
    if e.is_retryable() {
        return ApiError::busy("the service is busy; try again");
    }
    tracing::warn!(secret = arn, error = %e, "a claim's credentials could not be read");
    ApiError::new(502, "CredentialsUnavailable", format!("{name}: the secret {arn} could not be read: {e}"))
}
