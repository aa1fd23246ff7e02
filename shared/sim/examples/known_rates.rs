//! How cheap a pool can be that knows a reference trace's true hourly rates but not its arrivals: the running
//! count is set from the rate the pattern draws at each hour (a `rate:count` list), optionally raised a few
//! minutes before the rate rises, and the pool cost is compared with the oracle's on the same trace and seed.
//!
//! ```text
//! cargo run --profile tool -p apiary-sim --example known_rates -- diurnal 34:6 6:2 1:1 --lead 4
//! ```
//!
//! No forecast learned from arrivals can beat this, give or take luck: it is the forecast with no error in its
//! rates. BENCHMARKS.md quotes it beside the forecast's figures on diurnal.
//!
//! `--keep-fresh` adds `adaptiveRunningCount.keepFresh` (with a target share so low that the adaptive count never
//! asks for more than the counts given): just-installed clusters stay Running while claims are expected sooner
//! than a stop and a resume take, on the live rate estimate.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use chrono::TimeDelta;

use apiary_planner::AdaptiveRunningCount;
use apiary_sim::{base_spec, default_adaptive, policy, reference_trace, simulate, Costs, Pattern, Platform, Setup};
use apiary_sim::{Policy, Simulation};

const USAGE: &str = "usage: known_rates <trace> <rate:count>... [--lead MINUTES] [--seed N] [--keep-fresh]";

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("known_rates: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut args = args.into_iter();
    let name = args.next().ok_or("a reference trace name is needed")?;
    let (mut counts, mut lead, mut seed, mut keep_fresh) = (Vec::new(), TimeDelta::zero(), 1, false);
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| args.next().ok_or(format!("{flag} needs a value"));
        match arg.as_str() {
            "--lead" => {
                let v = value("--lead")?;
                let minutes: u32 = v.parse().map_err(|_| format!("--lead: {v:?} is not whole minutes"))?;
                lead = TimeDelta::minutes(i64::from(minutes));
            }
            "--keep-fresh" => keep_fresh = true,
            "--seed" => {
                let v = value("--seed")?;
                seed = v.parse().map_err(|_| format!("--seed: {v:?} is not a whole number"))?;
            }
            pair => {
                let parsed =
                    pair.split_once(':').and_then(|(r, c)| Some((r.parse::<f64>().ok()?, c.parse::<i64>().ok()?)));
                counts.push(parsed.ok_or(format!("{pair:?} is not rate:count"))?);
            }
        }
    }
    let pattern = Pattern::reference(&name).ok_or(format!("no reference trace {name:?}"))?;
    // The trace is drawn with seed 1, as `apiary-sim` does; `--seed` is for the simulation's own draws.
    let trace = reference_trace(&name, 1).ok_or(format!("no reference trace {name:?}"))?;
    let count_for = |rate: f64| {
        counts.iter().find(|(r, _)| (r - rate).abs() < 1e-9).map(|(_, c)| *c).ok_or(format!("no count for rate {rate}"))
    };
    // The count each hour, raised `lead` early when it rises.
    let mut changes: Vec<(TimeDelta, i64)> = Vec::new();
    let mut at = TimeDelta::zero();
    while at < trace.length {
        let count = count_for(pattern.rate_at(trace.start + at))?;
        let before = changes.last().map_or(0, |(_, c)| *c);
        let from = if count > before { (at - lead).max(TimeDelta::zero()) } else { at };
        changes.push((from, count));
        at += TimeDelta::hours(1);
    }
    let (platform, costs, base) = (Platform::default(), Costs::default(), base_spec(50));
    let mut spec = base.clone();
    spec.running_count = changes.first().map_or(0, |(_, c)| *c);
    if keep_fresh {
        // At most one spare from the adaptive count, and only while claims come: below every count given.
        let option = AdaptiveRunningCount { instant_share: Some(1e-6), keep_fresh: Some(true), ..default_adaptive() };
        spec.adaptive_running_count = Some(option);
    }
    let setup = Setup {
        policy: "known rates".into(),
        spec,
        running_changes: changes,
        platform: platform.clone(),
        costs,
        seed,
        sample_every: TimeDelta::minutes(10),
    };
    let known = Simulation::new(&trace, setup).run();
    let oracle = policy::compared(&trace, &platform, default_adaptive())
        .into_iter()
        .find(|p| matches!(p, Policy::Oracle { .. }))
        .map(|p| simulate(&trace, &p, &base, &platform, costs, seed))
        .ok_or("no oracle policy")?;
    let pairs: Vec<String> = counts.iter().map(|(r, c)| format!("{r}:{c}")).collect();
    println!(
        "{name} (seed {seed}), known rates {}{} lead {}m: {:.2}% instant, {:.0} spare running h, pool cost ${:.0} = {:.3}× the oracle's ${:.0}",
        pairs.join(" "),
        if keep_fresh { " keepFresh" } else { "" },
        lead.num_minutes(),
        known.instant_percent,
        known.hours.spare_running,
        known.pool_cost,
        known.pool_cost / oracle.pool_cost,
        oracle.pool_cost
    );
    Ok(())
}
