//! Schedules: recurring windows that override size and runningCount.
//!
//! The planner evaluates the schedules itself from `now`, so a missed EventBridge firing changes nothing: the
//! next reconcile (or sweep) sees the window open or closed all the same. Each evaluation also says when the
//! answer next changes, which becomes part of the pool's wake-up time.
//!
//! Parsing a cron expression costs tens of microseconds, far more than the rest of a small pool's plan, so the
//! answer is kept in the pool's status ([`ScheduleState`]) with a digest of the schedules and the instant it
//! holds until. A plan before that instant, with the same schedules, reuses it without parsing anything.

use std::str::FromStr;

use chrono_tz::Tz;
use croner::Cron;

use sha2::{Digest, Sha256};

pub use crate::model::ScheduleState;
use crate::model::{PoolSpec, Timestamp};

fn digest(spec: &PoolSpec) -> String {
    let json = serde_json::to_vec(&spec.schedules).unwrap_or_default();
    Sha256::digest(&json).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Size and runningCount in force at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// Pool size in force (before the inventory cap).
    pub size: i64,
    /// runningCount in force (before clamping to size).
    pub running_count: i64,
    /// The open window, named by its `name` or `schedules[i]`.
    pub active: Option<String>,
    /// When a window next opens or closes.
    pub next_change: Option<Timestamp>,
    /// What to keep in the pool's status (`None` without schedules).
    pub state: Option<ScheduleState>,
}

/// Parses a standard five-field cron expression (`minute hour day-of-month month day-of-week`).
pub fn parse_cron(text: &str) -> Result<Cron, String> {
    let fields = text.split_whitespace().count();
    if fields != 5 {
        return Err(format!(
            "{text:?} is not a five-field cron expression (minute hour day-of-month month day-of-week), e.g. \"0 8 * * MON-FRI\""
        ));
    }
    Cron::from_str(text).map_err(|e| format!("{text:?} is not a valid cron expression: {e}"))
}

/// The size and runningCount `spec` asks for at `now`: the first open window's overrides, else the spec's own.
/// `kept` is the state a previous plan stored; it is reused when still valid.
pub fn effective(spec: &PoolSpec, now: Timestamp, kept: Option<&ScheduleState>) -> Effective {
    let mut out =
        Effective { size: spec.size, running_count: spec.running_count, active: None, next_change: None, state: None };
    if spec.schedules.is_empty() {
        return out;
    }
    let digest = digest(spec);
    if let Some(kept) = kept.filter(|k| k.digest == digest && k.until.is_none_or(|t| now < t)) {
        if let Some(schedule) = kept.active.and_then(|i| spec.schedules.get(i).map(|s| (i, s))) {
            out.size = schedule.1.size.unwrap_or(spec.size);
            out.running_count = schedule.1.running_count.unwrap_or(spec.running_count);
            out.active = Some(schedule.1.name.clone().unwrap_or_else(|| format!("schedules[{}]", schedule.0)));
        }
        out.next_change = kept.until;
        out.state = Some(kept.clone());
        return out;
    }
    let mut active = None;
    for (i, schedule) in spec.schedules.iter().enumerate() {
        let (Ok(cron), Ok(tz), Some(length)) =
            (parse_cron(&schedule.cron), Tz::from_str(&schedule.time_zone), schedule.duration.get())
        else {
            continue; // refused by validation; a stored spec never has one
        };
        let local = now.with_timezone(&tz);
        let opened = cron.find_previous_occurrence(&local, true).ok().map(|t| t.to_utc());
        let next_open = cron.find_next_occurrence(&local, false).ok().map(|t| t.to_utc());
        let closes = opened.map(|t| t + length).filter(|end| *end > now);
        for t in [closes, next_open].into_iter().flatten() {
            out.next_change = Some(out.next_change.map_or(t, |c| c.min(t)));
        }
        if closes.is_some() && out.active.is_none() {
            active = Some(i);
            out.size = schedule.size.unwrap_or(spec.size);
            out.running_count = schedule.running_count.unwrap_or(spec.running_count);
            out.active = Some(schedule.name.clone().unwrap_or_else(|| format!("schedules[{i}]")));
        }
    }
    out.state = Some(ScheduleState { digest, active, until: out.next_change });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::GoDuration;
    use crate::model::{FakePlatform, Platform, Schedule};
    use chrono::{TimeZone, Utc};

    fn workday_spec() -> PoolSpec {
        let mut spec = PoolSpec::new(2, Platform::Fake(FakePlatform::default()));
        spec.running_count = 0;
        spec.schedules = vec![Schedule {
            name: Some("workday".into()),
            cron: "0 8 * * MON-FRI".into(),
            time_zone: "Europe/Berlin".into(),
            duration: GoDuration::new("9h"),
            size: Some(10),
            running_count: Some(4),
        }];
        spec
    }

    #[test]
    fn an_open_window_overrides_size_and_running_count_until_it_closes() {
        // Tuesday 2026-11-24 10:00 Berlin = 09:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 11, 24, 9, 0, 0).single().expect("valid");
        let e = effective(&workday_spec(), now, None);
        assert_eq!((e.size, e.running_count, e.active.as_deref()), (10, 4, Some("workday")));
        // Closes at 17:00 Berlin = 16:00 UTC.
        assert_eq!(e.next_change, Utc.with_ymd_and_hms(2026, 11, 24, 16, 0, 0).single());
    }

    #[test]
    fn outside_every_window_the_spec_applies_and_the_next_opening_is_the_next_change() {
        // Saturday 2026-11-28 12:00 UTC: next window Monday 08:00 Berlin = 07:00 UTC.
        let now = Utc.with_ymd_and_hms(2026, 11, 28, 12, 0, 0).single().expect("valid");
        let e = effective(&workday_spec(), now, None);
        assert_eq!((e.size, e.running_count, e.active), (2, 0, None));
        assert_eq!(e.next_change, Utc.with_ymd_and_hms(2026, 11, 30, 7, 0, 0).single());
    }

    #[test]
    fn a_kept_answer_is_reused_until_it_expires_or_the_schedules_change() {
        let spec = workday_spec();
        let tuesday_10 = Utc.with_ymd_and_hms(2026, 11, 24, 9, 0, 0).single().expect("valid");
        let first = effective(&spec, tuesday_10, None);
        let kept = first.state.clone().expect("kept");
        // An hour later: the same answer, from the status.
        let later = effective(&spec, tuesday_10 + chrono::TimeDelta::hours(1), Some(&kept));
        assert_eq!((later.size, later.state.as_ref()), (10, Some(&kept)));
        // At the window's end it is evaluated again.
        let closed = effective(&spec, kept.until.expect("closes"), Some(&kept));
        assert_eq!((closed.size, closed.active), (2, None));
        // A changed schedule is never answered from the old state.
        let mut edited = spec.clone();
        edited.schedules[0].size = Some(20);
        assert_eq!(effective(&edited, tuesday_10, Some(&kept)).size, 20);
    }

    #[test]
    fn six_field_cron_is_refused() {
        assert!(parse_cron("0 0 8 * * MON").is_err());
        assert!(parse_cron("0 8 * * MON-FRI").is_ok());
    }
}
