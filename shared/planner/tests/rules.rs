//! The pool rules (docs/concepts.md, "The planner" and "The seeds, behaviour by behaviour"), one test per
//! rule, each named as the rule reads.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::plan::provisioning_backoff;
use apiary_planner::*;
use chrono::TimeDelta;
use support::*;

use DesiredPower::{Hibernating, Running};

// ── runningCount (seed 000) ─────────────────────────────────────────────────────────────────────────────

#[test]
fn running_count_picks_the_oldest_unclaimed_installing_included() {
    let plan = given(pool().size(4).running_count(2))
        .with(cluster("a").created(at(1)).installing())
        .with(cluster("b").created(at(2)).hibernating())
        .with(cluster("c").created(at(3)).running())
        .with(cluster("d").created(at(4)).hibernating())
        .with(cluster("x").created(at(0)).running().claimed("k", at(5)))
        .with(claim("k").assigned("x", at(5)))
        .plan_at(at(10));
    assert_eq!(plan.powered(Running), ["a", "b"]);
    assert_eq!(plan.powered(Hibernating), ["c"]);
}

#[test]
fn running_count_above_size_is_clamped() {
    let plan = given(pool().size(2).running_count(5))
        .with(cluster("a").created(at(1)))
        .with(cluster("b").created(at(2)))
        .plan_at(at(10));
    assert_eq!(plan.powered(Running), ["a", "b"]);
    assert!(plan.created().is_empty());
    assert_eq!(plan.status.running_count, 2);
}

#[test]
fn pending_claims_raise_the_running_target() {
    let plan = given(pool().size(3).running_count(1))
        .with(cluster("a").created(at(1)))
        .with(cluster("b").created(at(2)))
        .with(cluster("c").created(at(3)))
        .with(claim("k").created(at(5)))
        .plan_at(at(10));
    // runningCount 1 + one pending claim: the two oldest run; the replacement added for the claim hibernates.
    assert_eq!(plan.powered(Running), ["a", "b"]);
    assert_eq!(plan.created().len(), 1);
    assert_eq!(plan.created()[0].spec_power_state, Some(Hibernating));
}

// ── assignment (seeds 000, 002) ─────────────────────────────────────────────────────────────────────────

#[test]
fn the_status_names_the_spares_a_claim_gets_next_oldest_first_none_claimed_or_asked_to_stop() {
    let plan = given(pool().size(6).running_count(2))
        .with(cluster("r4").created(at(4)).running())
        .with(cluster("r3").created(at(3)).running())
        .with(cluster("r1").created(at(1)).running())
        .with(cluster("r0").created(at(0)).running().claimed("k", at(5)))
        .with(claim("k").assigned("r0", at(5)))
        .with(cluster("r2").created(at(2)).running())
        .with(cluster("h").created(at(1)).hibernating())
        .with(claim("waits").created(at(9)))
        .plan_at(at(10));
    // The waiting claim takes r1 in this plan; r2 is next. Never the claimed r0, the stopped h (asked to run), or
    // r3 and r4, which this plan asks to hibernate (runningCount 2 and the claim that waited: r1, h, r2).
    assert_eq!(plan.assigned(), [("waits", "r1")]);
    assert_eq!(plan.powered(Running), ["h"]);
    assert!(plan.powered(Hibernating).contains(&"r4"));
    assert_eq!(plan.status.next_spares, ["r2"]);
}

#[test]
fn claims_are_served_oldest_claim_to_oldest_running_cluster() {
    let plan = given(pool().size(3).running_count(3))
        .with(cluster("r3").created(at(3)).running())
        .with(cluster("r1").created(at(1)).running())
        .with(cluster("r2").created(at(2)).running())
        .with(claim("k-new").created(at(10)))
        .with(claim("k-old").created(at(5)))
        .plan_at(at(11));
    assert_eq!(plan.assigned(), [("k-old", "r1"), ("k-new", "r2")]);
    assert_eq!(plan.status.claimed, 2);
    assert_eq!(plan.status.pending_claims, 0);
}

#[test]
fn a_hibernating_or_resuming_cluster_is_never_assigned() {
    let cases = [
        ("hibernating", cluster("c").hibernating()),
        ("resuming", cluster("c").resuming()),
        ("installing", cluster("c").installing().spec(Running)),
        ("broken though Running", cluster("c").running().broken()),
    ];
    for (case, c) in cases {
        let plan = given(pool().size(1)).with(c).with(claim("k").created(at(5))).plan_at(at(10));
        assert!(plan.assigned().is_empty(), "{case}: {:?}", plan.assigned());
        assert_eq!(plan.status.pending_claims, 1, "{case}");
    }
}

#[test]
fn a_cluster_whose_power_management_is_paused_is_never_assigned_nor_powered() {
    let plan = given(pool().size(2).running_count(1))
        .with(cluster("p").created(at(1)).running().paused())
        .with(cluster("h").created(at(2)).hibernating())
        .with(claim("k").created(at(5)))
        .plan_at(at(10));
    assert!(plan.assigned().is_empty(), "{:?}", plan.assigned());
    assert_eq!(plan.status.pending_claims, 1);
    // The paused one keeps its power state: the spare and the claim's cluster come from the others, the standby
    // and one made for the claim (as for any pending claim, within maxSize).
    let created: Vec<&str> = plan.created().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(created.len(), 1, "{created:?}");
    let mut running = plan.powered(Running);
    running.sort();
    let mut want = vec!["h", created[0]];
    want.sort();
    assert_eq!(running, want);
    assert!(plan.powered(Hibernating).is_empty());
}

#[test]
fn a_deleted_cluster_says_cluster_deployment_deleted_in_both_conditions() {
    let scenario = given(pool().size(0)).with(cluster("c").created(at(1)).running());
    let plan = scenario.plan_at(at(10));
    assert_eq!(plan.deleted(), ["c"]);
    let after = apply(&scenario.snapshot(), &plan).unwrap().unwrap();
    let c = after.clusters.iter().find(|c| c.id == "c").unwrap();
    assert!(c.deleting);
    for kind in [condition::HIBERNATING, condition::READY] {
        let k = find_condition(&c.conditions, kind).unwrap();
        assert_eq!(
            (k.status, k.reason.as_str(), k.last_transition_time),
            (ConditionStatus::False, reason::CLUSTER_DEPLOYMENT_DELETED, at(10)),
            "{kind}"
        );
    }
}

#[test]
fn a_broken_cluster_being_deleted_still_says_why_it_broke() {
    let mut c = cluster("c").created(at(1)).resuming().broken();
    set_condition(
        &mut c.c.conditions,
        condition::HIBERNATING,
        ConditionStatus::False,
        reason::FAILED_TO_START,
        "resume timed out after 8s",
        at(5),
    );
    let scenario = given(pool().size(1)).with(c);
    let plan = scenario.plan_at(at(10));
    assert_eq!(plan.deleted(), ["c"]);
    let after = apply(&scenario.snapshot(), &plan).unwrap().unwrap();
    let c = after.clusters.iter().find(|c| c.id == "c").unwrap();
    let k = find_condition(&c.conditions, condition::HIBERNATING).unwrap();
    assert_eq!(k.reason, reason::CLUSTER_DEPLOYMENT_DELETED);
    assert!(k.message.contains("FailedToStart") && k.message.contains("timed out after 8s"), "{}", k.message);
}

#[test]
fn a_pending_claim_wakes_the_oldest_standby_cluster() {
    let plan = given(pool().size(2).running_count(0))
        .with(cluster("s2").created(at(2)))
        .with(cluster("s1").created(at(1)))
        .with(claim("k").created(at(5)))
        .plan_at(at(10));
    assert_eq!(plan.powered(Running), ["s1"]);
    assert!(plan.assigned().is_empty());
}

// ── broken clusters (seed 002) ──────────────────────────────────────────────────────────────────────────

#[test]
fn provision_stopped_is_broken() {
    let plan = given(pool().size(1)).with(cluster("p").provision_stopped()).plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Broken), ["p"]);
    assert_eq!(plan.created().len(), 0, "replaced once the provisioning backoff ends");
    assert_eq!(plan.wake_at, Some(at(11)));
    // A cluster broken by a resume timeout is replaced at once.
    let plan = given(pool().size(1)).with(cluster("b").broken()).plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Broken), ["b"]);
    assert_eq!(plan.created().len(), 1, "and it is replaced");
    assert_eq!(plan.status.installing, 1);
}

#[test]
fn broken_deletion_is_bounded_by_max_concurrent() {
    let plan = given(pool().size(3).max_concurrent(2))
        .with(cluster("b1").created(at(1)).broken())
        .with(cluster("b2").created(at(2)).broken())
        .with(cluster("b3").created(at(3)).broken())
        .plan_at(at(10));
    assert_eq!(plan.deleted(), ["b1", "b2"]);
    assert!(plan.created().is_empty());
}

#[test]
fn adding_comes_before_deleting_broken() {
    let plan = given(pool().size(4).max_concurrent(1))
        .with(cluster("ok1").created(at(1)))
        .with(cluster("ok2").created(at(2)))
        .with(cluster("b").created(at(3)).broken())
        .plan_at(at(10));
    assert_eq!(plan.created().len(), 1);
    assert!(plan.deleted().is_empty(), "the one slot of maxConcurrent went to adding");
}

#[test]
fn broken_clusters_are_deleted_even_at_max_size() {
    let plan = given(pool().size(3).max_size(2))
        .with(cluster("ok").created(at(1)))
        .with(cluster("b").created(at(2)).broken())
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Broken), ["b"]);
    assert!(plan.created().is_empty(), "no room to add until the deletion completes");
}

// ── budgets ─────────────────────────────────────────────────────────────────────────────────────────────

#[test]
fn max_size_counts_claimed_and_deleting_clusters() {
    for (max_size, created) in [(3, 0), (4, 1)] {
        let plan = given(pool().size(2).max_size(max_size))
            .with(cluster("c").created(at(1)).running().claimed("k", at(2)))
            .with(claim("k").assigned("c", at(2)))
            .with(cluster("d").created(at(2)).deleting())
            .with(cluster("a").created(at(3)))
            .plan_at(at(10));
        assert_eq!(plan.created().len(), created, "maxSize {max_size}");
    }
}

#[test]
fn max_concurrent_counts_installing_and_deleting() {
    for (max_concurrent, created) in [(2, 0), (3, 1)] {
        let plan = given(pool().size(4).max_concurrent(max_concurrent))
            .with(cluster("i").created(at(1)).installing())
            .with(cluster("d").created(at(2)).deleting())
            .plan_at(at(10));
        assert_eq!(plan.created().len(), created, "maxConcurrent {max_concurrent}");
    }
}

#[test]
fn excess_deletion_order_is_installing_newest_first_then_standby_oldest_first_then_assignable_oldest_first() {
    let plan = given(pool().size(1))
        .with(cluster("a1").created(at(1)).running())
        .with(cluster("a2").created(at(2)).running())
        .with(cluster("s1").created(at(3)))
        .with(cluster("s2").created(at(4)))
        .with(cluster("i1").created(at(5)).installing())
        .with(cluster("i2").created(at(6)).installing())
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Excess), ["i2", "i1", "s1", "s2", "a1"]);
}

// ── stale clusters and poolVersion ──────────────────────────────────────────────────────────────────────

#[test]
fn stale_replacement_is_one_at_a_time_only_when_the_pool_is_full_and_nothing_installs() {
    // Full and settled: exactly the oldest stale cluster goes, and its replacement is added at once.
    let plan = given(pool().size(2))
        .with(cluster("st2").created(at(2)).stale())
        .with(cluster("st1").created(at(1)).stale())
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Stale), ["st1"]);
    assert_eq!(plan.created().len(), 1);

    // Not full: add first; with something installing, no stale cluster goes.
    let plan = given(pool().size(3))
        .with(cluster("st1").created(at(1)).stale())
        .with(cluster("st2").created(at(2)).stale())
        .plan_at(at(10));
    assert!(plan.deleted().is_empty());
    assert_eq!(plan.created().len(), 1);

    // Something installing: wait.
    let plan = given(pool().size(2))
        .with(cluster("st1").created(at(1)).stale())
        .with(cluster("i").created(at(2)).installing())
        .plan_at(at(10));
    assert!(plan.deleted().is_empty() && plan.created().is_empty());
    assert_eq!(plan.status.stale, 1);
}

#[test]
fn pool_version_is_unchanged_by_size_running_count_timeouts_lifetimes_and_inventory_entries() {
    let base = pool().inventory(&["foo", "bar"]).spec;
    let v = pool_version(&base);
    type Change = (&'static str, fn(&mut PoolSpec));
    let changes: [Change; 8] = [
        ("size", |s| s.size = 9),
        ("runningCount", |s| s.running_count = 3),
        ("maxSize/maxConcurrent", |s| {
            s.max_size = Some(4);
            s.max_concurrent = Some(2);
        }),
        ("timeouts", |s| {
            s.powerstate_transition_to_running_timeout = Some(GoDuration::new("10m"));
            s.powerstate_transition_to_hibernating_timeout = Some(GoDuration::new("5m"));
        }),
        ("hibernateAfter", |s| s.hibernate_after = Some(GoDuration::new("1h"))),
        ("lifetimes", |s| {
            s.claim_lifetime = Some(ClaimLifetime { default: Some(GoDuration::new("1h")), maximum: None })
        }),
        ("labels", |s| {
            s.labels.insert("team".into(), "ci".into());
        }),
        ("inventory entries", |s| s.inventory = Some(Inventory::of(["foo", "baz", "qux"]))),
    ];
    for (what, change) in changes {
        let mut spec = base.clone();
        change(&mut spec);
        assert_eq!(pool_version(&spec), v, "{what} must not change poolVersion");
    }
}

#[test]
fn pool_version_is_changed_by_adding_or_removing_the_inventory_and_by_the_platform() {
    let without = pool().spec;
    let with = pool().inventory(&["foo"]).spec;
    assert_ne!(pool_version(&without), pool_version(&with));
    let mut other_domain = without.clone();
    other_domain.base_domain = Some("example.com".into());
    assert_ne!(pool_version(&without), pool_version(&other_domain));
    // A fixed algorithm: this value is part of every stored cluster and must never drift between builds.
    assert_eq!(pool_version(&without), pool_version(&pool().spec));
    assert_eq!(pool_version(&without).len(), 16);
}

#[test]
fn pool_version_is_changed_by_the_installers_url_not_by_its_signing_secret() {
    let without = pool().spec;
    let installer = |url: &str, secret: &str| {
        let mut s = pool().spec;
        let webhook = Some(WebhookProvisioner { url: url.into(), secret: secret.into() });
        s.provisioner = Some(ProvisionerSpec { webhook });
        s
    };
    let a = installer("https://a.example.com", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k1");
    let rotated = installer("https://a.example.com", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k2");
    let b = installer("https://b.example.com", "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k1");
    assert_ne!(pool_version(&without), pool_version(&a));
    assert_eq!(pool_version(&a), pool_version(&rotated));
    assert_ne!(pool_version(&a), pool_version(&b));
}

// ── inventory (seed 003) ────────────────────────────────────────────────────────────────────────────────

#[test]
fn the_inventory_caps_size_and_max_size() {
    let plan = given(pool().size(5).inventory(&["foo", "bar", "baz"])).plan_at(at(10));
    let mut names: Vec<_> = plan.created().iter().map(|c| c.cluster_name.clone()).collect();
    names.sort();
    assert_eq!(names, ["bar", "baz", "foo"]);
    let mut reserved = plan.reserved();
    reserved.sort();
    assert_eq!(reserved, ["bar", "baz", "foo"], "each new cluster's name is reserved first");
    assert_eq!(plan.status.size, 3);
    assert!(plan.created().iter().all(|c| c.id.starts_with(&format!("{}-", c.cluster_name))));

    // maxSize is capped too: one claimed cluster from before the inventory leaves room for two.
    let plan = given(pool().size(5).max_size(10).inventory(&["foo", "bar", "baz"]))
        .with(cluster("old").stale().running().claimed("k", at(1)))
        .with(claim("k").assigned("old", at(1)))
        .plan_at(at(10));
    assert_eq!(plan.created().len(), 2);
}

#[test]
fn a_free_name_is_taken_never_a_held_one() {
    let plan = given(pool().size(3).inventory(&["foo", "bar", "baz"]))
        .with(cluster("foo-aaaaa").named("foo"))
        .with(lease("foo", "foo-aaaaa", at(0)))
        .with(lease("bar", "bar-bbbbb", at(9))) // reserved a minute ago, cluster not written yet
        .plan_at(at(10));
    assert_eq!(plan.reserved(), ["baz"]);
    assert_eq!(plan.created().len(), 1);
    assert_eq!(plan.created()[0].cluster_name, "baz");
}

#[test]
fn removing_a_name_deletes_its_unclaimed_holder_and_leaves_a_claimed_one() {
    let plan = given(pool().size(3).inventory(&["baz"]))
        .with(cluster("foo-1").named("foo").created(at(1)))
        .with(lease("foo", "foo-1", at(1)))
        .with(cluster("bar-1").named("bar").created(at(2)).running().claimed("k", at(3)))
        .with(claim("k").assigned("bar-1", at(3)))
        .with(lease("bar", "bar-1", at(2)))
        .with(cluster("baz-1").named("baz").created(at(3)))
        .with(lease("baz", "baz-1", at(3)))
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::InventoryNameRemoved), ["foo-1"]);
    assert_eq!(plan.deleted(), ["foo-1"]);
}

/// Issue 61: an inventory entry's parameters (an on-premises cluster's addresses) are the cluster's own; a new
/// cluster takes its entry's, and one made with others than its entry has now goes as if its name were removed:
/// replaced when unclaimed, left to its claim otherwise, and never handed to a new claim meanwhile.
#[test]
fn a_changed_entrys_parameters_replace_its_unclaimed_holder_and_leave_a_claimed_one() {
    let plan =
        given(pool().size(1).inventory(&["foo"]).entry_parameters("foo", &[("apiVIP", "10.0.0.10")])).plan_at(at(10));
    let created = plan.created();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].parameters.get("apiVIP").map(String::as_str), Some("10.0.0.10"), "a new cluster takes them");

    let moved = || {
        pool()
            .size(3)
            .inventory(&["foo", "bar", "baz"])
            .entry_parameters("foo", &[("apiVIP", "10.0.9.10")])
            .entry_parameters("bar", &[("apiVIP", "10.0.9.20")])
            .entry_parameters("baz", &[("apiVIP", "10.0.0.30")])
    };
    let plan = given(moved())
        .with(cluster("foo-1").named("foo").created(at(1)).running().parameters(&[("apiVIP", "10.0.0.10")]))
        .with(lease("foo", "foo-1", at(1)))
        .with(
            cluster("bar-1")
                .named("bar")
                .created(at(2))
                .running()
                .parameters(&[("apiVIP", "10.0.0.20")])
                .claimed("k", at(3)),
        )
        .with(claim("k").assigned("bar-1", at(3)))
        .with(lease("bar", "bar-1", at(2)))
        .with(cluster("baz-1").named("baz").created(at(3)).running().parameters(&[("apiVIP", "10.0.0.30")]))
        .with(lease("baz", "baz-1", at(3)))
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::InventoryEntryChanged), ["foo-1"]);
    assert_eq!(plan.deleted(), ["foo-1"], "the claimed one stays, the unchanged one stays");

    // Until it goes, a claim never takes it.
    let spec = moved().spec;
    let stale = cluster("foo-1").named("foo").running().parameters(&[("apiVIP", "10.0.0.10")]).c;
    assert!(!spec.may_assign(&stale));
    let fresh = cluster("foo-1").named("foo").running().parameters(&[("apiVIP", "10.0.9.10")]).c;
    assert!(spec.may_assign(&fresh));
}

#[test]
fn a_lease_with_no_cluster_after_the_grace_period_is_used_or_released() {
    // Still needed: the lease moves to a new cluster with a new id (bug 5: a reused id reused its provisioning
    // token, and the cluster got the old, terminated machines back and installed forever).
    let plan = given(pool().size(1).inventory(&["foo"])).with(lease("foo", "foo-zzzzz", at(0))).plan_at(at(10));
    let created: Vec<&str> = plan.created().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(created.len(), 1);
    assert!(created[0].starts_with("foo-") && created[0] != "foo-zzzzz", "{created:?}");
    let moved = plan.actions.iter().find_map(|a| match a {
        Action::ReserveName { name, holder, replacing, .. } => {
            Some((name.as_str(), holder.as_str(), replacing.as_deref()))
        }
        _ => None,
    });
    assert_eq!(moved, Some(("foo", created[0], Some("foo-zzzzz"))), "the lease moves, on condition it is still held");

    // Not needed: released.
    let plan = given(pool().size(0).inventory(&["foo"])).with(lease("foo", "foo-zzzzz", at(0))).plan_at(at(10));
    assert_eq!(plan.released_names(), ["foo"]);
    assert!(plan.created().is_empty());

    // Within the grace period: left alone, and the pool wakes when it ends.
    let plan = given(pool().size(0).inventory(&["foo"])).with(lease("foo", "foo-zzzzz", at(8))).plan_at(at(10));
    assert!(plan.released_names().is_empty());
    assert_eq!(plan.wake_at, Some(at(8) + apiary_planner::plan::LEASE_GRACE));
}

// ── hibernateAfter, lifetimes, release (seed 000) ───────────────────────────────────────────────────────

#[test]
fn hibernate_after_never_hibernates_an_unclaimed_pool_cluster() {
    let plan = given(pool().size(1).running_count(1).hibernate_after("1h"))
        .with(cluster("r").running().running_since(at(0)))
        .plan_at(at(600));
    assert!(plan.powered(Hibernating).is_empty());
}

#[test]
fn hibernate_after_for_a_claimed_one_counts_from_the_later_of_claim_time_and_last_becoming_running() {
    // (claimed at, running since, now) → hibernated?, wake at
    let cases = [
        ("running after the claim, not yet", at(0), at(30), at(80), false, Some(at(90))),
        ("claimed after running, not yet", at(30), at(0), at(80), false, Some(at(90))),
        ("an hour after becoming running", at(0), at(10), at(71), true, None),
        ("an hour after the claim", at(20), at(10), at(80), true, None),
    ];
    for (case, claimed, running, now, hibernated, wake) in cases {
        let plan = given(pool().size(0).hibernate_after("1h"))
            .with(cluster("c").running().running_since(running).claimed("k", claimed))
            .with(claim("k").assigned("c", claimed))
            .plan_at(now);
        assert_eq!(plan.powered(Hibernating) == ["c"], hibernated, "{case}");
        assert_eq!(plan.wake_at, wake, "{case}");
    }
}

#[test]
fn claim_lifetime_is_min_of_maximum_and_own_or_default() {
    let h = |n: i64| Some(chrono::TimeDelta::hours(n));
    // (own, default, maximum) → effective
    let cases = [
        (Some("2h"), Some("1h"), Some("4h"), h(2)),
        (None, Some("1h"), Some("4h"), h(1)),
        (Some("8h"), Some("1h"), Some("4h"), h(4)),
        (None, None, Some("4h"), h(4)),
        (Some("3h"), None, None, h(3)),
        (None, None, None, None),
    ];
    for (own, default, maximum, want) in cases {
        let mut c = claim("k").c;
        c.lifetime = own.map(GoDuration::new);
        let bounds = ClaimLifetime { default: default.map(GoDuration::new), maximum: maximum.map(GoDuration::new) };
        assert_eq!(c.effective_lifetime(Some(&bounds)), want, "{own:?} {default:?} {maximum:?}");
    }
}

/// docs/api.md and docs/clouds.md: with no lifetime of its own on a pool without `claimLifetime`, a claim lives until
/// it is released.
#[test]
fn a_claim_without_a_lifetime_on_a_pool_without_claim_lifetime_never_expires() {
    let scenario =
        given(pool().size(0)).with(cluster("c").running().claimed("k", at(0))).with(claim("k").assigned("c", at(0)));
    assert_eq!(claim("k").assigned("c", at(0)).c.expires_at(None), None);
    let years_later = scenario.plan_at(at(60 * 24 * 365 * 3));
    assert!(years_later.released().is_empty(), "{:?}", years_later.released());
}

#[test]
fn an_expired_claim_is_released() {
    let scenario = given(pool().size(0).claim_lifetime(Some("1h"), None))
        .with(cluster("c").running().claimed("k", at(0)))
        .with(claim("k").assigned("c", at(0)));
    let before = scenario.plan_at(at(59));
    assert!(before.released().is_empty());
    assert_eq!(before.wake_at, Some(at(60)));
    let after = scenario.plan_at(at(60));
    assert_eq!(after.released(), [("k", ReleaseReason::Expired)]);
    assert_eq!(after.deleted_for(DeleteReason::Released), ["c"]);
}

#[test]
fn a_released_cluster_is_deleted_within_budget() {
    let plan = given(pool().size(0).max_concurrent(1))
        .with(cluster("c1").created(at(1)).running().claimed("k1", at(2)))
        .with(cluster("c2").created(at(2)).running().claimed("k2", at(2)))
        .with(claim("k1").assigned("c1", at(2)).released(at(5)))
        .with(claim("k2").assigned("c2", at(2)).released(at(5)))
        .plan_at(at(10));
    assert_eq!(plan.released(), [("k1", ReleaseReason::Released), ("k2", ReleaseReason::Released)]);
    assert_eq!(plan.deleted(), ["c1"]);
    assert_eq!(plan.status.deleting, 2, "c1 deleting, c2 waiting for budget");
}

// ── pool deletion ───────────────────────────────────────────────────────────────────────────────────────

#[test]
fn deleting_a_pool_leaves_claimed_clusters_and_waits_for_the_rest() {
    let plan = given(pool().size(2).deleting())
        .with(cluster("a").created(at(1)))
        .with(cluster("c").created(at(2)).running().claimed("k", at(3)))
        .with(claim("k").assigned("c", at(3)))
        .with(claim("p").created(at(4)))
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::PoolDeleted), ["a"]);
    assert_eq!(plan.released(), [("p", ReleaseReason::PoolDeleted)]);
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::DeletePool { .. })));

    let plan = given(pool().size(2).deleting()).with(cluster("a").deleting()).plan_at(at(10));
    assert!(!plan.actions.iter().any(|a| matches!(a, Action::DeletePool { .. })), "waits for the deletion");

    let mut drained = given(pool().size(2).deleting()).snapshot();
    let p = apiary_planner::plan(&drained, at(10), 7);
    assert!(!p.actions.iter().any(|a| matches!(a, Action::DeletePool { .. })), "waits for the reaper's look");
    let asked = drained.pool.deletion_requested_at.expect("asked");
    let seen = [("left-behind".to_owned(), asked)].into();
    drained.pool.status.orphans =
        Some(reaper::Orphans { checked_at: Some(asked), seen, tried: Default::default(), drained: true });
    let p = apiary_planner::plan(&drained, at(10), 7);
    assert!(!p.actions.iter().any(|a| matches!(a, Action::DeletePool { .. })), "and for its orphans to go");
    drained.pool.status.orphans = Some(reaper::Orphans {
        checked_at: Some(asked),
        seen: Default::default(),
        tried: Default::default(),
        drained: true,
    });
    let p = apiary_planner::plan(&drained, at(10), 7);
    assert!(p.actions.iter().any(|a| matches!(a, Action::DeletePool { .. })), "then goes");
}

// ── writes, determinism, deadlines ──────────────────────────────────────────────────────────────────────

#[test]
fn the_status_keeps_the_pools_pace_and_a_settled_pace_is_not_written_again() {
    let mut scenario = given(pool().size(6).running_count(0));
    for i in 0..6 {
        let mut c = cluster(&format!("c{i}")).created(at(i));
        c.c.installed_at = Some(at(i + 40 + i));
        c.c.last_resume_seconds = Some(200 + 10 * i as u32);
        scenario = scenario.with(c);
    }
    let snapshot = scenario.snapshot();
    let first = plan(&snapshot, at(100), 1);
    let pace = first.status.pace.expect("six installs and resumes measured");
    assert_eq!((pace.install_seconds, pace.resume_seconds, pace.stop_seconds), (Some(2400), Some(200), None));
    let settled = apply(&snapshot, &first).unwrap().unwrap();
    let again = plan(&settled, at(101), 2);
    assert_eq!(again.writes().count(), 0, "{:?}", again.actions);
    assert_eq!(settled.pool.power_limits().pace, pace, "the power function is paced by the status");
}

#[test]
fn a_pool_with_claims_waiting_looks_at_its_transitions_every_poll_not_at_its_pace() {
    // Six measured clusters, all hibernated; a claim arrives: one resumes for it.
    let mut scenario = given(pool().size(6).running_count(0)).with(claim("k").created(at(100)));
    for i in 0..6 {
        let mut c = cluster(&format!("c{i}")).created(at(i)).hibernating();
        c.c.installed_at = Some(at(i + 40 + i));
        c.c.last_resume_seconds = Some(200 + 10 * i as u32);
        scenario = scenario.with(c);
    }
    let snapshot = scenario.snapshot();
    let first = plan(&snapshot, at(101), 1);
    assert_eq!(first.status.pending_claims, 1);
    let waiting = apply(&snapshot, &first).unwrap().unwrap();
    let pace = waiting.pool.status.pace.expect("measured");
    assert_eq!(pace.resume_seconds, Some(200));
    // The claim waits on the resume: a quick one is noticed within a poll, not a sparse minute later.
    let limits = waiting.pool.power_limits();
    assert_eq!(limits.pace, Pace::default(), "no pace while a claim waits");
    let resuming = waiting.clusters.iter().find(|c| c.spec_power_state == Some(Running)).expect("one resumes");
    let started =
        power::step(resuming, &power::Report::Machines { not_ready: 3, total: 3, actionable: 3 }, at(101), limits)
            .cluster;
    let s = power::step(&started, &power::Report::CallAccepted, at(101), limits);
    assert_eq!(s.recheck_after, Some(power::POLL));
    // Served, the pool is paced again.
    let mut served = waiting.clone();
    served.pool.status.pending_claims = 0;
    assert_eq!(served.pool.power_limits().pace, pace);
}

#[test]
fn nothing_is_written_when_nothing_changed() {
    let scenario = given(pool().size(2).running_count(1))
        .with(cluster("a").created(at(1)).running())
        .with(cluster("b").created(at(2)));
    let snapshot = scenario.snapshot();
    let first = plan(&snapshot, at(10), 1);
    assert_eq!(first.writes().count(), 1, "only the first status: {:?}", first.actions);
    let settled = apply(&snapshot, &first).unwrap().unwrap();
    let again = plan(&settled, at(11), 2);
    assert_eq!(again.writes().count(), 0, "{:?}", again.actions);
}

#[test]
fn the_same_input_gives_the_same_plan_byte_for_byte() {
    let scenario = given(pool().size(5).running_count(2).inventory(&["a", "b", "c", "d"]))
        .with(cluster("x").running().stale())
        .with(claim("k").created(at(1)));
    let one = serde_json::to_string(&scenario.plan_at(at(10))).unwrap();
    let two = serde_json::to_string(&scenario.plan_at(at(10))).unwrap();
    assert_eq!(one, two);
}

#[test]
fn wake_at_is_the_earliest_deadline() {
    let plan = given(pool().size(0).hibernate_after("90m").claim_lifetime(Some("2h"), None).resume_timeout("15m"))
        .with(cluster("c").running().running_since(at(0)).claimed("k", at(0)))
        .with(claim("k").assigned("c", at(0)))
        .with(cluster("r").created(at(60)).resuming().claimed("k2", at(60)))
        .with(claim("k2").assigned("r", at(60)))
        .plan_at(at(70));
    // hibernateAfter at 90, lifetime at 120 and 180, resume timeout at 75.
    assert_eq!(plan.wake_at, Some(at(75)));
    assert!(plan.wake_at.unwrap() > at(70));
}

#[test]
fn an_overdue_power_transition_gets_a_check() {
    let plan = given(pool().size(1).resume_timeout("10m"))
        .with(cluster("r").created(at(0)).resuming())
        .with(claim("k").created(at(0)))
        .plan_at(at(11));
    assert!(plan.actions.contains(&Action::CheckPower { cluster: "r".into() }));
}

#[test]
fn an_open_schedule_window_overrides_size_and_running_count() {
    let window = Schedule {
        name: Some("workday".into()),
        cron: "0 8 * * MON-FRI".into(),
        time_zone: "UTC".into(),
        duration: GoDuration::new("9h"),
        size: Some(3),
        running_count: Some(2),
    };
    // t0 is Monday 2026-01-05 00:00 UTC.
    let scenario = given(pool().size(1).running_count(0).schedule(window)).with(cluster("a").created(at(0)));
    let night = scenario.plan_at(at(60));
    assert!(night.created().is_empty());
    assert_eq!(night.wake_at, Some(at(8 * 60)));
    let day = scenario.plan_at(at(9 * 60));
    assert_eq!(day.created().len(), 2);
    assert_eq!(day.status.active_schedule.as_deref(), Some("workday"));
    assert_eq!(day.powered(Running).len(), 2);
    assert_eq!(day.wake_at, Some(at(17 * 60)));
}

#[test]
fn age_order_holds_when_a_stored_cluster_is_newer_than_now() {
    // A clock running behind: the stored cluster was created "after" now, so the new one is the older.
    let scenario = given(pool().size(2).running_count(1)).with(cluster("future").created(at(20)).running());
    let snapshot = scenario.snapshot();
    let first = plan(&snapshot, at(10), 3);
    let new_id = first.created()[0].id.clone();
    assert_eq!(first.powered(Running), [new_id.as_str()]);
    assert_eq!(first.powered(Hibernating), ["future"]);
    let again = plan(&apply(&snapshot, &first).unwrap().unwrap(), at(10), 4);
    assert_eq!(again.writes().count(), 0, "{:?}", again.actions);
}

#[test]
fn an_orphaned_lease_is_reused_once_and_never_also_handed_out_as_a_free_name() {
    let plan = given(pool().size(2).inventory(&["foo", "bar"])).with(lease("foo", "foo-zzzzz", at(0))).plan_at(at(10));
    let mut made: Vec<_> = plan.created().iter().map(|c| (c.cluster_name.clone(), c.id.clone())).collect();
    made.sort();
    assert_eq!(made.len(), 2);
    assert_eq!(made[1].0, "foo");
    assert_ne!(made[1].1, "foo-zzzzz");
    assert_eq!(made[0].0, "bar");
    let mut reserved = plan.reserved();
    reserved.sort();
    assert_eq!(reserved, ["bar", "foo"], "foo by moving its orphaned lease, bar afresh");
}

/// Bug 6: a cluster lost to provisioning was replaced at once, forever. Each loss in a row doubles the wait before
/// the next new cluster (1, 2, 4 … minutes, at most an hour), the pool says so, and a cluster that installs ends it.
#[test]
fn clusters_lost_to_provisioning_hold_back_new_ones_for_a_growing_while() {
    let mut lost = cluster("c1").provision_stopped();
    set_condition(
        &mut lost.c.conditions,
        condition::PROVISION_STOPPED,
        ConditionStatus::True,
        "InstallAttemptsLimitReached",
        "attempt 3 of 3 failed: no such image",
        at(5),
    );
    let scenario = given(pool().size(1)).with(lost);
    let plan = scenario.plan_at(at(5));
    assert_eq!(plan.deleted_for(DeleteReason::Broken), ["c1"]);
    assert!(plan.created().is_empty(), "no replacement yet");
    assert_eq!(plan.wake_at, Some(at(6)), "one minute after the loss");
    assert_eq!(plan.status.provision_failures, 1);
    let backoff = find_condition(&plan.status.conditions, condition::PROVISIONING_BACKOFF).unwrap();
    assert_eq!(backoff.status, ConditionStatus::True);
    assert!(backoff.message.contains("no such image"), "{}", backoff.message);
    // After the wait, the replacement is made.
    let applied = apply(&scenario.snapshot(), &plan).unwrap().unwrap();
    assert_eq!(plan_at(&applied, at(6)).created().len(), 1);
    assert_eq!(plan_at(&applied, at(5) + TimeDelta::seconds(30)).created().len(), 0);
    // Three in a row: four minutes.
    assert_eq!(provisioning_backoff(3), TimeDelta::minutes(4));
    assert_eq!(provisioning_backoff(30), TimeDelta::hours(1));
    // A cluster that installs after the last loss ends the streak.
    let mut recovered = applied.clone();
    recovered.clusters.push(cluster("c2").created(at(7)).c);
    let p = plan_at(&recovered, at(8));
    assert_eq!(p.status.provision_failures, 0);
    let backoff = find_condition(&p.status.conditions, condition::PROVISIONING_BACKOFF).unwrap();
    assert_eq!(backoff.status, ConditionStatus::False);
}

fn plan_at(s: &Snapshot, now: Timestamp) -> Plan {
    plan(s, now, 9)
}

// ── what the status says of the plan that wrote it ─────────────────────────────────────────────────────

#[test]
fn a_status_that_changed_is_written_with_its_plans_time_and_the_time_alone_is_never_written() {
    let scenario = given(pool().size(2).running_count(1))
        .with(cluster("r1").created(at(1)).running())
        .with(claim("k1").created(at(10)));
    let mut snap = scenario.snapshot();
    let first = plan(&snap, at(11), 42);
    assert_eq!(first.status.planned_at, Some(at(11)), "the claim is served: the status changed");
    let written = first.actions.iter().find_map(|a| match a {
        Action::UpdatePool { status, .. } => Some(status.planned_at),
        _ => None,
    });
    assert_eq!(written, Some(Some(at(11))));
    apply_mut(&mut snap, &first).unwrap();
    // Later, nothing new: the same status, and its time stays the one written.
    let again = plan(&snap, at(12), 43);
    assert!(!again.actions.iter().any(|a| matches!(a, Action::UpdatePool { .. })), "{:?}", again.actions);
    assert_eq!(again.status.planned_at, Some(at(11)));
}

// ── the pool's release ─────────────────────────────────────────────────────────────────────────────────────

#[test]
fn a_release_bump_replaces_the_unclaimed_clusters_one_at_a_time_and_the_trail_names_both_releases() {
    let (old, new) = (
        "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64",
        "quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64",
    );
    let mut before = pool().size(2);
    let unnamed = pool_version(&before.spec);
    before.spec.release = Some(old.into());
    let made_with = pool_version(&before.spec);
    assert_ne!(made_with, unnamed, "naming a release changes the version; naming none leaves it as it was");
    let mut bumped = pool().size(2);
    bumped.spec.release = Some(new.into());
    assert_ne!(pool_version(&bumped.spec), made_with);

    let made = |id: &str, t: i64| {
        let mut c = cluster(id).created(at(t)).version(Some(&made_with));
        c.c.release = Some(old.into());
        c
    };
    let scenario = given(bumped)
        .with(made("c1", 1).claimed("job", at(5)))
        .with(claim("job").assigned("c1", at(5)))
        .with(made("c2", 2))
        .with(made("c3", 3));
    let plan = scenario.plan_at(at(10));
    // The pool is full (two unclaimed) and nothing installs: the oldest unclaimed goes first, one at a time, and its
    // replacement is made at once; the claimed one is never replaced.
    assert_eq!(plan.deleted_for(DeleteReason::Stale), ["c2"]);
    let created = plan.created();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].release.as_deref(), Some(new), "a new cluster records the release it is made from");
    let snapshot = scenario.snapshot();
    let said: Vec<String> = plan
        .actions
        .iter()
        .filter(|a| matches!(a, Action::DeleteCluster { reason: DeleteReason::Stale, .. }))
        .flat_map(|a| apiary_planner::events::of_action(&snapshot, a, at(10)))
        .filter_map(|e| e.message)
        .collect();
    assert_eq!(said, [format!("made from release {old}, the pool's is now {new}: to be replaced")]);
}

#[test]
fn an_install_config_template_change_replaces_the_unclaimed_clusters_one_at_a_time() {
    let mut before = pool().size(2);
    let unnamed = pool_version(&before.spec);
    before.spec.install_config_template = Some("aws-4-18".into());
    let made_with = pool_version(&before.spec);
    assert_ne!(made_with, unnamed, "naming a template changes the version; naming none leaves it as it was");
    let mut changed = pool().size(2);
    changed.spec.install_config_template = Some("aws-4-18-large".into());
    assert_ne!(pool_version(&changed.spec), made_with);
    // Pinning the same name to its content is a change too: the pin is what the installer checks.
    let mut pinned = pool().size(2);
    pinned.spec.install_config_template = Some(format!("aws-4-18@sha256:{}", "0a".repeat(32)));
    assert_ne!(pool_version(&pinned.spec), made_with);

    let made = |id: &str, t: i64| cluster(id).created(at(t)).version(Some(&made_with));
    let plan = given(changed)
        .with(made("c1", 1).claimed("job", at(5)))
        .with(claim("job").assigned("c1", at(5)))
        .with(made("c2", 2))
        .with(made("c3", 3))
        .plan_at(at(10));
    assert_eq!(plan.deleted_for(DeleteReason::Stale), ["c2"]);
    assert_eq!(plan.created().len(), 1);
}
