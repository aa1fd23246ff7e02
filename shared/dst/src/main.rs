//! `apiary-dst`: runs seeds of the whole-system simulation.
//!
//! ```text
//! apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--jobs J] [--trace] [--deny-roles] [--no-faults]
//! ```
//! `--seed S` replays one seed; otherwise seeds `from .. from + N` run, on `--jobs` threads (default: every
//! core), their lines printed in seed order. `--trace` prints every invocation of a failing seed. `--deny-roles`
//! adds pools' roles denied and given back ([`apiary_dst::Faults::with_roles_denied`]); `--no-faults` runs the
//! workloads without any (the timings then are the fakes' own, for figures). Each failure
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
    let Some(Args { from, count, hours, trace, deny, calm, jobs }) = args()? else { return Ok(()) };
    let started = Instant::now();
    let (mut simulated, mut failed) = (TimeDelta::zero(), 0);
    let mut resumes = apiary_dst::invariants::ResumeTimes::default();
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
                let faults = match (calm, deny) {
                    (true, _) => apiary_dst::Faults::none(),
                    (false, true) => apiary_dst::Faults::with_roles_denied(),
                    (false, false) => apiary_dst::Faults::all(),
                };
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
                        resumes.extend(&r.resumes);
                        println!(
                            "seed {due}: ok, {:.1} simulated hours in {secs:.2} s, {} steps, {} invocations ({} killed), faults {:?}, converged within {} min, notifications {} received {} dead-lettered ({} attempts failed), provisions stopped {:?}",
                            r.simulated.num_seconds() as f64 / 3600.0,
                            r.stats.polls,
                            r.stats.started.iter().sum::<u64>(),
                            r.stats.killed,
                            r.faults,
                            r.slowest_convergence.num_minutes(),
                            r.notifications.0,
                            r.notifications.1,
                            r.notifications.2,
                            r.provisions_stopped,
                        );
                    }
                    Err(f) => {
                        failed += 1;
                        for line in &f.trace {
                            println!("  {line}");
                        }
                        // The replay command names the chaos phase when it is not the default, and the roles.
                        let longer = if hours == 2 { String::new() } else { format!(" HOURS={hours}") };
                        let roles = match (calm, deny) {
                            (true, _) => " DST_FLAGS=--no-faults",
                            (false, true) => " DST_FLAGS=--deny-roles",
                            (false, false) => "",
                        };
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
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
        format!("{} of them, median {:.1} s, p95 {:.1} s", v.len(), at(0.5), at(0.95))
    };
    println!(
        "machines found running to Running on pools with the Kubernetes check: needing node certificates approved \
         {}; needing none {}",
        spread(&mut resumes.with_certificates),
        spread(&mut resumes.without),
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// What the command line asks for.
struct Args {
    from: u64,
    count: u64,
    hours: i64,
    trace: bool,
    deny: bool,
    calm: bool,
    jobs: u64,
}

/// The command line's arguments; `None` when it asked for the usage, which is printed.
fn args() -> anyhow::Result<Option<Args>> {
    let (mut from, mut count, mut hours, mut trace, mut deny, mut calm) = (1u64, 20u64, 2i64, false, false, false);
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
            "--no-faults" => calm = true,
            "-h" | "--help" => {
                println!(
                    "usage: apiary-dst [--seeds N] [--from S] [--seed S] [--hours H] [--jobs J] [--trace] [--deny-roles] \
                     [--no-faults]"
                );
                return Ok(None);
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    Ok(Some(Args { from, count, hours, trace, deny, calm, jobs }))
}
