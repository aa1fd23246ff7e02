//! Resume canaries: standby clusters that have not run for a long time are resumed in quiet hours, a few at a
//! time, so that one that no longer resumes (expired certificates or credentials, operators that do not come
//! back; seed 002) is found and replaced before a claim needs it.
//!
//! A canary is an ordinary resume: the standby is set Running, the power function resumes it, and the resume
//! timeout breaks it if it never comes back, after which the pool replaces it. Once it is Running it has run
//! recently again, is no longer a canary, and the running count sends it back to sleep.

use chrono::{NaiveTime, TimeDelta, TimeZone, Timelike};

pub use crate::model::ResumeCanaries;
use crate::model::{Cluster, Timestamp};

/// Most canaries resuming at once.
pub const MAX_AT_A_TIME: i64 = 100;

/// Reads `HH:MM-HH:MM`.
pub fn parse_hours(text: &str) -> Result<(NaiveTime, NaiveTime), String> {
    let shape = || format!("{text:?} is not a range of local times HH:MM-HH:MM, e.g. \"01:00-05:00\"");
    let (from, to) = text.split_once('-').ok_or_else(shape)?;
    let time = |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").map_err(|_| shape());
    let (from, to) = (time(from)?, time(to)?);
    if from == to {
        return Err(format!("{text:?} is empty: its start and end are the same time"));
    }
    Ok((from, to))
}

impl ResumeCanaries {
    /// How long a standby may sleep before it is checked.
    pub fn after(&self) -> Option<TimeDelta> {
        self.after.get().filter(|d| *d > TimeDelta::zero())
    }

    /// How many at once.
    pub fn at_a_time(&self) -> usize {
        self.at_a_time.unwrap_or(1).clamp(0, MAX_AT_A_TIME) as usize
    }

    /// Whether canaries may start at `now`, and if not, when they next may.
    pub fn window(&self, now: Timestamp) -> (bool, Option<Timestamp>) {
        let Some(Ok((from, to))) = self.hours.as_deref().map(parse_hours) else {
            return (true, None);
        };
        let zone = crate::forecast::zone_or_utc(self.time_zone.as_deref());
        let local = now.with_timezone(&zone);
        let t = local.time().with_nanosecond(0).unwrap_or(local.time());
        let open = if from < to { from <= t && t < to } else { t >= from || t < to };
        if open {
            return (true, None);
        }
        // The next start: today's if still ahead, else tomorrow's (a start skipped by daylight saving, a day on).
        let next = (0..3).find_map(|days| {
            let day = local.date_naive() + TimeDelta::days(days);
            zone.from_local_datetime(&day.and_time(from)).earliest().map(|t| t.to_utc()).filter(|t| *t > now)
        });
        (false, next)
    }
}

/// Since when a cluster has not run: its last resume, else its install.
pub fn idle_since(c: &Cluster) -> Option<Timestamp> {
    c.running_since.max(c.installed_at)
}
