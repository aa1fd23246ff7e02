//! The `Schedules` port: a pool's `schedules` kept in the cloud's scheduler, each firing a reconcile of the pool.
//!
//! A schedule only wakes the pool at a window's start; the planner works out which window is open from the pool
//! spec itself, so a missed or late firing is caught up by the next sweep.

use apiary_planner::Schedule;
use async_trait::async_trait;

use crate::error::Result;

/// A pool's cron schedules, kept in the cloud's scheduler.
#[async_trait]
pub trait Schedules: Send + Sync {
    /// Makes the pool's schedules exactly `schedules`: creates, updates and deletes as needed. Idempotent.
    async fn sync(&self, pool: &str, schedules: &[Schedule]) -> Result<()>;
}
