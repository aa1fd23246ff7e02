//! The reaper's pass over one pool ([`apiary_planner::reaper`]), made by the power function on a reap message
//! (the reconcile sends one when a pass is due): the power function is the one that reaches the pool's cloud.

use apiary_planner::{reaper, Snapshot, Timestamp};
use apiary_ports::messages::ReconcileMessage;
use apiary_ports::metrics;
use apiary_ports::platform::{orphan, Target};
use apiary_ports::store::{Cond, Item, Key, Write};
use apiary_ports::{Deps, Error, Result};

/// The pass over `pool`, if one is still due. A late or repeated message finds it made from the pool item alone
/// (one GetItem), before the partition is read.
pub async fn pass(deps: &Deps, pool: &str) -> Result<Vec<String>> {
    let now = deps.clock.now();
    match deps.store.get(pool, &Key::Pool).await? {
        Some(Item::Pool(p)) if reaper::due(&p, now) => {}
        _ => return Ok(vec![]),
    }
    let Some(mut snapshot) = deps.store.read_pool(pool).await? else { return Ok(vec![]) };
    if !reaper::due(&snapshot.pool, now) {
        return Ok(vec![]);
    }
    let reaped = match reap(deps, &mut snapshot, now).await {
        // Another pass recorded itself first: that one looked.
        Err(Error::Conflict(_)) => return Ok(vec![]),
        other => other?,
    };
    if snapshot.pool.deletion_requested_at.is_some() {
        // A deleting pool goes once a pass found nothing of it left: let it see this one.
        deps.queue.reconcile(&ReconcileMessage::new(pool.to_owned(), "reaped")).await?;
    }
    Ok(reaped)
}

/// The pass over the pool of `snapshot`: lists the machines that carry the pool's mark,
/// remembers in the pool's status which belong to no cluster of it and since when (a write conditional on the
/// pool's revision: a lost one waits for the next pass), and deprovisions those past their grace (a deleting
/// pool's at once), each logged with its machines. The infraIds reaped.
async fn reap(deps: &Deps, snapshot: &mut Snapshot, now: Timestamp) -> Result<Vec<String>> {
    let (pool, spec) = (snapshot.pool.name.clone(), snapshot.pool.spec.clone());
    let machinery = deps.platforms.of(&spec)?;
    // A provisioner that cannot list what it made has nothing to look at: the pass is recorded all the same (a
    // deleting pool waits for one).
    let marked = match machinery.marked(&pool, &spec, now).await {
        Ok(marked) => {
            crate::credentials::record(deps, &snapshot.pool, &crate::credentials::Credentials::Accepted).await;
            marked.unwrap_or_default()
        }
        Err(Error::Credentials(why)) => {
            // Nothing was listed: the pass is not made (a deleting pool is not cleared), and the pool says why.
            crate::credentials::record(deps, &snapshot.pool, &crate::credentials::Credentials::Refused(why)).await;
            return Ok(vec![]);
        }
        Err(e) => return Err(e),
    };
    let review = reaper::review(snapshot, marked.iter().map(|m| m.infra_id.as_str()), now);
    let mut remembered = snapshot.pool.clone();
    remembered.status.orphans = Some(review.orphans.clone());
    remembered.rev += 1;
    let write = Write::Put(Item::Pool(Box::new(remembered.clone())), Cond::Rev(snapshot.pool.rev));
    deps.store.write(&pool, vec![write]).await?;
    snapshot.pool = remembered;
    for (infra_id, first_seen) in &review.orphans.seen {
        let machines: Vec<&str> =
            marked.iter().filter(|m| &m.infra_id == infra_id).map(|m| m.machine.as_str()).collect();
        tracing::warn!(pool, infra_id, ?machines, %first_seen, "orphaned machines: no cluster of the pool has their infraId");
    }
    let mut reaped = vec![];
    for infra_id in review.reap {
        let first_seen = review.orphans.seen.get(&infra_id).copied().unwrap_or(now);
        let cluster = orphan(&infra_id, first_seen);
        let target = Target { pool: &pool, spec: &spec, cluster: &cluster, now };
        match machinery.deprovision(target).await {
            Ok(t) => {
                tracing::warn!(pool, infra_id, %first_seen, remaining = t.remaining, refused = ?t.refused,
                    "reaped orphaned machines: no cluster of the pool had their infraId for the grace period");
                reaped.push(infra_id);
            }
            Err(e) => tracing::warn!(pool, infra_id, error = %e, "the orphaned machines could not be deprovisioned"),
        }
    }
    deps.metrics.emit(metrics::orphans(&deps.config.stack, &pool, review.orphans.seen.len(), reaped.len(), now));
    Ok(reaped)
}
