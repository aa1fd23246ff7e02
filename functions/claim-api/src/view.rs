//! Items as the API shows them.

use apiary_planner::{Claim, Cluster, Pool};
use serde::Serialize;
use serde_json::{json, Value};

/// Any serializable value as JSON.
pub(crate) fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A pool as the API shows it: the item, and for an AWS pool that names a role the ExternalId Apiary passes
/// when it assumes it (`status.externalId`: what the member account's role must require).
pub(crate) fn pool_view(pool: &Pool, stack_id: &str) -> Value {
    let mut v = to_json(pool);
    if let apiary_planner::Platform::Aws(apiary_planner::AwsPlatform { role_arn: Some(_), .. }) = &pool.spec.platform {
        if let Some(status) = v.get_mut("status").and_then(Value::as_object_mut) {
            status.insert("externalId".into(), apiary_planner::external_id(stack_id, &pool.name).into());
        }
    }
    v
}

/// A claim as the API shows it, with its `phase` (the planner's [`Claim::phase`]): Pending (no cluster yet),
/// Assigned (cluster not Running), Ready (cluster Running) or Releasing. The cluster carries what its installer
/// said of it (`outputs`: URLs, the ARN of the kubeconfig's secret), never a secret itself, and while it runs its
/// machines with their addresses.
pub(crate) fn claim_view(pool: &Pool, claim: &Claim, cluster: Option<&Cluster>) -> Value {
    let mut view = json!({
        "pool": pool.name,
        "name": claim.name,
        "owner": claim.owner,
        "subjects": claim.subjects,
        "phase": claim.phase(cluster),
        "createdAt": claim.created_at,
        "assignedAt": claim.assigned_at,
        "lifetime": claim.effective_lifetime(pool.spec.claim_lifetime.as_ref()).map(apiary_planner::duration::format),
        "expiresAt": claim.expires_at(pool.spec.claim_lifetime.as_ref()),
        "cluster": cluster.map(|c| json!({
            "id": c.id,
            "clusterName": c.cluster_name,
            "infraId": c.infra_id,
            "release": c.release,
            "powerState": c.power_state,
            "outputs": c.outputs,
            // Addresses as found when the cluster last became Running: shown only while it runs.
            "machines": c.machines.iter().filter(|_| c.is_running()).collect::<Vec<_>>(),
        })),
        "conditions": claim.conditions,
    });
    // A claim made by labels says which: it is found by its name alone (`/claims/{name}`).
    if let Some(labels) = &claim.selector {
        view["selector"] = json!({ "matchLabels": labels });
    }
    view
}
