//! Apiary's pool simulator: how many clusters to keep Running, answered by measurement.
//!
//! A deterministic discrete-event simulation of one pool. The real planner (`plan`, `apply`) and the real power
//! state machine (`power::step`) run on a simulated clock against a simulated platform (install, resume and
//! stop durations drawn from log-normal distributions, stuck resumes with a probability). Claims come from a
//! trace and are held for their drawn duration, then released. Several running-count policies run side by side
//! on the same trace and the same seed, and each reports claim waits, cluster-hours, cost and calls.
//!
//! Same trace, same setup, same seed: the same report, byte for byte.
//!
//! ```
//! use apiary_sim::{base_spec, simulate, Costs, Platform, Policy, Trace};
//!
//! // Two claims in a two-hour period; the pool keeps one cluster Running.
//! let csv = "# length: 2h\nclaim_at_seconds,hold_seconds\n3000,600\n3600,600\n";
//! let trace = Trace::parse("tiny", csv).unwrap();
//! let policy = Policy::Static { name: "static-1".into(), running: 1 };
//! let outcome = simulate(&trace, &policy, &base_spec(2), &Platform::default(), Costs::default(), 1);
//! assert_eq!(outcome.claims, 2);
//! assert_eq!(outcome.unserved, 0);
//! // The first claim finds the Running spare (installed after ~40 minutes); the second waits for a resume.
//! assert!(outcome.instant_percent >= 50.0);
//! ```

pub mod bill;
pub mod capacity;
pub mod claimant;
pub mod engine;
pub mod policy;
pub mod report;
pub mod rng;
pub mod trace;
pub mod units;

use chrono::TimeDelta;

use apiary_planner::{
    AdaptiveRunningCount, FakePlatform, Forecast, GoDuration, Platform as PoolPlatform, PoolSpec, ResumeCanaries,
};

pub use engine::{Platform, Setup, Simulation, Spread};
pub use policy::Policy;
pub use report::{Costs, Outcome};
pub use trace::{Pattern, Trace};

/// A pool of `size` on the simulated platform, with resume and hibernate timeouts so stuck clusters are replaced.
pub fn base_spec(size: i64) -> PoolSpec {
    let mut spec = PoolSpec::new(size, PoolPlatform::Fake(FakePlatform::default()));
    spec.powerstate_transition_to_running_timeout = Some(GoDuration::new("15m"));
    spec.powerstate_transition_to_hibernating_timeout = Some(GoDuration::new("15m"));
    spec
}

/// The adaptive option the comparison uses by default: serve 95% of claims at once.
pub fn default_adaptive() -> AdaptiveRunningCount {
    AdaptiveRunningCount {
        instant_share: Some(0.95),
        wait_p95: None,
        window: None,
        resume_estimate: None,
        forecast: None,
        keep_fresh: None,
    }
}

/// The same with forecast pre-warming on (UTC, the default half-life).
pub fn default_forecast() -> AdaptiveRunningCount {
    AdaptiveRunningCount { forecast: Some(Forecast::default()), ..default_adaptive() }
}

/// The canaries the comparison tries: standbys asleep two days, two at a time, 01:00–05:00 UTC.
pub fn default_canaries() -> ResumeCanaries {
    ResumeCanaries {
        after: GoDuration::new("48h"),
        at_a_time: Some(2),
        hours: Some("01:00-05:00".into()),
        time_zone: None,
    }
}

/// Each policy run without and with `canaries`, on a platform whose resumes fail more the longer a cluster
/// slept.
pub fn canary_comparison(
    trace: &Trace,
    policies: &[Policy],
    base: &PoolSpec,
    platform: &Platform,
    costs: Costs,
    seed: u64,
    canaries: &ResumeCanaries,
) -> Vec<(Outcome, Outcome)> {
    let mut with = base.clone();
    with.resume_canaries = Some(canaries.clone());
    policies
        .iter()
        .map(|p| (simulate(trace, p, base, platform, costs, seed), simulate(trace, p, &with, platform, costs, seed)))
        .collect()
}

/// Weeks in a reference trace.
pub const REFERENCE_WEEKS: i64 = 6;
/// Of which the pool learns in the first ones; the rest are measured.
pub const LEARN_WEEKS: i64 = 4;

/// A reference trace by name (see [`Pattern::reference`]): [`REFERENCE_WEEKS`] weeks from Monday 2026-01-05,
/// the first [`LEARN_WEEKS`] learned and not measured.
pub fn reference_trace(name: &str, seed: u64) -> Option<Trace> {
    let pattern = Pattern::reference(name)?;
    let mut trace = trace::generate(name, &pattern, trace::default_start(), TimeDelta::weeks(REFERENCE_WEEKS), seed);
    trace.learn = TimeDelta::weeks(LEARN_WEEKS);
    Some(trace)
}

/// Runs one policy on `trace`.
pub fn simulate(
    trace: &Trace,
    policy: &Policy,
    base: &PoolSpec,
    platform: &Platform,
    costs: Costs,
    seed: u64,
) -> Outcome {
    let (spec, running_changes) = policy.configure(base, trace);
    let setup = Setup {
        policy: policy.name(),
        spec,
        running_changes,
        platform: platform.clone(),
        costs,
        seed,
        sample_every: TimeDelta::minutes(10),
    };
    Simulation::new(trace, setup).run()
}
