//! `plan` on pools of 100, 1 000 and 10 000 clusters with pending claims, and the pool's pace on 10 000.
//!
//! Each pool mixes what a busy pool holds: 10% Running spares, 60% hibernating, 5% installing, 20% claimed,
//! a few broken and stale clusters, and pending claims worth 5% of the pool, so a plan assigns claims, adds
//! clusters, deletes broken ones and re-powers the rest.
#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use apiary_planner::{plan, Snapshot};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use support::*;

pub fn busy_pool(n: usize) -> Snapshot {
    let n64 = i64::try_from(n).unwrap();
    let mut s = given(pool().size(n64 * 8 / 10).running_count(n64 / 10).max_concurrent(n64 / 10 + 1));
    for i in 0..n {
        let id = format!("c{i:05}");
        let created = at(i64::try_from(i).unwrap() % 5000);
        let b = cluster(&id).created(created);
        let b = match i % 20 {
            0 | 1 => b.running(),
            2 => b.installing(),
            3..=6 => {
                let k = format!("k{i:05}");
                s = s.with(claim(&k).created(created).assigned(&id, created));
                b.running().claimed(&k, created)
            }
            7 if i % 60 == 7 => b.broken(),
            8 if i % 40 == 8 => b.stale(),
            _ => b.hibernating(),
        };
        s = s.with(b);
    }
    for j in 0..n / 20 {
        s = s.with(claim(&format!("p{j:05}")).created(at(6000 + i64::try_from(j).unwrap())));
    }
    s.snapshot()
}

/// The same pool with the adaptive count and forecast on, its profile learned over four weeks (a trickle, busy
/// hours and bursts), and the pending claims not yet counted: the plan counts them, closes the buckets since the
/// last count and calibrates the week: the most work forecast adds to a plan.
pub fn forecasting_pool(n: usize) -> Snapshot {
    use apiary_planner::forecast::{bucket_start, Buckets, Profile, BUCKETS};
    use apiary_planner::{Demand, Forecast};
    let mut snap = busy_pool(n);
    let adaptive = apiary_planner::AdaptiveRunningCount {
        instant_share: Some(0.95),
        wait_p95: None,
        window: None,
        resume_estimate: Some(apiary_planner::GoDuration::new("4m")),
        forecast: Some(Forecast::default()),
        keep_fresh: None,
    };
    snap.pool.spec.adaptive_running_count = Some(adaptive);
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut draw = |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        match x % 20 {
            0 => (x % 4000) as u16,
            1..=6 => (x % 600) as u16,
            _ => (x % 50) as u16,
        }
    };
    let open = bucket_start(at(5990), chrono_tz::Tz::UTC);
    snap.pool.status.demand = Some(Demand {
        claims_per_hour: 20.0,
        at: at(5990),
        counted_until: at(5990),
        counted_at_edge: Vec::new(),
        profile: Some(Profile {
            time_zone: "UTC".into(),
            since: open - chrono::TimeDelta::weeks(4),
            open,
            open_count: 3,
            mean: Buckets((0..BUCKETS).map(&mut draw).collect()),
            spread: Buckets((0..BUCKETS).map(&mut draw).collect()),
            worth: Some(0.5),
            kept: None,
        }),
    });
    snap
}

fn bench_plan(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan");
    for n in [100usize, 1_000, 10_000] {
        let snapshot = busy_pool(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &snapshot, |b, snap| {
            b.iter(|| plan(black_box(snap), at(7000), 7))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("plan-forecast");
    for n in [100usize, 10_000] {
        let snapshot = forecasting_pool(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &snapshot, |b, snap| {
            b.iter(|| plan(black_box(snap), at(7000), 7))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("pace");
    let snapshot = busy_pool(10_000);
    group.bench_function("10000", |b| b.iter(|| apiary_planner::Pace::measure(black_box(&snapshot.clusters), None)));
    group.finish();
    // What a reconcile's read of a 10 000-cluster partition costs the types (its items' JSON into clusters and
    // claims; the store's own decoding aside): the price of keeping a later release's fields.
    let mut group = c.benchmark_group("decode");
    let text = serde_json::to_string(&(&snapshot.clusters, &snapshot.claims)).unwrap();
    group.throughput(Throughput::Elements(snapshot.clusters.len() as u64));
    group.bench_function("10000", |b| {
        b.iter(|| serde_json::from_str::<(Vec<apiary_planner::Cluster>, Vec<apiary_planner::Claim>)>(black_box(&text)))
    });
    group.finish();
}

criterion_group!(benches, bench_plan);
criterion_main!(benches);
