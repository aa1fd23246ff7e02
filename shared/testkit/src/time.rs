//! Virtual time, and the [`Clock`] port on it.

use std::sync::Mutex;
use std::time::Duration;

use apiary_planner::Timestamp;
use apiary_ports::clock::Clock;
use async_trait::async_trait;
use chrono::TimeDelta;

/// The world's current time; only the test or simulation moves it.
#[derive(Debug)]
pub struct Time(Mutex<Timestamp>);

impl Time {
    /// Time starting at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Mutex::new(start))
    }

    /// Now.
    pub fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves to `t` (never backwards).
    pub fn set(&self, t: Timestamp) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now = (*now).max(t);
    }

    /// Moves forward by `d`.
    pub fn advance(&self, d: TimeDelta) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now += d.max(TimeDelta::zero());
    }
}

/// A SplitMix64 stream: small, fast, and the same numbers for the same seed on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A number in [0, n) (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// The [`Clock`] of a world: its virtual time, seeds from a fixed stream, and sleeps that move time forward
/// (the world stands still while a handler waits).
#[derive(Debug)]
pub struct VirtualClock {
    time: std::sync::Arc<Time>,
    seeds: Mutex<SplitMix>,
}

impl VirtualClock {
    /// The clock on `time`, drawing seeds from `seed`.
    pub fn new(time: std::sync::Arc<Time>, seed: u64) -> Self {
        Self { time, seeds: Mutex::new(SplitMix::new(seed)) }
    }
}

#[async_trait]
impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        self.time.now()
    }

    fn seed(&self) -> u64 {
        self.seeds.lock().unwrap_or_else(|e| e.into_inner()).next_u64()
    }

    async fn sleep(&self, duration: Duration) {
        self.time.advance(TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX));
    }
}
