//! Forecast pre-warming: the time-of-week profile, what it foresees, and that it stays pure and compact.
#![allow(missing_docs, clippy::unwrap_used)]

mod support;

use apiary_planner::forecast::{bucket_start, index, Buckets, Profile, BUCKETS};
use apiary_planner::*;
use chrono::{TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use support::*;

const WEEK: i64 = 7 * 24 * 60;

/// Claims arriving at these minutes after Monday 00:00 UTC, each counted by a plan and then released.
fn learn(p: PoolBuilder, minutes: &[i64]) -> Snapshot {
    after_arrivals(p, minutes, Claims::Released)
}

fn running_at(snap: &Snapshot, m: i64) -> usize {
    let plan = plan(snap, at(m), 99);
    let mut after = snap.clone();
    apiary_planner::apply_mut(&mut after, &plan).unwrap();
    after.pool.status.running_count as usize
}

/// Twenty claims within two minutes of 09:00 every Monday, for `weeks` weeks.
fn monday_bursts(weeks: i64) -> Vec<i64> {
    (0..weeks).flat_map(|w| (0..20).map(move |i| w * WEEK + 9 * 60 + i / 10)).collect()
}

#[test]
fn a_burst_that_comes_back_every_week_has_its_spares_running_before_it() {
    let p = || pool().size(30).adaptive(0.95, "3m");
    let with = learn(p().forecast("UTC"), &monday_bursts(3));
    let without = learn(p(), &monday_bursts(3));
    let monday = 3 * WEEK;
    // Four minutes before the fourth Monday's burst (resumes take 3 minutes, plus a minute's margin).
    let before = running_at(&with, monday + 9 * 60 - 4);
    assert!(before >= 15, "{before} spares before a burst of 20 seen three weeks running");
    assert_eq!(running_at(&without, monday + 9 * 60 - 4), 0, "the adaptive count alone cannot see it coming");
    // Not all day: an hour before, and at night, nothing is foreseen.
    assert!(running_at(&with, monday + 8 * 60) <= 1);
    assert_eq!(running_at(&with, monday + 3 * 60), 0);
}

#[test]
fn a_burst_seen_once_is_not_taken_for_a_pattern() {
    // Learning starts with a claim at Monday 00:00, so a week later the profile is in use; one burst at 09:00.
    let mut arrivals = vec![0];
    arrivals.extend(monday_bursts(1));
    let once = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &arrivals);
    assert!(running_at(&once, WEEK + 9 * 60 - 4) <= 1, "one burst is no pattern");
    // The same burst a second week is: a part of it is foreseen the third.
    arrivals.extend(monday_bursts(2).into_iter().skip(20));
    let twice = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &arrivals);
    assert!(running_at(&twice, 2 * WEEK + 9 * 60 - 4) >= 5);
}

#[test]
fn foreseen_claims_do_not_inflate_the_rate_estimate() {
    let p = || pool().size(30).adaptive(0.95, "3m");
    let with = learn(p().forecast("UTC"), &monday_bursts(4));
    let without = learn(p(), &monday_bursts(4));
    let rate = |s: &Snapshot| s.pool.status.demand.as_ref().unwrap().claims_per_hour;
    assert!(rate(&with) < rate(&without) / 2.0, "{} against {}", rate(&with), rate(&without));
    // So the spares left behind the burst decay sooner.
    let after = 3 * WEEK + 9 * 60 + 20;
    assert!(running_at(&with, after) < running_at(&without, after));
}

#[test]
fn planning_again_after_applying_writes_nothing() {
    let snap = learn(pool().size(30).adaptive(0.95, "3m").forecast("Europe/Berlin"), &monday_bursts(3));
    for m in [3 * WEEK + 8 * 60 + 55, 3 * WEEK + 9 * 60 + 30, 4 * WEEK] {
        let first = plan(&snap, at(m), 1);
        let applied = apply(&snap, &first).unwrap().unwrap();
        let again = plan(&applied, at(m), 2);
        assert_eq!(again.writes().count(), 0, "at minute {m}: {:?}", again.actions);
        // The wake-up is in the future and no later than the foresight's horizon.
        if let Some(wake) = first.wake_at {
            assert!(wake > at(m) && wake <= at(m) + TimeDelta::hours(6) + TimeDelta::minutes(10));
        }
    }
}

#[test]
fn the_week_is_counted_in_the_pools_time_zone_through_daylight_saving() {
    let berlin: Tz = "Europe/Berlin".parse().unwrap();
    // Monday 09:05 in Berlin is 08:05 UTC in winter and 07:05 UTC in summer: the same bucket.
    let winter = Utc.with_ymd_and_hms(2026, 1, 5, 8, 5, 0).unwrap();
    let summer = Utc.with_ymd_and_hms(2026, 7, 6, 7, 5, 0).unwrap();
    assert_eq!(index(winter, berlin), 9 * 6);
    assert_eq!(index(summer, berlin), 9 * 6);
    assert_eq!(bucket_start(winter, berlin), Utc.with_ymd_and_hms(2026, 1, 5, 8, 0, 0).unwrap());
    // A zone 45 minutes off the hour: buckets start on its ten minutes, not UTC's.
    let kathmandu: Tz = "Asia/Kathmandu".parse().unwrap();
    let t = Utc.with_ymd_and_hms(2026, 1, 5, 3, 20, 0).unwrap(); // 09:05 local
    assert_eq!(bucket_start(t, kathmandu), Utc.with_ymd_and_hms(2026, 1, 5, 3, 15, 0).unwrap());
    assert_eq!(index(t, kathmandu), 9 * 6);
    // Sunday 23:55 is the week's last bucket.
    let sunday = Utc.with_ymd_and_hms(2026, 1, 11, 23, 55, 0).unwrap();
    assert_eq!(index(sunday, Tz::UTC), BUCKETS - 1);
}

#[test]
fn the_profile_is_a_few_kilobytes_and_survives_the_table() {
    let snap = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &monday_bursts(3));
    let profile = snap.pool.status.demand.as_ref().unwrap().profile.clone().unwrap();
    let json = serde_json::to_string(&profile).unwrap();
    assert!(json.len() < 6 * 1024, "{} bytes", json.len());
    let back: Profile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, profile);
    // A profile cut short is refused with a reason, not read as zeros.
    let bad = json.replacen(&serde_json::to_string(&profile.mean).unwrap(), "\"AAAA\"", 1);
    let err = serde_json::from_str::<Profile>(&bad).unwrap_err().to_string();
    assert!(err.contains("forecast buckets"), "{err}");
    assert_eq!(
        Buckets(vec![7; BUCKETS]),
        serde_json::from_str(&serde_json::to_string(&Buckets(vec![7; BUCKETS])).unwrap()).unwrap()
    );
}

#[test]
fn a_new_time_zone_starts_the_profile_afresh_and_turning_forecast_off_drops_it() {
    let snap = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &monday_bursts(2));
    let mut moved = snap.clone();
    moved.pool.spec.adaptive_running_count.as_mut().unwrap().forecast.as_mut().unwrap().time_zone =
        Some("America/New_York".into());
    let plan1 = plan(&moved, at(2 * WEEK), 1);
    let after = apply(&moved, &plan1).unwrap().unwrap();
    let profile = after.pool.status.demand.as_ref().unwrap().profile.as_ref().unwrap();
    assert_eq!(profile.time_zone, "America/New_York");
    assert_eq!(profile.mean, Buckets(vec![0; BUCKETS]));

    let mut off = snap;
    off.pool.spec.adaptive_running_count.as_mut().unwrap().forecast = None;
    let plan2 = plan(&off, at(2 * WEEK), 1);
    let after = apply(&off, &plan2).unwrap().unwrap();
    assert!(after.pool.status.demand.as_ref().unwrap().profile.is_none());
}

#[test]
fn a_profile_read_without_its_buckets_is_learned_afresh_not_read_out_of_bounds() {
    // The store keeps the buckets in an item of their own and puts them back when it reads the partition; a
    // store that lost that item hands the planner a profile without them.
    let mut snap = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &monday_bursts(2));
    let profile = snap.pool.status.demand.as_mut().unwrap().profile.as_mut().unwrap();
    (profile.mean, profile.spread, profile.kept) = (Buckets::default(), Buckets::default(), Some(3));
    assert!(!profile.has_buckets());
    let plan1 = plan(&snap, at(2 * WEEK + 9 * 60 - 4), 1);
    let after = apply(&snap, &plan1).unwrap().unwrap();
    let profile = after.pool.status.demand.as_ref().unwrap().profile.as_ref().unwrap();
    assert!(profile.has_buckets());
    assert_eq!(profile.mean, Buckets(vec![0; BUCKETS]), "nothing learned is made up");
    assert_eq!(profile.kept, None);
}

#[test]
fn bad_forecast_settings_are_refused_by_field() {
    let mut spec = pool().size(3).adaptive(0.95, "3m").spec;
    spec.adaptive_running_count.as_mut().unwrap().forecast =
        Some(Forecast { time_zone: Some("Mars/Olympus".into()), half_life_weeks: Some(0.0) });
    let errors = validate_spec(&spec).unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert!(fields.contains(&"adaptiveRunningCount.forecast.timeZone"), "{errors:?}");
    assert!(fields.contains(&"adaptiveRunningCount.forecast.halfLifeWeeks"), "{errors:?}");
    spec.adaptive_running_count.as_mut().unwrap().forecast =
        Some(Forecast { time_zone: Some("Europe/Berlin".into()), half_life_weeks: Some(2.0) });
    assert_eq!(validate_spec(&spec), Ok(()));
    // Unknown fields inside the option are refused too, when a caller sends them (a stored spec reads past them).
    let errors = apiary_planner::validate::strictly::<Forecast>(&serde_json::json!({ "timezone": "UTC" }));
    assert_eq!(errors.map_err(|e| e[0].field.clone()), Err("timezone".to_owned()));
}

#[test]
fn a_lead_longer_than_a_bucket_still_wakes_the_pool_a_lead_early() {
    // Resumes of 25 minutes: a burst at 00:30 needs its spares asked for at 00:05, before the 00:10 and 00:20 edges.
    let forecast = Forecast::default();
    let view = Profile::new(&forecast, at(0)).at(at(0), &forecast);
    let moments = view.moments(at(0), TimeDelta::minutes(25));
    assert!(moments.contains(&at(5)), "{:?}", &moments[..6]);
    assert!(moments.windows(2).all(|w| w[0] < w[1]), "in order, once each");
}

#[test]
fn between_a_plan_and_its_wake_up_the_foreseen_running_count_does_not_change() {
    // The sweep reconciles a pool between its full passes only for its deadlines and waiting claims, so what the
    // forecast foresees must wake the pool itself: planned again at any time before the wake-up it asked for, the
    // same state gives the same running count. A flow of a claim every two minutes, 09:00 to 10:00, three Mondays;
    // the fourth Monday's hour before it, when no claim comes and the spares for the flow are resumed ahead of it.
    // (Once claims come, each is a reconcile; a bucket that closes without the claims it used to see lowers what
    // is foreseen, which the full pass picks up.) With `keepFresh` too, whose kept clusters are counted on as the
    // claims seen allow.
    for keep_fresh in [false, true] {
        let mut p = pool().size(30).adaptive(0.95, "3m").forecast("UTC");
        if let Some(a) = p.spec.adaptive_running_count.as_mut() {
            a.keep_fresh = keep_fresh.then_some(true);
        }
        let minutes: Vec<i64> = (0..3).flat_map(|w| (0..30).map(move |i| w * WEEK + 9 * 60 + 2 * i)).collect();
        let snap = learn(p, &minutes);
        let monday = 3 * WEEK;
        assert_eq!(plan(&snap, at(monday + 7 * 60 + 30), 1).status.running_count, 0);
        assert!(plan(&snap, at(monday + 9 * 60), 1).status.running_count > 0);
        for m in (monday + 7 * 60 + 30)..(monday + 9 * 60) {
            let t = at(m);
            let first = plan(&snap, t, 1);
            let (count, wake) = (first.status.running_count, first.wake_at.unwrap_or(t + TimeDelta::hours(1)));
            let mut u = t + TimeDelta::seconds(15);
            while u < wake.min(t + TimeDelta::minutes(20)) {
                let later = plan(&snap, u, 1).status.running_count;
                assert_eq!(
                    later, count,
                    "keepFresh {keep_fresh}: planned at {t} with a wake-up at {wake}: {later} at {u}, not {count}"
                );
                u += TimeDelta::seconds(15);
            }
        }
    }
}

#[test]
fn spares_resuming_for_a_burst_are_not_stopped_when_the_first_resume_shortens_the_lead() {
    // A pool of installed standbys, and the burst of the last three Mondays at 09:00: five minutes before the
    // fourth (a 3-minute resume and the margin), its spares are resumed.
    let mut snap = learn(pool().size(30).adaptive(0.95, "3m").forecast("UTC"), &monday_bursts(3));
    for c in &mut snap.clusters {
        (c.installed_at, c.power_state) = (Some(at(0)), Some(PowerState::Hibernating));
    }
    let monday = 3 * WEEK;
    let prewarm = plan(&snap, at(monday + 9 * 60 - 5), 1);
    let mut snap = apply(&snap, &prewarm).unwrap().unwrap();
    let resuming: Vec<String> = snap
        .clusters
        .iter()
        .filter(|c| c.spec_power_state == Some(DesiredPower::Running))
        .map(|c| c.id.clone())
        .collect();
    assert!(resuming.len() >= 15, "{} spares resumed for a burst of 20", resuming.len());
    // Two minutes later the first is Running after a resume of half a minute, and so were the pool's last ones:
    // the measured resume, and with it the lead, is shorter now (the spares are asked for two and a half minutes
    // before the burst, not five). The burst is still coming, within a stop and a resume: stopping the others now
    // would only resume them again thirty seconds later.
    for c in &mut snap.clusters {
        c.last_resume_seconds = Some(30);
        if resuming.contains(&c.id) {
            c.power_state = Some(PowerState::WaitingForMachines);
        }
    }
    snap.clusters.iter_mut().find(|c| c.id == resuming[0]).unwrap().power_state = Some(PowerState::Running);
    let later = plan(&snap, at(monday + 9 * 60 - 3), 2);
    let stopped: Vec<&Action> = later
        .actions
        .iter()
        .filter(|a| matches!(a, Action::SetPowerState { power_state: DesiredPower::Hibernating, .. }))
        .collect();
    assert!(stopped.is_empty(), "{stopped:?}");
    assert!(later.wake_at.is_some_and(|w| w <= at(monday + 9 * 60)), "{:?}", later.wake_at);
}
