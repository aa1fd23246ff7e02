//! A conditional write that lost its condition is read again and tried again: the one loop every function uses,
//! with how many tries each kind of race gets.
//!
//! Every write that can race is conditional on what was read ([`Cond`](crate::store::Cond)). Losing the
//! condition ([`Error::Conflict`]) means someone else wrote first: the attempt re-reads and plans again. A race
//! that keeps being lost ends with the last conflict, and the caller says what that means for its request (a 503
//! to an API caller, a message back in its queue).

use crate::Error;

/// Tries for the power function's writes (a cluster it steps, its pool's tick item, the pool's credentials
/// condition): its message comes again, so a race lost a few times waits for the next delivery.
pub const STEP: u32 = 3;
/// Tries for an API request's writes (a pool, a claim, a claim's cluster): a caller waits on it, and a race lost
/// every time costs that caller a 503 to try again.
pub const REQUEST: u32 = 5;
/// Tries for a reconcile's plan, read and planned again after a lost condition or a moment's refusal by the table.
pub const PLAN: u32 = 5;

/// An error that says a conditional write lost its condition.
pub trait LostCondition {
    /// Whether this is one.
    fn lost_condition(&self) -> bool;
}

impl LostCondition for Error {
    fn lost_condition(&self) -> bool {
        matches!(self, Error::Conflict(_))
    }
}

/// Awaits `$attempt` (an `async` block, or a call that makes a future: made afresh for each try) until it does not
/// lose a condition ([`LostCondition`]), at most `$tries` times, and is what the last try returned. `$what` names
/// the race in the log. A macro, not a function taking a closure: the future stays a plain part of its caller's,
/// `Send` wherever the caller's is.
#[macro_export]
macro_rules! on_conflict {
    ($tries:expr, $what:expr, $attempt:expr $(,)?) => {{
        let mut tried: u32 = 0;
        loop {
            tried += 1;
            match $attempt.await {
                Err(e) if $crate::retry::again(&e, $what, tried, $tries) => {}
                done => break done,
            }
        }
    }};
}

/// Whether a try that failed with `e`, the `tried`th of at most `tries`, is made again: when it lost a condition and
/// tries are left. Logs it when so.
pub fn again(e: &impl LostCondition, what: &str, tried: u32, tries: u32) -> bool {
    let again = e.lost_condition() && tried < tries;
    if again {
        tracing::info!(what, tried, "lost a condition; reading again");
    }
    again
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> Error {
        Error::Conflict("taken".into())
    }

    #[tokio::test]
    async fn a_lost_condition_is_tried_again_until_one_holds() {
        let mut calls = 0;
        let got = on_conflict!(STEP, "test", async {
            calls += 1;
            if calls < 3 {
                Err(lost())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(got.expect("the third try holds"), 3);
    }

    #[tokio::test]
    async fn a_race_lost_every_time_ends_with_the_last_conflict_after_its_tries() {
        let mut calls = 0;
        let got: Result<(), Error> = on_conflict!(STEP, "test", async {
            calls += 1;
            Err(lost())
        });
        assert!(matches!(got, Err(Error::Conflict(_))));
        assert_eq!(calls, STEP);
    }

    #[tokio::test]
    async fn any_other_error_ends_at_once() {
        let mut calls = 0;
        let got: Result<(), Error> = on_conflict!(REQUEST, "test", async {
            calls += 1;
            Err(Error::Config("a setting is missing".into()))
        });
        assert!(matches!(got, Err(Error::Config(_))));
        assert_eq!(calls, 1);
    }
}
