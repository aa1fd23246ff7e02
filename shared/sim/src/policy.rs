//! The running-count policies compared on one trace.
//!
//! - `static-0`: Hive's default, everything hibernated.
//! - `static-formula`: seed 000's starting point, `runningCount = round_up(claim_frequency × install_time)`, with
//!   the trace's mean claim rate.
//! - `static-peak`: the same formula with the busiest hour's rate (seed 000's "handle peak demand").
//! - `schedules`: a weekday working-hours window (Mon–Fri 08:00, 10 hours), each side tuned with the formula on
//!   its own mean rate (seed 000's "cron jobs", as a pool field).
//! - `adaptive`: the planner's adaptive running count with a target.
//! - `forecast`: the same with forecast pre-warming.
//! - `keep-fresh`: `forecast` with `keepFresh`: a just-installed cluster stays Running while a claim is expected
//!   sooner than a stop and a resume take, and one that is up counts toward the running count before one asleep.
//! - `oracle`: perfect foresight. runningCount is exactly the number of claims arriving within the next resume
//!   time (its 99th percentile), so each claim finds a spare resumed just for it. A lower bound on spare hours
//!   for serving every claim at once.

use chrono::{Datelike, TimeDelta, Timelike, Weekday};

use apiary_planner::duration::hours;
use apiary_planner::{AdaptiveRunningCount, GoDuration, PoolSpec, Schedule};

use crate::engine::Platform;
use crate::trace::Trace;

/// A way to set a pool's running count.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// A fixed runningCount.
    Static {
        /// Report name.
        name: String,
        /// runningCount.
        running: i64,
    },
    /// runningCount `off`, and `day` in a weekday working-hours window.
    Schedules {
        /// runningCount Mon–Fri 08:00–18:00 UTC.
        day: i64,
        /// runningCount otherwise.
        off: i64,
    },
    /// The adaptive running count.
    Adaptive {
        /// Report name.
        name: String,
        /// The pool option.
        option: AdaptiveRunningCount,
    },
    /// Perfect foresight of arrivals.
    Oracle {
        /// How long before each claim its cluster is resumed.
        lead: TimeDelta,
    },
}

impl Policy {
    /// The report name.
    pub fn name(&self) -> String {
        match self {
            Policy::Static { name, .. } | Policy::Adaptive { name, .. } => name.clone(),
            Policy::Schedules { day, off } => format!("schedules ({day} day / {off} off)"),
            Policy::Oracle { .. } => "oracle".into(),
        }
    }

    /// The pool spec for this policy, and runningCount changes over time (oracle only).
    pub fn configure(&self, base: &PoolSpec, trace: &Trace) -> (PoolSpec, Vec<(TimeDelta, i64)>) {
        let mut spec = base.clone();
        let mut changes = Vec::new();
        match self {
            Policy::Static { running, .. } => spec.running_count = *running,
            Policy::Schedules { day, off } => {
                spec.running_count = *off;
                spec.schedules = vec![Schedule {
                    name: Some("workday".into()),
                    cron: "0 8 * * MON-FRI".into(),
                    time_zone: "UTC".into(),
                    duration: GoDuration::new("10h"),
                    size: None,
                    running_count: Some(*day),
                }];
            }
            Policy::Adaptive { option, .. } => {
                spec.running_count = 0;
                spec.adaptive_running_count = Some(option.clone());
            }
            Policy::Oracle { lead } => {
                spec.running_count = 0;
                // runningCount(t) = claims arriving in (t, t + lead]: +1 a lead before each claim, −1 as it arrives.
                let mut steps: Vec<(TimeDelta, i64)> = Vec::new();
                for a in &trace.arrivals {
                    steps.push(((a.at - *lead).max(TimeDelta::zero()), 1));
                    steps.push((a.at, -1));
                }
                steps.sort();
                let mut level = 0;
                for (t, d) in steps {
                    level += d;
                    match changes.last_mut() {
                        Some((last, value)) if *last == t => *value = level,
                        _ => changes.push((t, level)),
                    }
                }
            }
        }
        (spec, changes)
    }
}

fn in_workday(trace: &Trace, at: TimeDelta) -> bool {
    let t = trace.start + at;
    !matches!(t.weekday(), Weekday::Sat | Weekday::Sun) && (8..18).contains(&t.hour())
}

/// Seed 000's formula: `round_up(claims per hour × install hours)`.
pub fn formula(per_hour: f64, install: TimeDelta) -> i64 {
    (per_hour * hours(install)).ceil() as i64
}

/// The policies compared on `trace`: the static ones tuned from the trace as seed 000 suggests, schedules,
/// adaptive with `adaptive` as its option, and the oracle.
pub fn compared(trace: &Trace, platform: &Platform, adaptive: AdaptiveRunningCount) -> Vec<Policy> {
    let forecast = AdaptiveRunningCount { forecast: Some(Default::default()), ..adaptive.clone() };
    let install = platform.install.median;
    // Tuned on the measured period, as an operator would from the pool's history.
    let hours = hours(trace.length - trace.learn);
    let workday_hours = (trace.learn.num_hours()..trace.length.num_hours())
        .filter(|h| in_workday(trace, TimeDelta::hours(*h)))
        .count() as f64;
    let in_day = trace.measured().filter(|a| in_workday(trace, a.at)).count() as f64;
    let day_rate = if workday_hours > 0.0 { in_day / workday_hours } else { 0.0 };
    let off_hours = (hours - workday_hours).max(1.0);
    let off_rate = (trace.measured().count() as f64 - in_day) / off_hours;
    let (mean, peak) = (formula(trace.mean_rate(), install), formula(trace.peak_rate(), install));
    vec![
        Policy::Static { name: "static-0".into(), running: 0 },
        Policy::Static { name: format!("static-formula ({mean})"), running: mean },
        Policy::Static { name: format!("static-peak ({peak})"), running: peak },
        Policy::Schedules { day: formula(day_rate, install), off: formula(off_rate, install) },
        Policy::Adaptive { name: "adaptive".into(), option: adaptive },
        Policy::Adaptive { name: "forecast".into(), option: forecast.clone() },
        Policy::Adaptive {
            name: "keep-fresh".into(),
            option: AdaptiveRunningCount { keep_fresh: Some(true), ..forecast },
        },
        // The 99th percentile of resumes, plus one power poll.
        Policy::Oracle { lead: platform.resume.quantile(2.33) + apiary_planner::power::POLL },
    ]
}
