//! Counts of cloud calls made by this process, by operation (`dynamodb:Query`, `sqs:SendMessage`,
//! `compute:instances.start`, …).
//!
//! Every adapter counts each call it sends (the AWS SDK's own retries aside; the HTTP clouds' client counts each
//! attempt). Benchmarks and tests read the counts around an operation to report what it costs.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;

static CALLS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

tokio::task_local! {
    /// The calls made in the task of a [`counted`] future, by operation.
    static SCOPE: RefCell<BTreeMap<&'static str, u64>>;
}

/// Records one call of `op`.
pub fn count(op: &'static str) {
    let mut calls = CALLS.lock().unwrap_or_else(|e| e.into_inner());
    *calls.entry(op).or_default() += 1;
    let _ = SCOPE.try_with(|scope| *scope.borrow_mut().entry(op).or_default() += 1);
}

/// Runs `f` and counts the calls it makes in its own task, by operation: not those other tasks make meanwhile (a
/// test's beside it, a server's), nor those of tasks it spawns.
pub async fn counted<F: Future>(f: F) -> (F::Output, BTreeMap<String, u64>) {
    SCOPE
        .scope(RefCell::new(BTreeMap::new()), async move {
            let out = f.await;
            let calls = SCOPE.with(|scope| scope.borrow().iter().map(|(k, v)| ((*k).to_owned(), *v)).collect());
            (out, calls)
        })
        .await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_counted_future_counts_its_own_calls_not_another_tasks() {
        let other = tokio::spawn(async { count("test:other") });
        let ((), mine) = counted(async {
            count("test:mine");
            count("test:mine");
            tokio::task::yield_now().await;
        })
        .await;
        other.await.expect("the other task");
        assert_eq!(mine, BTreeMap::from([("test:mine".to_owned(), 2)]));
        assert!(snapshot().get("test:other").is_some_and(|n| *n >= 1), "still counted for the process");
    }
}
