//! The `Store` port: one pool's partition of the table, read whole, written conditionally.
//!
//! Writes are described in domain terms ([`Write`]); the adapter turns one write into one conditional
//! PutItem/DeleteItem and several into one TransactWriteItems. A lost condition is [`Error::Conflict`], never a
//! generic error. [`writes_for`] gives the writes of a planner [`Action`], computed with the planner's own
//! reference semantics ([`apiary_planner::apply_mut`]) so the table and the reference cannot disagree.

use apiary_planner::{apply_mut, Action, Claim, Cluster, NameLease, Plan, Pool, Snapshot};
use async_trait::async_trait;

use crate::error::{Error, Result};

/// An item of a pool's partition.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The `POOL` item.
    Pool(Box<Pool>),
    /// A `CLUSTER#<id>` item.
    Cluster(Box<Cluster>),
    /// A `CLAIM#<name>` item.
    Claim(Box<Claim>),
    /// A `NAME#<name>` lease.
    Lease(NameLease),
}

/// An item's key within a pool's partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// The `POOL` item.
    Pool,
    /// `CLUSTER#<id>`.
    Cluster(String),
    /// `CLAIM#<name>`.
    Claim(String),
    /// `NAME#<name>`.
    Lease(String),
}

impl Item {
    /// The item's key.
    pub fn key(&self) -> Key {
        match self {
            Item::Pool(_) => Key::Pool,
            Item::Cluster(c) => Key::Cluster(c.id.clone()),
            Item::Claim(c) => Key::Claim(c.name.clone()),
            Item::Lease(l) => Key::Lease(l.name.clone()),
        }
    }
}

/// The condition a write holds on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// The item does not exist.
    Absent,
    /// The item is at this revision.
    Rev(u64),
    /// A cluster at this revision, unclaimed and Running: the only kind that can be assigned (seed 002).
    RevUnclaimedRunning(u64),
    /// A claim at this revision with no cluster yet.
    RevPending(u64),
    /// A lease held by this cluster id.
    Holder(String),
}

/// One conditional write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Write the whole item.
    Put(Item, Cond),
    /// Delete the item.
    Delete(Key, Cond),
}

/// One pool's partition in the table.
#[async_trait]
pub trait Store: Send + Sync {
    /// The pool and everything in its partition, read strongly consistently; `None` if the pool does not exist.
    async fn read_pool(&self, pool: &str) -> Result<Option<Snapshot>>;
    /// One item, read strongly consistently.
    async fn get(&self, pool: &str, key: &Key) -> Result<Option<Item>>;
    /// Every pool item (not their partitions).
    async fn list_pools(&self) -> Result<Vec<Pool>>;
    /// Writes all of `writes` or none: one write alone, several in one transaction. A failed condition is
    /// [`Error::Conflict`].
    async fn write(&self, pool: &str, writes: Vec<Write>) -> Result<()>;
}

/// The writes that carry out `action` on `snapshot`, which is updated to the state after
/// it (as the reference [`apply_mut`] defines it). Non-write actions give no writes.
pub fn writes_for(snapshot: &mut Snapshot, action: &Action) -> Result<Vec<Write>> {
    let one = Plan { actions: vec![action.clone()], status: Default::default(), wake_at: None };
    let kept = apply_mut(snapshot, &one).map_err(|c| Error::Conflict(c.what))?;
    let cluster = |s: &Snapshot, id: &str| s.clusters.iter().find(|c| c.id == id).cloned().map(Box::new);
    let claim = |s: &Snapshot, name: &str| s.claims.iter().find(|c| c.name == name).cloned().map(Box::new);
    let missing = |what: &str| Error::Conflict(format!("{what} vanished while applying"));
    Ok(match action {
        Action::ReleaseClaim { claim: name, expected_rev, cluster: held, .. } => {
            let mut w = vec![Write::Delete(Key::Claim(name.clone()), Cond::Rev(*expected_rev))];
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
        Action::ReserveName { name, holder, at } => {
            vec![Write::Put(
                Item::Lease(NameLease { name: name.clone(), holder: holder.clone(), reserved_at: *at }),
                Cond::Absent,
            )]
        }
        Action::ReleaseName { name, holder } => {
            vec![Write::Delete(Key::Lease(name.clone()), Cond::Holder(holder.clone()))]
        }
        Action::CreateCluster { cluster: c } => vec![Write::Put(Item::Cluster(c.clone()), Cond::Absent)],
        Action::DeleteCluster { cluster: id, expected_rev, .. }
        | Action::SetPowerState { cluster: id, expected_rev, .. } => {
            vec![Write::Put(Item::Cluster(cluster(snapshot, id).ok_or_else(|| missing(id))?), Cond::Rev(*expected_rev))]
        }
        Action::UpdatePool { expected_rev, .. } => {
            vec![Write::Put(Item::Pool(Box::new(snapshot.pool.clone())), Cond::Rev(*expected_rev))]
        }
        Action::DeletePool { expected_rev } => {
            debug_assert!(!kept);
            vec![Write::Delete(Key::Pool, Cond::Rev(*expected_rev))]
        }
        Action::Deprovision { .. } | Action::CheckPower { .. } => vec![],
    })
}
