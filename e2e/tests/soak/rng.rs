//! A small seeded generator (xorshift64*): the same seed gives the same fault plan and the same
//! workload choices, so that a failing run can be replayed with `SOAK_SEED`.

use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        // Spread the seed's bits first (splitmix64), so that seeds 1, 2, 3 start far apart; the
        // state must never be zero.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng { state: (z ^ (z >> 31)).max(1) }
    }

    /// An independent generator for another task, derived from this one.
    pub fn fork(&mut self) -> Rng {
        Rng::seeded(self.next())
    }

    pub fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A duration between `low` and `high` seconds, to the millisecond.
    pub fn seconds(&mut self, low: f64, high: f64) -> Duration {
        let millis = self.between((low * 1000.0) as u64, (high * 1000.0) as u64);
        Duration::from_millis(millis)
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_gives_one_sequence_and_another_seed_another() {
        let run = |seed| (0..5).map(|_| Rng::seeded(seed).fork().next()).collect::<Vec<_>>();
        assert_eq!(run(7), run(7));
        let (mut a, mut b) = (Rng::seeded(7), Rng::seeded(8));
        assert_ne!((a.next(), a.next()), (b.next(), b.next()));
    }

    #[test]
    fn between_stays_within_its_bounds_and_reaches_both() {
        let mut rng = Rng::seeded(1);
        let drawn: Vec<u64> = (0..1000).map(|_| rng.between(3, 6)).collect();
        assert!(drawn.iter().all(|n| (3..=6).contains(n)));
        assert!(drawn.contains(&3) && drawn.contains(&6));
    }
}
