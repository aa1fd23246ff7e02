//! `apiary-sim`: compare running-count policies on claim traces. See `--help`.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use chrono::TimeDelta;

use apiary_sim::trace::{default_start, generate};
use apiary_sim::{base_spec, default_adaptive, policy, report, simulate, Costs, Pattern, Platform, Trace};

const USAGE: &str = "\
apiary-sim: compare running-count policies on claim traces

usage:
  apiary-sim [options]                      run every policy on each trace, print the comparison
  apiary-sim generate <steady|diurnal|bursty> [--seed N]
                                            print a reference trace as CSV

options:
  --trace NAME|FILE      steady, diurnal, bursty (shipped in shared/sim/traces) or a CSV file
                         (claim_at_seconds,hold_seconds); repeatable; default: all three
  --out DIR              where the pictures (<trace>-<policy>.svg) and report.json go; default: sim-out
  --seed N               seed for every draw; default 1
  --size N               pool size; default 50
  --running-cost X       $ per cluster-hour with machines running; default 1.5
  --hibernated-cost X    $ per cluster-hour hibernated; default 0.1
  --install-minutes X    median install time; default 40
  --resume-minutes X     median resume time; default 3.5
  --resume-failure P     probability a resume gets stuck; default 0.01
  --instant-share X      the adaptive policy's target share of claims served at once; default 0.95
  --json                 print the outcomes as JSON instead of tables
";

struct Args {
    traces: Vec<String>,
    out: PathBuf,
    seed: u64,
    size: i64,
    costs: Costs,
    platform: Platform,
    instant_share: f64,
    json: bool,
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
        json: false,
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
    if a.traces.is_empty() {
        a.traces = vec!["steady".into(), "diurnal".into(), "bursty".into()];
    }
    Ok(a)
}

fn load(name: &str) -> Result<Trace, String> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces").join(format!("{name}.csv"));
    let path = if Pattern::reference(name).is_some() { shipped } else { PathBuf::from(name) };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
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
        let policies = policy::compared(&trace, &args.platform, adaptive.clone());
        let mut outcomes = Vec::new();
        let mut timings = Vec::new();
        for p in &policies {
            let started = Instant::now();
            let o = simulate(&trace, p, &base, &args.platform, args.costs, args.seed);
            timings.push((p.name(), started.elapsed()));
            let file = args.out.join(format!("{}-{}.svg", trace.name, slug(&p.name())));
            std::fs::write(&file, report::svg(&o, trace.start, trace.length))
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            outcomes.push(o);
        }
        if !args.json {
            println!(
                "## {} — {} claims over {}, mean {:.1}/h, busiest hour {:.0}; pool size {}, seed {}\n",
                trace.name,
                trace.arrivals.len(),
                apiary_planner::duration::format(trace.length),
                trace.mean_rate(),
                trace.peak_rate(),
                args.size,
                args.seed
            );
            println!("{}", report::table(&outcomes));
            let took: Vec<String> =
                timings.iter().map(|(name, d)| format!("{name} {:.0} ms", d.as_secs_f64() * 1000.0)).collect();
            println!("time to simulate the period: {}; pictures in {}\n", took.join(", "), args.out.display());
        }
        all.extend(outcomes);
    }
    let json = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
    let file = args.out.join("report.json");
    std::fs::write(&file, &json).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    if args.json {
        println!("{json}");
    }
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
        let Some(pattern) = Pattern::reference(&name) else {
            eprintln!("generate: unknown pattern {name:?} (steady, diurnal, bursty)\n\n{USAGE}");
            return ExitCode::from(2);
        };
        print!("{}", generate(&name, &pattern, default_start(), TimeDelta::days(7), seed).to_csv());
        return ExitCode::SUCCESS;
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
