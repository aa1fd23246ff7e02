//! A pool's pace: how soon its clusters' installs, resumes and stops finish when they are quick, measured on the
//! clusters the pool holds: each plan gathers them ([`Samples`]) in the pass that reads its clusters, and keeps
//! the result in the pool's status ([`Pace::measure`] does the same for a list of clusters).
//!
//! The power function reads it with the pool item it already reads, and looks at a transition sparsely until a
//! poll before its pool's quick time, at the usual cadence after ([`crate::power::install_look`],
//! [`crate::power::transition_look`]), while no claim waits. The one transition in twenty that finishes quicker
//! than the pool's quick time is noticed then. A pool without enough measurements yet (a new one) is looked at
//! every poll, and so is a pool whose claims wait ([`crate::Pool::power_limits`]). A pool whose transitions become
//! quicker (a smaller image, another region) has them noticed at most one sparse gap late until its pace, measured
//! on what is noticed, catches up. docs/concepts.md says what this saves.

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::model::Cluster;

/// The quantile of the measured durations that is the pool's quick time: one transition in twenty is quicker.
pub const QUICK: f64 = 0.05;
/// Measurements needed before a duration is taken as the pool's.
pub const MIN_SAMPLES: usize = 5;
/// A measured quick time within this fraction of the recorded one (or a second) keeps the recorded one: the pool
/// item is not written again for drift.
pub const DRIFT: f64 = 0.1;

/// The pool's quick install, resume and stop times, in seconds; each absent until measured [`MIN_SAMPLES`] times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pace {
    /// From a cluster's creation to its install found done (first attempts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_seconds: Option<u32>,
    /// From a resume's start to Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_seconds: Option<u32>,
    /// From a stop's start to Hibernating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_seconds: Option<u32>,
}

impl Pace {
    /// The pace measured on `clusters`; each duration keeps `old`'s value while the measurement is within
    /// [`DRIFT`] of it or there are too few measurements. `None` when nothing is known.
    pub fn measure(clusters: &[Cluster], old: Option<Pace>) -> Option<Pace> {
        let mut samples = Samples::default();
        clusters.iter().for_each(|c| samples.add(c));
        samples.pace(old)
    }

    /// The pool's quick install time.
    pub fn install(&self) -> Option<TimeDelta> {
        self.install_seconds.map(|s| TimeDelta::seconds(i64::from(s)))
    }

    /// The pool's quick resume time.
    pub fn resume(&self) -> Option<TimeDelta> {
        self.resume_seconds.map(|s| TimeDelta::seconds(i64::from(s)))
    }

    /// The pool's quick stop time.
    pub fn stop(&self) -> Option<TimeDelta> {
        self.stop_seconds.map(|s| TimeDelta::seconds(i64::from(s)))
    }
}

/// The durations measured on a pool's clusters, gathered one cluster at a time (the planner does it in the pass
/// that reads each cluster anyway).
#[derive(Debug, Clone, Default)]
pub struct Samples {
    installs: Vec<u32>,
    resumes: Vec<u32>,
    stops: Vec<u32>,
}

impl Samples {
    /// Adds what `c` measured: its install (a first attempt's), its last resume and its last stop.
    pub fn add(&mut self, c: &Cluster) {
        self.installs.extend(install_seconds(c));
        self.resumes.extend(c.last_resume_seconds);
        self.stops.extend(c.last_stop_seconds);
    }

    /// The pace they give; each duration keeps `old`'s value while the measurement is within [`DRIFT`] of it or
    /// there are too few measurements. `None` when nothing is known.
    pub fn pace(self, old: Option<Pace>) -> Option<Pace> {
        let old = old.unwrap_or_default();
        let pace = Pace {
            install_seconds: settle(quick(self.installs), old.install_seconds),
            resume_seconds: settle(quick(self.resumes), old.resume_seconds),
            stop_seconds: settle(quick(self.stops), old.stop_seconds),
        };
        (pace != Pace::default()).then_some(pace)
    }
}

/// How long `c`'s install took, from its creation to its install found done: a first attempt's only.
pub(crate) fn install_seconds(c: &Cluster) -> Option<u32> {
    let installed = c.installed_at.filter(|_| c.install_failures == 0)?;
    u32::try_from((installed - c.created_at).num_seconds()).ok()
}

/// The [`QUICK`] quantile of `seconds`, when there are at least [`MIN_SAMPLES`].
fn quick(seconds: Vec<u32>) -> Option<u32> {
    if seconds.len() < MIN_SAMPLES {
        return None;
    }
    quantile(seconds, QUICK)
}

/// The `q` quantile of `values` (the value ranked ⌊n·q⌋ from the smallest); `None` when there are none.
pub(crate) fn quantile(mut values: Vec<u32>, q: f64) -> Option<u32> {
    let rank = ((values.len() as f64 * q) as usize).min(values.len().checked_sub(1)?);
    let (_, at, _) = values.select_nth_unstable(rank);
    Some(*at)
}

/// `measured`, unless `recorded` is close enough to it (or nothing was measured).
fn settle(measured: Option<u32>, recorded: Option<u32>) -> Option<u32> {
    match (measured, recorded) {
        (Some(m), Some(r)) if f64::from(m.abs_diff(r)) <= (f64::from(r) * DRIFT).max(1.0) => Some(r),
        (Some(m), _) => Some(m),
        (None, r) => r,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::model::Timestamp;

    fn t(s: i64) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time") + TimeDelta::seconds(s)
    }

    fn installed(i: usize, took: i64) -> Cluster {
        let mut c = Cluster::new(format!("c{i}"), format!("c{i}"), "infra", t(0));
        c.installed_at = Some(t(took));
        c
    }

    #[test]
    fn the_quick_time_is_the_fifth_percentile_once_there_are_enough_measurements() {
        let few: Vec<Cluster> = (0..4).map(|i| installed(i, 2400)).collect();
        assert_eq!(Pace::measure(&few, None), None, "four installs are too few");
        // Twenty installs of 30 to 49 minutes: the second quickest is the fifth percentile.
        let many: Vec<Cluster> = (0..20).map(|i| installed(i, 1800 + 60 * i as i64)).collect();
        let pace = Pace::measure(&many, None).expect("measured");
        assert_eq!(pace.install_seconds, Some(1860));
        assert_eq!((pace.resume_seconds, pace.stop_seconds), (None, None));
        // A failed first attempt is not an install's pace.
        let mut retried = many.clone();
        for c in &mut retried[..3] {
            c.install_failures = 1;
        }
        assert_eq!(Pace::measure(&retried, None).and_then(|p| p.install_seconds), Some(1980));
    }

    #[test]
    fn a_recorded_pace_is_kept_through_drift_and_when_the_measurements_are_gone() {
        let mut many: Vec<Cluster> = (0..10).map(|i| installed(i, 2000)).collect();
        for (i, c) in many.iter_mut().enumerate() {
            c.last_resume_seconds = Some(170 + i as u32);
            c.last_stop_seconds = Some(100);
        }
        let first = Pace::measure(&many, None).expect("measured");
        assert_eq!(
            (first.install_seconds, first.resume_seconds, first.stop_seconds),
            (Some(2000), Some(170), Some(100))
        );
        let installed_after = |secs: i64| -> Vec<Cluster> {
            many.iter().cloned().map(|c| Cluster { installed_at: Some(t(secs)), ..c }).collect()
        };
        // Within a tenth: kept, so the pool item is not written again.
        assert_eq!(Pace::measure(&installed_after(2150), Some(first)), Some(first));
        // Beyond it: the new measurement.
        assert_eq!(Pace::measure(&installed_after(2300), Some(first)).and_then(|p| p.install_seconds), Some(2300));
        // Nothing measured any more (the clusters are gone): what was recorded stays.
        assert_eq!(Pace::measure(&[], Some(first)), Some(first));
    }
}
