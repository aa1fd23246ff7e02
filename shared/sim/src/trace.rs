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
        let mut arrivals = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(comment) = line.strip_prefix('#') {
                if let Some(v) = comment.trim().strip_prefix("start:") {
                    start = v.trim().parse().map_err(|e| format!("line {}: bad start {v:?}: {e}", n + 1))?;
                } else if let Some(v) = comment.trim().strip_prefix("length:") {
                    length = duration::parse(v.trim()).map_err(|e| format!("line {}: {e}", n + 1))?;
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
        Ok(Self { name: name.to_string(), start, length, arrivals })
    }

    /// Writes the trace as CSV.
    pub fn to_csv(&self) -> String {
        let mut out = format!(
            "# trace: {}\n# start: {}\n# length: {}\nclaim_at_seconds,hold_seconds\n",
            self.name,
            self.start.to_rfc3339(),
            duration::format(self.length)
        );
        for a in &self.arrivals {
            out.push_str(&format!("{:.0},{:.0}\n", a.at.num_seconds(), a.hold.num_seconds()));
        }
        out
    }

    /// Average claims per hour over the period.
    pub fn mean_rate(&self) -> f64 {
        self.arrivals.len() as f64 / hours(self.length)
    }

    /// The busiest hour's claims (a sliding hour, stepped by a minute).
    pub fn peak_rate(&self) -> f64 {
        let times: Vec<i64> = self.arrivals.iter().map(|a| a.at.num_seconds()).collect();
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
    /// CI: a trickle of claims plus bursts (a pipeline fanning out) every few hours on weekdays.
    Bursty {
        /// Background claims per hour.
        background: f64,
        /// Claims per burst.
        burst: usize,
        /// Hours between bursts, weekdays 06:00–20:00.
        every_hours: u32,
        /// Seconds over which a burst's claims spread.
        spread_seconds: f64,
    },
}

impl Pattern {
    /// The three reference patterns, by name.
    pub fn reference(name: &str) -> Option<Self> {
        match name {
            "steady" => Some(Pattern::Steady { per_hour: 12.0 }),
            "diurnal" => Some(Pattern::Diurnal { day: 34.0, shoulder: 6.0, night: 1.0, weekend: 1.0 }),
            "bursty" => Some(Pattern::Bursty { background: 4.0, burst: 30, every_hours: 2, spread_seconds: 180.0 }),
            _ => None,
        }
    }

    fn rate_at(&self, t: Timestamp) -> f64 {
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
    if let Pattern::Bursty { burst, every_hours, spread_seconds, .. } = *pattern {
        let mut h = 0;
        while TimeDelta::hours(h) < length {
            let at = start + TimeDelta::hours(h);
            let weekday = !matches!(at.weekday(), Weekday::Sat | Weekday::Sun);
            if weekday && (6..20).contains(&at.hour()) && at.hour().is_multiple_of(every_hours) {
                for _ in 0..burst {
                    let offset = TimeDelta::milliseconds((rng.uniform() * spread_seconds * 1000.0) as i64);
                    arrivals.push(Arrival { at: TimeDelta::hours(h) + offset, hold: hold(&mut rng, 30.0) });
                }
            }
            h += 1;
        }
    }
    arrivals.sort_by_key(|a| a.at);
    Trace { name: name.to_string(), start, length, arrivals }
}
