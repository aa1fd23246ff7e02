//! A small, fast hasher (FNV-1a) for the planner's lookup tables keyed by short ids and names.
//!
//! SipHash's flood resistance buys nothing here (keys come from our own table) and costs a third of a large
//! plan. Only lookups use these tables: no output depends on their iteration order.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a, 64 bits.
#[derive(Debug, Clone, Copy)]
pub struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A map hashed with [`Fnv`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;
/// A set hashed with [`Fnv`].
pub type FastSet<K> = HashSet<K, BuildHasherDefault<Fnv>>;
