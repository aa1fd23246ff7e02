//! Measures what an operation costs through the local stack: AWS calls per operation (counted by the adapters)
//! and claim latency through the local API. Emulator-bound: the latencies are moto's, not DynamoDB's.
//!
//! Run with `make bench-api`, which starts the emulator.

#![allow(clippy::print_stdout)]

mod support;

use std::time::{Duration, Instant};

use apiary_aws::calls;
use apiary_local::Options;
use serde_json::json;
use support::{aws_pool, stack, ALICE};

fn quiet(listen_only: bool) -> Options {
    Options {
        listen: "127.0.0.1:0".parse().expect("address"),
        sweep_every: if listen_only { Duration::from_secs(86_400) } else { Duration::from_secs(1) },
        power_consumers: usize::from(!listen_only),
        reconcile_consumers: usize::from(!listen_only),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut s = stack().await;

    // Calls per operation: the pool converged, then only the API left running, so nothing else calls AWS.
    s.put_pool("calls", &aws_pool(3, 1)).await;
    s.converged("calls", 3, 1).await;
    s.restart(quiet(true)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = calls::snapshot();
    reconcile::reconcile(&s.deps, "calls").await.expect("reconcile");
    println!("steady-state reconcile of an unchanged pool: {:?}", calls::since(&before));
    let before = calls::snapshot();
    let (status, _) = s.call("PUT", "/pools/calls/claims/one", ALICE, None).await;
    println!("claim with a free Running spare (HTTP {status}): {:?}", calls::since(&before));
    let before = calls::snapshot();
    let (status, _) = s.call("PUT", "/pools/calls/claims/two", ALICE, None).await;
    println!("claim with no Running spare (HTTP {status}): {:?}", calls::since(&before));

    // Claim latency: 200 claims, one after another, on a pool with 200 Running spares (fake platform).
    s.restart(quiet(false)).await;
    s.put_pool("lat", &json!({"size": 200, "runningCount": 200, "platform": {"fake": {}}})).await;
    s.until("200 Running spares", Duration::from_secs(600), || async {
        let c = s.clusters("lat").await;
        (c.len() == 200 && c.iter().all(|c| c["powerState"] == "Running")).then_some(())
    })
    .await;
    s.restart(quiet(true)).await;
    let mut assigned = vec![];
    let mut pending = vec![];
    for i in 0..200 {
        let started = Instant::now();
        let (status, _) = s.call("PUT", &format!("/pools/lat/claims/c{i}"), ALICE, None).await;
        let took = started.elapsed();
        match status {
            201 => assigned.push(took),
            202 => pending.push(took),
            other => panic!("claim c{i}: HTTP {other}"),
        }
    }
    assigned.sort();
    pending.sort();
    // Where the time goes: the read of the pool's partition (200 clusters, 200 claims) on its own.
    let mut reads = vec![];
    for _ in 0..20 {
        let started = Instant::now();
        s.deps.store.read_pool("lat").await.expect("read");
        reads.push(started.elapsed());
    }
    reads.sort();
    println!(
        "one Query of that partition (400 items) alone: p50 {:.1} ms, p95 {:.1} ms",
        percentile(&reads, 0.5).as_secs_f64() * 1e3,
        percentile(&reads, 0.95).as_secs_f64() * 1e3
    );
    if !assigned.is_empty() {
        println!(
            "claim latency, 201 with a Running spare, {} claims on a 200-cluster pool: p50 {:.1} ms, p95 {:.1} ms",
            assigned.len(),
            percentile(&assigned, 0.5).as_secs_f64() * 1e3,
            percentile(&assigned, 0.95).as_secs_f64() * 1e3
        );
    }
    if !pending.is_empty() {
        println!(
            "claim latency, 202 Pending, {} claims: p50 {:.1} ms, p95 {:.1} ms",
            pending.len(),
            percentile(&pending, 0.5).as_secs_f64() * 1e3,
            percentile(&pending, 0.95).as_secs_f64() * 1e3
        );
    }

    // Claim notifications (issue 59): 50 claims one after another on each of two pools of 50 Running spares, the
    // functions all running, one pool with a `notify` webhook (a local receiver) and one without, alternately; for
    // each claim on the first, the time from its answer until the receiver had its verified `claim.assigned`.
    s.restart(quiet(false)).await;
    let (receiver, key) = s.notify_receiver(&["hooked"]).await;
    let plain = json!({"size": 50, "runningCount": 50, "platform": {"fake": {}}});
    let mut hooked = plain.clone();
    hooked["notify"] = json!([{"url": receiver.url(), "secret": key, "events": ["claim.assigned"]}]);
    for (pool, spec) in [("plain", &plain), ("hooked", &hooked)] {
        s.put_pool(pool, spec).await;
        s.until("50 Running spares", Duration::from_secs(600), || async {
            let c = s.clusters(pool).await;
            (c.len() == 50 && c.iter().all(|c| c["powerState"] == "Running")).then_some(())
        })
        .await;
    }
    let (mut without, mut with, mut heard) = (vec![], vec![], vec![]);
    for i in 0..50 {
        let started = Instant::now();
        let (status, _) = s.call("PUT", &format!("/pools/plain/claims/p{i}"), ALICE, None).await;
        if status == 201 {
            without.push(started.elapsed());
        }
        let claim = format!("n{i}");
        let started = Instant::now();
        let (status, _) = s.call("PUT", &format!("/pools/hooked/claims/{claim}"), ALICE, None).await;
        let answer = started.elapsed();
        if status != 201 {
            continue;
        }
        with.push(answer);
        let got = || receiver.received().iter().any(|r| r.body["data"]["claim"] == claim.as_str());
        while !got() {
            assert!(started.elapsed() < Duration::from_secs(60), "{claim}: no notification within a minute");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        heard.push(started.elapsed() - answer);
    }
    for v in [&mut without, &mut with, &mut heard] {
        v.sort();
    }
    let ms = |v: &[Duration], p: f64| percentile(v, p).as_secs_f64() * 1e3;
    if !without.is_empty() && !heard.is_empty() {
        println!(
            "claim latency, 201, every function running: without a notify hook {} claims p50 {:.1} ms p95 {:.1} ms; \
             with one {} claims p50 {:.1} ms p95 {:.1} ms; answer to the receiver's verified claim.assigned: \
             p50 {:.1} ms, p95 {:.1} ms",
            without.len(),
            ms(&without, 0.5),
            ms(&without, 0.95),
            with.len(),
            ms(&with, 0.5),
            ms(&with, 0.95),
            ms(&heard, 0.5),
            ms(&heard, 0.95)
        );
    }
    s.stop().await;
}
