//! The set of allocated offsets in `[0, total)`, sparse where the space is sparse.
//!
//! Offsets are cut into chunks of 2^16. A chunk is in exactly one of three states:
//! - empty: stored nowhere (an unused /48 or /0 costs nothing);
//! - partial: a [`Container`] in `partial`, keyed by chunk index;
//! - full: covered by a run in `full`, an index of merged runs of full chunks.
//!
//! Because full runs are merged, the first chunk that is not full is chunk 0 or the chunk just
//! after the first run, so the lowest free offset is found without scanning.

use std::collections::BTreeMap;

use super::container::{CHUNK_BITS, CHUNK_SIZE, Container};
use super::ranges::Span;
use super::rank::{Found, Item, RankIndex};
use super::runs::{RunSet, btree_bytes};
use super::tally::Tally;

#[derive(Clone, Debug)]
pub(super) struct OffsetBitmap {
    /// `total - 1`; `None` when the space is empty.
    last_offset: Option<u128>,
    total: Tally,
    partial: BTreeMap<u128, Container>,
    /// Runs of chunk indexes whose every offset is set.
    full: RunSet,
    count: Tally,
    /// Order statistics over the used chunks, kept only where random picks are asked for.
    rank: Option<RankIndex>,
}

fn split(offset: u128) -> (u128, u16) {
    (offset >> CHUNK_BITS, (offset & u128::from(CHUNK_SIZE - 1)) as u16)
}

impl OffsetBitmap {
    #[must_use]
    pub(super) fn new(total: Tally) -> OffsetBitmap {
        let last_offset = (!total.is_zero()).then(|| total.sub(Tally::of(1)).saturating());
        OffsetBitmap {
            last_offset,
            total,
            partial: BTreeMap::new(),
            full: RunSet::default(),
            count: Tally::ZERO,
            rank: None,
        }
    }

    /// Number of set offsets (exact).
    #[must_use]
    pub(super) fn count(&self) -> Tally {
        self.count
    }

    /// Every offset is set (also true for an empty space). O(1).
    #[must_use]
    pub(super) fn is_full(&self) -> bool {
        self.count == self.total
    }

    /// Offsets in `chunk` (2^16, or fewer in the last chunk).
    fn capacity(&self, chunk: u128) -> u32 {
        match self.last_offset {
            Some(last) if chunk == last >> CHUNK_BITS => u32::from(split(last).1) + 1,
            Some(last) if chunk < last >> CHUNK_BITS => CHUNK_SIZE,
            _ => 0,
        }
    }

    /// Last offset of `chunk`.
    fn chunk_end(&self, chunk: u128) -> u128 {
        (chunk << CHUNK_BITS) + u128::from(self.capacity(chunk).saturating_sub(1))
    }

    #[must_use]
    pub(super) fn contains(&self, offset: u128) -> bool {
        let (chunk, low) = split(offset);
        match self.partial.get(&chunk) {
            Some(container) => container.contains(low),
            None => self.full.contains(chunk),
        }
    }

    /// Sets `offset`; true if it was clear. Offsets past the end are ignored.
    pub(super) fn insert(&mut self, offset: u128) -> bool {
        let added = self.insert_unindexed(offset);
        if added {
            self.reindex(split(offset).0, split(offset).0);
        }
        added
    }

    fn insert_unindexed(&mut self, offset: u128) -> bool {
        if self.last_offset.is_none_or(|last| offset > last) {
            return false;
        }
        let (chunk, low) = split(offset);
        let capacity = self.capacity(chunk);
        match self.partial.get_mut(&chunk) {
            Some(container) => {
                if !container.insert(low) {
                    return false;
                }
                if container.len() == capacity {
                    self.partial.remove(&chunk);
                    self.full.insert(chunk);
                }
            }
            None if self.full.contains(chunk) => return false,
            None if capacity == 1 => {
                self.full.insert(chunk);
            }
            None => {
                let mut container = Container::empty();
                container.insert(low);
                self.partial.insert(chunk, container);
            }
        }
        self.count = self.count.add(Tally::of(1));
        true
    }

    /// Clears `offset`; true if it was set.
    pub(super) fn remove(&mut self, offset: u128) -> bool {
        let removed = self.remove_unindexed(offset);
        if removed {
            self.reindex(split(offset).0, split(offset).0);
        }
        removed
    }

    fn remove_unindexed(&mut self, offset: u128) -> bool {
        let (chunk, low) = split(offset);
        if let Some(container) = self.partial.get_mut(&chunk) {
            if !container.remove(low) {
                return false;
            }
            if container.len() == 0 {
                self.partial.remove(&chunk);
            }
        } else if self.full.remove(chunk) {
            let capacity = self.capacity(chunk);
            if capacity > 1 {
                self.partial.insert(chunk, Container::full_except(capacity, low));
            }
        } else {
            return false;
        }
        self.count = self.count.sub(Tally::of(1));
        true
    }

    /// Sets and returns the lowest clear offset; `None` when full (answered from the count).
    pub(super) fn take_lowest(&mut self) -> Option<u128> {
        let offset = self.take_lowest_unindexed()?;
        self.reindex(split(offset).0, split(offset).0);
        Some(offset)
    }

    fn take_lowest_unindexed(&mut self) -> Option<u128> {
        if self.is_full() {
            return None;
        }
        let chunk = match self.full.first_run() {
            Some(run) if run.first == 0 => run.last.checked_add(1)?,
            _ => 0,
        };
        let capacity = self.capacity(chunk);
        let low = match self.partial.get_mut(&chunk) {
            Some(container) => {
                let low = container.lowest_absent();
                if low >= capacity {
                    return None; // unreachable while the invariants hold
                }
                container.insert(low as u16);
                if container.len() == capacity {
                    self.partial.remove(&chunk);
                    self.full.insert(chunk);
                }
                low
            }
            None if capacity == 0 => return None,
            None if capacity == 1 => {
                self.full.insert(chunk);
                0
            }
            None => {
                let mut container = Container::empty();
                container.insert(0);
                self.partial.insert(chunk, container);
                0
            }
        };
        self.count = self.count.add(Tally::of(1));
        Some((chunk << CHUNK_BITS) | u128::from(low))
    }

    /// Sets every offset of `span` (clipped to the space); returns how many were clear.
    pub(super) fn insert_span(&mut self, span: Span) -> Tally {
        let added = self.insert_span_unindexed(span);
        if !added.is_zero() {
            self.reindex(split(span.first).0, split(span.last).0);
        }
        added
    }

    fn insert_span_unindexed(&mut self, span: Span) -> Tally {
        let Some(last_offset) = self.last_offset else {
            return Tally::ZERO;
        };
        if span.first > last_offset {
            return Tally::ZERO;
        }
        let span = Span::new(span.first, span.last.min(last_offset));
        let (first_chunk, first_low) = split(span.first);
        let (last_chunk, last_low) = split(span.last);
        if first_chunk == last_chunk {
            return self.insert_in_chunk(first_chunk, first_low, last_low);
        }
        let mut added = Tally::ZERO;
        let mut whole_first = first_chunk;
        if first_low != 0 {
            added = added.add(self.insert_in_chunk(first_chunk, first_low, u16::MAX));
            whole_first += 1;
        }
        let mut whole_last = last_chunk;
        if span.last != self.chunk_end(last_chunk) {
            added = added.add(self.insert_in_chunk(last_chunk, 0, last_low));
            whole_last -= 1;
        }
        if whole_first <= whole_last {
            added = added.add(self.fill_chunks(whole_first, whole_last));
        }
        added
    }

    fn insert_in_chunk(&mut self, chunk: u128, lo: u16, hi: u16) -> Tally {
        let capacity = self.capacity(chunk);
        if lo == 0 && u32::from(hi) + 1 >= capacity {
            return self.fill_chunks(chunk, chunk);
        }
        if self.full.contains(chunk) {
            return Tally::ZERO;
        }
        let container = self.partial.entry(chunk).or_insert_with(Container::empty);
        let added = container.insert_span(lo, hi);
        if container.len() >= capacity {
            self.partial.remove(&chunk);
            self.full.insert(chunk);
        }
        self.count = self.count.add(Tally::of(u128::from(added)));
        Tally::of(u128::from(added))
    }

    /// Marks chunks `first..=last` full; returns how many offsets were clear in them.
    fn fill_chunks(&mut self, first: u128, last: u128) -> Tally {
        let chunks = Span::new(first, last);
        let mut already = Tally::ZERO;
        for run in self.full.overlapping(chunks) {
            let (from, to) = (run.first.max(first), run.last.min(last));
            already = already.add(Tally::span(from << CHUNK_BITS, self.chunk_end(to)));
        }
        let swallowed: Vec<u128> = self.partial.range(first..=last).map(|(&c, _)| c).collect();
        for chunk in swallowed {
            if let Some(container) = self.partial.remove(&chunk) {
                already = already.add(Tally::of(u128::from(container.len())));
            }
        }
        let _ = self.full.insert_span(chunks);
        let added = Tally::span(first << CHUNK_BITS, self.chunk_end(last)).sub(already);
        self.count = self.count.add(added);
        added
    }

    /// Keeps order statistics from now on, for [`take_nth_clear`](Self::take_nth_clear).
    /// O(c log c) for c used chunks, once.
    pub(super) fn keep_ranks(&mut self) {
        if self.rank.is_none() {
            self.rank = Some(RankIndex::default());
            self.reindex(0, u128::MAX >> CHUNK_BITS);
        }
    }

    /// Sets and returns the `k`-th clear offset (0-based); `None` when fewer are clear or ranks
    /// are not kept. O(log n).
    pub(super) fn take_nth_clear(&mut self, k: u128) -> Option<u128> {
        if Tally::of(k) >= self.total.sub(self.count) {
            return None;
        }
        let offset = match self.rank.as_ref()?.find_free(k) {
            Found::Offset(offset) => offset,
            Found::InChunk { chunk, nth } => {
                let low = self.partial.get(&chunk)?.nth_absent(nth);
                if low >= self.capacity(chunk) {
                    return None; // unreachable while the index agrees with the chunks
                }
                (chunk << CHUNK_BITS) | u128::from(low)
            }
        };
        self.insert(offset).then_some(offset)
    }

    /// Brings the order statistics of chunks `first..=last` up to date, widened to whole runs
    /// of full chunks so that no stale run is left half-covered.
    fn reindex(&mut self, first: u128, last: u128) {
        if self.rank.is_none() {
            return;
        }
        let mut lo = first;
        for probe in [Some(first), first.checked_sub(1)].into_iter().flatten() {
            if let Some(run) = self.full.run_containing(probe) {
                lo = lo.min(run.first);
            }
        }
        let mut hi = last;
        for probe in [Some(last), last.checked_add(1)].into_iter().flatten() {
            if let Some(run) = self.full.run_containing(probe) {
                hi = hi.max(run.last);
            }
        }
        let mut items: Vec<Item> = self
            .partial
            .range(lo..=hi)
            .map(|(&chunk, container)| Item {
                chunk,
                size: Tally::of(u128::from(self.capacity(chunk))),
                used: Tally::of(u128::from(container.len())),
            })
            .collect();
        for run in self.full.overlapping(Span::new(lo, hi)) {
            let size = Tally::span(run.first << CHUNK_BITS, self.chunk_end(run.last));
            items.push(Item { chunk: run.first, size, used: size });
        }
        items.sort_unstable_by_key(|item| item.chunk);
        if let Some(rank) = &mut self.rank {
            rank.replace(lo, hi, items);
        }
    }

    /// Runs of set offsets, ascending and merged.
    #[must_use]
    pub(super) fn runs(&self) -> Vec<Span> {
        let mut runs: Vec<Span> = Vec::new();
        let mut push = |span: Span| match runs.last_mut() {
            Some(last) if last.last.checked_add(1) == Some(span.first) => last.last = span.last,
            _ => runs.push(span),
        };
        let mut full = self.full.iter().peekable();
        let mut partial = self.partial.iter().peekable();
        loop {
            let next_full = full.peek().map(|run| run.first);
            let next_partial = partial.peek().map(|&(&chunk, _)| chunk);
            let full_comes_first = match (next_full, next_partial) {
                (None, None) => break,
                (Some(f), Some(p)) => f < p,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            if full_comes_first {
                if let Some(run) = full.next() {
                    push(Span::new(run.first << CHUNK_BITS, self.chunk_end(run.last)));
                }
            } else if let Some((&chunk, container)) = partial.next() {
                let base = chunk << CHUNK_BITS;
                container.for_each_run(|lo, hi| {
                    push(Span::new(base + u128::from(lo), base + u128::from(hi)));
                });
            }
        }
        runs
    }

    /// Estimated heap bytes: map nodes, containers' own heap, and the full-run index.
    /// O(number of partial chunks).
    #[must_use]
    pub(super) fn heap_bytes(&self) -> usize {
        btree_bytes::<u128, Container>(self.partial.len())
            + self.partial.values().map(Container::heap_bytes).sum::<usize>()
            + self.full.heap_bytes()
    }
}

#[cfg(test)]
#[path = "bitmap_tests.rs"]
mod tests;
