//! `make burst N=…`: a CI fan-out through the local API, as the local stack (`make run`) runs it.
//!
//! 1. A pool of N clusters on the `fake` platform, all N kept Running, is filled.
//! 2. N claims are sent at once; each one's latency and answer are recorded, every cluster is checked to be
//!    given at most once, and every claim to be answered 201 (none told to wait while spares stand free).
//! 3. The pool is emptied of spares (size 0), then N claims are sent at once again: each must be answered 202
//!    (waiting), then served as the pool installs clusters for them, at most N/10 at a time, oldest claim first.
//! 4. Claims by labels: four pools carrying one label, N/4 Running spares each, get N claims by that label at once
//!    (`PUT /claims/{claim}`): every one must be answered 201, no cluster given twice, every pool giving some.
//!
//! Emulator-bound: moto handles one request at a time (`infra/emulator.py`), so the figures are the emulator's
//! throughput as much as Apiary's; the report says how long one emulator request takes on its own.

#![allow(clippy::print_stdout)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use apiary_local::Options;
use apiary_ports::store::Key;
use serde_json::{json, Value};
use support::{stack_with, Stack, ALICE};

const POOL: &str = "burst";
/// How long the filled pool stands before the burst.
const SETTLE: Duration = Duration::from_secs(30);

/// The answers of one burst: each claim's status and latency.
struct Burst {
    wall: Duration,
    answers: Vec<(u16, Duration, Value)>,
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

impl Burst {
    /// `| N | wall | p50 | p95 | max | statuses | unanswered |`, as BENCHMARKS.md's table has it.
    fn row(&self, n: usize, what: &str) -> String {
        let mut latencies: Vec<Duration> = self.answers.iter().map(|a| a.1).collect();
        latencies.sort();
        let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
        for (status, ..) in &self.answers {
            *statuses.entry(*status).or_default() += 1;
        }
        let statuses: Vec<String> = statuses.iter().map(|(s, n)| format!("{n}× {s}")).collect();
        format!(
            "| {n} | {what} | {} | {} | {} | {} | {} | {} |",
            ms(self.wall),
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.95)),
            ms(*latencies.last().unwrap_or(&Duration::ZERO)),
            statuses.join(", "),
            n - self.answers.len()
        )
    }
}

/// Sends `n` claims named `{prefix}-{i}` at once; waits for every answer (the client waits as long as API Gateway
/// would: 29 s).
async fn fire(s: &Stack, n: usize, prefix: &str) -> Burst {
    fire_at(s, n, |i| format!("/pools/{POOL}/claims/{prefix}-{i:04}"), None).await
}

/// Sends `n` claims at once, the `i`-th to `path(i)` with `body`; waits for every answer, as [`fire`].
async fn fire_at(s: &Stack, n: usize, path: impl Fn(usize) -> String, body: Option<&str>) -> Burst {
    let started = Instant::now();
    let calls = (0..n).map(|i| {
        let path = path(i);
        async move {
            let sent = Instant::now();
            let answer = s.try_call("PUT", &path, ALICE, body).await.ok();
            answer.map(|(status, body)| (status, sent.elapsed(), body))
        }
    });
    let answers = futures::future::join_all(calls).await.into_iter().flatten().collect();
    Burst { wall: started.elapsed(), answers }
}

/// The median of 30 runs of `f`.
async fn timed<F, Fut, T>(f: F) -> String
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut took = vec![];
    for _ in 0..30 {
        let t = Instant::now();
        f().await;
        took.push(t.elapsed());
    }
    took.sort();
    ms(percentile(&took, 0.5))
}

/// The pool's unclaimed Running clusters.
async fn spares(s: &Stack) -> usize {
    let clusters = s.clusters(POOL).await;
    clusters
        .iter()
        .filter(|c| c["claim"].is_null() && c["powerState"] == "Running" && !c["deleting"].as_bool().unwrap_or(false))
        .count()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    // As `make run` runs the functions: one reconcile and one power consumer, the sweep every 10 s.
    let s = stack_with(Options {
        listen: "127.0.0.1:0".parse().expect("address"),
        sweep_every: Duration::from_secs(10),
        power_consumers: 1,
        reconcile_consumers: 1,
    })
    .await;

    s.put_pool(POOL, &json!({"size": n, "runningCount": n, "platform": {"fake": {}}})).await;
    let filling = Instant::now();
    s.until(&format!("{n} Running spares"), Duration::from_secs(3600), || async {
        (spares(&s).await >= n).then_some(())
    })
    .await;
    println!("pool of {n} Running spares filled in {:.0} s", filling.elapsed().as_secs_f64());
    // A fan-out meets a pool that has stood ready for a while, not one whose clusters are still settling: the
    // power function's first looks at each new Running cluster, and the reconciles they ask for, are past.
    tokio::time::sleep(SETTLE).await;

    // What each of a claim's reads costs the emulator on its own, the pool filled: the floor under every figure
    // below (the emulator answers one request at a time).
    let store = &s.deps.store;
    let get = timed(|| async { store.get(POOL, &Key::Pool).await.expect("GetItem") }).await;
    let page = timed(|| async { store.spares(POOL, 0, 16).await.expect("Query spares") }).await;
    let probe = apiary_planner::Claim::new("probe", ALICE, chrono::Utc::now());
    let line = timed(|| async { store.ahead(POOL, &probe, 16).await.expect("Query pending") }).await;
    println!("alone, p50 of one round trip: GetItem {get}, a page of spares {page}, the claims in line {line}");

    println!("| N | spares | wall | p50 | p95 | max | answers | unanswered |");
    println!("|---:|---|---:|---:|---:|---:|---|---:|");
    let hot = fire(&s, n, "hot").await;
    println!("{}", hot.row(n, &format!("{n} Running")));
    // Nothing given twice: every 201 names its own cluster, and that cluster names the claim back.
    let mut given = BTreeSet::new();
    for (status, _, body) in &hot.answers {
        if *status == 201 {
            let id = body["cluster"]["id"].as_str().expect("cluster id").to_owned();
            assert!(given.insert(id.clone()), "cluster {id} given twice");
        }
    }
    let clusters = s.clusters(POOL).await;
    for c in &clusters {
        if let Some(claim) = c["claim"].as_str() {
            let answer = hot.answers.iter().find(|a| a.2["name"] == claim);
            if let Some((201, _, body)) = answer {
                assert_eq!(body["cluster"]["id"], c["id"], "claim {claim}");
            }
        }
    }
    println!("double assignments: 0 ({} clusters given, each once)", given.len());
    // N claims on N spares: none may be told to wait while a spare stands free (checked once the run is over).
    let waited = hot.answers.iter().filter(|a| a.0 != 201).count();

    // No spares: the pool keeps none, and installs for the waiting claims at most a tenth of N at a time.
    let waves = (n / 10).max(1);
    s.put_pool(
        POOL,
        &json!({"size": 0, "runningCount": 0, "maxConcurrent": waves,
                "platform": {"fake": {"installDuration": "5s"}}}),
    )
    .await;
    s.until("no spares left", Duration::from_secs(3600), || async { (spares(&s).await == 0).then_some(()) }).await;
    let cold = fire(&s, n, "cold").await;
    println!("{}", cold.row(n, "none"));
    // Every claim answered 201 or 202 is stored; one that was not answered may be too.
    let stored = cold.answers.iter().filter(|a| a.0 == 201 || a.0 == 202).count();
    let served = Instant::now();
    type Stamp = chrono::DateTime<chrono::Utc>;
    let assigned: Vec<(Stamp, Stamp, String)> = s
        .until(&format!("{stored} waiting claims Ready"), Duration::from_secs(3600), || async {
            let (_, body) = s.call("GET", &format!("/pools/{POOL}/claims"), ALICE, None).await;
            let claims = body["claims"].as_array().cloned().unwrap_or_default();
            let cold: Vec<&Value> =
                claims.iter().filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with("cold-"))).collect();
            (cold.len() >= stored && cold.iter().all(|c| c["phase"] == "Ready")).then(|| {
                cold.iter()
                    .map(|c| {
                        let at = |k: &str| c[k].as_str().and_then(|t| t.parse::<Stamp>().ok()).expect(k);
                        (at("createdAt"), at("assignedAt"), c["name"].as_str().unwrap_or_default().to_owned())
                    })
                    .collect()
            })
        })
        .await;
    let mut by_assignment = assigned.clone();
    by_assignment.sort_by(|a, b| (&a.1, &a.0, &a.2).cmp(&(&b.1, &b.0, &b.2)));
    let mut fifo = by_assignment.clone();
    fifo.sort_by(|a, b| (&a.0, &a.2).cmp(&(&b.0, &b.2)));
    let in_order = by_assignment.iter().map(|a| &a.2).eq(fifo.iter().map(|a| &a.2));
    println!(
        "{} waiting claims all Ready {:.0} s after the burst, {waves} installs at a time; served oldest first: {in_order}",
        assigned.len(),
        served.elapsed().as_secs_f64()
    );
    if !in_order {
        // Which: each claim given a cluster before an older one, with both stamps, for the one who looks into it.
        for (young, old) in by_assignment.iter().flat_map(|y| by_assignment.iter().map(move |o| (y, o))) {
            if young.0 > old.0 && young.1 < old.1 {
                println!(
                    "  {} (created {}) assigned {}, before {} (created {}) at {}",
                    young.2, young.0, young.1, old.2, old.0, old.1
                );
            }
        }
    }
    assert!(in_order, "waiting claims were not served oldest first");
    assert_eq!(waited, 0, "{waited} of {n} claims on {n} Running spares were not answered 201");
    by_labels(&s, n).await;
    s.stop().await;
}

/// Step 4: N claims by one label at once over four pools carrying it, N/4 Running spares each.
async fn by_labels(s: &Stack, n: usize) {
    let pools: Vec<String> = (0..4).map(|i| format!("labelled-{i}")).collect();
    let each = n.div_ceil(4);
    for p in &pools {
        let spec = json!({"size": each, "runningCount": each, "labels": {"bench": "burst"}, "platform": {"fake": {}}});
        s.put_pool(p, &spec).await;
    }
    let running = |p: String| async move {
        let clusters = s.clusters(&p).await;
        clusters.iter().filter(|c| c["claim"].is_null() && c["powerState"] == "Running").count()
    };
    s.until(&format!("four pools of {each} Running spares"), Duration::from_secs(3600), || async {
        for p in &pools {
            if running(p.clone()).await < each {
                return None;
            }
        }
        Some(())
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    let body = json!({"selector": {"matchLabels": {"bench": "burst"}}}).to_string();
    let burst = fire_at(s, each * 4, |i| format!("/claims/labelled-{i:04}"), Some(&body)).await;
    println!("{}", burst.row(each * 4, &format!("4 × {each} Running, by labels")));
    let mut given = BTreeSet::new();
    let mut by_pool: BTreeMap<String, usize> = BTreeMap::new();
    for (status, _, body) in &burst.answers {
        assert_eq!(*status, 201, "a claim by labels among free spares: {body}");
        let id = body["cluster"]["id"].as_str().expect("cluster id").to_owned();
        let pool = body["pool"].as_str().expect("pool").to_owned();
        assert!(given.insert((pool.clone(), id.clone())), "cluster {pool}/{id} given twice");
        *by_pool.entry(pool).or_default() += 1;
    }
    println!("claims by labels per pool: {by_pool:?}; double assignments: 0");
    // Spread over the pools as their spares are shared (a pool that refills as it goes gives more).
    assert_eq!(by_pool.len(), 4, "the burst spreads over every pool with spares");
}
