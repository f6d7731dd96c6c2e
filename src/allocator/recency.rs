//! The order in which free offsets were released, for the `LeastRecentlyReleased` strategy.
//!
//! A released offset is "parked": it stays set in the pool's bitmap (so the lowest-free search
//! passes over it) and is queued here by release time. At most [`MAX_REMEMBERED_RELEASES`]
//! are parked; releasing one more lets the oldest go back to the plain free addresses. Every
//! operation is O(log n) for n parked offsets.

use std::collections::BTreeMap;

use super::ranges::Span;

/// How many released addresses one pool family remembers the order of (about 3 MiB at most).
pub const MAX_REMEMBERED_RELEASES: usize = 32_768;

#[derive(Clone, Debug, Default)]
pub(super) struct ReleaseOrder {
    by_offset: BTreeMap<u128, u64>,
    by_age: BTreeMap<u64, u128>,
    next: u64,
}

impl ReleaseOrder {
    pub(super) fn len(&self) -> usize {
        self.by_offset.len()
    }

    pub(super) fn contains(&self, offset: u128) -> bool {
        self.by_offset.contains_key(&offset)
    }

    /// Queues `offset` as released last. Returns the offset that fell out of the memory, if any.
    pub(super) fn park(&mut self, offset: u128) -> Option<u128> {
        self.unpark(offset);
        self.by_offset.insert(offset, self.next);
        self.by_age.insert(self.next, offset);
        self.next += 1;
        if self.by_offset.len() > MAX_REMEMBERED_RELEASES { self.pop_oldest() } else { None }
    }

    /// Forgets `offset`; true if it was parked.
    pub(super) fn unpark(&mut self, offset: u128) -> bool {
        match self.by_offset.remove(&offset) {
            Some(age) => self.by_age.remove(&age).is_some(),
            None => false,
        }
    }

    /// Forgets and returns the offset released longest ago.
    pub(super) fn pop_oldest(&mut self) -> Option<u128> {
        let (_, offset) = self.by_age.pop_first()?;
        self.by_offset.remove(&offset);
        Some(offset)
    }

    /// Forgets every parked offset of `span`; returns them.
    pub(super) fn unpark_span(&mut self, span: Span) -> Vec<u128> {
        let inside: Vec<u128> = self.by_offset.range(span.first..=span.last).map(|(&offset, _)| offset).collect();
        for &offset in &inside {
            self.unpark(offset);
        }
        inside
    }

    /// Estimated heap bytes of the two maps.
    pub(super) fn heap_bytes(&self) -> usize {
        super::runs::btree_bytes::<u128, u64>(self.len()) + super::runs::btree_bytes::<u64, u128>(self.len())
    }

    /// Parked offsets, released longest ago first.
    pub(super) fn oldest_first(&self) -> impl Iterator<Item = u128> + '_ {
        self.by_age.values().copied()
    }
}
