//! Claim traces: when each claim arrives and how long it is held, read from CSV or generated.
//!
//! CSV: `claim_at_seconds,hold_seconds` per line, seconds from the trace's start; lines starting with `#` are
//! comments, and `# start: <RFC 3339>` / `# length: <Go duration>` set the period (default: a week from Monday
//! 2026-01-05 00:00 UTC).

use chrono::{Datelike, TimeDelta, TimeZone, Timelike, Utc, Weekday};

use apiary_planner::duration::{self, hours};
use apiary_planner::Timestamp;

use crate::rng::Rng;

/// One claim of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// When it arrives, from the trace's start.
    pub at: TimeDelta,
    /// How long it is held once it has a cluster.
    pub hold: TimeDelta,
}

/// A period and the claims made in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Name, for reports.
    pub name: String,
    /// When the period starts.
    pub start: Timestamp,
    /// How long it lasts.
    pub length: TimeDelta,
    /// How long, from the start, the pool learns before it is measured (`# learn:` in the CSV; default none).
    pub learn: TimeDelta,
    /// The claims, in arrival order.
    pub arrivals: Vec<Arrival>,
}

/// The default start: Monday 2026-01-05 00:00 UTC.
pub fn default_start() -> Timestamp {
    Utc.with_ymd_and_hms(2026, 1, 5, 0, 0, 0).single().unwrap_or_default()
}

impl Trace {
    /// Reads a trace from CSV text.
    pub fn parse(name: &str, text: &str) -> Result<Self, String> {
        let mut start = default_start();
        let mut length = TimeDelta::days(7);
        let mut learn = TimeDelta::zero();
        let mut arrivals = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(comment) = line.strip_prefix('#') {
                if let Some(v) = comment.trim().strip_prefix("start:") {
                    start = v.trim().parse().map_err(|e| format!("line {}: bad start {v:?}: {e}", n + 1))?;
                } else if let Some(v) = comment.trim().strip_prefix("length:") {
                    length = duration::parse(v.trim()).map_err(|e| format!("line {}: {e}", n + 1))?;
                } else if let Some(v) = comment.trim().strip_prefix("learn:") {
                    learn = duration::parse(v.trim()).map_err(|e| format!("line {}: {e}", n + 1))?;
                }
                continue;
            }
            if line.is_empty() || line.starts_with("claim_at") {
                continue;
            }
            let (at, hold) = line.split_once(',').ok_or_else(|| format!("line {}: expected two columns", n + 1))?;
            let secs = |s: &str| -> Result<TimeDelta, String> {
                let v: f64 = s.trim().parse().map_err(|_| format!("line {}: {s:?} is not a number", n + 1))?;
                if !(v.is_finite() && v >= 0.0) {
                    return Err(format!("line {}: {s:?} must be a non-negative number of seconds", n + 1));
                }
                Ok(TimeDelta::milliseconds((v * 1000.0).round() as i64))
            };
            arrivals.push(Arrival { at: secs(at)?, hold: secs(hold)? });
        }
        arrivals.sort_by_key(|a| a.at);
        if learn >= length {
            return Err(format!(
                "learn ({}) must be shorter than length ({})",
                duration::format(learn),
                duration::format(length)
            ));
        }
        Ok(Self { name: name.to_string(), start, length, learn, arrivals })
    }

    /// Writes the trace as CSV.
    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "# trace: {}\n# start: {}\n# length: {}\n",
            self.name,
            self.start.to_rfc3339(),
            duration::format(self.length)
        );
        if self.learn > TimeDelta::zero() {
            out.push_str(&format!("# learn: {}\n", duration::format(self.learn)));
        }
        out.push_str("claim_at_seconds,hold_seconds\n");
        for a in &self.arrivals {
            out.push_str(&format!("{:.0},{:.0}\n", a.at.num_seconds(), a.hold.num_seconds()));
        }
        out
    }

    /// When measuring starts: after the learning weeks.
    pub fn measured_from(&self) -> Timestamp {
        self.start + self.learn
    }

    /// The claims of the measured period.
    pub fn measured(&self) -> impl Iterator<Item = &Arrival> {
        self.arrivals.iter().filter(|a| a.at >= self.learn)
    }

    /// Average claims per hour over the measured period.
    pub fn mean_rate(&self) -> f64 {
        self.measured().count() as f64 / hours(self.length - self.learn)
    }

    /// The busiest hour's claims (a sliding hour, stepped by a minute).
    pub fn peak_rate(&self) -> f64 {
        let times: Vec<i64> = self.measured().map(|a| a.at.num_seconds()).collect();
        let (mut best, mut lo) = (0, 0);
        for hi in 0..times.len() {
            while times[hi] - times[lo] >= 3600 {
                lo += 1;
            }
            best = best.max(hi + 1 - lo);
        }
        best as f64
    }
}

/// How claims arrive in a generated trace.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// Poisson arrivals at a constant rate.
    Steady {
        /// Claims per hour.
        per_hour: f64,
    },
    /// A working week: busy weekdays, shoulders morning and evening, a quiet night and weekend.
    Diurnal {
        /// Claims per hour, weekdays 08:00–18:00.
        day: f64,
        /// Claims per hour, weekdays 06:00–08:00 and 18:00–22:00.
        shoulder: f64,
        /// Claims per hour, weekday nights.
        night: f64,
        /// Claims per hour, Saturday and Sunday.
        weekend: f64,
    },
    /// CI: a trickle of claims plus bursts (a pipeline fanning out) every few hours on weekdays: at the same
    /// times every week, at times that drift from week to week, or at random times.
    Bursty {
        /// Background claims per hour.
        background: f64,
        /// Claims per burst.
        burst: usize,
        /// Hours between bursts, weekdays 06:00–20:00.
        every_hours: u32,
        /// Seconds over which a burst's claims spread.
        spread_seconds: f64,
        /// Minutes the bursts move later each week.
        drift_minutes_per_week: i64,
        /// As many bursts a day, at random times between 06:00 and 20:00.
        random_times: bool,
    },
}

impl Pattern {
    /// The reference patterns, by name: steady, diurnal, bursty, two bursty ones that try to fool a forecaster
    /// (drifting: 30 minutes later each week; random: at random times), and quiet (for resume canaries).
    pub fn reference(name: &str) -> Option<Self> {
        let bursty = |drift_minutes_per_week, random_times| Pattern::Bursty {
            background: 4.0,
            burst: 30,
            every_hours: 2,
            spread_seconds: 180.0,
            drift_minutes_per_week,
            random_times,
        };
        match name {
            "steady" => Some(Pattern::Steady { per_hour: 12.0 }),
            "diurnal" => Some(Pattern::Diurnal { day: 34.0, shoulder: 6.0, night: 1.0, weekend: 1.0 }),
            // A team's pool: a couple of claims an hour in working hours; its standbys sleep for days.
            "quiet" => Some(Pattern::Diurnal { day: 2.0, shoulder: 0.5, night: 0.0, weekend: 0.0 }),
            "bursty" => Some(bursty(0, false)),
            "drifting" => Some(bursty(30, false)),
            "random" => Some(bursty(0, true)),
            _ => None,
        }
    }

    /// Claims per hour the pattern draws at `t` (a burst's claims aside).
    pub fn rate_at(&self, t: Timestamp) -> f64 {
        match *self {
            Pattern::Steady { per_hour } => per_hour,
            Pattern::Diurnal { day, shoulder, night, weekend } => {
                if matches!(t.weekday(), Weekday::Sat | Weekday::Sun) {
                    return weekend;
                }
                match t.hour() {
                    8..=17 => day,
                    6..=7 | 18..=21 => shoulder,
                    _ => night,
                }
            }
            Pattern::Bursty { background, .. } => background,
        }
    }

    fn max_rate(&self) -> f64 {
        match *self {
            Pattern::Steady { per_hour } => per_hour,
            Pattern::Diurnal { day, shoulder, night, weekend } => day.max(shoulder).max(night).max(weekend),
            Pattern::Bursty { background, .. } => background,
        }
    }
}

/// Generates a trace of `pattern` over `length` from `start`; holds are log-normal around 45 minutes (30 for
/// burst claims, which are CI jobs).
pub fn generate(name: &str, pattern: &Pattern, start: Timestamp, length: TimeDelta, seed: u64) -> Trace {
    let mut rng = Rng::new(seed);
    let mut arrivals = Vec::new();
    let hold = |rng: &mut Rng, median_min: f64| TimeDelta::seconds((rng.lognormal(median_min * 60.0, 0.5)) as i64);
    // Non-homogeneous Poisson arrivals by thinning.
    let max = pattern.max_rate();
    if max > 0.0 {
        let mut t = 0.0;
        loop {
            t += rng.exponential(3600.0 / max);
            let at = TimeDelta::milliseconds((t * 1000.0) as i64);
            if at >= length {
                break;
            }
            if rng.uniform() * max < pattern.rate_at(start + at) {
                arrivals.push(Arrival { at, hold: hold(&mut rng, 45.0) });
            }
        }
    }
    if let Pattern::Bursty { burst, every_hours, spread_seconds, drift_minutes_per_week, random_times, .. } = *pattern {
        let mut day = 0;
        while TimeDelta::days(day) < length {
            let midnight = TimeDelta::days(day);
            let weekday = !matches!((start + midnight).weekday(), Weekday::Sat | Weekday::Sun);
            let hours: Vec<u32> = (6..20).filter(|h| h % every_hours == 0).collect();
            let drift = TimeDelta::minutes(drift_minutes_per_week * (day / 7));
            let mut times: Vec<TimeDelta> = hours
                .iter()
                .map(|h| {
                    if random_times {
                        TimeDelta::milliseconds((rng.uniform() * 14.0 * 3_600_000.0) as i64) + TimeDelta::hours(6)
                    } else {
                        TimeDelta::hours(i64::from(*h)) + drift
                    }
                })
                .collect();
            times.sort();
            for at in times.into_iter().filter(|_| weekday) {
                for _ in 0..burst {
                    let offset = TimeDelta::milliseconds((rng.uniform() * spread_seconds * 1000.0) as i64);
                    let t = midnight + at + offset;
                    if t < length {
                        arrivals.push(Arrival { at: t, hold: hold(&mut rng, 30.0) });
                    }
                }
            }
            day += 1;
        }
    }
    arrivals.sort_by_key(|a| a.at);
    Trace { name: name.to_string(), start, length, learn: TimeDelta::zero(), arrivals }
}
