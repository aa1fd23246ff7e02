//! The writes a planner action makes, computed with the planner's own reference semantics, grouped into
//! transactions, and each told to the pool's trail.

use super::*;

/// `actions` cut into the groups written as one transaction each, in order: a [`Action::ReserveName`] with the
/// [`Action::CreateCluster`] of its holder that the planner puts right after it (a lease written alone, whose
/// cluster then lost its condition, would hold the name for a cluster that never came until the lease's grace
/// ran out); every other action alone.
pub fn transactions(actions: &[Action]) -> Vec<&[Action]> {
    let mut out = Vec::new();
    let mut rest = actions;
    while !rest.is_empty() {
        let paired = match rest {
            [Action::ReserveName { holder, .. }, Action::CreateCluster { cluster }, ..] => &cluster.id == holder,
            _ => false,
        };
        let (group, tail) = rest.split_at(if paired { 2 } else { 1 });
        out.push(group);
        rest = tail;
    }
    out
}

/// A cluster's change from `stored` to `written` (at its new revision) at `now`, as the power function writes it:
/// the put on `stored`'s revision with the events told in its transaction, and the events of its progress
/// ([`EventType::is_progress`](apiary_planner::events::EventType::is_progress)), each appended alone once the
/// change is written. Alone, the put is one write unit a KB of the item; in a transaction with its event it
/// was two, and the event's two.
pub fn cluster_change(stored: &Cluster, written: &Cluster, now: Timestamp) -> (Vec<Write>, Vec<Event>) {
    let (after, with): (Vec<Event>, Vec<Event>) =
        apiary_planner::events::of_cluster(stored, Some(written), now).into_iter().partition(|e| e.kind.is_progress());
    let mut writes = vec![Write::Put(Item::Cluster(Box::new(written.clone())), Cond::Rev(stored.rev))];
    writes.extend(with.into_iter().map(Write::Append));
    (writes, after)
}

/// The writes of `action` on `snapshot`, as [`writes_for`] gives them, and the events it tells the pool's trail at
/// `now` ([`apiary_planner::events::of_action`]), with what the pool's `notify` webhooks hear of them
/// ([`apiary_planner::notify::of_action`]), to be written in the same transaction.
pub fn writes_with_events(snapshot: &mut Snapshot, action: &Action, now: Timestamp) -> Result<Vec<Write>> {
    let events = apiary_planner::events::of_action(snapshot, action, now);
    let events = apiary_planner::notify::of_action(snapshot, action, events);
    let mut writes = writes_for(snapshot, action)?;
    writes.extend(events.into_iter().map(Write::Append));
    Ok(writes)
}

/// The writes that carry out `action` on `snapshot`, which is updated to the state after
/// it (as the reference [`apply_mut`] defines it). Non-write actions give no writes.
pub fn writes_for(snapshot: &mut Snapshot, action: &Action) -> Result<Vec<Write>> {
    let one = Plan { actions: vec![action.clone()], status: Default::default(), wake_at: None };
    let before = matches!(action, Action::UpdatePool { .. } | Action::DeletePool { .. }).then(|| snapshot.pool.clone());
    let selected = match action {
        Action::ReleaseClaim { claim: name, .. } => {
            snapshot.claims.iter().any(|c| &c.name == name && c.selector.is_some())
        }
        _ => false,
    };
    let kept = apply_mut(snapshot, &one).map_err(|c| Error::Conflict(c.what))?;
    let cluster = |s: &Snapshot, id: &str| s.clusters.iter().find(|c| c.id == id).cloned().map(Box::new);
    let claim = |s: &Snapshot, name: &str| s.claims.iter().find(|c| c.name == name).cloned().map(Box::new);
    let missing = |what: &str| Error::Conflict(format!("{what} vanished while applying"));
    Ok(match action {
        Action::ReleaseClaim { claim: name, expected_rev, cluster: held, .. } => {
            let mut w = vec![Write::Delete(Key::Claim(name.clone()), Cond::Rev(*expected_rev))];
            // A claim made by selector takes its name's entry along (the claim's condition holds the transaction;
            // while the claim is there its entry names no other pool).
            if selected {
                w.push(Write::Delete(Key::ClaimName(name.clone()), Cond::Any));
            }
            if let Some((id, rev)) = held {
                let c = cluster(snapshot, id).ok_or_else(|| missing(id))?;
                w.push(Write::Put(Item::Cluster(c), Cond::Rev(*rev)));
            }
            w
        }
        Action::AssignClaim { claim: name, claim_rev, cluster: id, cluster_rev, .. } => vec![
            Write::Put(
                Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?),
                Cond::RevUnclaimedRunning(*cluster_rev),
            ),
            Write::Put(Item::Claim(claim(snapshot, name).ok_or_else(|| missing(name))?), Cond::RevPending(*claim_rev)),
        ],
        Action::ReserveName { name, holder, at, replacing } => {
            let cond = replacing.clone().map_or(Cond::Absent, Cond::Holder);
            vec![Write::Put(
                Item::Lease(NameLease { name: name.clone(), holder: holder.clone(), reserved_at: *at }),
                cond,
            )]
        }
        Action::ReleaseName { name, holder } => {
            vec![Write::Delete(Key::Lease(name.clone()), Cond::Holder(holder.clone()))]
        }
        // Creating or deleting a cluster changes what maxSize and maxConcurrent bound: it holds only while the pool
        // is still at the revision the plan read, so a spec changed meanwhile cancels the rest of a stale plan.
        Action::CreateCluster { cluster: c } => vec![
            Write::Put(Item::Cluster(c.clone()), Cond::Absent),
            Write::Check(Key::Pool, Cond::Rev(snapshot.pool.rev)),
        ],
        Action::DeleteCluster { cluster: id, expected_rev, .. } => vec![
            Write::Put(Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?), Cond::Rev(*expected_rev)),
            Write::Check(Key::Pool, Cond::Rev(snapshot.pool.rev)),
        ],
        Action::SetPowerState { cluster: id, expected_rev, .. } => {
            vec![Write::Put(Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?), Cond::Rev(*expected_rev))]
        }
        Action::UpdatePool { expected_rev, .. } => match before {
            Some(before) => pool_writes(&before, &mut snapshot.pool, *expected_rev),
            None => vec![],
        },
        // The profile's item goes with the pool (a pool made again under its name starts without one).
        Action::DeletePool { expected_rev } => {
            debug_assert!(!kept);
            let found = before.as_ref().and_then(profile_found);
            let mut w = vec![Write::Delete(Key::Pool, Cond::Rev(*expected_rev))];
            w.extend(found.map(|r| Write::Delete(Key::Profile, Cond::Rev(r))));
            // And its entries in the label index.
            let indexed = before.as_ref().and_then(|p| p.status.labels_indexed.as_ref());
            w.extend(label_writes(&snapshot.pool.name, indexed, Some(&Labels::new())));
            w
        }
        Action::Deprovision { .. } | Action::CheckPower { .. } => vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_planner::Profile;
    use chrono::DateTime;

    #[test]
    fn a_name_is_written_with_the_cluster_that_takes_it_and_nothing_else_is_grouped() {
        let at = DateTime::UNIX_EPOCH;
        let reserve =
            |holder: &str| Action::ReserveName { name: "foo".into(), holder: holder.into(), at, replacing: None };
        let create =
            |id: &str| Action::CreateCluster { cluster: Box::new(Cluster::new(id, "foo", format!("{id}-x"), at)) };
        let check = |id: &str| Action::CheckPower { cluster: id.into() };
        let actions = [check("a"), reserve("b"), create("b"), create("c"), reserve("d"), create("e")];
        let sizes: Vec<usize> = transactions(&actions).iter().map(|g| g.len()).collect();
        assert_eq!(sizes, [1, 2, 1, 1, 1], "b's lease with b; d's lease is not e's");
        assert!(transactions(&[]).is_empty());
    }

    fn learned(kept: Option<u64>, buckets: bool) -> Snapshot {
        let at = DateTime::UNIX_EPOCH;
        let full = || apiary_planner::Buckets(vec![1; apiary_planner::BUCKETS]);
        let profile = Profile {
            time_zone: "UTC".into(),
            since: at,
            open: at,
            open_count: 0,
            mean: if buckets { full() } else { Buckets::default() },
            spread: if buckets { full() } else { Buckets::default() },
            worth: None,
            kept,
        };
        let demand = apiary_planner::Demand {
            claims_per_hour: 1.0,
            at,
            counted_until: at,
            counted_at_edge: vec![],
            profile: Some(profile),
        };
        let mut pool: Pool = serde_json::from_value(serde_json::json!({
            "name": "p", "createdAt": at, "rev": 7,
            "spec": {"size": 1, "platform": {"aws": {
                "region": "us-east-1", "roleArn": "arn:aws:iam::123456789012:role/r"}}}
        }))
        .expect("pool");
        pool.status.demand = Some(demand);
        Snapshot { pool, clusters: vec![], claims: vec![], leases: vec![] }
    }

    #[test]
    fn a_profile_whose_item_was_missing_is_written_afresh_and_a_deleted_pool_takes_its_profile_along() {
        // The pool keeps its buckets apart, but the read found no profile item: the planner learns afresh, and the
        // new buckets are written where nothing is (a condition on the missing revision would lose forever).
        let mut snap = learned(Some(3), false);
        let mut status = snap.pool.status.clone();
        let fresh = status.profile_mut().expect("profile");
        let full = learned(None, true).pool.status.demand.and_then(|d| d.profile).expect("profile");
        (fresh.mean, fresh.spread, fresh.kept) = (full.mean, full.spread, None);
        let action = Action::UpdatePool { expected_rev: 7, status: Box::new(status), next_wake_at: None };
        let writes = writes_for(&mut snap, &action).expect("writes");
        assert!(matches!(&writes[1], Write::Put(Item::Profile(p), Cond::Absent) if p.rev == 8), "{writes:?}");
        assert_eq!(snap.pool.status.profile().and_then(|p| p.kept), Some(8));

        let mut snap = learned(Some(3), true);
        let writes = writes_for(&mut snap, &Action::DeletePool { expected_rev: 7 }).expect("writes");
        assert_eq!(writes, [Write::Delete(Key::Pool, Cond::Rev(7)), Write::Delete(Key::Profile, Cond::Rev(3))]);
        let mut inline = learned(None, true);
        let writes = writes_for(&mut inline, &Action::DeletePool { expected_rev: 7 }).expect("writes");
        assert_eq!(writes, [Write::Delete(Key::Pool, Cond::Rev(7))], "a pool holding its own buckets has no item");
    }

    #[test]
    fn the_pool_item_never_holds_buckets_it_keeps_apart() {
        let apart = learned(Some(3), true).pool;
        let bare = stored(&apart);
        let p = bare.status.profile().expect("profile");
        assert!(p.mean.is_empty() && p.spread.is_empty() && p.kept == Some(3));
        let bytes = item_bytes("p", &Item::Pool(Box::new(apart.clone()))).expect("size");
        assert!(bytes < 1024, "{bytes}");
        // Read back with its item, the pool holds on the revision the read found.
        let item = ProfileItem { rev: 5, mean: Buckets(vec![2; apiary_planner::BUCKETS]), spread: Buckets::default() };
        let back = with_profile(bare.into_owned(), Some(item.clone()));
        let p = back.status.profile().expect("profile");
        assert_eq!((p.kept, &p.mean, &p.spread), (Some(5), &item.mean, &item.spread));
        let inline = learned(None, true).pool;
        assert_eq!(stored(&inline).as_ref(), &inline, "a pool holding its own buckets is stored as it is");
        assert!(item_bytes("p", &Item::Pool(Box::new(inline))).expect("size") > 5 * 1024);
    }
}
