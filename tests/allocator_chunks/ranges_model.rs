//! The model of `allocator_chunks`: sets of `u128` values kept as sorted, disjoint, non-touching
//! inclusive ranges (so that a /64 costs one range), and counts up to 2^128.

/// A count up to 2^128 (one more than `u128` holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Big {
    carry: bool,
    low: u128,
}

impl Big {
    pub fn add(self, other: Big) -> Big {
        let (low, over) = self.low.overflowing_add(other.low);
        Big { carry: self.carry || other.carry || over, low }
    }

    /// `self - other`, for `other <= self`.
    pub fn sub(self, other: Big) -> Big {
        let (low, borrow) = self.low.overflowing_sub(other.low);
        Big { carry: self.carry && !other.carry && !borrow, low }
    }

    pub fn saturating(self) -> u128 {
        if self.carry { u128::MAX } else { self.low }
    }

    pub fn exceeds_u128(&self) -> bool {
        self.carry
    }

    fn of_range(a: u128, b: u128) -> Big {
        let (low, over) = (b - a).overflowing_add(1);
        Big { carry: over, low }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set(Vec<(u128, u128)>);

impl Set {
    pub fn of(ranges: impl IntoIterator<Item = (u128, u128)>) -> Set {
        let mut all: Vec<(u128, u128)> = ranges.into_iter().collect();
        all.sort_unstable();
        let mut merged: Vec<(u128, u128)> = Vec::new();
        for (a, b) in all {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        Set(merged)
    }

    pub fn ranges(&self) -> impl Iterator<Item = (u128, u128)> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, v: u128) -> bool {
        let at = self.0.partition_point(|&(_, b)| b < v);
        self.0.get(at).is_some_and(|&(a, _)| a <= v)
    }

    pub fn size(&self) -> Big {
        self.0.iter().fold(Big::default(), |sum, &(a, b)| sum.add(Big::of_range(a, b)))
    }

    pub fn union(&self, other: &Set) -> Set {
        Set::of(self.ranges().chain(other.ranges()))
    }

    pub fn intersect(&self, other: &Set) -> Set {
        let mut both = Vec::new();
        for &(a, b) in &self.0 {
            for &(c, d) in other.0.iter().filter(|&&(c, d)| c <= b && d >= a) {
                both.push((a.max(c), b.min(d)));
            }
        }
        Set::of(both)
    }

    pub fn minus(&self, other: &Set) -> Set {
        let mut left = Vec::new();
        for &(first, last) in &self.0 {
            let mut from = Some(first);
            for &(a, b) in other.0.iter().filter(|&&(a, b)| a <= last && b >= first) {
                let Some(start) = from else { break };
                if a > start {
                    left.push((start, a - 1));
                }
                from = (b < last).then(|| b + 1);
            }
            left.extend(from.map(|start| (start, last)));
        }
        Set(left)
    }

    pub fn insert(&mut self, a: u128, b: u128) {
        *self = self.union(&Set(vec![(a, b)]));
    }

    pub fn remove(&mut self, a: u128, b: u128) {
        *self = self.minus(&Set(vec![(a, b)]));
    }

    /// The lowest value of `self` that `other` lacks.
    pub fn lowest_outside(&self, other: &Set) -> Option<u128> {
        self.minus(other).0.first().map(|&(a, _)| a)
    }

    /// The first `n` values, ascending.
    pub fn first_values(&self, n: usize) -> Vec<u128> {
        self.ranges().flat_map(|(a, b)| a..=b).take(n).collect()
    }
}

#[test]
fn the_model_sets_and_counts_are_right_at_the_edges() {
    let whole = Set::of([(0, u128::MAX)]);
    assert!(whole.size().exceeds_u128() && whole.size().saturating() == u128::MAX);
    let holed = whole.minus(&Set::of([(5, 5)]));
    assert_eq!((holed.size().exceeds_u128(), holed.size().saturating()), (false, u128::MAX));
    assert_eq!(whole.size().sub(holed.size()), Set::of([(9, 9)]).size());
    assert_eq!(Set::of([(1, 3), (4, 6), (9, 9)]).ranges().collect::<Vec<_>>(), [(1, 6), (9, 9)]);
    assert_eq!(Set::of([(1, 6)]).intersect(&Set::of([(0, 2), (5, 9)])), Set::of([(1, 2), (5, 6)]));
    assert_eq!(Set::of([(0, 9)]).lowest_outside(&Set::of([(0, 3), (5, 5)])), Some(4));
    assert!(Set::of([(3, 7)]).contains(7) && !Set::of([(3, 7)]).contains(8));
}
