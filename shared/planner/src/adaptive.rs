//! Adaptive running count: the number of Running spares, set from the recent claim arrival rate and the measured
//! resume time, to meet the operator's target (share of claims served at once, or claim wait p95).
//!
//! The model: a claim that takes a spare makes the planner resume the oldest standby cluster, which is Running
//! again after the resume time `T`. Spares in flight are then an M/G/∞ queue: with claims arriving at rate `λ`,
//! the number taken within the last `T` is Poisson(`λT`), and a claim finds a Running spare when fewer than `R`
//! were taken. So `R` is the smallest count with `P(N ≤ R − 1) ≥ share`. For a wait-p95 target `W`, a claim
//! waits longer than `W` only if `R` or more were taken in the last `T − W`: the same rule with `λ(T − W)` at 95%.
//! The rate planned for carries one standard deviation of headroom, and the resume time is the 90th percentile
//! of those measured. Demand below a quarter claim per window is sporadic and gets no spare: such claims wait
//! one resume.
//!
//! The rate is an exponentially weighted count of arrivals (time constant `window`), kept in the pool's status as
//! its value at one instant. It is rewritten only when new claims are seen; at any other time it is derived by
//! decay, so planning is pure and re-planning the same state writes nothing. The next time the decaying rate
//! lowers `R` is solved exactly and becomes a wake-up.

use chrono::TimeDelta;

use crate::duration::{hours, GoDuration};
use crate::forecast::BURST_MARGIN;
pub use crate::model::{AdaptiveRunningCount, Demand};
use crate::model::{Claim, Cluster, Forecast, Profile, Timestamp};

/// Default time constant of the arrival-rate estimate.
pub const DEFAULT_WINDOW: TimeDelta = TimeDelta::minutes(30);
/// Resume time assumed until one is measured.
pub const DEFAULT_RESUME: TimeDelta = TimeDelta::minutes(5);
/// Stop time assumed until one is measured (`keepFresh`).
pub const DEFAULT_STOP: TimeDelta = TimeDelta::minutes(2);
/// Below this rate (claims per hour) demand is treated as none.
const NEGLIGIBLE_RATE: f64 = 1e-3;
/// Demand below this many claims per window is sporadic and gets no spare. After a lone claim the estimate is
/// one claim per window and decays below a quarter in `window × ln 4` (about 40 minutes with the default window).
const SPORADIC_CLAIMS_PER_WINDOW: f64 = 0.25;
/// Standard deviations of headroom on the rate estimate. An exponentially weighted count of a Poisson stream
/// has variance `λ / 2τ`; planning for the estimate itself would under-provision half the time (measured with the
/// simulator: a 0.95 target gave 89% on the diurnal trace without it, 97% with it).
const RATE_HEADROOM_SD: f64 = 1.0;
/// Which measured resume time to plan with: the model cares about the slow ones, so a high quantile.
const RESUME_QUANTILE: f64 = 0.9;
/// With `keepFresh`, how much the clusters kept Running after their installs are counted on to stand in for
/// claimed spares when the forecast plans a flow's spares ([`resumed_share`]). Kept clusters come and go with
/// the installs, and run out just when claims bunch up, so they are counted on for little, and for no more claims
/// than the installs ending then replace: those of an install's time before, and those the pool is seeing now.
/// Calibrated with the simulator on the diurnal trace (the two measured weeks): 0.1 gives 97.4% at once at
/// 1.088–1.091× the oracle's cost on seeds 1–3; 0 gave 97.6–98.0% at 1.107–1.115×, 0.2 gave 96.9% and 1 gave 86%
/// (an earlier ranking, BENCHMARKS.md).
const FRESH_STAND_IN: f64 = 0.1;

/// What the adaptive option decides at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Running spares wanted (before clamping to size).
    pub running: usize,
    /// The estimate to store: a new one when claims were counted, else the stored one.
    pub demand: Demand,
    /// The arrival rate now, claims per hour.
    pub rate: f64,
    /// The resume time used.
    pub resume: TimeDelta,
    /// When the decaying rate next lowers `running`, if it will.
    pub next_drop: Option<Timestamp>,
    /// Spares already up or on their way up that stay so (at least `running`): the most the forecast asks for
    /// within a stop and a resume from now. A count that dips for less than that (between two of its moments, or
    /// because a resume just measured shortened the lead of a burst under way) would stop clusters only to resume
    /// them again before the stop had saved anything.
    pub held: usize,
    /// With `keepFresh`, while a claim is expected sooner than a typical stop and resume take: how long a
    /// just-installed cluster is kept Running, and how many claims are expected in that time.
    pub keep_fresh: Option<KeepFresh>,
}

/// What `keepFresh` keeps: just-installed clusters beyond the running count stay Running for `window` (a typical
/// stop and resume: the median stop measured on the pool, else [`DEFAULT_STOP`], and the median resume), as many as
/// [`KeepFresh::keeps`] says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeepFresh {
    /// How long after its install a cluster is kept.
    pub window: TimeDelta,
    /// Claims expected within `window`.
    pub claims: f64,
}

impl KeepFresh {
    /// Whether a `k`-th cluster is worth keeping. It stands in for a claimed spare if `k` claims come within its
    /// window (the ones kept before it serve the first `k − 1`), saving its stop and a standby's resume: the
    /// window's length. It runs idle until the `k`-th claim, or for the whole window if that claim does not
    /// come. With claims Poisson (mean `m` = `claims` over the window `W`), it is kept while
    /// `W · P(N ≥ k) > E[min(S_k, W)] = (W / m) · Σ_{j=1..k} P(N ≥ j)`. The first is kept while `m > 1`: a claim
    /// expected sooner than a stop and a resume take.
    pub fn keeps(&self, k: usize) -> bool {
        let m = self.claims;
        if k == 0 || m <= 0.0 {
            return false;
        }
        // P(N ≥ j) for j = 1..=k: the last is the chance it is used, their sum over m its expected idle share.
        let (mut pmf, mut below, mut at_least, mut sum) = ((-m).exp(), 0.0, 0.0, 0.0);
        for j in 1..=k {
            below += pmf;
            pmf *= m / j as f64;
            at_least = (1.0 - below).max(0.0);
            sum += at_least;
        }
        at_least > sum / m
    }
}

impl AdaptiveRunningCount {
    fn window(&self) -> TimeDelta {
        self.window.as_ref().and_then(GoDuration::get).filter(|w| *w > TimeDelta::zero()).unwrap_or(DEFAULT_WINDOW)
    }

    /// Decides the running count at `now` from the stored estimate, the claims and the clusters' resume times.
    /// `cap` bounds the answer (the pool's size).
    pub fn decide(
        &self,
        stored: Option<&Demand>,
        claims: &[Claim],
        clusters: &[Cluster],
        now: Timestamp,
        cap: usize,
    ) -> Decision {
        let window = self.window();
        let tau_h = hours(window);
        let resume = measured_resume(clusters, RESUME_QUANTILE)
            .or_else(|| self.resume_estimate.as_ref().and_then(GoDuration::get))
            .unwrap_or(DEFAULT_RESUME);
        let target = self.target(resume);
        // The typical resume (the median measured, at most the one planned with), read once for the forecast's
        // flows and for keepFresh's window; and a stop and a resume, keepFresh's window and how far ahead the
        // forecast's count holds clusters up.
        let (typical, trip) = if self.forecast.is_some() || self.keeps_fresh() {
            let typical = measured_resume(clusters, 0.5).unwrap_or(resume).min(resume);
            (typical, round_trip(clusters, typical))
        } else {
            (resume, TimeDelta::zero())
        };
        let learn = self.forecast.as_ref().zip(target.map(|_| (self.flow_exposure(typical), resume, cap)));
        let demand = update(self, stored, claims, now, window, learn);
        let rate = decayed(&demand, now, tau_h);
        let mut running = self.running_for(rate, resume, cap);
        let mut peak = 0;
        let mut next_drop = self.next_drop(running, rate, resume, cap, now);
        let fresh = self.keeps_fresh().then_some(trip);
        // Claims an hour expected over the fresh window: the live estimate, or the forecast's flow across it.
        let mut ahead = rate;
        if let (Some((forecast, (exposure, _, _))), Some(profile)) = (learn, demand.profile.as_ref()) {
            if profile.ready(now) {
                let view = profile.at(now, forecast);
                let hot = view.hot(rate, now, window);
                // Kept clusters are the installs that replaced the claims of an install's time before: they stand in
                // for no more claims than came then, nor than the pool is seeing (the estimate as of the last claim
                // counted, which only a claim changes: the plan stays the same between claims). Where the foreseen
                // claims are not being made, neither are the installs that would replace them.
                let install = fresh.and_then(|_| measured_install(clusters));
                let seen = demand.claims_per_hour;
                let at = |t: Timestamp| {
                    let burst = view.burst_need(t, resume + BURST_MARGIN).ceil() as usize;
                    let flow_rate = view.flow_rate(t).max(view.flow_rate(t + exposure));
                    let resumed = fresh.map_or(1.0, |w| {
                        let supplied = install.map_or(flow_rate, |d| flow_rate.min(view.flow_rate(t - d))).min(seen);
                        resumed_share(supplied * hours(w))
                    });
                    (burst + view.flow_spares(flow_rate * resumed, exposure, cap)).min(cap)
                };
                let foreseen = at(now);
                let flow = fresh.map_or(0.0, |w| (view.flow_rate(now) + view.flow_rate(now + w)) / 2.0);
                // When demand runs clearly hotter than the forecast, the adaptive count stands on its own.
                if hot {
                    running = running.max(foreseen);
                    ahead = ahead.max(flow);
                } else {
                    (running, next_drop) = (foreseen, None);
                    ahead = flow;
                }
                // The next instant the foresight changes its answer (bursts come a lead early, flows change at the
                // buckets' edges and are read an exposure ahead); past the horizon, a look again then. Nothing else
                // wakes the pool for it: the sweep does only at its full passes.
                let mut moments = view.moments(now, resume + BURST_MARGIN);
                let horizon = moments.last().copied();
                moments.extend(view.moments(now, exposure));
                if let Some(d) = install {
                    // And an install's time after each edge, when the supply of kept clusters changes.
                    let later = view.moments(now - d, TimeDelta::zero()).into_iter().map(|t| t + d);
                    moments.extend(later.filter(|t| *t > now && horizon.is_some_and(|h| *t <= h)));
                }
                moments.sort();
                moments.dedup();
                let change = moments.iter().copied().find(|t| at(*t) != foreseen).or(moments.last().copied());
                next_drop = earliest(next_drop, change);
                // What it asks for is constant between its moments: the most within a stop and a resume is the
                // most at the moments in that time.
                peak = moments.iter().take_while(|t| **t <= now + trip).map(|t| at(*t)).max().unwrap_or(0);
            }
        }
        let keep_fresh =
            fresh.map(|window| KeepFresh { window, claims: ahead * hours(window) }).filter(|k| k.claims > 1.0);
        Decision { running, demand, rate, resume, next_drop, held: running.max(peak), keep_fresh }
    }

    /// Whether `keepFresh` is on.
    pub fn keeps_fresh(&self) -> bool {
        self.keep_fresh == Some(true)
    }

    /// When the decaying `rate`, now asking for `running` spares, next asks for fewer.
    fn next_drop(&self, running: usize, rate: f64, resume: TimeDelta, cap: usize, now: Timestamp) -> Option<Timestamp> {
        if running == 0 || rate < NEGLIGIBLE_RATE {
            return None;
        }
        let tau_h = hours(self.window());
        // The largest rate that asks for fewer spares, by bisection (the count only grows with the rate).
        let (mut lo, mut hi) = (0.0_f64, rate);
        for _ in 0..40 {
            let mid = (lo + hi) / 2.0;
            if self.running_for(mid, resume, cap) < running {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // rate · e^(−t/τ) = lo  ⇒  t = τ · ln(rate / lo); nudged past the crossing so the drop has happened.
        (lo > 0.0).then(|| {
            let secs = tau_h * 3600.0 * (rate / lo).ln() + 1.0;
            now + TimeDelta::milliseconds((secs * 1000.0).ceil() as i64)
        })
    }

    /// The forecast's exposure: spares taken by a flow are Poisson with mean `rate × mean resume` (M/G/∞), so
    /// the flow is planned with the `typical` resume (the median measured) and one power poll, not a slow one.
    fn flow_exposure(&self, typical: TimeDelta) -> TimeDelta {
        let typical = typical + crate::power::POLL;
        match self.target(typical) {
            Some((exposure, _)) => exposure,
            None => typical,
        }
    }

    /// How long a claim is exposed to a missing spare, and the share of claims to serve within it.
    fn target(&self, resume: TimeDelta) -> Option<(TimeDelta, f64)> {
        match (self.instant_share, self.wait_p95.as_ref().and_then(GoDuration::get)) {
            (Some(share), _) => Some((resume, share)),
            (None, Some(wait)) => Some(((resume - wait).max(TimeDelta::zero()), 0.95)),
            (None, None) => None,
        }
    }

    /// The spares needed at `rate` claims per hour with resumes taking `resume`, at most `cap`.
    pub fn running_for(&self, rate: f64, resume: TimeDelta, cap: usize) -> usize {
        let Some((exposure, share)) = self.target(resume) else { return 0 };
        // Sporadic demand gets no spare: keeping one Running until the next claim costs more than that claim's
        // one resume of waiting.
        let window_h = hours(self.window());
        if rate * window_h < SPORADIC_CLAIMS_PER_WINDOW {
            return 0;
        }
        let rate = rate + RATE_HEADROOM_SD * (rate / (2.0 * window_h)).sqrt();
        let mu = rate * hours(exposure);
        if mu <= 0.0 || share <= 0.0 {
            return 0;
        }
        // Smallest R with P(N ≤ R − 1) ≥ share, N ~ Poisson(mu).
        let mut p = (-mu).exp();
        let mut cdf = 0.0;
        for r in 1..=cap {
            cdf += p; // P(N ≤ r − 1)
            if cdf >= share {
                return r;
            }
            p *= mu / r as f64;
        }
        cap
    }
}

/// With `keepFresh`, the share of a flow's claimed spares planned as replaced by a resume, when `claims` are
/// both expected within the fresh window and replaced by the installs ending in it: the rest are replaced at once
/// by a cluster kept Running after its install. `1 / (1 + claims × FRESH_STAND_IN)`; all of them below one claim
/// (nothing is kept).
fn resumed_share(claims: f64) -> f64 {
    if claims > 1.0 {
        1.0 / (1.0 + claims * FRESH_STAND_IN)
    } else {
        1.0
    }
}

/// The stored estimate decayed to `now`.
fn decayed(d: &Demand, now: Timestamp, tau_h: f64) -> f64 {
    let age_h = hours((now - d.at).max(TimeDelta::zero()));
    d.claims_per_hour * (-age_h / tau_h).exp()
}

/// Adds the claims not counted yet to the estimate. Unchanged when there are none.
///
/// A claim is new when it was created after `counted_until`, or exactly then and is not among the names
/// counted at that instant. (A claim that becomes visible only after a later one was counted is missed: the
/// estimate runs a little low, never double counts.)
fn update(
    adaptive: &AdaptiveRunningCount,
    stored: Option<&Demand>,
    claims: &[Claim],
    now: Timestamp,
    window: TimeDelta,
    learn: Option<(&Forecast, (TimeDelta, TimeDelta, usize))>,
) -> Demand {
    let tau_h = hours(window);
    // Enabling the option counts the claims still in the table from the last few windows.
    let since = stored.map_or(now - window * 4, |d| d.counted_until);
    let edge: &[String] = stored.map_or(&[], |d| &d.counted_at_edge);
    let mut fresh: Vec<(Timestamp, &str)> = claims
        .iter()
        .filter(|c| c.created_at > since || (c.created_at == since && !edge.contains(&c.name)))
        .map(|c| (c.created_at, c.name.as_str()))
        .collect();
    fresh.sort();
    // The profile learns while the forecast is on; one kept in another time zone starts afresh, and so does one
    // read without its buckets (the store reads them with the pool's partition: only a store that lost the
    // profile's own item gives none).
    let mut profile = learn.map(|(forecast, _)| match stored.and_then(|d| d.profile.as_ref()) {
        Some(p) if p.time_zone == forecast.zone().name() && p.has_buckets() => p.clone(),
        _ => Profile::new(forecast, fresh.first().map_or(now, |(t, _)| *t)),
    });
    if fresh.is_empty() {
        let mut same = stored.cloned().unwrap_or(Demand {
            claims_per_hour: 0.0,
            at: now,
            counted_until: since,
            counted_at_edge: Vec::new(),
            profile: None,
        });
        same.profile = profile;
        return same;
    }
    let mut rate = stored.map_or(0.0, |d| decayed(d, now, tau_h));
    let mut closed = false;
    for (t, _) in &fresh {
        let foreseen = match (&mut profile, learn) {
            (Some(p), Some((forecast, _))) => {
                let (foreseen, closes) = p.count(*t, forecast);
                closed |= closes;
                foreseen
            }
            _ => false,
        };
        // A claim the forecast foresaw was served by spares resumed for it: it says nothing about the rate.
        if !foreseen {
            let age_h = hours((now - *t).max(TimeDelta::zero()));
            rate += (-age_h / tau_h).exp() / tau_h;
        }
    }
    // Buckets closed: the week is calibrated again, once for all the claims counted.
    if let (true, Some(p), Some((forecast, (exposure, resume, cap)))) = (closed, &mut profile, learn) {
        p.calibrate(forecast, exposure, &|rate| adaptive.running_for(rate, resume, cap));
    }
    let counted_until = fresh.last().map_or(since, |(t, _)| *t);
    let mut counted_at_edge: Vec<String> =
        fresh.iter().filter(|(t, _)| *t == counted_until).map(|(_, n)| n.to_string()).collect();
    if counted_until == since {
        counted_at_edge.extend(edge.iter().cloned());
        counted_at_edge.sort();
    }
    Demand { claims_per_hour: rate, at: now, counted_until, counted_at_edge, profile }
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The median install measured on the pool's clusters (first attempts).
fn measured_install(clusters: &[Cluster]) -> Option<TimeDelta> {
    let secs = crate::pace::quantile(clusters.iter().filter_map(crate::pace::install_seconds).collect(), 0.5)?;
    Some(TimeDelta::seconds(i64::from(secs)))
}

/// What hibernating a cluster and resuming it again takes: a typical stop (the median measured on the pool, else
/// [`DEFAULT_STOP`]) and the `typical` resume. With `keepFresh`, how long a just-installed cluster is kept Running
/// for a claim: what hibernating it and resuming it again for that claim would take.
fn round_trip(clusters: &[Cluster], typical: TimeDelta) -> TimeDelta {
    let stop = crate::pace::quantile(clusters.iter().filter_map(|c| c.last_stop_seconds).collect(), 0.5)
        .map_or(DEFAULT_STOP, |s| TimeDelta::seconds(i64::from(s)));
    stop + typical
}

/// The `quantile` of the clusters' last measured resume times.
fn measured_resume(clusters: &[Cluster], quantile: f64) -> Option<TimeDelta> {
    let secs = crate::pace::quantile(clusters.iter().filter_map(|c| c.last_resume_seconds).collect(), quantile)?;
    Some(TimeDelta::seconds(i64::from(secs)))
}
