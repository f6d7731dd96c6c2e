//! The offset space: a pool's allocatable addresses (sorted, disjoint, merged ranges) laid end
//! to end as offsets `[0, total)`. Address -> offset and offset -> address are binary searches
//! over the ranges, O(log r).

use std::mem::size_of;

use super::ranges::Span;
use super::tally::Tally;

/// A range of address values and the offset of its first address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placed {
    values: Span,
    offset: u128,
}

#[derive(Clone, Debug, Default)]
pub(super) struct OffsetSpace {
    ranges: Vec<Placed>,
    total: Tally,
}

impl OffsetSpace {
    /// Lays out `allocatable` (normalized) in ascending order.
    #[must_use]
    pub(super) fn new(allocatable: &[Span]) -> OffsetSpace {
        let mut total = Tally::ZERO;
        let ranges = allocatable
            .iter()
            .map(|&values| {
                // Only a whole IPv6 space reaches 2^128, and then it is the only range.
                let placed = Placed { values, offset: total.saturating() };
                total = total.add(values.len());
                placed
            })
            .collect();
        OffsetSpace { ranges, total }
    }

    /// Number of offsets (exact, up to 2^128).
    #[must_use]
    pub(super) fn total(&self) -> Tally {
        self.total
    }

    fn range_of_value(&self, value: u128) -> Option<&Placed> {
        let after = self.ranges.partition_point(|r| r.values.first <= value);
        let placed = self.ranges.get(after.checked_sub(1)?)?;
        placed.values.contains(value).then_some(placed)
    }

    fn range_of_offset(&self, offset: u128) -> Option<&Placed> {
        let after = self.ranges.partition_point(|r| r.offset <= offset);
        let placed = self.ranges.get(after.checked_sub(1)?)?;
        (offset - placed.offset <= placed.values.last - placed.values.first).then_some(placed)
    }

    /// The offset of an address value, if it is allocatable.
    #[must_use]
    pub(super) fn offset_of(&self, value: u128) -> Option<u128> {
        let placed = self.range_of_value(value)?;
        Some(placed.offset + (value - placed.values.first))
    }

    /// The address value at `offset`, if `offset < total`.
    #[must_use]
    pub(super) fn value_at(&self, offset: u128) -> Option<u128> {
        let placed = self.range_of_offset(offset)?;
        Some(placed.values.first + (offset - placed.offset))
    }

    /// Splits a span of address values into the offsets of its allocatable part (`inside`)
    /// and the values of the rest (`outside`), both in ascending order.
    pub(super) fn partition(&self, values: Span, mut inside: impl FnMut(Span), mut outside: impl FnMut(Span)) {
        let start = self.ranges.partition_point(|r| r.values.last < values.first);
        let mut next_outside = Some(values.first);
        for placed in &self.ranges[start..] {
            if placed.values.first > values.last {
                break;
            }
            let first = placed.values.first.max(values.first);
            let last = placed.values.last.min(values.last);
            if let Some(gap_start) = next_outside.filter(|gap| *gap < first) {
                outside(Span::new(gap_start, first - 1));
            }
            let offset = placed.offset + (first - placed.values.first);
            inside(Span::new(offset, offset + (last - first)));
            next_outside = last.checked_add(1).filter(|next| *next <= values.last);
        }
        if let Some(gap_start) = next_outside {
            outside(Span::new(gap_start, values.last));
        }
    }

    /// The address values of a span of offsets (clipped to the space), ascending.
    pub(super) fn values_of(&self, offsets: Span, mut visit: impl FnMut(Span)) {
        let start = self.ranges.partition_point(|r| r.offset <= offsets.first).saturating_sub(1);
        for placed in &self.ranges[start..] {
            let width = placed.values.last - placed.values.first;
            let range_last = placed.offset + width;
            if placed.offset > offsets.last {
                break;
            }
            if range_last < offsets.first {
                continue;
            }
            let first = placed.offset.max(offsets.first) - placed.offset;
            let last = range_last.min(offsets.last) - placed.offset;
            visit(Span::new(placed.values.first + first, placed.values.first + last));
        }
    }

    /// The allocatable address ranges.
    pub(super) fn value_ranges(&self) -> impl Iterator<Item = Span> + '_ {
        self.ranges.iter().map(|placed| placed.values)
    }

    #[must_use]
    pub(super) fn heap_bytes(&self) -> usize {
        self.ranges.capacity() * size_of::<Placed>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(list: &[(u128, u128)]) -> OffsetSpace {
        let spans: Vec<Span> = list.iter().map(|&(a, b)| Span::new(a, b)).collect();
        OffsetSpace::new(&spans)
    }

    #[test]
    fn offsets_run_across_ranges_without_gaps() {
        let space = space(&[(10, 14), (20, 20), (30, 39)]);
        assert_eq!(space.total(), Tally::of(16));
        let offsets: Vec<_> = [10, 14, 20, 30, 39].map(|v| space.offset_of(v)).to_vec();
        assert_eq!(offsets, [Some(0), Some(4), Some(5), Some(6), Some(15)]);
        assert_eq!(space.offset_of(15), None);
        assert_eq!(space.offset_of(9), None);
        assert_eq!(space.offset_of(40), None);
        for offset in 0..16 {
            let value = space.value_at(offset).unwrap();
            assert_eq!(space.offset_of(value), Some(offset));
        }
        assert_eq!(space.value_at(16), None);
    }

    #[test]
    fn a_whole_ipv6_space_maps_every_offset() {
        let space = space(&[(0, u128::MAX)]);
        assert!(space.total().exceeds_u128());
        assert_eq!(space.value_at(u128::MAX), Some(u128::MAX));
        assert_eq!(space.offset_of(u128::MAX), Some(u128::MAX));
    }

    #[test]
    fn partition_separates_allocatable_offsets_from_outside_values() {
        let space = space(&[(10, 14), (20, 20), (30, 39)]);
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        space.partition(Span::new(12, 33), |s| inside.push((s.first, s.last)), |s| outside.push((s.first, s.last)));
        assert_eq!(inside, [(2, 4), (5, 5), (6, 9)]);
        assert_eq!(outside, [(15, 19), (21, 29)]);
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        space.partition(
            Span::new(0, u128::MAX),
            |s| inside.push((s.first, s.last)),
            |s| outside.push((s.first, s.last)),
        );
        assert_eq!(inside.len(), 3);
        assert_eq!(outside, [(0, 9), (15, 19), (21, 29), (40, u128::MAX)]);
    }

    #[test]
    fn values_of_offsets_split_at_range_boundaries() {
        let space = space(&[(10, 14), (20, 20), (30, 39)]);
        let mut values = Vec::new();
        space.values_of(Span::new(3, 7), |s| values.push((s.first, s.last)));
        assert_eq!(values, [(13, 14), (20, 20), (30, 31)]);
    }
}
