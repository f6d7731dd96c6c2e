//! A mutable set of integer values kept as merged runs in a `BTreeMap` (first -> last):
//! the index of full chunks, and a pool's out-of-range addresses. Every operation is O(log r)
//! for r runs, plus the runs a range insertion swallows.

use std::collections::BTreeMap;
use std::mem::size_of;

use super::ranges::Span;
use super::tally::Tally;

#[derive(Clone, Debug, Default)]
pub(super) struct RunSet {
    /// first -> last, disjoint and never adjacent.
    runs: BTreeMap<u128, u128>,
    count: Tally,
}

impl RunSet {
    /// Number of values held (exact).
    #[must_use]
    pub(super) fn count(&self) -> Tally {
        self.count
    }

    /// The run holding `value`.
    #[must_use]
    pub(super) fn run_containing(&self, value: u128) -> Option<Span> {
        let (&first, &last) = self.runs.range(..=value).next_back()?;
        (value <= last).then_some(Span { first, last })
    }

    #[must_use]
    pub(super) fn contains(&self, value: u128) -> bool {
        self.run_containing(value).is_some()
    }

    /// The lowest run.
    #[must_use]
    pub(super) fn first_run(&self) -> Option<Span> {
        self.runs.first_key_value().map(|(&first, &last)| Span { first, last })
    }

    /// Runs in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = Span> + '_ {
        self.runs.iter().map(|(&first, &last)| Span { first, last })
    }

    /// Runs overlapping `span`, in ascending order.
    pub(super) fn overlapping(&self, span: Span) -> impl Iterator<Item = Span> + '_ {
        let before = self.run_containing(span.first).filter(|run| run.first < span.first);
        before.into_iter().chain(self.runs.range(span.first..=span.last).map(|(&first, &last)| Span { first, last }))
    }

    /// Adds one value; true if it was not there.
    pub(super) fn insert(&mut self, value: u128) -> bool {
        self.insert_span(Span::new(value, value)) == Tally::of(1)
    }

    /// Adds every value of `span`; returns how many were not there.
    pub(super) fn insert_span(&mut self, span: Span) -> Tally {
        let mut merged = span;
        let mut already = Tally::ZERO;
        // A run ending just before `span` (or overlapping its start) is absorbed.
        let reach_back = span.first.saturating_sub(1);
        if let Some((&first, &last)) = self.runs.range(..=reach_back).next_back()
            && last >= reach_back
        {
            self.runs.remove(&first);
            merged.first = first;
            merged.last = merged.last.max(last);
            if last >= span.first {
                already = already.add(Span::new(span.first, last.min(span.last)).len());
            }
        }
        // Runs starting inside `span`, or just after it, are absorbed.
        let reach_forward = span.last.saturating_add(1);
        let swallowed: Vec<(u128, u128)> =
            self.runs.range(span.first..=reach_forward).map(|(&first, &last)| (first, last)).collect();
        for (first, last) in swallowed {
            self.runs.remove(&first);
            merged.last = merged.last.max(last);
            if first <= span.last {
                already = already.add(Span::new(first, last.min(span.last)).len());
            }
        }
        self.runs.insert(merged.first, merged.last);
        let added = span.len().sub(already);
        self.count = self.count.add(added);
        added
    }

    /// Removes one value; true if it was there.
    pub(super) fn remove(&mut self, value: u128) -> bool {
        let Some(run) = self.run_containing(value) else {
            return false;
        };
        self.runs.remove(&run.first);
        if run.first < value {
            self.runs.insert(run.first, value - 1);
        }
        if value < run.last {
            self.runs.insert(value + 1, run.last);
        }
        self.count = self.count.sub(Tally::of(1));
        true
    }

    /// Estimate of heap bytes: B-tree nodes hold 11 entries and are about 2/3 full.
    #[must_use]
    pub(super) fn heap_bytes(&self) -> usize {
        btree_bytes::<u128, u128>(self.runs.len())
    }
}

/// Estimated heap bytes of a `BTreeMap<K, V>` with `len` entries: leaves of 11 slots about
/// 2/3 full, plus a pointer-sized header, plus internal nodes (about 1/7 of the leaves).
#[must_use]
pub(super) fn btree_bytes<K, V>(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let leaf = 11 * (size_of::<K>() + size_of::<V>()) + 16;
    let leaves = len.div_ceil(8);
    leaves * leaf + leaves.div_ceil(7) * (leaf + 12 * size_of::<usize>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(set: &RunSet) -> Vec<(u128, u128)> {
        set.iter().map(|s| (s.first, s.last)).collect()
    }

    #[test]
    fn inserting_merges_neighbours_and_counts_only_new_values() {
        let mut set = RunSet::default();
        assert!(set.insert(5));
        assert!(!set.insert(5));
        assert!(set.insert(7));
        assert_eq!(set.insert_span(Span::new(6, 6)), Tally::of(1));
        assert_eq!(runs(&set), [(5, 7)]);
        assert_eq!(set.insert_span(Span::new(0, 20)), Tally::of(18));
        assert_eq!(runs(&set), [(0, 20)]);
        assert_eq!(set.insert_span(Span::new(30, 40)), Tally::of(11));
        assert_eq!(set.insert_span(Span::new(21, 29)), Tally::of(9));
        assert_eq!(runs(&set), [(0, 40)]);
        assert_eq!(set.count(), Tally::of(41));
    }

    #[test]
    fn removing_splits_runs() {
        let mut set = RunSet::default();
        let _ = set.insert_span(Span::new(0, 10));
        assert!(set.remove(5));
        assert!(!set.remove(5));
        assert!(set.remove(0));
        assert!(set.remove(10));
        assert_eq!(runs(&set), [(1, 4), (6, 9)]);
        assert_eq!(set.count(), Tally::of(8));
        assert!(set.contains(4) && !set.contains(5));
    }

    #[test]
    fn runs_reach_both_ends_of_the_value_space() {
        let mut set = RunSet::default();
        assert_eq!(set.insert_span(Span::new(0, u128::MAX)), Tally::span(0, u128::MAX));
        assert!(set.count().exceeds_u128());
        assert!(set.remove(u128::MAX));
        assert!(set.remove(0));
        assert_eq!(set.count(), Tally::of(u128::MAX - 1));
        assert!(set.insert(u128::MAX));
        assert_eq!(runs(&set), [(1, u128::MAX)]);
    }

    #[test]
    fn overlapping_lists_the_runs_touching_a_span() {
        let mut set = RunSet::default();
        for v in [1, 5, 6, 9] {
            set.insert(v);
        }
        let found: Vec<_> = set.overlapping(Span::new(6, 9)).map(|s| (s.first, s.last)).collect();
        assert_eq!(found, [(5, 6), (9, 9)]);
    }
}
