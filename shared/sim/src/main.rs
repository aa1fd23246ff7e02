//! `apiary-sim`: compare running-count policies on claim traces. See `--help`.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use chrono::TimeDelta;

use apiary_sim::{
    base_spec, canary_comparison, default_adaptive, default_canaries, policy, reference_trace, report, simulate, Costs,
    Outcome, Platform, Policy, Trace,
};

const USAGE: &str = "\
apiary-sim: compare running-count policies on claim traces

usage:
  apiary-sim [options]                      run every policy on each trace, print the comparison
  apiary-sim generate <steady|diurnal|bursty|drifting|random|quiet> [--seed N]
                                            print a reference trace as CSV
  apiary-sim bill [--seed N]                Apiary's own bill a month for 1, 10 and 100 pools like each
                                            reference trace under the forecast policy (and diurnal under
                                            keep-fresh), as BENCHMARKS.md keeps it; --seed as below

options:
  --trace NAME|FILE      a reference trace (steady, diurnal, bursty, drifting, random, quiet: six weeks, the first
                         four learned and not measured) or a CSV file (claim_at_seconds,hold_seconds, with
                         `# learn: 672h` to leave weeks unmeasured); repeatable; default: all but quiet,
                         then the resume canaries compared on quiet (on the first trace when given)
  --out DIR              where the pictures (<trace>-<policy>.svg for the measured period,
                         <trace>-<policy>-day.svg for its first day) and report.json go; default: sim-out
  --seed N               seed for every draw; default 1
  --size N               pool size; default 50
  --running-cost X       $ per cluster-hour with machines running; default 1.5
  --hibernated-cost X    $ per cluster-hour hibernated; default 0.1
  --install-minutes X    median install time; default 40
  --resume-minutes X     median resume time; default 3.5
  --resume-failure P     probability a resume gets stuck; default 0.01
  --aging P              for the canary comparison: added to that per day a cluster slept; default 0.02
  --instant-share X      the adaptive policy's target share of claims served at once; default 0.95
  --policy NAME          compare only this policy (static-0, static-formula, static-peak, schedules, adaptive,
                         forecast, keep-fresh, oracle); repeatable; skips the canary comparison
  --json                 print the outcomes as JSON instead of tables
";

/// The policies `--policy` may name: each compared policy's name up to its tuning in brackets.
const POLICY_NAMES: [&str; 8] =
    ["static-0", "static-formula", "static-peak", "schedules", "adaptive", "forecast", "keep-fresh", "oracle"];

struct Args {
    traces: Vec<String>,
    out: PathBuf,
    seed: u64,
    size: i64,
    costs: Costs,
    platform: Platform,
    instant_share: f64,
    aging: f64,
    json: bool,
    /// Only these policies (`--policy`); all when empty.
    only: Vec<String>,
    /// Traces were named on the command line.
    given_traces: bool,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        traces: Vec::new(),
        out: PathBuf::from("sim-out"),
        seed: 1,
        size: 50,
        costs: Costs::default(),
        platform: Platform::default(),
        instant_share: default_adaptive().instant_share.unwrap_or(0.95),
        aging: 0.02,
        json: false,
        only: Vec::new(),
        given_traces: false,
    };
    while let Some(flag) = argv.next() {
        let mut value = |name: &str| argv.next().ok_or_else(|| format!("{name} needs a value"));
        let number = |name: &str, v: String| v.parse::<f64>().map_err(|_| format!("{name}: {v:?} is not a number"));
        match flag.as_str() {
            "--trace" => a.traces.push(value("--trace")?),
            "--out" => a.out = PathBuf::from(value("--out")?),
            "--seed" => a.seed = value("--seed")?.parse().map_err(|_| "--seed: not a whole number".to_string())?,
            "--size" => a.size = value("--size")?.parse().map_err(|_| "--size: not a whole number".to_string())?,
            "--running-cost" => a.costs.running_per_hour = number("--running-cost", value("--running-cost")?)?,
            "--hibernated-cost" => {
                a.costs.hibernated_per_hour = number("--hibernated-cost", value("--hibernated-cost")?)?
            }
            "--install-minutes" => {
                let m = number("--install-minutes", value("--install-minutes")?)?;
                a.platform.install = apiary_sim::Spread::minutes(m, a.platform.install.sigma);
            }
            "--resume-minutes" => {
                let m = number("--resume-minutes", value("--resume-minutes")?)?;
                a.platform.resume = apiary_sim::Spread::minutes(m, a.platform.resume.sigma);
            }
            "--resume-failure" => a.platform.resume_failure = number("--resume-failure", value("--resume-failure")?)?,
            "--instant-share" => a.instant_share = number("--instant-share", value("--instant-share")?)?,
            "--aging" => a.aging = number("--aging", value("--aging")?)?,
            "--policy" => {
                let name = value("--policy")?;
                if !POLICY_NAMES.contains(&name.as_str()) {
                    return Err(format!("--policy: {name:?} is not one of {}", POLICY_NAMES.join(", ")));
                }
                a.only.push(name);
            }
            "--json" => a.json = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if a.size < 0 {
        return Err("--size must not be negative".into());
    }
    if !(a.instant_share > 0.0 && a.instant_share < 1.0) {
        return Err("--instant-share must be between 0 and 1".into());
    }
    if !(0.0..=1.0).contains(&a.aging) {
        return Err("--aging must be between 0 and 1".into());
    }
    a.given_traces = !a.traces.is_empty();
    if a.traces.is_empty() {
        a.traces = ["steady", "diurnal", "bursty", "drifting", "random"].map(String::from).to_vec();
    }
    Ok(a)
}

fn load(name: &str) -> Result<Trace, String> {
    if let Some(trace) = reference_trace(name, 1) {
        return Ok(trace);
    }
    let path = Path::new(name);
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or(name);
    Trace::parse(stem, &text).map_err(|e| format!("{}: {e}", path.display()))
}

fn run(args: Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let mut adaptive = default_adaptive();
    adaptive.instant_share = Some(args.instant_share);
    let base = base_spec(args.size);
    let mut all = Vec::new();
    for name in &args.traces {
        let trace = load(name)?;
        let mut policies = policy::compared(&trace, &args.platform, adaptive.clone());
        if !args.only.is_empty() {
            policies.retain(|p| args.only.iter().any(|n| policy_named(&p.name(), n)));
        }
        let mut outcomes = Vec::new();
        let mut timings = Vec::new();
        for p in &policies {
            let started = Instant::now();
            let o = simulate(&trace, p, &base, &args.platform, args.costs, args.seed);
            timings.push((p.name(), started.elapsed()));
            let measured = trace.measured_from();
            let pictures = [("", trace.length - trace.learn), ("-day", TimeDelta::days(1))];
            for (suffix, length) in pictures {
                let file = args.out.join(format!("{}-{}{suffix}.svg", trace.name, slug(&p.name())));
                std::fs::write(&file, report::svg(&o, measured, length))
                    .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            }
            outcomes.push(o);
        }
        if !args.json {
            println!(
                "## {} — {} claims over the {} measured (after {} learned), mean {:.1}/h, busiest hour {:.0}; pool size {}, seed {}\n",
                trace.name,
                trace.measured().count(),
                apiary_planner::duration::format(trace.length - trace.learn),
                apiary_planner::duration::format(trace.learn),
                trace.mean_rate(),
                trace.peak_rate(),
                args.size,
                args.seed
            );
            println!("{}", report::table(&outcomes));
            let took: Vec<String> =
                timings.iter().map(|(name, d)| format!("{name} {:.0} ms", d.as_secs_f64() * 1000.0)).collect();
            println!("time to simulate the period: {}; pictures in {}\n", took.join(", "), args.out.display());
            let mut priced: Vec<&Outcome> =
                outcomes.iter().filter(|o| o.policy == "forecast" || o.policy == "keep-fresh").collect();
            if priced.is_empty() {
                priced.extend(outcomes.first());
            }
            for o in priced {
                println!(
                    "What Apiary itself costs on AWS a month, for pools like this one under {} (list prices, us-east-1; \
                     see shared/sim/src/bill.rs for what is counted and what is assumed):\n",
                    o.policy
                );
                println!("{}", apiary_sim::bill::table(o, trace.length - trace.learn));
                println!("Where its DynamoDB write units go:\n");
                println!("{}", apiary_sim::bill::writes_table(o, trace.length - trace.learn));
                println!("And its read units:\n");
                println!("{}", apiary_sim::bill::reads_table(o, trace.length - trace.learn));
            }
        }
        all.extend(outcomes);
    }
    if !args.json && args.only.is_empty() {
        canaries(&args, &adaptive, &base)?;
    }
    let json = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
    let file = args.out.join("report.json");
    std::fs::write(&file, &json).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    if args.json {
        println!("{json}");
    }
    Ok(())
}

/// The reference traces and policies `apiary-sim bill` prices: each trace under the forecast policy, and diurnal
/// under keep-fresh too.
const BILLED: [(&str, &str); 7] = [
    ("steady", "forecast"),
    ("diurnal", "forecast"),
    ("bursty", "forecast"),
    ("drifting", "forecast"),
    ("random", "forecast"),
    ("quiet", "forecast"),
    ("diurnal", "keep-fresh"),
];

/// The seed of `apiary-sim bill` (`--seed N`, 1 unless given).
fn bill_args(mut argv: impl Iterator<Item = String>) -> Result<u64, String> {
    let mut seed = 1;
    while let Some(flag) = argv.next() {
        match flag.as_str() {
            "--seed" => {
                let v = argv.next().ok_or("--seed needs a value")?;
                seed = v.parse().map_err(|_| format!("--seed: {v:?} is not a whole number"))?;
            }
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(seed)
}

/// Simulates each of [`BILLED`] at once (a thread each) and prints their bills' summary.
fn bill(seed: u64) -> Result<(), String> {
    let (platform, base, adaptive) = (Platform::default(), base_spec(50), default_adaptive());
    let runs: Vec<Result<(String, Outcome, TimeDelta), String>> = std::thread::scope(|s| {
        let running: Vec<_> = BILLED
            .iter()
            .map(|&(name, wanted)| {
                let (platform, base, adaptive) = (&platform, &base, adaptive.clone());
                s.spawn(move || {
                    let trace = load(name)?;
                    let p = policy::compared(&trace, platform, adaptive)
                        .into_iter()
                        .find(|p| policy_named(&p.name(), wanted))
                        .ok_or_else(|| format!("no policy {wanted}"))?;
                    let o = simulate(&trace, &p, base, platform, Costs::default(), seed);
                    let row = if wanted == "forecast" { name.to_string() } else { format!("{name}, {wanted}") };
                    Ok((row, o, trace.length - trace.learn))
                })
            })
            .collect();
        running.into_iter().map(|r| r.join().unwrap_or_else(|_| Err("a simulation panicked".into()))).collect()
    });
    let runs = runs.into_iter().collect::<Result<Vec<_>, String>>()?;
    let rows: Vec<(String, &Outcome, TimeDelta)> = runs.iter().map(|(n, o, m)| (n.clone(), o, *m)).collect();
    println!(
        "# Apiary's own AWS bill\n\n\
         Written by `make bill` (`apiary-sim bill --seed {seed}`): do not edit. README.md, docs/ and BENCHMARKS.md \
         quote these figures, and `make docs-check` fails when a quoted one differs \
         ([how they are counted](../BENCHMARKS.md#what-apiary-costs-to-run)).\n\n\
         What Apiary itself costs on AWS a month, for pools like each reference trace (forecast policy; each bill's \
         lines: `make sim ARGS=\"--trace T --policy P\"`):\n"
    );
    print!("{}", apiary_sim::bill::summary(&rows));
    let (prices, a) = (apiary_sim::bill::Prices::default(), apiary_sim::bill::Assumptions::default());
    let fixed = runs.first().map_or(0.0, |(_, o, measured)| {
        apiary_sim::bill::monthly(&apiary_sim::bill::lines(o, *measured, &prices, &a), 0.0)
    });
    println!("\n| the stack alone, whatever its pools | a month |\n|---|---:|\n| fixed | ${fixed:.2} |");
    println!(
        "\nThe pools themselves in the same two weeks: claims given a Running cluster at once, and what the clusters \
         cost (spare running and installing hours at $1.50, hibernated at $0.10):\n"
    );
    println!("| the pools | claims served at once | the pool's clusters, two weeks |\n|---|---:|---:|");
    for (name, o, _) in &runs {
        println!("| {name} | {:.1} % | ${} |", o.instant_percent, apiary_sim::bill::dollars(o.pool_cost));
    }
    println!(
        "\nWhat each stack setting changes a month (below zero: saves), for 1, 10 and 100 pools like each, and for \
         each pool past the tenth (`make sim` prints the lines of each):\n"
    );
    println!("| pools like, setting | what it is | 1 pool | 10 pools | 100 pools | each pool more |\n|---|---|---:|---:|---:|---:|");
    for (name, o, measured) in &runs {
        for c in apiary_sim::bill::changes(o, *measured) {
            let [one, ten, hundred] = c.by;
            let each = (hundred - ten) / 90.0;
            println!(
                "| {}-{} | {} | {one:.2} | {ten:.2} | {hundred:.2} | {each:.2} |",
                slug(name),
                c.key,
                c.what.replace('|', "/")
            );
        }
    }
    Ok(())
}

/// Whether a compared policy's `name` is the one `--policy` named: its name up to its tuning in brackets
/// ("static-formula (8)").
fn policy_named(name: &str, wanted: &str) -> bool {
    name.split(" (").next() == Some(wanted)
}

/// The canary comparison on the quiet reference trace (or the first trace given): a pool whose standbys sleep
/// for days, and resumes that fail more the longer a cluster slept.
fn canaries(
    args: &Args,
    adaptive: &apiary_planner::AdaptiveRunningCount,
    base: &apiary_planner::PoolSpec,
) -> Result<(), String> {
    let name = if args.given_traces { args.traces.first().ok_or("no trace")?.as_str() } else { "quiet" };
    let trace = load(name)?;
    let platform = Platform { resume_failure_per_day_asleep: args.aging, ..args.platform.clone() };
    let policies: Vec<Policy> = policy::compared(&trace, &platform, adaptive.clone())
        .into_iter()
        .filter(|p| {
            ["static-0", "static-formula", "schedules", "adaptive", "forecast"].iter().any(|n| p.name().starts_with(n))
        })
        .collect();
    let canaries = default_canaries();
    let pairs = canary_comparison(&trace, &policies, base, &platform, args.costs, args.seed, &canaries);
    println!(
        "## resume canaries on {}: resumes fail {:.0}% plus {:.0}% per day asleep; canaries after {}, {} at a time, {} UTC\n",
        trace.name,
        platform.resume_failure * 100.0,
        args.aging * 100.0,
        canaries.after.text(),
        canaries.at_a_time(),
        canaries.hours.as_deref().unwrap_or("any time"),
    );
    println!("{}", report::canary_table(&pairs));
    Ok(())
}

fn slug(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-")
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().map(String::as_str) == Some("generate") {
        argv.next();
        let name = argv.next().unwrap_or_default();
        let seed = match (argv.next().as_deref(), argv.next()) {
            (Some("--seed"), Some(v)) => v.parse().unwrap_or(1),
            _ => 1,
        };
        let Some(trace) = reference_trace(&name, seed) else {
            eprintln!(
                "generate: unknown pattern {name:?} (steady, diurnal, bursty, drifting, random, quiet)\n\n{USAGE}"
            );
            return ExitCode::from(2);
        };
        print!("{}", trace.to_csv());
        return ExitCode::SUCCESS;
    }
    if argv.peek().map(String::as_str) == Some("bill") {
        argv.next();
        return match bill_args(argv).and_then(bill) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("apiary-sim bill: {e}\n\n{USAGE}");
                ExitCode::from(2)
            }
        };
    }
    match parse(argv).and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("apiary-sim: {e}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
