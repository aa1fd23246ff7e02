//! The simulator: determinism, traces, and what the policies do to a pool.
#![allow(missing_docs, clippy::unwrap_used)]

use chrono::TimeDelta;

use apiary_sim::trace::{default_start, generate, Arrival};
use apiary_sim::{base_spec, default_adaptive, policy, simulate, Costs, Outcome, Pattern, Platform, Policy, Trace};

/// A working Monday: the diurnal pattern over one day.
fn monday() -> Trace {
    let pattern = Pattern::reference("diurnal").unwrap();
    generate("monday", &pattern, default_start(), TimeDelta::days(1), 11)
}

fn run(trace: &Trace, policy: &Policy, seed: u64) -> Outcome {
    simulate(trace, policy, &base_spec(50), &Platform::default(), Costs::default(), seed)
}

fn by_name<'a>(outcomes: &'a [Outcome], name: &str) -> &'a Outcome {
    outcomes.iter().find(|o| o.policy.starts_with(name)).unwrap()
}

/// Every compared policy on the Monday trace, simulated once for all the tests that read it.
fn monday_compared() -> &'static [Outcome] {
    static OUTCOMES: std::sync::OnceLock<Vec<Outcome>> = std::sync::OnceLock::new();
    OUTCOMES.get_or_init(|| {
        let trace = monday();
        let platform = Platform::default();
        policy::compared(&trace, &platform, default_adaptive())
            .iter()
            .map(|p| simulate(&trace, p, &base_spec(50), &platform, Costs::default(), 1))
            .collect()
    })
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let trace = monday();
    let adaptive = Policy::Adaptive { name: "adaptive".into(), option: default_adaptive() };
    let one = serde_json::to_string(&run(&trace, &adaptive, 5)).unwrap();
    let two = serde_json::to_string(&run(&trace, &adaptive, 5)).unwrap();
    assert_eq!(one, two);
    let other = serde_json::to_string(&run(&trace, &adaptive, 6)).unwrap();
    assert_ne!(one, other, "the seed reaches the platform's draws");
}

#[test]
fn every_claim_is_served_and_every_install_accounted() {
    let trace = monday();
    let o = run(&trace, &Policy::Static { name: "static-2".into(), running: 2 }, 1);
    assert_eq!(o.claims, trace.arrivals.len());
    assert!(o.unserved <= 3, "only claims made in the last minutes may still wait: {}", o.unserved);
    assert!(o.installs >= o.claims - o.unserved, "each served claim consumes a cluster: {} installs", o.installs);
    assert_eq!(o.calls.provision, o.installs);
    assert!(o.hours.claimed > 0.0 && o.hours.hibernated > 0.0 && o.hours.installing > 0.0);
}

#[test]
fn with_no_running_spares_every_claim_waits_for_a_resume() {
    let o = run(&monday(), &Policy::Static { name: "static-0".into(), running: 0 }, 1);
    assert_eq!(o.instant_percent, 0.0);
    // A resume takes ~3.5 minutes (log-normal), plus the power function's polling.
    assert!((120.0..400.0).contains(&o.wait_p50_s), "median wait {}s", o.wait_p50_s);
}

#[test]
fn the_oracle_serves_almost_every_claim_at_once_with_few_spare_hours() {
    let outcomes = monday_compared();
    let oracle = by_name(outcomes, "oracle");
    let formula = by_name(outcomes, "static-formula");
    assert!(oracle.instant_percent >= 95.0, "{}", oracle.instant_percent);
    assert!(oracle.hours.spare_running < formula.hours.spare_running / 2.0);
}

#[test]
fn adaptive_serves_the_working_day_with_fewer_spare_hours_than_the_formula() {
    let outcomes = monday_compared();
    let adaptive = by_name(outcomes, "adaptive");
    let formula = by_name(outcomes, "static-formula");
    assert!(adaptive.instant_percent >= 93.0, "{}", adaptive.instant_percent);
    assert!(
        adaptive.hours.spare_running < 0.8 * formula.hours.spare_running,
        "adaptive {:.0} h vs formula {:.0} h",
        adaptive.hours.spare_running,
        formula.hours.spare_running
    );
}

#[test]
fn the_formula_is_seed_000s() {
    // One claim every 15 minutes, 40-minute installs: round_up(1/15 × 40) = 3.
    assert_eq!(policy::formula(4.0, TimeDelta::minutes(40)), 3);
    // 11 per hour at peak: round_up(11 × 40/60) = 8.
    assert_eq!(policy::formula(11.0, TimeDelta::minutes(40)), 8);
}

#[test]
fn traces_round_trip_through_csv_and_bad_lines_are_named() {
    let trace = monday();
    let again = Trace::parse("monday", &trace.to_csv()).unwrap();
    assert_eq!(again.arrivals.len(), trace.arrivals.len());
    assert_eq!(again.length, trace.length);
    assert_eq!(again.arrivals[0].at.num_seconds(), trace.arrivals[0].at.num_seconds());

    let err = Trace::parse("bad", "claim_at_seconds,hold_seconds\n10,60\n20\n").unwrap_err();
    assert!(err.contains("line 3"), "{err}");
    let err = Trace::parse("bad", "10,-5\n").unwrap_err();
    assert!(err.contains("line 1") && err.contains("non-negative"), "{err}");
}

#[test]
fn the_reference_traces_are_a_week_of_about_two_thousand_claims() {
    for name in ["steady", "diurnal", "bursty"] {
        let path = format!("{}/traces/{name}.csv", env!("CARGO_MANIFEST_DIR"));
        let trace = Trace::parse(name, &std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(trace.length, TimeDelta::days(7), "{name}");
        assert!((1500..2300).contains(&trace.arrivals.len()), "{name}: {}", trace.arrivals.len());
        // Shipped traces are what `apiary-sim generate <name> --seed 1` prints.
        let regenerated = generate(name, &Pattern::reference(name).unwrap(), default_start(), TimeDelta::days(7), 1);
        assert_eq!(trace.arrivals.len(), regenerated.arrivals.len(), "{name}");
    }
}

#[test]
fn a_trace_from_a_file_is_served_in_order() {
    let text = "# start: 2026-01-05T09:00:00Z\n# length: 2h\nclaim_at_seconds,hold_seconds\n600,1800\n60,900\n";
    let trace = Trace::parse("tiny", text).unwrap();
    assert_eq!(
        trace.arrivals,
        [
            Arrival { at: TimeDelta::seconds(60), hold: TimeDelta::seconds(900) },
            Arrival { at: TimeDelta::seconds(600), hold: TimeDelta::seconds(1800) }
        ]
    );
    let o = run(&trace, &Policy::Static { name: "static-1".into(), running: 1 }, 1);
    assert_eq!(o.claims, 2);
    assert_eq!(o.unserved, 0);
}
