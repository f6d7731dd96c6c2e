//! Step 5 of the contract: when a deleted claim's address may go (pure).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::index::PoolFacts;

/// What to do for a claim that is being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// Keep the address until the pool's reuse grace period has passed.
    WaitGracePeriod(Duration),
    /// Delete the `IPAddress`, free the address, drop the claim's finalizer.
    Now,
}

/// The pool's `addressReuseGracePeriodSeconds` holds the address (and the claim's deletion) until
/// `deletionTimestamp + grace`. A pool that is gone or being deleted holds nothing.
pub fn plan(deleted_at: Timestamp, pool: Option<&PoolFacts>, now: Timestamp) -> Release {
    let grace = match pool {
        Some(p) if !p.deleting && p.grace_period_seconds > 0 => p.grace_period_seconds,
        _ => return Release::Now,
    };
    let until = deleted_at.saturating_add(SignedDuration::from_secs(grace)).unwrap_or(Timestamp::MAX);
    match now.duration_until(until) {
        left if left.is_positive() => Release::WaitGracePeriod(left.unsigned_abs()),
        _ => Release::Now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(grace: i64, deleting: bool) -> PoolFacts {
        PoolFacts { grace_period_seconds: grace, deleting, ..PoolFacts::default() }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).expect("a valid timestamp")
    }

    #[test]
    fn grace_period_holds_the_address_until_it_has_passed() {
        assert_eq!(plan(at(1000), Some(&pool(60, false)), at(1010)), Release::WaitGracePeriod(Duration::from_secs(50)));
        assert_eq!(plan(at(1000), Some(&pool(60, false)), at(1060)), Release::Now);
    }

    #[test]
    fn without_grace_period_the_address_goes_at_once() {
        assert_eq!(plan(at(1000), Some(&pool(0, false)), at(1000)), Release::Now);
    }

    #[test]
    fn pool_being_deleted_or_gone_skips_the_grace_period() {
        assert_eq!(plan(at(1000), Some(&pool(60, true)), at(1001)), Release::Now);
        assert_eq!(plan(at(1000), None, at(1001)), Release::Now);
    }
}
