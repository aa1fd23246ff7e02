//! The shell's time and randomness: the planner takes both as arguments and never reads them itself.

use std::hash::{BuildHasher, Hasher};

use apiary_planner::Timestamp;

/// The current time.
pub fn now() -> Timestamp {
    std::time::SystemTime::now().into()
}

/// A fresh random seed for one plan (new cluster names are drawn from it).
pub fn seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(now().timestamp_nanos_opt().unwrap_or_default());
    h.finish()
}
