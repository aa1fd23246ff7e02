//! Deterministic names for new clusters: `<stem>-<5 chars>`, drawn from the plan's seed.
//!
//! The planner takes no randomness from the environment; the caller passes a seed (random in production,
//! fixed in tests), and the same seed always yields the same names.

/// Characters of generated suffixes: lowercase consonants and digits, so no word is spelt by accident.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A stream of suffixes derived from one seed (SplitMix64).
#[derive(Debug, Clone)]
pub struct Suffixes {
    state: u64,
}

impl Suffixes {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next five-character suffix.
    pub fn next_suffix(&mut self) -> String {
        let mut bits = self.next_u64();
        (0..5)
            .map(|_| {
                let c = ALPHABET[(bits % ALPHABET.len() as u64) as usize];
                bits /= ALPHABET.len() as u64;
                c as char
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_suffixes() {
        let a: Vec<_> = (0..3).scan(Suffixes::new(7), |s, _| Some(s.next_suffix())).collect();
        let b: Vec<_> = (0..3).scan(Suffixes::new(7), |s, _| Some(s.next_suffix())).collect();
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
        assert!(a.iter().all(|s| s.len() == 5));
    }
}
