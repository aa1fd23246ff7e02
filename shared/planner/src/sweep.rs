//! The sweep's rules: which pools a pass enqueues, and when a pass is a full one.
//!
//! The sweep is the level-triggered safety net. A pool is due when its wake-up time has passed, it has no status
//! yet, it is being deleted, or claims wait for clusters (a lost message would keep a user waiting). Installs and
//! deletions under way are not enough: each ends with the power function's message, and a busy pool has some
//! nearly all the time, so sweeping them every minute reconciled it every minute. A message lost on their way is
//! caught by the full pass instead. A full pass enqueues every pool, and a reconcile starts the tick of a pool
//! with clusters in motion and none live (any reconcile does); it is due when the last recorded full pass is at
//! least nine tenths of the interval old (so a pass that fires a little early does not slip a whole period),
//! whatever the sweep's own rate.

use chrono::TimeDelta;

use crate::model::{Pool, Timestamp};

/// How often a full pass is made by default.
pub const FULL_SWEEP_EVERY: TimeDelta = TimeDelta::minutes(10);

/// Whether `pool` needs a reconcile at `now` even if nobody asked, between full passes.
pub fn due(pool: &Pool, now: Timestamp) -> bool {
    let s = &pool.status;
    pool.next_wake_at.is_some_and(|t| t <= now)
        || s.pool_version.is_empty()
        || pool.deletion_requested_at.is_some()
        || s.pending_claims > 0
}

/// Whether a pass at `now` is a full one, given when the last full pass was recorded and the interval.
pub fn full_due(last_full: Option<Timestamp>, now: Timestamp, every: TimeDelta) -> bool {
    last_full.is_none_or(|last| now - last >= every * 9 / 10)
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::*;

    #[test]
    fn a_full_pass_is_due_once_the_last_is_nine_tenths_of_the_interval_old() {
        let t = Utc.with_ymd_and_hms(2026, 11, 23, 9, 3, 0).single().expect("time");
        let every = FULL_SWEEP_EVERY;
        assert!(full_due(None, t, every));
        assert!(!full_due(Some(t), t + TimeDelta::minutes(8), every));
        assert!(full_due(Some(t), t + TimeDelta::minutes(9), every));
        assert!(full_due(Some(t), t + TimeDelta::minutes(10) - TimeDelta::milliseconds(200), every));
    }
}
