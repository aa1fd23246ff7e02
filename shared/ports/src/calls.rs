//! Counts of cloud calls made by this process, by operation (`dynamodb:Query`, `sqs:SendMessage`,
//! `compute:instances.start`, …).
//!
//! Every adapter counts each call it sends (the AWS SDK's own retries aside; the HTTP clouds' client counts each
//! attempt). Benchmarks and tests read the counts around an operation to report what it costs.

use std::collections::BTreeMap;
use std::sync::Mutex;

static CALLS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// Records one call of `op`.
pub fn count(op: &'static str) {
    let mut calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    *calls.entry(op).or_default() += 1;
}

/// The counts so far.
pub fn snapshot() -> BTreeMap<String, u64> {
    let calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    calls.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// The calls made since `before` (a [`snapshot`]), zeros left out.
pub fn since(before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    snapshot()
        .into_iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (d > 0).then_some((k, d))
        })
        .collect()
}
