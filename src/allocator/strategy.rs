//! Which free address a pool hands out next, and the random numbers the `Random` strategy uses.

use std::fmt;
use std::hash::{BuildHasher, RandomState};

/// The order in which a pool hands out its free addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// The lowest free address (the in-cluster provider's order).
    #[default]
    Lowest,
    /// Addresses this process has not seen released first, lowest first; then the address
    /// released longest ago. See [`MAX_REMEMBERED_RELEASES`](super::MAX_REMEMBERED_RELEASES).
    LeastRecentlyReleased,
    /// Any free address, each equally likely.
    Random,
}

impl Strategy {
    /// The name the pool's `allocationStrategy` field uses.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Lowest => "Lowest",
            Strategy::LeastRecentlyReleased => "LeastRecentlyReleased",
            Strategy::Random => "Random",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// splitmix64: small, fast, and good enough to spread picks evenly; not for secrets.
#[derive(Clone, Debug)]
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    /// Seeded from the operating system's randomness (through `std`'s hasher keys).
    pub(super) fn from_os() -> Rng {
        Rng::seeded(RandomState::new().hash_one(0x5eed_u64))
    }

    pub(super) fn seeded(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound > 0`), every value equally likely: draws are masked to
    /// the bound's bit length and redrawn when too large (fewer than two draws on average).
    pub(super) fn below(&mut self, bound: u128) -> u128 {
        if bound <= 1 {
            return 0;
        }
        let mask = u128::MAX >> (bound - 1).leading_zeros();
        loop {
            let draw = ((u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())) & mask;
            if draw < bound {
                return draw;
            }
        }
    }
}

#[cfg(test)]
#[path = "strategy_tests.rs"]
mod tests;
