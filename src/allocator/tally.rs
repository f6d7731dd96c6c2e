//! An exact count of addresses from 0 to 2^128 inclusive.
//!
//! A whole IPv6 space has 2^128 addresses, one more than `u128` holds. Counts are kept exact in
//! this type and converted to `u128` (saturating at `u128::MAX`) only at the public boundary.

/// `value = carry * 2^128 + low`, with `carry` implying `low == 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Tally {
    carry: bool,
    low: u128,
}

impl Tally {
    pub(super) const ZERO: Tally = Tally { carry: false, low: 0 };
    const ALL: Tally = Tally { carry: true, low: 0 };

    #[must_use]
    pub(super) const fn of(low: u128) -> Tally {
        Tally { carry: false, low }
    }

    /// The number of values in `first..=last` (`first <= last`).
    #[must_use]
    pub(super) fn span(first: u128, last: u128) -> Tally {
        match (last.saturating_sub(first)).checked_add(1) {
            Some(low) => Tally::of(low),
            None => Tally::ALL,
        }
    }

    /// Sum, saturating at 2^128 (no count of one family's addresses can exceed it).
    #[must_use]
    pub(super) fn add(self, other: Tally) -> Tally {
        if self.carry || other.carry {
            return Tally::ALL;
        }
        match self.low.checked_add(other.low) {
            Some(low) => Tally::of(low),
            None => Tally::ALL,
        }
    }

    /// Difference, saturating at 0.
    #[must_use]
    pub(super) fn sub(self, other: Tally) -> Tally {
        match (self.carry, other.carry) {
            (_, true) => Tally::ZERO,
            (false, false) => Tally::of(self.low.saturating_sub(other.low)),
            (true, false) if other.low == 0 => self,
            // 2^128 - x = (u128::MAX - x) + 1, which fits for x >= 1.
            (true, false) => Tally::of(u128::MAX - other.low + 1),
        }
    }

    #[must_use]
    pub(super) fn is_zero(self) -> bool {
        !self.carry && self.low == 0
    }

    /// The value, or `u128::MAX` when it is 2^128.
    #[must_use]
    pub(super) fn saturating(self) -> u128 {
        if self.carry { u128::MAX } else { self.low }
    }

    /// True only for 2^128, the one value `u128` cannot hold.
    #[must_use]
    pub(super) fn exceeds_u128(self) -> bool {
        self.carry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_ipv6_space_counts_exactly_and_saturates_only_at_the_boundary() {
        let all = Tally::span(0, u128::MAX);
        assert!(all.exceeds_u128());
        assert_eq!(all.saturating(), u128::MAX);
        assert_eq!(all.sub(Tally::of(1)), Tally::of(u128::MAX));
        assert_eq!(all.sub(Tally::of(1)).add(Tally::of(1)), all);
        assert_eq!(all.sub(all), Tally::ZERO);
        assert_eq!(Tally::span(1, u128::MAX), Tally::of(u128::MAX));
    }

    #[test]
    fn arithmetic_never_wraps() {
        assert_eq!(Tally::of(3).sub(Tally::of(5)), Tally::ZERO);
        assert_eq!(Tally::of(u128::MAX).add(Tally::of(5)), Tally::span(0, u128::MAX));
        assert_eq!(Tally::span(5, 5), Tally::of(1));
        assert!(Tally::of(2) < Tally::span(0, u128::MAX));
    }
}
