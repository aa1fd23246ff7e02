//! `apiary-dst`: runs seeds of the whole-system simulation.
//!
//! ```text
//! apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--trace]
//! ```
//! `--seed S` replays one seed; otherwise seeds `from .. from + N` run. `--trace` prints every invocation of a
//! failing seed. Each failure prints the command that
//! replays it; the exit code is 1 when any seed failed.

#![allow(clippy::print_stdout)]

use std::time::Instant;

use anyhow::{bail, Context};
use apiary_dst::{run, RunConfig};
use chrono::TimeDelta;

fn main() -> anyhow::Result<()> {
    let (mut from, mut count, mut hours, mut trace) = (1u64, 20u64, 2i64, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> anyhow::Result<u64> {
            let v = args.next().with_context(|| format!("{name} needs a value"))?;
            v.parse().with_context(|| format!("{name} {v:?}: want a number"))
        };
        match arg.as_str() {
            "--seeds" => count = value("--seeds")?,
            "--from" => from = value("--from")?,
            "--seed" => (from, count) = (value("--seed")?, 1),
            "--hours" => hours = i64::try_from(value("--hours")?)?,
            "--trace" => trace = true,
            "-h" | "--help" => {
                println!("usage: apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--trace]");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let started = Instant::now();
    let (mut simulated, mut failed) = (TimeDelta::zero(), 0);
    for seed in from..from + count {
        let t = Instant::now();
        match run(&RunConfig { chaos: TimeDelta::hours(hours), trace, ..RunConfig::new(seed) }) {
            Ok(r) => {
                simulated += r.simulated;
                println!(
                    "seed {seed}: ok, {:.1} simulated hours in {:.2} s, {} steps, {} invocations ({} killed), faults {:?}, converged within {} min",
                    r.simulated.num_seconds() as f64 / 3600.0,
                    t.elapsed().as_secs_f64(),
                    r.stats.polls,
                    r.stats.started.iter().sum::<u64>(),
                    r.stats.killed,
                    r.faults,
                    r.slowest_convergence.num_minutes(),
                );
            }
            Err(f) => {
                failed += 1;
                for line in &f.trace {
                    println!("  {line}");
                }
                println!("FAILED {f}");
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let hours = simulated.num_seconds() as f64 / 3600.0;
    println!(
        "{} seeds, {failed} failed; {hours:.1} simulated hours in {wall:.1} s ({:.0} simulated hours per second)",
        count,
        hours / wall
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
