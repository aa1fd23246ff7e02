//! The `Clock` port: the shell's time and randomness. The planner takes both as arguments; the handlers take them
//! from here, never from the environment, so a simulation can run them on virtual time with fixed seeds.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use apiary_planner::Timestamp;
use async_trait::async_trait;

/// Time and seeds.
#[async_trait]
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
    /// A fresh seed for one plan (new cluster names are drawn from it) or one token.
    fn seed(&self) -> u64;
    /// Waits `duration` (a long-polling request waiting for its claim).
    async fn sleep(&self, duration: Duration);
}

/// The machine's clock, a random seed per call, and tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        std::time::SystemTime::now().into()
    }

    fn seed(&self) -> u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(self.now().timestamp_nanos_opt().unwrap_or_default());
        h.finish()
    }

    async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}
