//! A small seeded random number generator (SplitMix64), so every random choice the simulator
//! makes (injected faults, simulated machine failures) is reproducible from a seed, with no
//! global state.
//!
//! Responsibility: uniform `u64`s, probabilities, and per-name draws independent of order.
//! Inputs: a seed. Outputs: numbers. Pure.

/// SplitMix64: tiny, fast, and good enough for simulation (not for cryptography).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for one named thing under a seed: the same `(seed, name)` always gives the
    /// same sequence, whatever else was drawn before.
    pub fn for_name(seed: u64, name: &str) -> Self {
        // FNV-1a of the name, mixed with the seed.
        let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let mut rng = Self::new(seed ^ hash);
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        // 53 random bits are exactly representable in an f64.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to `[0, 1]`); draws nothing when `p <= 0`.
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        assert_eq!(a, (0..5).map(|_| r.next_u64()).collect::<Vec<_>>());
        assert_ne!(Rng::new(8).next_u64(), a[0]);
    }

    #[test]
    fn floats_are_in_range_and_chances_roughly_right() {
        let mut r = Rng::new(1);
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2_000..3_000).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| (0.0..1.0).contains(&r.next_f64())));
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }

    #[test]
    fn per_name_draws_do_not_depend_on_order() {
        let x = Rng::for_name(3, "m-1").next_u64();
        let _ = Rng::for_name(3, "m-2").next_u64();
        assert_eq!(Rng::for_name(3, "m-1").next_u64(), x);
        assert_ne!(Rng::for_name(3, "m-2").next_u64(), x);
    }
}
