//! `apiary-dst`: runs seeds of the whole-system simulation.
//!
//! ```text
//! apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--jobs J] [--trace] [--deny-roles]
//! ```
//! `--seed S` replays one seed; otherwise seeds `from .. from + N` run, on `--jobs` threads (default: every
//! core), their lines printed in seed order. `--trace` prints every invocation of a failing seed. `--deny-roles`
//! adds pools' roles denied and given back ([`apiary_dst::Faults::with_roles_denied`]). Each failure
//! prints the command that replays it; the exit code is 1 when any seed failed.

#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, Context};
use apiary_dst::{run, RunConfig};
use chrono::TimeDelta;

/// A seed's result and the seconds it took.
type Outcome = (Result<apiary_dst::Report, Box<apiary_dst::Failure>>, f64);

fn main() -> anyhow::Result<()> {
    let (mut from, mut count, mut hours, mut trace, mut deny) = (1u64, 20u64, 2i64, false, false);
    let mut jobs = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
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
            "--jobs" => jobs = value("--jobs")?.max(1),
            "--trace" => trace = true,
            "--deny-roles" => deny = true,
            "-h" | "--help" => {
                println!(
                    "usage: apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--jobs J] [--trace] [--deny-roles]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let started = Instant::now();
    let (mut simulated, mut failed) = (TimeDelta::zero(), 0);
    // Workers take the next seed as they finish one; lines wait here until every earlier seed's are printed.
    let next = AtomicU64::new(from);
    let (tx, rx) = mpsc::channel::<(u64, Outcome)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(count) {
            let (tx, next) = (tx.clone(), &next);
            scope.spawn(move || loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= from + count {
                    break;
                }
                let t = Instant::now();
                let faults = if deny { apiary_dst::Faults::with_roles_denied() } else { apiary_dst::Faults::all() };
                let result = run(&RunConfig { chaos: TimeDelta::hours(hours), trace, faults, ..RunConfig::new(seed) });
                if tx.send((seed, (result, t.elapsed().as_secs_f64()))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut due = from;
        for (seed, outcome) in rx {
            waiting.insert(seed, outcome);
            while let Some((result, secs)) = waiting.remove(&due) {
                match result {
                    Ok(r) => {
                        simulated += r.simulated;
                        println!(
                            "seed {due}: ok, {:.1} simulated hours in {secs:.2} s, {} steps, {} invocations ({} killed), faults {:?}, converged within {} min",
                            r.simulated.num_seconds() as f64 / 3600.0,
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
                        // The replay command names the chaos phase when it is not the default, and the roles.
                        let longer = if hours == 2 { String::new() } else { format!(" HOURS={hours}") };
                        let roles = if deny { " DST_FLAGS=--deny-roles" } else { "" };
                        println!("FAILED {f}{longer}{roles}");
                    }
                }
                due += 1;
            }
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let hours = simulated.num_seconds() as f64 / 3600.0;
    println!(
        "{count} seeds, {failed} failed; {hours:.1} simulated hours in {wall:.1} s on {} threads ({:.0} simulated hours per second)",
        jobs.min(count),
        hours / wall
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
