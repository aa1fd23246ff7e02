//! How a claimant looks at a claim it waits on: soon after making it, then less and less often, down to once every
//! [`MOST`]: 0.25, 0.75, 1.75 and 3.75 s after, then every 2 s. A claim that becomes Ready is seen at most [`MOST`]
//! later, and hundreds of jobs waiting on one pool read it a few hundred times a second, not thousands.
//!
//! The CLI looks with one request each time, answered at once. A `GET` with `?wait=` takes the same looks inside
//! one request instead, and holds the claim API function while it waits: Lambda bills a function by the time it
//! runs, waiting or not, and a second of the claim API's wait costs about what API Gateway charges for a whole
//! request, so many short requests cost less than one long one (BENCHMARKS.md counts both).

use std::time::Duration;

/// The first gap, between making a claim (or a look's request) and the next look.
pub const FIRST: Duration = Duration::from_millis(250);
/// The longest gap between two looks.
pub const MOST: Duration = Duration::from_secs(2);

/// The gap after `gap`: twice it, at most [`MOST`].
pub fn next(gap: Duration) -> Duration {
    (gap * 2).min(MOST)
}

/// When each look comes, counted from the claim's making: 0.25, 0.75, 1.75, 3.75, 5.75 s and on, without end.
pub fn times() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FIRST), |g| Some(next(*g))).scan(Duration::ZERO, |at, gap| {
        *at += gap;
        Some(*at)
    })
}

/// The looks a claimant takes at a claim that became Ready `wait` after it was made: every look before then, and
/// the one that finds it Ready. None for a claim Ready at once (its making answered with the cluster).
pub fn looks(wait: Duration) -> usize {
    if wait.is_zero() {
        return 0;
    }
    times().take_while(|at| *at < wait).count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_looks_come_soon_then_every_two_seconds() {
        let first: Vec<Duration> = times().take(7).collect();
        assert_eq!(first, [0.25, 0.75, 1.75, 3.75, 5.75, 7.75, 9.75].map(secs));
        assert_eq!(next(Duration::from_secs(5)), MOST);
    }

    #[test]
    fn a_wait_takes_each_look_before_it_ends_and_the_one_that_sees_it_end() {
        assert_eq!(looks(Duration::ZERO), 0);
        assert_eq!(looks(secs(0.1)), 1);
        assert_eq!(looks(secs(0.25)), 1);
        assert_eq!(looks(secs(0.3)), 2);
        assert_eq!(looks(secs(3.75)), 4);
        // Ten minutes: four looks in the first 3.75 s, then one every 2 s.
        assert_eq!(looks(Duration::from_secs(600)), 4 + 299);
    }
}
