//! Spaces the status writes of pools apart during a storm of allocations.
//!
//! The counts of a busy pool change with every address. Alone, a pool's status is written at
//! most every `min`. When many pools are busy at once, they share a budget of writes per second:
//! each pool waits `busy pools / budget`, at most `max`. Once the storm ends, every pool's last
//! write follows its previous one within that interval, so the final status is exact and late
//! by `max` at worst. (A trailing debounce could put the write off for as long as a storm lasts.)

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::index::PoolKey;
use crate::sync::lock;

pub struct WriteThrottle {
    min: Duration,
    max: Duration,
    per_second: u32,
    last: Mutex<Busy>,
}

/// When each busy pool was last written. A pool not written for `2 * max` is idle again; idle
/// pools are forgotten at most once per `max`, not on every call, so that a call costs the same
/// with ten busy pools or ten thousand.
#[derive(Default)]
struct Busy {
    written: HashMap<PoolKey, Instant>,
    pruned: Option<Instant>,
}

impl WriteThrottle {
    /// Each pool at least `min` apart; all pools together `per_second` writes, with each pool
    /// waiting at most `max`.
    pub fn new(min: Duration, max: Duration, per_second: u32) -> Self {
        WriteThrottle { min, max: max.max(min), per_second: per_second.max(1), last: Mutex::default() }
    }

    fn last(&self) -> MutexGuard<'_, Busy> {
        // The map holds no invariant a panicking holder could break.
        lock(&self.last)
    }

    /// How long to wait before the next write of `pool`, if at all.
    pub fn wait(&self, pool: &PoolKey) -> Option<Duration> {
        self.wait_at(pool, Instant::now())
    }

    fn wait_at(&self, pool: &PoolKey, now: Instant) -> Option<Duration> {
        let mut last = self.last();
        let idle_after = self.max * 2;
        if last.pruned.is_none_or(|at| now.saturating_duration_since(at) >= self.max) {
            last.written.retain(|_, at| now.saturating_duration_since(*at) < idle_after);
            last.pruned = Some(now);
        }
        let since = now.saturating_duration_since(*last.written.get(pool)?);
        if since >= idle_after {
            return None;
        }
        let busy = u32::try_from(last.written.len()).unwrap_or(u32::MAX);
        let interval = (Duration::from_secs(1) * busy / self.per_second).clamp(self.min, self.max);
        (since < interval).then(|| interval - since)
    }

    /// Notes a write of `pool` now.
    pub fn wrote(&self, pool: &PoolKey) {
        self.wrote_at(pool, Instant::now());
    }

    fn wrote_at(&self, pool: &PoolKey, now: Instant) {
        self.last().written.insert(pool.clone(), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn throttle() -> WriteThrottle {
        WriteThrottle::new(MS * 500, MS * 5000, 20)
    }

    fn pool(i: usize) -> PoolKey {
        PoolKey::in_cluster("ns", &format!("p{i}"))
    }

    #[test]
    fn a_pool_written_just_now_waits_and_another_pool_does_not() {
        let throttle = throttle();
        let t = Instant::now();
        assert_eq!(throttle.wait_at(&pool(0), t), None);
        throttle.wrote_at(&pool(0), t);
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 100), Some(MS * 400));
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 500), None);
        assert_eq!(throttle.wait_at(&PoolKey::global("b"), t), None);
    }

    #[test]
    fn many_busy_pools_share_the_budget_up_to_the_longest_wait() {
        let throttle = throttle();
        let t = Instant::now();
        for i in 0..40 {
            throttle.wrote_at(&pool(i), t);
        }
        // 40 pools at 20 writes per second: each every 2 s.
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 500), Some(MS * 1500));
        for i in 40..1000 {
            throttle.wrote_at(&pool(i), t);
        }
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 500), Some(MS * 4500));
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 5000), None);
    }

    #[test]
    fn idle_pools_are_forgotten_and_no_longer_count() {
        let throttle = throttle();
        let t = Instant::now();
        for i in 0..100 {
            throttle.wrote_at(&pool(i), t);
        }
        let later = t + MS * 10_000;
        throttle.wrote_at(&pool(0), later);
        assert_eq!(throttle.wait_at(&pool(0), later + MS * 100), Some(MS * 400));
        assert_eq!(throttle.wait_at(&pool(1), later), None);
        assert_eq!(throttle.last().written.len(), 1);
    }

    #[test]
    fn idle_pools_are_swept_once_per_longest_wait_and_count_as_idle_meanwhile() {
        let throttle = throttle();
        let t = Instant::now();
        throttle.wrote_at(&pool(0), t);
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 100), Some(MS * 400), "the first call sweeps");
        throttle.wrote_at(&pool(1), t + MS * 5_000);
        assert_eq!(throttle.wait_at(&pool(1), t + MS * 5_100), Some(MS * 400), "sweeps again, 5 s on");
        // 4.95 s after that sweep none runs, yet pool 0, written 10.05 s ago, is idle.
        assert_eq!(throttle.wait_at(&pool(0), t + MS * 10_050), None);
        assert_eq!(throttle.last().written.len(), 2, "no sweep within 5 s of the last");
        // 5.1 s after it, a sweep drops pool 0 and keeps pool 1 (written 5.2 s ago).
        assert_eq!(throttle.wait_at(&pool(1), t + MS * 10_200), None);
        assert_eq!(throttle.last().written.len(), 1);
    }
}
