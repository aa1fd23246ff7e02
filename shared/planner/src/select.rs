//! Claims by labels: which pools a label selector matches, which of them a claim goes to, and the label index the
//! reconcile keeps so that a claim finds the matching pools without reading every pool.
//!
//! A claim may name `selector.matchLabels` instead of a pool. The claim API reads the pools indexed under each of
//! the selector's labels, keeps those whose labels hold every one (and that the caller may claim from), and ranks
//! them with [`rank`]: a pool with a Running spare first (as fast an answer as a pool's own claim; a burst spread
//! over such pools by [`spread`]), else the pool
//! that will serve it soonest, its standby clusters (a resume away) before its installing ones (an install away),
//! in each case counting only those not already owed to the claims waiting there; equal pools by name, so the
//! choice is deterministic.
//!
//! The index: every label of a pool has an entry naming the pool. The pool's status records which labels have
//! one ([`PoolStatus::labels_indexed`](crate::PoolStatus::labels_indexed)); each plan moves that record a
//! [`INDEX_STEP`] of changes toward the spec's labels ([`index_step`]), and the store writes the entries that
//! changed in the same transaction as the status, so the record never names an entry that is not there.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Pool;
use crate::validate::limits::{MAX_LABEL_KEY_LEN, MAX_LABEL_VALUE_LEN};
use crate::validate::FieldError;

/// A pool's labels, or a selector's.
pub type Labels = BTreeMap<String, String>;

/// Most labels a selector may name.
pub const MAX_SELECTOR_LABELS: usize = 16;

/// Most changes to a pool's label index one plan makes (its entries are written in one transaction with the pool
/// item and the profile's, within DynamoDB's 100 items): any change of labels takes at most two plans.
pub const INDEX_STEP: usize = 96;

/// A claim's choice of pools by their labels, as Kubernetes writes one (`matchLabels` only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    /// Labels a pool must carry, each with this value.
    #[serde(default)]
    pub match_labels: Labels,
}

impl Selector {
    /// Whether a pool labelled `labels` matches: it carries every label of the selector, with its value.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// Checks a claim's `selector` (given as `field`): 1 to [`MAX_SELECTOR_LABELS`] labels, each key and value as a
/// pool's labels take them.
pub fn validate_selector(field: &str, selector: &Selector) -> Result<(), FieldError> {
    let labels = &selector.match_labels;
    let field = format!("{field}.matchLabels");
    if labels.is_empty() || labels.len() > MAX_SELECTOR_LABELS {
        return Err(FieldError::new(
            field,
            format!("name 1 to {MAX_SELECTOR_LABELS} labels a pool must carry, got {}", labels.len()),
        ));
    }
    for (key, value) in labels {
        if key.is_empty() || key.len() > MAX_LABEL_KEY_LEN {
            return Err(FieldError::new(&field, format!("a label key must be 1 to {MAX_LABEL_KEY_LEN} characters")));
        }
        if value.len() > MAX_LABEL_VALUE_LEN {
            return Err(FieldError::new(
                format!("{field}.{key}"),
                format!("at most {MAX_LABEL_VALUE_LEN} characters, got {}", value.len()),
            ));
        }
    }
    Ok(())
}

/// How soon a pool can serve one more claim, from its status as its last plan left it: its clusters of each kind
/// not already owed to the claims waiting there (the oldest claims take Running spares first, then standbys, then
/// installing clusters, as the reconcile serves them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Readiness {
    /// Running spares no waiting claim is owed.
    pub running: u32,
    /// Hibernated spares no waiting claim is owed: a resume away.
    pub standby: u32,
    /// Installing clusters no waiting claim is owed: an install away.
    pub installing: u32,
    /// Claims waiting beyond all of those.
    pub owed: u32,
}

impl Readiness {
    /// The readiness of `pool` as its status says.
    pub fn of(pool: &Pool) -> Self {
        let s = &pool.status;
        let mut owed = s.pending_claims;
        let mut free = |have: u32| {
            let taken = have.min(owed);
            owed -= taken;
            have - taken
        };
        let (running, standby, installing) = (free(s.ready), free(s.standby), free(s.installing));
        Self { running, standby, installing, owed }
    }

    /// The order of preference: a free Running spare (most first), a free standby, a free installing cluster,
    /// then the fewest claims already waiting past what the pool holds.
    fn key(&self) -> (Reverse<u8>, Reverse<u32>, u32) {
        let (tier, free) = if self.running > 0 {
            (3, self.running)
        } else if self.standby > 0 {
            (2, self.standby)
        } else if self.installing > 0 {
            (1, self.installing)
        } else {
            (0, 0)
        };
        (Reverse(tier), Reverse(free), self.owed)
    }
}

/// `pools` in the order a claim by selector tries them ([`Readiness`]), equal pools by name.
pub fn rank<'a>(pools: impl IntoIterator<Item = &'a Pool>) -> Vec<&'a Pool> {
    let mut ranked: Vec<&Pool> = pools.into_iter().collect();
    ranked.sort_by(|a, b| Readiness::of(a).key().cmp(&Readiness::of(b).key()).then_with(|| a.name.cmp(&b.name)));
    ranked
}

/// The pools of `ranked` with a Running spare, in the order a claim tries them: from the one `drawn` (a number
/// drawn from the claim's name) falls on, each pool as likely as its share of the free Running spares, then the
/// others in rank order. So a burst of claims by one selector spreads over the matching pools (their partitions
/// serve it side by side) in proportion to what each has ready, instead of all racing for the first pool's spares;
/// the same claim always draws the same pool.
pub fn spread<'a>(ranked: &[&'a Pool], drawn: u64) -> Vec<&'a Pool> {
    let with: Vec<(&Pool, u64)> =
        ranked.iter().map(|p| (*p, u64::from(Readiness::of(p).running))).filter(|(_, free)| *free > 0).collect();
    let total: u64 = with.iter().map(|(_, free)| free).sum();
    if total == 0 {
        return vec![];
    }
    let mut at = drawn % total;
    let first = with
        .iter()
        .position(|(_, free)| {
            let here = at < *free;
            at = at.saturating_sub(*free);
            here
        })
        .unwrap_or(0);
    with[first..].iter().chain(&with[..first]).map(|(p, _)| *p).collect()
}

/// The pool of `ranked` a claim waits in when none gave it a spare at once: the first (the one that serves it
/// soonest, [`rank`]) but those whose status named a Running spare their index no longer had (`taken` since their
/// last plan: their status overstates them), unless nothing else matches.
pub fn where_to_wait<'a>(ranked: &[&'a Pool], taken: &[&str]) -> Option<&'a Pool> {
    ranked.iter().find(|p| !taken.contains(&p.name.as_str())).or(ranked.first()).copied()
}

/// The labels whose index entries exist after one plan's step from `indexed` (what the pool's status records;
/// `None` when it records nothing, as for a pool made before the index) toward `wanted` (the spec's labels):
/// entries of labels gone or changed are removed first, then the new ones added, at most [`INDEX_STEP`] changes in
/// all, so the labels indexed stay within the larger of the two sets.
pub fn index_step(indexed: Option<&Labels>, wanted: &Labels) -> Labels {
    let mut next = indexed.cloned().unwrap_or_default();
    let mut budget = INDEX_STEP;
    let stale: Vec<String> = next.iter().filter(|(k, v)| wanted.get(*k) != Some(*v)).map(|(k, _)| k.clone()).collect();
    for key in stale.into_iter().take(budget) {
        next.remove(&key);
        budget -= 1;
    }
    for (key, value) in wanted {
        if budget == 0 {
            break;
        }
        if !next.contains_key(key) {
            next.insert(key.clone(), value.clone());
            budget -= 1;
        }
    }
    next
}

/// One label: its key and value.
pub type Label = (String, String);

/// The index entries a step from `before` to `after` writes: the labels to add, and those to remove.
pub fn index_changes(before: Option<&Labels>, after: &Labels) -> (Vec<Label>, Vec<Label>) {
    let empty = Labels::new();
    let before = before.unwrap_or(&empty);
    let added = after.iter().filter(|(k, v)| before.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone()));
    let removed = before.iter().filter(|(k, v)| after.get(*k) != Some(*v)).map(|(k, v)| (k.clone(), v.clone()));
    (added.collect(), removed.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FakePlatform, Platform, PoolSpec, PoolStatus};
    use chrono::{TimeZone, Utc};

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn pool(name: &str, ready: u32, standby: u32, installing: u32, pending: u32) -> Pool {
        let status = PoolStatus { ready, standby, installing, pending_claims: pending, ..PoolStatus::default() };
        Pool {
            name: name.into(),
            spec: PoolSpec::new(4, Platform::Fake(FakePlatform::default())),
            status,
            next_wake_at: None,
            deletion_requested_at: None,
            created_at: Utc.with_ymd_and_hms(2026, 11, 28, 9, 0, 0).unwrap(),
            rev: 1,
            later: Default::default(),
        }
    }

    #[test]
    fn a_selector_matches_pools_that_carry_each_of_its_labels() {
        let s = Selector { match_labels: labels(&[("cloud", "aws"), ("version", "4.16")]) };
        assert!(s.matches(&labels(&[("cloud", "aws"), ("version", "4.16"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("cloud", "aws"), ("version", "4.15")])));
        assert!(!s.matches(&labels(&[("cloud", "aws")])));
    }

    #[test]
    fn a_selector_names_one_to_sixteen_labels_of_valid_length() {
        let err = |s: &Selector| validate_selector("selector", s).expect_err("refused");
        assert_eq!(err(&Selector::default()).field, "selector.matchLabels");
        let many = (0..=MAX_SELECTOR_LABELS).map(|i| (format!("k{i}"), "v".to_owned())).collect();
        assert_eq!(err(&Selector { match_labels: many }).field, "selector.matchLabels");
        let long = Selector { match_labels: labels(&[("cloud", &"a".repeat(MAX_LABEL_VALUE_LEN + 1))]) };
        assert_eq!(err(&long).field, "selector.matchLabels.cloud");
        assert!(validate_selector("selector", &Selector { match_labels: labels(&[("cloud", "aws")]) }).is_ok());
    }

    #[test]
    fn readiness_counts_only_what_waiting_claims_are_not_owed() {
        let r = Readiness::of(&pool("a", 2, 3, 4, 4));
        assert_eq!(r, Readiness { running: 0, standby: 1, installing: 4, owed: 0 });
        let r = Readiness::of(&pool("a", 1, 0, 1, 5));
        assert_eq!(r, Readiness { running: 0, standby: 0, installing: 0, owed: 3 });
    }

    #[test]
    fn a_running_spare_comes_first_then_a_standby_then_an_install_then_the_shortest_line() {
        let pools = [
            pool("installing", 0, 0, 3, 0),
            pool("owed", 0, 0, 0, 2),
            pool("standby", 0, 2, 0, 0),
            pool("busy", 0, 0, 0, 7),
            pool("one-ready", 1, 0, 0, 0),
            pool("two-ready", 3, 0, 0, 1),
            pool("also-two", 2, 0, 0, 0),
        ];
        let names: Vec<&str> = rank(&pools).iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["also-two", "two-ready", "one-ready", "standby", "installing", "owed", "busy"]);
    }

    #[test]
    fn claims_spread_over_the_pools_with_spares_as_their_spares_are_shared() {
        let pools = [pool("a", 3, 0, 0, 0), pool("b", 1, 0, 0, 0), pool("c", 0, 4, 0, 0)];
        let ranked = rank(&pools);
        let names = |drawn: u64| spread(&ranked, drawn).iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        // Three of every four draws fall on a's spares, one on b's; the pool without a Running spare never.
        assert_eq!(names(0), ["a", "b"]);
        assert_eq!(names(2), ["a", "b"]);
        assert_eq!(names(3), ["b", "a"]);
        assert_eq!(names(7), ["b", "a"]);
        let firsts: Vec<String> = (0..400).map(|d| names(d)[0].clone()).collect();
        assert_eq!(firsts.iter().filter(|n| *n == "a").count(), 300);
        assert!(spread(&rank(&[pool("c", 0, 4, 0, 0)]), 5).is_empty());
    }

    #[test]
    fn a_claim_waits_where_it_is_served_soonest_but_not_where_spares_were_just_taken() {
        let pools = [pool("a", 1, 0, 0, 0), pool("b", 0, 2, 0, 0)];
        let ranked = rank(&pools);
        let name = |p: Option<&Pool>| p.map(|p| p.name.clone());
        assert_eq!(name(where_to_wait(&ranked, &[])), Some("a".into()));
        assert_eq!(name(where_to_wait(&ranked, &["a"])), Some("b".into()));
        assert_eq!(name(where_to_wait(&ranked, &["a", "b"])), Some("a".into()));
        assert_eq!(name(where_to_wait(&[], &[])), None);
    }

    #[test]
    fn the_index_moves_toward_the_labels_removing_first_and_a_step_at_a_time() {
        let wanted = labels(&[("cloud", "aws"), ("team", "x")]);
        assert_eq!(index_step(None, &wanted), wanted);
        let indexed = labels(&[("cloud", "gcp"), ("old", "1")]);
        assert_eq!(index_step(Some(&indexed), &wanted), wanted);
        let (added, removed) = index_changes(Some(&indexed), &wanted);
        assert_eq!(added, [("cloud".to_owned(), "aws".to_owned()), ("team".to_owned(), "x".to_owned())]);
        assert_eq!(removed, [("cloud".to_owned(), "gcp".to_owned()), ("old".to_owned(), "1".to_owned())]);

        // Past a step's budget: the stale ones go first, never more indexed than the larger set.
        let old: Labels = (0..64).map(|i| (format!("o{i:02}"), "v".to_owned())).collect();
        let new: Labels = (0..64).map(|i| (format!("n{i:02}"), "v".to_owned())).collect();
        let first = index_step(Some(&old), &new);
        assert_eq!(first.len(), INDEX_STEP - 64);
        assert!(first.keys().all(|k| k.starts_with('n')));
        assert_eq!(index_step(Some(&first), &new), new);
        assert_eq!(index_step(Some(&new), &new), new);
    }
}
