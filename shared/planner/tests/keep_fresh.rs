//! `adaptiveRunningCount.keepFresh`: a just-installed cluster stays Running, beyond the running count, while
//! claims are expected sooner than a stop and a resume would take, and hibernates when none came.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::adaptive::DEFAULT_STOP;
use apiary_planner::*;
use chrono::TimeDelta;
use support::*;

/// Claims an hour the pools below are seeing: 3.5 expected within the 7-minute fresh window (the default 2-minute
/// stop and the 5-minute resume estimate, nothing measured yet).
const RATE: f64 = 30.0;

/// A pool of `size` with the adaptive count, and `keepFresh` if `on`.
fn keep_fresh(on: bool, size: usize) -> PoolBuilder {
    let mut p = pool().size(size as i64).adaptive(0.9, "5m");
    if let Some(a) = p.spec.adaptive_running_count.as_mut() {
        a.keep_fresh = on.then_some(true);
    }
    p
}

/// The fresh window: the default stop and the resume estimate.
fn window() -> TimeDelta {
    DEFAULT_STOP + mins(5)
}

/// The pool as `s` has it, seeing `RATE` claims an hour as of `now`.
fn busy(s: &Scenario, now: Timestamp) -> Snapshot {
    let mut snap = s.snapshot();
    snap.pool.status.demand =
        Some(Demand { claims_per_hour: RATE, at: now, counted_until: now, counted_at_edge: Vec::new(), profile: None });
    snap
}

/// The running count the adaptive option asks for in `snap` at `now`.
fn spares(snap: &Snapshot, now: Timestamp) -> usize {
    let option = snap.pool.spec.adaptive_running_count.as_ref().unwrap();
    option.decide(snap.pool.status.demand.as_ref(), &snap.claims, &snap.clusters, now, 20).running
}

/// `n` spares installed long ago and Running, `s0`, `s1`, …
fn with_spares(mut s: Scenario, n: usize) -> Scenario {
    for i in 0..n {
        s = s.with(cluster(&format!("s{i}")).running());
    }
    s
}

#[test]
fn a_just_installed_cluster_stays_running_while_claims_are_expected_and_hibernates_when_none_came() {
    let now = at(100);
    let n = spares(&busy(&given(keep_fresh(true, 20)), now), now);
    assert!(n > 0, "the rate asks for spares");
    let installing =
        |on: bool| with_spares(given(keep_fresh(on, n + 1)), n).with(cluster("new").created(at(60)).installing());

    // Seed 000: the newest cluster beyond the running count ends its install hibernated.
    let off = plan(&busy(&installing(false), now), now, 1);
    assert!(off.powered(DesiredPower::Running).is_empty(), "{:?}", off.actions);

    // keepFresh: it is meant Running while it installs, so its install ends Running.
    let on = busy(&installing(true), now);
    let p = plan(&on, now, 1);
    assert_eq!(p.powered(DesiredPower::Running), ["new"], "{:?}", p.actions);
    let mut snap = apply(&on, &p).unwrap().unwrap();
    assert_eq!(plan(&snap, now, 2).writes().count(), 0, "planning it again writes nothing");

    // Installed a minute later and Running: kept, with a wake-up at the end of its window.
    let installed = at(101);
    let c = snap.clusters.iter_mut().find(|c| c.id == "new").unwrap();
    (c.installed_at, c.power_state, c.running_since) = (Some(installed), Some(PowerState::Running), Some(installed));
    let kept = plan(&snap, installed, 3);
    let powered = |p: &Plan| p.actions.iter().filter(|a| matches!(a, Action::SetPowerState { .. })).count();
    assert_eq!(powered(&kept), 0, "{:?}", kept.actions);
    assert!(kept.wake_at.is_some_and(|t| t <= installed + window()), "{:?}", kept.wake_at);
    let before = installed + window() - TimeDelta::seconds(1);
    snap.pool.status.demand.as_mut().unwrap().at = before;
    let p = plan(&snap, before, 4);
    assert_eq!(powered(&p), 0, "still in its window: {:?}", p.actions);
    assert_eq!(p.wake_at, Some(installed + window()), "woken when its window ends");

    // No claim came in the window: it hibernates, as seed 000 would have had it.
    let after = installed + window();
    snap.pool.status.demand.as_mut().unwrap().at = after;
    let p = plan(&snap, after, 4);
    assert_eq!(p.powered(DesiredPower::Hibernating), ["new"], "{:?}", p.actions);
}

#[test]
fn a_kept_cluster_stands_in_for_a_claimed_spare_instead_of_a_standby_being_resumed() {
    let now = at(100);
    let n = spares(&busy(&given(keep_fresh(true, 20)), now), now);
    // Once the claim is served, the pool holds its size: nothing is installed.
    let pool_of = |on: bool| {
        with_spares(given(keep_fresh(on, n + 1)), n)
            .with(cluster("old").hibernating())
            .with(cluster("fresh").created(at(98)).running())
            .with(claim("k").created(now))
    };

    // Seed 000: the claim takes the oldest spare, the oldest standby is resumed in its place and the newest
    // cluster is stopped.
    let off = plan(&busy(&pool_of(false), now), now, 1);
    assert_eq!(off.assigned(), [("k", "s0")]);
    assert_eq!(off.powered(DesiredPower::Running), ["old"], "{:?}", off.actions);
    assert_eq!(off.powered(DesiredPower::Hibernating), ["fresh"]);

    // keepFresh: the cluster that is up takes the claimed spare's place; nothing stops, nothing resumes.
    let on = busy(&pool_of(true), now);
    let p = plan(&on, now, 1);
    assert_eq!(p.assigned(), [("k", "s0")]);
    assert!(p.powered(DesiredPower::Running).is_empty(), "{:?}", p.actions);
    assert!(p.powered(DesiredPower::Hibernating).is_empty(), "{:?}", p.actions);
    // It is a spare now, not a kept cluster: its window does not end it.
    let snap = apply(&on, &p).unwrap().unwrap();
    let later = at(98) + window() + mins(1);
    let mut later_snap = snap.clone();
    later_snap.pool.status.demand.as_mut().unwrap().at = later;
    let again = plan(&later_snap, later, 2);
    assert!(!again.powered(DesiredPower::Hibernating).contains(&"fresh"), "{:?}", again.actions);
}

#[test]
fn only_as_many_are_kept_as_are_worth_their_idle_time() {
    let now = at(100);
    let n = spares(&busy(&given(keep_fresh(true, 20)), now), now);
    let mut s = with_spares(given(keep_fresh(true, n + 5)), n);
    for i in 0..5 {
        s = s.with(cluster(&format!("i{i}")).created(at(60 + i)).installing());
    }
    let p = plan(&busy(&s, now), now, 1);
    // 3.5 claims expected within the window: a first kept cluster is used if one comes (97%), a second if two
    // do (86%), each for less time idle than its stop and resume. A third is used only if three come (68%) and
    // would idle longer on average (0.72 of the window) than that: the two installs closest to done are kept.
    assert_eq!(p.powered(DesiredPower::Running), ["i0", "i1"], "{:?}", p.actions);
    let k = adaptive::KeepFresh { window: window(), claims: 3.5 };
    assert_eq!((k.keeps(1), k.keeps(2), k.keeps(3)), (true, true, false));
    // The first is kept exactly while a claim is expected sooner than a stop and a resume take.
    let first = |claims: f64| adaptive::KeepFresh { window: window(), claims }.keeps(1);
    assert_eq!((first(0.99), first(1.01)), (false, true));

    // A quiet pool keeps none: fewer than one claim expected within the window.
    let mut quiet = busy(&s, now);
    quiet.pool.status.demand.as_mut().unwrap().claims_per_hour = 6.0;
    let p = plan(&quiet, now, 1);
    assert!(p.powered(DesiredPower::Running).is_empty(), "{:?}", p.actions);
}

#[test]
fn a_canary_resumed_beyond_the_count_does_not_take_the_place_of_a_cluster_already_resuming() {
    // Found by the property tests: one claim waiting, a cluster resuming for it, and an older standby asleep long
    // enough to be resumed as a canary. Counting clusters meant Running as up put the resuming one first and made
    // the standby a canary; once meant Running, the older standby came first, and the next plan hibernated the
    // other.
    let now = at(146);
    // Resuming for the claim, two minutes after its install: not asleep long enough to be a canary itself.
    let mut resuming = cluster("resuming").created(at(14)).resuming();
    resuming.c.installed_at = Some(at(144));
    let s = given(keep_fresh(true, 1).canaries("30m", 1, None))
        .with(cluster("broken").running().broken())
        .with(cluster("spare").hibernating())
        .with(resuming)
        .with(cluster("asleep").hibernating())
        .with(claim("k").created(at(0)));
    let snap = s.snapshot();
    let first = plan(&snap, now, 1);
    let applied = apply(&snap, &first).unwrap().unwrap();
    let again = plan(&applied, now, 2);
    assert_eq!(again.writes().count(), 0, "first {:?}\nthen {:?}", first.actions, again.actions);
}

const WEEK: i64 = 7 * 24 * 60;

/// Three Mondays: nothing before 08:30, then a claim a minute until 10:00, each claim released.
fn mornings() -> Vec<i64> {
    (0..3).flat_map(|w| (0..90).map(move |i| w * WEEK + 8 * 60 + 30 + i)).collect()
}

/// Forty spares whose installs took `took` minutes.
fn installs_took(mut snap: Snapshot, took: i64) -> Snapshot {
    snap.clusters = (0..40)
        .map(|i| {
            let mut c = cluster(&format!("c{i:02}")).created(at(i)).c;
            c.installed_at = Some(at(i + took));
            c
        })
        .collect();
    snap
}

#[test]
fn kept_clusters_stand_in_for_no_more_claims_than_the_installs_an_install_ago_supply() {
    let learned = |on: bool| after_arrivals(keep_fresh(on, 40).forecast("UTC"), &mornings(), Claims::Released);
    // The fourth Monday at 08:40: the flow is a claim a minute, and was nothing before 08:30.
    let now = at(3 * WEEK + 8 * 60 + 40);
    let off = spares(&installs_took(learned(false), 40), now);
    // Installs of 40 minutes began at 08:00, when no claim had come: none ends now to be kept, so none is counted
    // on to stand in for a claimed spare.
    assert_eq!(spares(&installs_took(learned(true), 40), now), off);
    // Installs of 5 minutes replace the claims of 08:35: as many are kept as claims come, and stand in for some.
    let quick = spares(&installs_took(learned(true), 5), now);
    assert!(quick < off, "{quick} spares with kept clusters supplied, {off} without the option");
    // Before the installs are measured, the flow itself is taken for the supply.
    let mut unmeasured = learned(true);
    unmeasured.clusters.clear();
    assert!(spares(&unmeasured, now) < off);
}

#[test]
fn kept_clusters_stand_in_for_no_more_claims_than_the_pool_has_lately_seen() {
    // The fourth Monday, 09:00, with 5-minute installs: the forecast's flow is a claim a minute.
    let now = at(3 * WEEK + 9 * 60);
    let monday = |on: bool, arrivals: &[i64]| {
        let minutes: Vec<i64> = mornings().into_iter().chain(arrivals.iter().copied()).collect();
        installs_took(after_arrivals(keep_fresh(on, 40).forecast("UTC"), &minutes, Claims::Released), 5)
    };
    // The claims come as foreseen, a minute apart since 08:30: the installs replacing them are kept, and stand in
    // for some of the claimed spares.
    let coming: Vec<i64> = (0..30).map(|i| 3 * WEEK + 8 * 60 + 30 + i).collect();
    let (on, off) = (spares(&monday(true, &coming), now), spares(&monday(false, &coming), now));
    assert!(on < off, "{on} spares with the claims coming, {off} without the option");
    // This Monday one claim came, at 08:50: the installs that would be kept replace claims that are not being made,
    // so none is counted on, and the flow's spares are the forecast's own.
    let quiet = [3 * WEEK + 8 * 60 + 50];
    assert_eq!(spares(&monday(true, &quiet), now), spares(&monday(false, &quiet), now));
}
