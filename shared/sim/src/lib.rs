//! Apiary's pool simulator: how many clusters to keep Running, answered by measurement.
//!
//! A deterministic discrete-event simulation of one pool. The real planner (`plan`, `apply`) and the real power
//! state machine (`power::step`) run on a simulated clock against a simulated platform (install, resume and
//! stop durations drawn from log-normal distributions, stuck resumes with a probability). Claims come from a
//! trace and are held for their drawn duration, then released. Several running-count policies run side by side
//! on the same trace and the same seed, and each reports claim waits, cluster-hours, cost and calls.
//!
//! Same trace, same setup, same seed: the same report, byte for byte.

pub mod engine;
pub mod policy;
pub mod report;
pub mod rng;
pub mod trace;

use chrono::TimeDelta;

use apiary_planner::{AdaptiveRunningCount, FakePlatform, GoDuration, Platform as PoolPlatform, PoolSpec};

pub use engine::{Costs, Platform, Setup, Simulation, Spread};
pub use policy::Policy;
pub use report::Outcome;
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
    AdaptiveRunningCount { instant_share: Some(0.95), wait_p95: None, window: None, resume_estimate: None }
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
