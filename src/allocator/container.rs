//! One chunk of 2^16 offsets that is neither empty nor full, stored in the smallest of three
//! forms (as in Roaring bitmaps): up to 6 values inline, a sorted array up to 4096 values, or
//! a 65,536-bit bitmap with a 1,024-bit summary of its full words.

use std::fmt;
use std::mem::size_of;

/// Bits of an offset that select the value inside its chunk.
pub(super) const CHUNK_BITS: u32 = 16;
/// Offsets per chunk.
pub(super) const CHUNK_SIZE: u32 = 1 << CHUNK_BITS;

const SMALL_MAX: usize = 6;
/// An array shrinks to inline form at this length (hysteresis against flapping).
const SMALL_SHRINK: usize = 4;
const ARRAY_MAX: usize = 4096;
/// A bitmap shrinks to an array at this count (hysteresis against flapping).
const BITMAP_SHRINK: u32 = 2048;
const WORDS: usize = (CHUNK_SIZE / 64) as usize;

#[derive(Clone, Debug)]
pub(super) enum Container {
    /// Sorted values, inline: no heap at all for sparse pools.
    Small { len: u8, values: [u16; SMALL_MAX] },
    /// Sorted values, more than `SMALL_MAX`, at most `ARRAY_MAX`. Boxed so that a container
    /// stays two words: sparse pools pay per chunk, dense chunks amortise the extra pointer.
    #[expect(clippy::box_collection, reason = "a thin pointer keeps Container at 16 bytes")]
    Array(Box<Vec<u16>>),
    /// More than `ARRAY_MAX` values (down to `BITMAP_SHRINK` once there).
    Bitmap(Box<Bits>),
}

#[derive(Clone)]
pub(super) struct Bits {
    words: [u64; WORDS],
    /// Bit `w` is set when `words[w]` is all ones: the lowest clear bit is found in 16 + 1 steps.
    full_words: [u64; WORDS / 64],
    count: u32,
}

impl fmt::Debug for Bits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bits").field("count", &self.count).finish()
    }
}

impl Bits {
    fn empty() -> Box<Bits> {
        Box::new(Bits { words: [0; WORDS], full_words: [0; WORDS / 64], count: 0 })
    }

    /// Values `0..capacity` (at most `CHUNK_SIZE`), written word by word.
    fn filled(capacity: u32) -> Box<Bits> {
        let capacity = capacity.min(CHUNK_SIZE);
        let mut bits = Bits::empty();
        let whole_words = (capacity / 64) as usize;
        bits.words[..whole_words].fill(u64::MAX);
        if let Some(word) = bits.words.get_mut(whole_words) {
            *word = (1u64 << (capacity % 64)) - 1;
        }
        for word in 0..whole_words {
            bits.full_words[word >> 6] |= 1 << (word & 63);
        }
        bits.count = capacity;
        bits
    }

    fn from_values(values: &[u16]) -> Box<Bits> {
        let mut bits = Bits::empty();
        for &value in values {
            bits.insert(value);
        }
        bits
    }

    fn contains(&self, value: u16) -> bool {
        let (word, bit) = (usize::from(value >> 6), value & 63);
        self.words[word] >> bit & 1 == 1
    }

    fn insert(&mut self, value: u16) -> bool {
        let (word, mask) = (usize::from(value >> 6), 1u64 << (value & 63));
        if self.words[word] & mask != 0 {
            return false;
        }
        self.words[word] |= mask;
        self.count += 1;
        if self.words[word] == u64::MAX {
            self.full_words[word >> 6] |= 1 << (word & 63);
        }
        true
    }

    fn remove(&mut self, value: u16) -> bool {
        let (word, mask) = (usize::from(value >> 6), 1u64 << (value & 63));
        if self.words[word] & mask == 0 {
            return false;
        }
        self.words[word] &= !mask;
        self.count -= 1;
        self.full_words[word >> 6] &= !(1 << (word & 63));
        true
    }

    /// Lowest clear bit, or `CHUNK_SIZE` when every bit is set.
    fn lowest_absent(&self) -> u32 {
        for (group, summary) in self.full_words.iter().enumerate() {
            if *summary != u64::MAX {
                let word = group * 64 + summary.trailing_ones() as usize;
                return (word as u32) * 64 + self.words[word].trailing_ones();
            }
        }
        CHUNK_SIZE
    }

    /// Sets `lo..=hi`; returns how many bits were newly set.
    fn insert_span(&mut self, lo: u16, hi: u16) -> u32 {
        let before = self.count;
        for word in usize::from(lo >> 6)..=usize::from(hi >> 6) {
            let from = if word == usize::from(lo >> 6) { lo & 63 } else { 0 };
            let to = if word == usize::from(hi >> 6) { hi & 63 } else { 63 };
            let mask = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.count += (mask & !self.words[word]).count_ones();
            self.words[word] |= mask;
            if self.words[word] == u64::MAX {
                self.full_words[word >> 6] |= 1 << (word & 63);
            }
        }
        self.count - before
    }

    /// The `nth` clear bit (0-based): a count down the words, at most 1,024 of them.
    fn nth_absent(&self, nth: u32) -> u32 {
        let mut left = nth;
        for (index, &word) in self.words.iter().enumerate() {
            let clear = !word;
            let count = clear.count_ones();
            if left < count {
                let mut rest = clear;
                for _ in 0..left {
                    rest &= rest - 1;
                }
                return index as u32 * 64 + rest.trailing_zeros();
            }
            left -= count;
        }
        CHUNK_SIZE + left
    }

    fn values(&self) -> Vec<u16> {
        let mut values = Vec::with_capacity(self.count as usize);
        for (word_index, &word) in self.words.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let bit = rest.trailing_zeros();
                values.push((word_index as u32 * 64 + bit) as u16);
                rest &= rest - 1;
            }
        }
        values
    }
}

impl Container {
    #[must_use]
    pub(super) fn empty() -> Container {
        Container::Small { len: 0, values: [0; SMALL_MAX] }
    }

    /// Every value of `0..capacity` except `hole` (a full chunk after one release).
    #[must_use]
    pub(super) fn full_except(capacity: u32, hole: u16) -> Container {
        let capacity = capacity.min(CHUNK_SIZE);
        if capacity as usize > ARRAY_MAX + 1 {
            let mut bits = Bits::filled(capacity);
            bits.remove(hole);
            return Container::Bitmap(bits);
        }
        let values = (0..capacity).filter(|v| *v != u32::from(hole));
        Container::from_sorted(values.map(|v| v as u16).collect())
    }

    fn from_sorted(values: Vec<u16>) -> Container {
        if values.len() <= SMALL_MAX {
            let mut inline = [0; SMALL_MAX];
            inline[..values.len()].copy_from_slice(&values);
            Container::Small { len: values.len() as u8, values: inline }
        } else if values.len() <= ARRAY_MAX {
            Container::Array(Box::new(values))
        } else {
            Container::Bitmap(Bits::from_values(&values))
        }
    }

    #[must_use]
    pub(super) fn len(&self) -> u32 {
        match self {
            Container::Small { len, .. } => u32::from(*len),
            Container::Array(values) => values.len() as u32,
            Container::Bitmap(bits) => bits.count,
        }
    }

    fn sorted(&self) -> &[u16] {
        match self {
            Container::Small { len, values } => &values[..usize::from(*len)],
            Container::Array(values) => values,
            Container::Bitmap(_) => &[],
        }
    }

    #[must_use]
    pub(super) fn contains(&self, value: u16) -> bool {
        match self {
            Container::Bitmap(bits) => bits.contains(value),
            other => other.sorted().binary_search(&value).is_ok(),
        }
    }

    /// Adds `value`; true if it was absent.
    pub(super) fn insert(&mut self, value: u16) -> bool {
        match self {
            Container::Bitmap(bits) => bits.insert(value),
            Container::Small { len, values } => {
                let present = &values[..usize::from(*len)];
                let Err(position) = present.binary_search(&value) else {
                    return false;
                };
                if usize::from(*len) < SMALL_MAX {
                    values.copy_within(position..usize::from(*len), position + 1);
                    values[position] = value;
                    *len += 1;
                } else {
                    let mut grown = Vec::with_capacity(4 * SMALL_MAX);
                    grown.extend_from_slice(present);
                    grown.insert(position, value);
                    *self = Container::Array(Box::new(grown));
                }
                true
            }
            Container::Array(values) => {
                let Err(position) = values.binary_search(&value) else {
                    return false;
                };
                if values.len() < ARRAY_MAX {
                    if values.len() == values.capacity() {
                        // Grow by a quarter, not double: at most 2.5 bytes per value.
                        let more = (values.len() / 4).max(16).min(ARRAY_MAX - values.len());
                        values.reserve_exact(more);
                    }
                    values.insert(position, value);
                } else {
                    let mut bits = Bits::from_values(values);
                    bits.insert(value);
                    *self = Container::Bitmap(bits);
                }
                true
            }
        }
    }

    /// Removes `value`; true if it was present.
    pub(super) fn remove(&mut self, value: u16) -> bool {
        match self {
            Container::Bitmap(bits) => {
                if !bits.remove(value) {
                    return false;
                }
                if bits.count <= BITMAP_SHRINK {
                    *self = Container::from_sorted(bits.values());
                }
                true
            }
            Container::Small { len, values } => {
                let Ok(position) = values[..usize::from(*len)].binary_search(&value) else {
                    return false;
                };
                values.copy_within(position + 1..usize::from(*len), position);
                *len -= 1;
                true
            }
            Container::Array(values) => {
                let Ok(position) = values.binary_search(&value) else {
                    return false;
                };
                values.remove(position);
                if values.len() <= SMALL_SHRINK {
                    *self = Container::from_sorted(std::mem::take(&mut **values));
                }
                true
            }
        }
    }

    /// The lowest value not present (`CHUNK_SIZE` if all are).
    #[must_use]
    pub(super) fn lowest_absent(&self) -> u32 {
        match self {
            Container::Bitmap(bits) => bits.lowest_absent(),
            other => lowest_gap(other.sorted()) as u32,
        }
    }

    /// The `nth` absent value (0-based); `CHUNK_SIZE` or more when fewer are absent.
    #[must_use]
    pub(super) fn nth_absent(&self, nth: u32) -> u32 {
        match self {
            Container::Bitmap(bits) => bits.nth_absent(nth),
            other => nth_gap(other.sorted(), nth),
        }
    }

    /// Adds every value of `lo..=hi`; returns how many were absent.
    pub(super) fn insert_span(&mut self, lo: u16, hi: u16) -> u32 {
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        if let Container::Bitmap(bits) = self {
            return bits.insert_span(lo, hi);
        }
        let values = self.sorted();
        let before = values.partition_point(|&v| v < lo);
        let after = values.partition_point(|&v| v <= hi);
        let added = u32::from(hi - lo) + 1 - (after - before) as u32;
        if values.len() + added as usize > ARRAY_MAX {
            let mut bits = Bits::from_values(values);
            bits.insert_span(lo, hi);
            *self = Container::Bitmap(bits);
        } else {
            let mut merged = Vec::with_capacity(values.len() + added as usize);
            merged.extend_from_slice(&values[..before]);
            merged.extend(lo..=hi);
            merged.extend_from_slice(&values[after..]);
            *self = Container::from_sorted(merged);
        }
        added
    }

    /// Calls `visit(first, last)` for each run of consecutive values, in ascending order.
    pub(super) fn for_each_run(&self, mut visit: impl FnMut(u16, u16)) {
        let owned;
        let values = match self {
            Container::Bitmap(bits) => {
                owned = bits.values();
                &owned[..]
            }
            other => other.sorted(),
        };
        let mut run: Option<(u16, u16)> = None;
        for &value in values {
            run = match run {
                Some((first, last)) if last.checked_add(1) == Some(value) => Some((first, value)),
                Some((first, last)) => {
                    visit(first, last);
                    Some((value, value))
                }
                None => Some((value, value)),
            };
        }
        if let Some((first, last)) = run {
            visit(first, last);
        }
    }

    /// Heap bytes held by this container (not counting its slot in the map).
    #[must_use]
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Container::Small { .. } => 0,
            Container::Array(values) => size_of::<Vec<u16>>() + values.capacity() * 2,
            Container::Bitmap(_) => size_of::<Bits>(),
        }
    }
}

/// Index of the first `i` with `values[i] != i`, which is the lowest absent value: sorted
/// distinct values have `values[i] >= i`, with equality exactly on a prefix. O(log n).
fn lowest_gap(values: &[u16]) -> usize {
    let (mut lo, mut hi) = (0, values.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if usize::from(values[mid]) == mid {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The `nth` value (0-based) absent from sorted distinct `values`: before `values[i]` lie
/// `values[i] - i` absent values, which never decreases, so the answer is `nth` plus the number
/// of values with at most `nth` absent values before them. O(log n).
fn nth_gap(values: &[u16], nth: u32) -> u32 {
    let (mut lo, mut hi) = (0, values.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if u32::from(values[mid]) - mid as u32 <= nth {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    nth + lo as u32
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
