//! Steps 4 and 9: claims let go of their clusters (released, expired, or their pool deleted), and pending
//! claims are served FIFO, oldest claim to oldest Running cluster.

use std::collections::BTreeSet;

use crate::model::{Claim, DesiredPower};

use super::planner::Planner;
use super::{bump, earliest, fifo, Action, ReleaseReason};

impl Planner<'_> {
    /// Step 9: claims the claimant released or whose lifetime ran out let go of their clusters.
    pub(super) fn release_claims(&mut self, deleting_pool: bool) {
        let lifetime = self.snap.pool.spec.claim_lifetime.as_ref();
        let mut claims: Vec<&Claim> = self.snap.claims.iter().collect();
        claims.sort_by(|a, b| fifo(a, b));
        let mut releases = Vec::new();
        for claim in claims {
            let expires = claim.expires_at(lifetime);
            let reason = if claim.release_requested_at.is_some() {
                ReleaseReason::Released
            } else if expires.is_some_and(|t| t <= self.now) {
                ReleaseReason::Expired
            } else if deleting_pool && claim.cluster.is_none() {
                ReleaseReason::PoolDeleted
            } else {
                self.wake_at(expires);
                continue;
            };
            releases.push((claim, reason));
        }
        if releases.is_empty() {
            return;
        }
        let index = self.stored_index();
        let mut released = BTreeSet::new();
        for (claim, reason) in releases {
            let cluster = claim.cluster.as_deref().and_then(|id| index.get(id).copied()).map(|i| {
                let slot = &mut self.slots[i];
                slot.marked = true;
                slot.claimed = false;
                (slot.c.id.clone(), bump(&mut slot.rev))
            });
            self.out.releases.push(Action::ReleaseClaim {
                claim: claim.name.clone(),
                expected_rev: claim.rev,
                cluster,
                reason,
            });
            released.insert(claim.name.as_str());
        }
        self.pending.retain(|(c, _)| !released.contains(c.name.as_str()));
    }

    /// Step 4: oldest pending claim ↔ oldest Running cluster. Only Running clusters are assignable (seed 002).
    pub(super) fn assign_claims(&mut self) {
        let assignable = self.classify().assignable;
        let served = self.pending.len().min(assignable.len());
        for ((claim, claim_rev), &i) in self.pending.drain(..served).zip(&assignable) {
            let slot = &mut self.slots[i];
            slot.claimed = true;
            slot.power = Some(DesiredPower::Running);
            self.out.assigns.push(Action::AssignClaim {
                claim: claim.name.clone(),
                claim_rev,
                cluster: slot.c.id.clone(),
                cluster_rev: bump(&mut slot.rev),
                at: self.now,
            });
            let lifetime = claim.effective_lifetime(self.snap.pool.spec.claim_lifetime.as_ref());
            let expiry = lifetime.map(|l| self.now + l);
            self.out.wake = earliest(self.out.wake, expiry);
        }
    }
}
