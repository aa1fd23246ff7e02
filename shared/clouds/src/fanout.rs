//! One call per machine, a few at once: each machine's refusal is reported with it and never stops the others.

use apiary_ports::platform::Refused;
use apiary_ports::Result;
use futures::StreamExt;

/// Machines acted on at once.
pub const CONCURRENCY: usize = 8;

/// What one machine's call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done, or nothing to do (already in the state asked for, gone, or mid-transition: re-issued at the next look).
    Done,
    /// The cloud refused it: its message.
    Refused(String),
}

/// Runs `act` on every `(machine, call)` of `calls`, at most [`CONCURRENCY`] at once. Refusals are collected
/// (sorted by machine); a call that could not be made (throttled past its budget) fails the whole step, after
/// every other machine was acted on, so that the step is retried.
pub async fn each<C, F, Fut>(calls: Vec<(String, C)>, act: F) -> Result<Refused>
where
    F: Fn(C) -> Fut,
    Fut: std::future::Future<Output = Result<Outcome>>,
{
    let results: Vec<(String, Result<Outcome>)> = futures::stream::iter(calls)
        .map(|(machine, call)| {
            let done = act(call);
            async move { (machine, done.await) }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut refused = Refused::default();
    let mut failed = None;
    for (machine, result) in results {
        match result {
            Ok(Outcome::Done) => {}
            Ok(Outcome::Refused(message)) => refused.machines.push((machine, message)),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    refused.machines.sort();
    match failed {
        Some(e) => Err(e),
        None => Ok(refused),
    }
}

/// Runs `look` on every item, at most [`CONCURRENCY`] at once, keeping their order; the first error fails it.
pub async fn all<T, R, F, Fut>(items: Vec<T>, look: F) -> Result<Vec<R>>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = Result<R>>,
{
    futures::stream::iter(items).map(look).buffered(CONCURRENCY).collect::<Vec<_>>().await.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiary_ports::Error;

    #[test]
    fn refusals_are_kept_per_machine_and_an_error_fails_the_step() {
        let calls = vec![("b".to_owned(), 2), ("a".to_owned(), 1), ("c".to_owned(), 3)];
        let refused = futures::executor::block_on(each(calls.clone(), |n| async move {
            Ok(if n == 3 { Outcome::Done } else { Outcome::Refused(format!("no {n}")) })
        }))
        .expect("no error");
        assert_eq!(refused.machines, [("a".to_owned(), "no 1".to_owned()), ("b".to_owned(), "no 2".to_owned())]);
        let failed = futures::executor::block_on(each(calls, |n| async move {
            if n == 2 {
                Err(Error::service("x", "throttled", true))
            } else {
                Ok(Outcome::Done)
            }
        }));
        assert!(failed.is_err_and(|e| e.is_retryable()));
    }
}
