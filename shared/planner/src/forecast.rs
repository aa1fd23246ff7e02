//! Forecast pre-warming: the adaptive running count's foresight of demand it has seen before.
//!
//! The pool learns a time-of-week profile of its claim arrivals: 1 008 buckets of 10 minutes, Monday 00:00 to
//! Sunday 24:00 in the pool's time zone, each holding an exponentially weighted mean of the claims that bucket saw
//! week after week, and the weighted mean absolute deviation from it. Two things are read from the profile:
//!
//! - **Flow**: the local level of demand, the mean of a bucket and its three neighbours on each side without the
//!   highest and the lowest. A steady or daily pattern is all flow. Spares for it follow the Poisson model of
//!   [`crate::adaptive`] with the typical (median) resume, and a threshold calibrated over the whole week: a
//!   spare is kept where it serves enough claims at once per hour, and the threshold is the highest at which
//!   the week misses no more claims than the adaptive count's own spares would. The same service, with the
//!   spares moved to where they serve most: quiet hours get the one spare that serves almost all their claims,
//!   busy hours the several they need, and the count falls when the forecast says demand falls, not a window
//!   later.
//! - **Bursts**: a bucket's claims above the flow, less their deviation, so that only a burst that came back
//!   week after week counts. Its spares are resumed a lead (the measured p90 resume, plus a margin) before the
//!   bucket starts, and are taken by the burst's claims as they come.
//!
//! Claims a burst forecast foresaw are not counted in the adaptive rate estimate, so a foreseen burst does not
//! leave an hour of spares behind it. When demand runs clearly hotter than the forecast, the adaptive count
//! applies on its own terms, as without a forecast.
//!
//! Learning happens as claims are counted: the bucket being counted (open) is closed when a claim arrives in a
//! later one, and each bucket between gets a week with no claims. Between counts the profile is read as of `now`
//! by doing the same closes on a copy, so planning is pure and re-planning the same state writes nothing. The
//! buckets are stored as hundredths of a claim in 16 bits, base64 encoded: about 5.4 KB for the two arrays.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{Datelike, TimeDelta, Timelike};
use chrono_tz::Tz;

use crate::duration::hours;
use crate::model::Timestamp;
pub use crate::model::{Buckets, Forecast, Profile, BUCKETS};

/// A bucket's length.
pub const BUCKET: TimeDelta = TimeDelta::minutes(10);
/// A week.
pub const WEEK: TimeDelta = TimeDelta::weeks(1);
/// Default half-life of a week's weight, in weeks.
pub const DEFAULT_HALF_LIFE_WEEKS: f64 = 1.0;
/// Longest half-life accepted, in weeks.
pub const MAX_HALF_LIFE_WEEKS: f64 = 8.0;
/// Time between a burst's spares being Running (at the p90 resume) and the bucket's start.
pub const BURST_MARGIN: TimeDelta = TimeDelta::minutes(2);
/// How far ahead the foresight looks for its next change.
pub const HORIZON: TimeDelta = TimeDelta::hours(6);
/// Neighbours on each side whose median is a bucket's flow.
const SMOOTH: usize = 3;
/// Deviations subtracted from a bucket's mean before it counts as a burst.
const BURST_DEVIATIONS: f64 = 1.0;
/// Claims a bucket must hold above the flow to count as a burst.
const MIN_BURST: f64 = 1.0;
/// Standard deviations of the live rate above the forecast before demand counts as hotter than forecast.
const HOT_DEVIATIONS: f64 = 3.0;
/// Largest storable bucket value, claims.
const MAX_VALUE: f64 = u16::MAX as f64 / 100.0;

impl Forecast {
    /// The time zone (UTC when unset or unknown; validation refuses unknown ones).
    pub fn zone(&self) -> Tz {
        zone_or_utc(self.time_zone.as_deref())
    }

    fn alpha(&self) -> f64 {
        let h = self
            .half_life_weeks
            .filter(|h| h.is_finite() && *h > 0.0)
            .unwrap_or(DEFAULT_HALF_LIFE_WEEKS)
            .min(MAX_HALF_LIFE_WEEKS);
        1.0 - 0.5_f64.powf(1.0 / h)
    }
}

impl Buckets {
    fn zero() -> Self {
        Self(vec![0; BUCKETS])
    }

    fn get(&self, b: usize) -> f64 {
        f64::from(self.0.get(b).copied().unwrap_or(0)) / 100.0
    }

    fn set(&mut self, b: usize, v: f64) {
        if let Some(slot) = self.0.get_mut(b) {
            *slot = (v.clamp(0.0, MAX_VALUE) * 100.0).round() as u16;
        }
    }
}

/// The IANA zone named, UTC when none or unknown (validation refuses unknown ones).
pub fn zone_or_utc(name: Option<&str>) -> Tz {
    name.and_then(|z| Tz::from_str(z).ok()).unwrap_or(Tz::UTC)
}

/// The start of the bucket holding `t`, in `zone`.
pub fn bucket_start(t: Timestamp, zone: Tz) -> Timestamp {
    let local = t.with_timezone(&zone);
    let into = TimeDelta::minutes(i64::from(local.minute() % 10))
        + TimeDelta::seconds(i64::from(local.second()))
        + TimeDelta::nanoseconds(i64::from(local.nanosecond()));
    t - into
}

/// The bucket of the week holding `t`, in `zone`.
pub fn index(t: Timestamp, zone: Tz) -> usize {
    let local = t.with_timezone(&zone);
    local.weekday().num_days_from_monday() as usize * 144 + local.hour() as usize * 6 + local.minute() as usize / 10
}

/// How often bucket `b` has been closed, `steps` buckets after learning began in bucket `first`.
fn closes(first: usize, steps: usize, b: usize) -> u32 {
    let offset = (b + BUCKETS - first) % BUCKETS;
    (steps / BUCKETS + usize::from(offset < steps % BUCKETS)) as u32
}

/// The correction for an exponentially weighted mean that has seen `n` weeks: `1 − (1 − α)^n`.
fn learned(alpha: f64, n: u32) -> f64 {
    1.0 - (1.0 - alpha).powi(n.min(10_000) as i32)
}

/// What the pool expects, read from a profile as of one instant. Buckets are read as they are needed.
#[derive(Debug, Clone)]
pub struct View {
    p: Profile,
    zone: Tz,
    /// The bucket `since` falls in, and the buckets closed since.
    first: usize,
    steps: usize,
    open_index: usize,
    /// The weight learned by buckets closed in every week so far, and by those closed once more.
    learned: (f64, f64),
    /// Each bucket's flow, once read (empty: not kept).
    flows: Vec<OnceCell<f64>>,
}

impl Profile {
    /// A profile learning from the bucket holding `at`.
    pub fn new(forecast: &Forecast, at: Timestamp) -> Self {
        Self::starting(forecast.zone(), at)
    }

    fn starting(zone: Tz, at: Timestamp) -> Self {
        let open = bucket_start(at, zone);
        Self {
            time_zone: zone.name().to_string(),
            since: open,
            open,
            open_count: 0,
            mean: Buckets::zero(),
            spread: Buckets::zero(),
            worth: None,
            kept: None,
        }
    }

    fn zone(&self) -> Tz {
        zone_or_utc(Some(&self.time_zone))
    }

    /// Closes the open bucket with its count and opens the next.
    fn close(&mut self, alpha: f64) {
        let zone = self.zone();
        let (first, steps) = (index(self.since, zone), self.steps());
        let b = index(self.open, zone);
        let n = closes(first, steps, b);
        let count = f64::from(self.open_count);
        let w = learned(alpha, n);
        let mean = if w > 0.0 { self.mean.get(b) / w } else { 0.0 };
        // A first week's deviation is its whole count: a burst counts once it has come back.
        let deviation = if n > 0 { (count - mean).abs() } else { count };
        self.mean.set(b, (1.0 - alpha) * self.mean.get(b) + alpha * count);
        self.spread.set(b, (1.0 - alpha) * self.spread.get(b) + alpha * deviation);
        self.open += BUCKET;
        self.open_count = 0;
    }

    /// Buckets closed since learning began.
    fn steps(&self) -> usize {
        ((self.open - self.since).num_minutes() / 10).max(0) as usize
    }

    /// Closes every bucket before the one holding `t`. True when any was closed.
    fn advance(&mut self, t: Timestamp, alpha: f64) -> bool {
        let zone = self.zone();
        let target = bucket_start(t, zone);
        if target <= self.open {
            return false;
        }
        // Weeks of silence weigh the history down to nothing: start afresh rather than close them one by one.
        let silent_weeks = hours(target - self.open) / hours(WEEK);
        if (1.0 - alpha).powf(silent_weeks) < 1e-4 {
            *self = Profile::starting(zone, target);
            return true;
        }
        while self.open < target {
            self.close(alpha);
        }
        true
    }

    /// Counts one claim created at `t` (claims come in time order). Returns whether the forecast foresaw it (it
    /// falls in a bucket with a burst expected, and the burst's claims have not all come yet), and whether
    /// buckets were closed (the week then wants calibrating again: [`Profile::calibrate`]).
    pub fn count(&mut self, t: Timestamp, forecast: &Forecast) -> (bool, bool) {
        let alpha = forecast.alpha();
        if t < self.open {
            // Visible only after a later claim was counted: its bucket is closed. It counts in the open one.
            self.open_count = self.open_count.saturating_add(1);
            return (false, false);
        }
        let closed = self.advance(t, alpha);
        self.open_count = self.open_count.saturating_add(1);
        let view = self.clone().view_uncached(alpha);
        (f64::from(self.open_count) <= view.burst(view.open_index).ceil(), closed)
    }

    /// Calibrates the flow's spares on the week learned: `exposure` is the typical resume, `adaptive` the
    /// adaptive count's spares for a rate, whose misses the flow's spares must not exceed.
    pub fn calibrate(&mut self, forecast: &Forecast, exposure: TimeDelta, adaptive: &dyn Fn(f64) -> usize) {
        self.worth = self.view(forecast.alpha()).calibrate(exposure, adaptive);
    }

    /// The profile as of `now`: the buckets since the last count closed on a copy.
    pub fn at(&self, now: Timestamp, forecast: &Forecast) -> View {
        let alpha = forecast.alpha();
        let mut p = self.clone();
        p.advance(now, alpha);
        p.into_view(alpha)
    }

    fn view(&self, alpha: f64) -> View {
        self.clone().into_view(alpha)
    }

    /// A view that keeps no flows: for reading a bucket or two.
    fn view_uncached(self, alpha: f64) -> View {
        let mut view = self.into_view(alpha);
        view.flows = Vec::new();
        view
    }

    fn into_view(self, alpha: f64) -> View {
        let zone = self.zone();
        let steps = self.steps();
        let weeks = (steps / BUCKETS) as u32;
        View {
            first: index(self.since, zone),
            steps,
            open_index: index(self.open, zone),
            learned: (learned(alpha, weeks), learned(alpha, weeks + 1)),
            flows: vec![OnceCell::new(); BUCKETS],
            p: self,
            zone,
        }
    }

    /// Whether a week has been learned.
    pub fn ready(&self, now: Timestamp) -> bool {
        now - self.since >= WEEK
    }
}

impl View {
    /// The bucket's mean and deviation, corrected for the weeks it has been learned.
    fn corrected(&self, b: usize) -> (f64, f64) {
        let offset = (b + BUCKETS - self.first) % BUCKETS;
        let w = if offset < self.steps % BUCKETS { self.learned.1 } else { self.learned.0 };
        if w <= 0.0 {
            return (0.0, 0.0);
        }
        (self.p.mean.get(b) / w, self.p.spread.get(b) / w)
    }

    /// The flow in bucket `b`, claims: the mean of its neighbourhood's means without the highest and the
    /// lowest (a burst next door is not flow; a median would read sparse demand, mostly empty buckets, as none).
    fn flow(&self, b: usize) -> f64 {
        let compute = || {
            let mut near = [0.0; 2 * SMOOTH + 1];
            for (k, slot) in near.iter_mut().enumerate() {
                *slot = self.corrected((b + BUCKETS + k - SMOOTH) % BUCKETS).0;
            }
            near.sort_by(f64::total_cmp);
            near[1..2 * SMOOTH].iter().sum::<f64>() / (2 * SMOOTH - 1) as f64
        };
        match self.flows.get(b % BUCKETS) {
            Some(cell) => *cell.get_or_init(compute),
            None => compute(),
        }
    }

    /// Claims a burst in bucket `b` is expected to bring beyond the flow.
    pub fn burst(&self, b: usize) -> f64 {
        let b = b % BUCKETS;
        let (mean, spread) = self.corrected(b);
        let over = mean - BURST_DEVIATIONS * spread - self.flow(b);
        if over >= MIN_BURST {
            over
        } else {
            0.0
        }
    }

    /// Flow claims per hour in the bucket holding `t`.
    pub fn flow_rate(&self, t: Timestamp) -> f64 {
        self.flow(index(t, self.zone)) / hours(BUCKET)
    }

    /// Burst claims to have spares Running for at `now`: the open bucket's burst not come yet, and the bursts of
    /// the buckets starting within `lead`.
    pub fn burst_need(&self, now: Timestamp, lead: TimeDelta) -> f64 {
        let start = bucket_start(now, self.zone);
        let mut need = if start == self.p.open {
            (self.burst(self.open_index) - f64::from(self.p.open_count)).max(0.0)
        } else {
            self.burst(index(now, self.zone))
        };
        let mut next = start + BUCKET;
        while next <= now + lead {
            need += self.burst(index(next, self.zone));
            next += BUCKET;
        }
        need
    }

    /// The flow rate as an exponentially weighted mean over the past with time constant `tau`: what the
    /// adaptive estimate would read if demand were exactly the forecast.
    pub fn flow_ewma(&self, now: Timestamp, tau: TimeDelta) -> f64 {
        let tau_h = hours(tau);
        let mut sum = 0.0;
        let mut end = now;
        let mut start = bucket_start(now, self.zone);
        while hours(now - end) < 6.0 * tau_h {
            let rate = self.flow(index(start, self.zone)) / hours(BUCKET);
            let (a, b) = (hours(now - end), hours(now - start));
            sum += rate * ((-a / tau_h).exp() - (-b / tau_h).exp());
            end = start;
            start -= BUCKET;
        }
        sum
    }

    /// The instants, over the next [`HORIZON`], at which the foresight may change its answer: each bucket's
    /// edge, and `lead` before it.
    pub fn moments(&self, now: Timestamp, lead: TimeDelta) -> Vec<Timestamp> {
        let start = bucket_start(now, self.zone);
        let mut out = Vec::new();
        let mut edge = start + BUCKET;
        while edge - now <= HORIZON {
            // A lead longer than a bucket puts `edge - lead` before earlier edges: sorted below.
            out.extend([edge - lead, edge].into_iter().filter(|t| *t > now));
            edge += BUCKET;
        }
        out.sort();
        out.dedup();
        out
    }

    /// Whether the live rate is clearly above the forecast's flow.
    pub fn hot(&self, live: f64, now: Timestamp, tau: TimeDelta) -> bool {
        let expected = self.flow_ewma(now, tau);
        live > expected + HOT_DEVIATIONS * (expected.max(1.0 / hours(tau)) / (2.0 * hours(tau))).sqrt()
    }

    /// Spares for a flow of `rate` claims per hour with resumes exposing `exposure`, at the calibrated worth.
    pub fn flow_spares(&self, rate: f64, exposure: TimeDelta, cap: usize) -> usize {
        self.p.worth.map_or(0, |worth| spares_worth(rate, hours(exposure), worth, cap).0)
    }

    /// The highest worth (claims served at once per spare-hour) at which the week's flow misses no more claims
    /// than the adaptive count's spares (`adaptive`, for a rate) would: the same service, with the spares moved
    /// to where they serve most.
    fn calibrate(&self, exposure: TimeDelta, adaptive: &dyn Fn(f64) -> usize) -> Option<f64> {
        // Buckets with about the same flow (within 2%) plan alike: group them.
        let mut rates: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
        for b in 0..BUCKETS {
            let f = self.flow(b);
            if f > 0.0 {
                let group = rates.entry((f.ln() / 0.02).round() as i64).or_insert((0.0, 0.0));
                *group = (group.0 + f, group.1 + 1.0);
            }
        }
        let rates: Vec<(f64, f64)> = rates.into_values().map(|(sum, n)| (sum / n / hours(BUCKET), n)).collect();
        let t = hours(exposure);
        let missed = |spares: &dyn Fn(f64) -> usize| -> f64 {
            rates.iter().map(|(rate, n)| missed_with(*rate, t, spares(*rate)) * n).sum::<f64>()
        };
        let allowed = missed(adaptive);
        let missed = |worth: f64| missed(&|rate| spares_worth(rate, t, worth, usize::MAX).0);
        if rates.is_empty() {
            return None;
        }
        // Bisection on log(worth): fewer spares as worth rises, and more claims missed.
        let (mut lo, mut hi) = ((1e-4_f64).ln(), (1e4_f64).ln());
        if missed(lo.exp()) > allowed {
            return Some(lo.exp());
        }
        for _ in 0..20 {
            let mid = (lo + hi) / 2.0;
            if missed(mid.exp()) <= allowed {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo.exp())
    }
}

/// Claims per bucket missed with `spares` for claims at `rate` per hour and resumes of `t` hours.
fn missed_with(rate: f64, t: f64, spares: usize) -> f64 {
    let mu = rate * t;
    let (mut p, mut tail) = ((-mu).exp(), 1.0);
    for r in 0..spares {
        tail = (tail - p).max(0.0);
        p *= mu / (r + 1) as f64;
    }
    rate * hours(BUCKET) * tail
}

/// For claims at `rate` per hour and resumes of `t` hours, the spares `R` minimising `R + misses(R) / worth`
/// (at most `cap`), and the claims per bucket missed with them: `rate · P(N ≥ R)` with `N ~ Poisson(rate · t)`.
fn spares_worth(rate: f64, t: f64, worth: f64, cap: usize) -> (usize, f64) {
    let mu = rate * t;
    if mu <= 0.0 || !worth.is_finite() {
        return (0, rate * hours(BUCKET) * f64::from(u8::from(mu > 0.0)));
    }
    let per_bucket = rate * hours(BUCKET);
    let mut p = (-mu).exp(); // P(N = r)
    let mut tail = 1.0; // P(N ≥ r)
    let (mut best, mut best_cost, mut best_miss) = (0, per_bucket / worth, per_bucket);
    let limit = (mu + 10.0 * mu.sqrt() + 10.0) as usize;
    for r in 1..=limit.min(cap) {
        tail = (tail - p).max(0.0);
        p *= mu / r as f64;
        let cost = r as f64 * hours(BUCKET) + per_bucket * tail / worth;
        if cost < best_cost {
            (best, best_cost, best_miss) = (r, cost, per_bucket * tail);
        }
    }
    (best, best_miss)
}
