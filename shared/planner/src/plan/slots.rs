//! The planner's view of the pool's clusters: one [`Slot`] per cluster, in age order, and the buckets
//! of the classification the steps share ([`Buckets`]).

use crate::hash::FastMap;
use crate::model::{Cluster, DesiredPower};

/// The cluster behind a slot: borrowed from the snapshot, or made by this plan. Kept small so that sorting and
/// scanning ten thousand slots stays in cache.
pub(super) enum Item<'a> {
    Stored(&'a Cluster),
    New(Box<Cluster>),
}

impl std::ops::Deref for Item<'_> {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        match self {
            Item::Stored(c) => c,
            Item::New(c) => c,
        }
    }
}

/// How a cluster's poolVersion compares with the pool's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Version {
    /// None recorded: it may or may not match (Hive's "unknown"). Replaced first.
    Unknown,
    /// Another version.
    Mismatched,
    /// The pool's.
    Current,
}

/// A cluster as the plan sees it: the stored item (or a new one) plus what the plan changed so far.
pub(super) struct Slot<'a> {
    pub(super) c: Item<'a>,
    pub(super) rev: u64,
    pub(super) claimed: bool,
    pub(super) marked: bool,
    pub(super) deleting: bool,
    pub(super) power: Option<DesiredPower>,
    pub(super) name_removed: bool,
    /// Its inventory name is still there, but the entry's parameters are not the ones it was made with: it goes
    /// as one whose name was removed does (`name_removed` is set too), for this reason.
    pub(super) entry_changed: bool,
    pub(super) version: Version,
}

impl Slot<'_> {
    pub(super) fn is_new(&self) -> bool {
        matches!(self.c, Item::New(_))
    }
    pub(super) fn installing(&self) -> bool {
        !self.deleting && self.c.installed_at.is_none() && !self.c.is_broken()
    }
    /// Unclaimed, not on its way out: the clusters the pool's own logic counts.
    pub(super) fn unassigned(&self) -> bool {
        !self.deleting && !self.claimed && !self.marked && !self.name_removed
    }
    pub(super) fn stale(&self) -> bool {
        self.version != Version::Current
    }
}

/// The classification the steps share, as indexes into the age-ordered slots.
#[derive(Default)]
pub(super) struct Buckets {
    pub(super) installing: Vec<usize>,
    pub(super) standby: Vec<usize>,
    pub(super) assignable: Vec<usize>,
    pub(super) broken: Vec<usize>,
    /// Released by a claim, or holding a removed inventory name: delete within budget.
    pub(super) marked: Vec<usize>,
    /// Unassigned clusters from another poolVersion (also in one of the buckets above): those with no version
    /// recorded first, then the mismatched ones, each oldest first (Hive's order of replacement).
    pub(super) stale: Vec<usize>,
    /// Whether any of `stale` has a mismatched (not just unknown) version.
    pub(super) mismatched: bool,
    pub(super) claimed: usize,
    pub(super) deleting: usize,
}

impl Buckets {
    pub(super) fn unassigned(&self) -> usize {
        self.installing.len() + self.standby.len() + self.assignable.len() + self.broken.len()
    }

    /// The order in which excess clusters go, least useful first (Hive's): installing newest first (furthest
    /// from done), then standby oldest first, then assignable oldest first.
    pub(super) fn excess_order(&self) -> impl Iterator<Item = usize> + '_ {
        self.installing.iter().rev().chain(&self.standby).chain(&self.assignable).copied()
    }
}

/// The slots by what they are now: the buckets every step of the plan picks from.
pub(super) fn classify(slots: &[Slot<'_>]) -> Buckets {
    let mut b = Buckets::default();
    for (i, s) in slots.iter().enumerate() {
        if s.deleting {
            b.deleting += 1;
            continue;
        }
        if s.marked || s.name_removed {
            b.marked.push(i);
            continue;
        }
        if s.claimed {
            b.claimed += 1;
            continue;
        }
        if s.stale() {
            b.stale.push(i);
            b.mismatched |= s.version == Version::Mismatched;
        }
        if s.c.is_broken() {
            b.broken.push(i);
        } else if s.c.installed_at.is_none() {
            b.installing.push(i);
        } else if s.c.can_serve() {
            b.assignable.push(i);
        } else {
            b.standby.push(i);
        }
    }
    // Unknown versions first, each kind oldest first (the slots are in age order; the sort is stable).
    b.stale.sort_by_key(|&i| slots[i].version);
    b
}

/// Stored clusters' ids → slot index (keys borrowed from the snapshot, so slots stay mutable).
pub(super) fn stored_index<'a>(slots: &[Slot<'a>]) -> FastMap<&'a str, usize> {
    let mut index = FastMap::with_capacity_and_hasher(slots.len(), Default::default());
    for (i, slot) in slots.iter().enumerate() {
        if let Item::Stored(c) = slot.c {
            index.insert(c.id.as_str(), i);
        }
    }
    index
}
