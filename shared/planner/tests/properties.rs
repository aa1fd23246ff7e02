//! Invariants of `plan` over generated pools: budgets, claims, determinism and convergence.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use std::collections::{HashMap, HashSet};

use apiary_planner::forecast::{Buckets, Profile, BUCKETS};
use apiary_planner::*;
use chrono::TimeDelta;
use proptest::prelude::*;
use support::*;

/// What a generated cluster is doing.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Installing,
    Standby,
    Assignable,
    Resuming,
    Stopping,
    Broken,
    ProvisionStopped,
    Deleting,
    Claimed,
    ClaimedReleased,
    ClaimedExpiring,
    Marked,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        3 => Just(Kind::Installing),
        4 => Just(Kind::Standby),
        4 => Just(Kind::Assignable),
        1 => Just(Kind::Resuming),
        1 => Just(Kind::Stopping),
        1 => Just(Kind::Broken),
        1 => Just(Kind::ProvisionStopped),
        1 => Just(Kind::Deleting),
        2 => Just(Kind::Claimed),
        1 => Just(Kind::ClaimedReleased),
        1 => Just(Kind::ClaimedExpiring),
        1 => Just(Kind::Marked),
    ]
}

#[derive(Debug, Clone)]
struct Gen {
    size: i64,
    running: i64,
    max_size: Option<i64>,
    max_concurrent: Option<i64>,
    inventory: Option<usize>,
    hibernate_after: bool,
    lifetime: bool,
    timeouts: bool,
    deleting_pool: bool,
    adaptive: bool,
    /// With the adaptive count: forecast on, with a profile drawn from this seed over this many weeks.
    forecast: Option<(u64, u8)>,
    /// With the adaptive count: keepFresh on.
    keep_fresh: bool,
    /// Resume canaries after 30 minutes asleep, this many at a time, in 01:00–02:00 UTC or at any time.
    canaries: Option<(i64, bool)>,
    schedule: bool,
    clusters: Vec<(Kind, i64, bool, bool)>,
    pending: Vec<i64>,
    orphan_leases: Vec<(usize, i64)>,
    now: i64,
    seed: u64,
}

fn gen() -> impl Strategy<Value = Gen> {
    (
        (0i64..8, 0i64..10, proptest::option::of(0i64..14), proptest::option::of(1i64..5)),
        (
            proptest::option::of(1usize..8),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            prop::bool::weighted(0.1),
            any::<bool>(),
        ),
        proptest::collection::vec((kind(), 0i64..100, any::<bool>(), prop::bool::weighted(0.2)), 0..14),
        proptest::collection::vec(0i64..120, 0..6),
        proptest::collection::vec((0usize..8, 0i64..120), 0..3),
        (
            100i64..200,
            any::<u64>(),
            any::<bool>(),
            proptest::option::of((any::<u64>(), 0u8..4)),
            proptest::option::of((1i64..4, any::<bool>())),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (size, running, max_size, max_concurrent),
                (inventory, ha, lt, to, del, adaptive),
                clusters,
                pending,
                orphans,
                (now, seed, schedule, forecast, canaries, keep_fresh),
            )| Gen {
                size,
                running,
                max_size,
                max_concurrent,
                inventory,
                hibernate_after: ha,
                lifetime: lt,
                timeouts: to,
                deleting_pool: del,
                adaptive,
                forecast,
                keep_fresh,
                canaries,
                schedule,
                clusters,
                pending,
                orphan_leases: orphans,
                now,
                seed,
            },
        )
}

fn snapshot(g: &Gen) -> Snapshot {
    let names: Vec<String> = (0..g.inventory.unwrap_or(0)).map(|i| format!("n{i}")).collect();
    let mut p = pool().size(g.size).running_count(g.running);
    if let Some(m) = g.max_size {
        p = p.max_size(m);
    }
    if let Some(m) = g.max_concurrent {
        p = p.max_concurrent(m);
    }
    if g.inventory.is_some() {
        p = p.inventory(&names.iter().map(String::as_str).collect::<Vec<_>>());
    }
    if g.hibernate_after {
        p = p.hibernate_after("30m");
    }
    if g.lifetime {
        p = p.claim_lifetime(Some("1h"), Some("2h"));
    }
    if g.timeouts {
        p = p.resume_timeout("10m").hibernate_timeout("10m");
    }
    if g.deleting_pool {
        p = p.deleting();
    }
    if g.adaptive {
        p = p.adaptive(0.9, "5m");
        if g.forecast.is_some() {
            p = p.forecast("Europe/Berlin");
        }
        if g.keep_fresh {
            if let Some(a) = p.spec.adaptive_running_count.as_mut() {
                a.keep_fresh = Some(true);
            }
        }
    }
    if let Some((n, in_hours)) = g.canaries {
        p = p.canaries("30m", n, in_hours.then_some("01:00-02:00"));
    }
    if g.schedule {
        // Open 01:00–02:00 every day; the generated `now` is 01:40–03:20.
        p = p.schedule(Schedule {
            name: None,
            cron: "0 1 * * *".into(),
            time_zone: "UTC".into(),
            duration: GoDuration::new("1h"),
            size: Some(g.size + 2),
            running_count: Some(1),
        });
    }
    let mut s = given(p);
    let mut used_names = HashSet::new();
    for (i, &(kind, created, stale, inventory_named)) in g.clusters.iter().enumerate() {
        let id = format!("c{i}");
        let mut b = cluster(&id).created(at(created));
        // Some clusters hold an inventory name (maybe one since removed), with its lease.
        if inventory_named && used_names.insert(i) {
            let name = format!("n{i}");
            b = b.named(&name);
            s = s.with(lease(&name, &id, at(created)));
        }
        if stale {
            b = b.stale();
        }
        let claim_name = format!("k{i}");
        b = match kind {
            Kind::Installing => b.installing().spec(DesiredPower::Hibernating),
            Kind::Standby => b.hibernating(),
            Kind::Assignable => b.running(),
            Kind::Resuming => b.resuming(),
            Kind::Stopping => {
                let mut b = b.running().spec(DesiredPower::Hibernating);
                b.c.power_state = Some(PowerState::WaitingForMachinesToStop);
                b.c.transition_started_at = Some(at(created));
                b
            }
            Kind::Broken => b.running().broken(),
            Kind::ProvisionStopped => b.provision_stopped(),
            Kind::Deleting => b.deleting(),
            Kind::Marked => b.running().claimed("gone", at(created)).marked(),
            Kind::Claimed | Kind::ClaimedReleased | Kind::ClaimedExpiring => {
                let mut k = claim(&claim_name).created(at(created)).assigned(&id, at(created));
                if matches!(kind, Kind::ClaimedReleased) {
                    k = k.released(at(created + 1));
                }
                if matches!(kind, Kind::ClaimedExpiring) {
                    k = k.lifetime("20m");
                }
                s = s.with(k);
                b.running().claimed(&claim_name, at(created)).running_since(at(created))
            }
        };
        s = s.with(b.rev(u64::try_from(i).unwrap() % 3));
    }
    for (j, &created) in g.pending.iter().enumerate() {
        s = s.with(claim(&format!("p{j}")).created(at(created)));
    }
    for &(n, reserved) in &g.orphan_leases {
        let name = format!("n{n}");
        if !s.leases.iter().any(|l| l.name == name) && !s.clusters.iter().any(|c| c.c.cluster_name == name) {
            s = s.with(lease(&name, &format!("{name}-ghost"), at(reserved)));
        }
    }
    let mut snap = s.snapshot();
    if let (true, Some((seed, weeks))) = (g.adaptive, g.forecast) {
        snap.pool.status.demand = Some(learned_demand(seed, weeks));
    }
    if g.adaptive && g.keep_fresh {
        // Busy enough to keep clusters, and some of them installed within the last few minutes.
        if snap.pool.status.demand.is_none() {
            snap.pool.status.demand = Some(Demand {
                claims_per_hour: 60.0,
                at: at(g.now),
                counted_until: at(g.now),
                counted_at_edge: Vec::new(),
                profile: None,
            });
        }
        for (i, c) in snap.clusters.iter_mut().enumerate() {
            if c.installed_at.is_some() && c.claim.is_none() && i % 2 == 0 {
                c.installed_at = Some(at(g.now) - TimeDelta::minutes(i as i64 % 10));
                c.created_at = c.created_at.min(c.installed_at.unwrap_or(c.created_at));
            }
        }
    }
    snap
}

/// A rate estimate with a profile learned over `weeks` weeks: mostly a trickle, some busy buckets and bursts,
/// drawn from `seed`.
fn learned_demand(seed: u64, weeks: u8) -> Demand {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut draw = |_| match next() % 20 {
        0 => (next() % 4000) as u16,
        1..=6 => (next() % 600) as u16,
        _ => (next() % 50) as u16,
    };
    let mean = Buckets((0..BUCKETS).map(&mut draw).collect());
    let spread = Buckets((0..BUCKETS).map(&mut draw).collect());
    let open = at(50);
    Demand {
        claims_per_hour: (next() % 100) as f64,
        at: at(40),
        counted_until: at(50),
        counted_at_edge: Vec::new(),
        profile: Some(Profile {
            time_zone: "Europe/Berlin".into(),
            since: open - TimeDelta::weeks(i64::from(weeks)) - TimeDelta::minutes(50),
            open,
            open_count: (next() % 5) as u32,
            mean,
            spread,
            worth: Some((next() % 1000) as f64 / 100.0),
            kept: None,
        }),
    }
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn budgets_are_never_exceeded(g in gen()) {
        let snap = snapshot(&g);
        let plan = plan(&snap, at(g.now), g.seed);
        let created = plan.writes().filter(|a| matches!(a, Action::CreateCluster { .. })).count();
        let names = snap.pool.spec.inventory_names().map(|n| n.len());
        let max_size = match (snap.pool.spec.max_size, names) {
            (Some(m), Some(n)) => Some((m as usize).min(n)),
            (m, n) => m.map(|m| m as usize).or(n),
        };
        if let Some(max) = max_size {
            prop_assert!(created == 0 || snap.clusters.len() + created <= max,
                "{} clusters + {created} created > maxSize {max}", snap.clusters.len());
        }
        if let Some(mc) = snap.pool.spec.max_concurrent {
            // Installing + deleting never rises above maxConcurrent (nor grows, if it already was above).
            let busy = |s: &Snapshot| {
                s.clusters.iter().filter(|c| c.deleting || (c.installed_at.is_none() && !c.is_broken())).count()
            };
            let before = busy(&snap);
            let after = apply(&snap, &plan).unwrap().map_or(0, |a| busy(&a));
            prop_assert!(after <= before.max(mc as usize), "{before} busy before, {after} after, maxConcurrent {mc}");
            if before >= mc as usize {
                prop_assert_eq!(created, 0);
            }
        }
        if let Some(n) = names {
            let after = apply(&snap, &plan).unwrap();
            if let Some(after) = after {
                let mut holders: HashMap<&str, usize> = HashMap::new();
                for c in after.clusters.iter().filter(|c| !c.deleting) {
                    *holders.entry(c.cluster_name.as_str()).or_default() += 1;
                }
                prop_assert!(holders.values().all(|&k| k == 1), "two live clusters share a name: {holders:?}");
                let leased: HashSet<&str> = after.leases.iter().map(|l| l.name.as_str()).collect();
                prop_assert_eq!(leased.len(), after.leases.len(), "a name leased twice");
                prop_assert!(created <= n);
            }
        }
    }

    #[test]
    fn no_cluster_is_ever_in_two_claims(g in gen()) {
        let snap = snapshot(&g);
        let plan = plan(&snap, at(g.now), g.seed);
        let mut targets = HashSet::new();
        for a in &plan.actions {
            if let Action::AssignClaim { cluster, .. } = a {
                prop_assert!(targets.insert(cluster.clone()), "{cluster} assigned twice");
                let c = snap.clusters.iter().find(|c| &c.id == cluster).unwrap();
                prop_assert!(c.claim.is_none() && c.is_running() && !c.is_broken(), "{c:?} is not assignable");
            }
        }
        if let Some(after) = apply(&snap, &plan).unwrap() {
            let mut seen = HashMap::new();
            for k in after.claims.iter().filter_map(|k| k.cluster.as_deref()) {
                prop_assert!(seen.insert(k, ()).is_none(), "{k} is in two claims");
            }
        }
    }

    #[test]
    fn claimed_clusters_are_never_deleted_by_pool_logic(g in gen()) {
        let snap = snapshot(&g);
        let plan = plan(&snap, at(g.now), g.seed);
        if let Some(after) = apply(&snap, &plan).unwrap() {
            let held: HashSet<&str> = after.claims.iter().filter_map(|k| k.cluster.as_deref()).collect();
            for a in &plan.actions {
                if let Action::DeleteCluster { cluster, .. } = a {
                    prop_assert!(!held.contains(cluster.as_str()), "{cluster} deleted while a claim holds it");
                }
            }
        }
    }

    #[test]
    fn the_same_input_always_gives_the_same_plan(g in gen()) {
        let snap = snapshot(&g);
        let one = serde_json::to_string(&plan(&snap, at(g.now), g.seed)).unwrap();
        let two = serde_json::to_string(&plan(&snap.clone(), at(g.now), g.seed)).unwrap();
        prop_assert_eq!(one, two);
    }

    #[test]
    fn applying_a_plan_then_planning_again_writes_nothing(g in gen()) {
        let snap = snapshot(&g);
        let first = plan(&snap, at(g.now), g.seed);
        let applied = apply(&snap, &first);
        prop_assert!(applied.is_ok(), "the plan's own revisions conflict: {:?}", applied);
        if let Some(after) = applied.unwrap() {
            let again = plan(&after, at(g.now), g.seed.wrapping_add(1));
            let writes: Vec<_> = again.writes().collect();
            prop_assert!(writes.is_empty(), "first: {}\nsecond: {}", summary(&first), serde_json::to_string(&writes).unwrap());
        }
    }

    /// Pool deletion and resizing to 0 follow the same budget and order (bug 9): given the same clusters, they
    /// delete the same ones.
    #[test]
    fn deleting_a_pool_and_resizing_it_to_zero_delete_the_same_clusters(g in gen()) {
        let mut base = snapshot(&g);
        base.claims.retain(|c| c.cluster.is_some());
        base.pool.spec.adaptive_running_count = None;
        base.pool.spec.schedules.clear();
        let mut deleted = base.clone();
        deleted.pool.deletion_requested_at = Some(at(0));
        let mut zero = base;
        zero.pool.deletion_requested_at = None;
        zero.pool.spec.size = 0;
        zero.pool.spec.running_count = 0;
        let gone = |s: &Snapshot| {
            let mut ids: Vec<String> = plan(s, at(g.now), g.seed)
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::DeleteCluster { cluster, .. } => Some(cluster.clone()),
                    _ => None,
                })
                .collect();
            ids.sort();
            ids
        };
        prop_assert_eq!(gone(&deleted), gone(&zero));
    }

    #[test]
    fn wake_at_is_always_in_the_future(g in gen()) {
        let snap = snapshot(&g);
        let plan = plan(&snap, at(g.now), g.seed);
        prop_assert!(plan.wake_at.is_none_or(|t| t > at(g.now)));
    }
}

/// One line per action: enough to see what a failing case did.
fn summary(plan: &Plan) -> String {
    plan.actions
        .iter()
        .map(|a| match a {
            Action::CreateCluster { cluster } => format!("create {} {:?}", cluster.id, cluster.spec_power_state),
            other => serde_json::to_string(other).unwrap(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
