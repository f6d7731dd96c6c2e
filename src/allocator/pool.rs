//! One family of one pool: its definition, its offset space, the allocated offsets, and the
//! used addresses that fall outside the allocatable set ("out of range").

use std::net::IpAddr;

use super::bitmap::OffsetBitmap;
use super::family::{Family, value_of};
use super::outcome::{AllocateError, Counts, Marked, NotInPool};
use super::ranges::{self, Span};
use super::runs::RunSet;
use super::space::OffsetSpace;
use super::spec::{Definition, FamilySpec, SpecError};
use super::tally::Tally;

/// At most this many addresses are listed by [`FamilyPool::with_spec`] as now outside the
/// pool (only bulk allocations can make more); all of them are still carried and counted.
pub const MAX_LISTED_OUTSIDE: usize = 65_536;

/// The allocator of one pool family. `Clone` copies the whole state.
#[derive(Clone, Debug)]
pub struct FamilyPool {
    definition: Definition,
    space: OffsetSpace,
    allocated: OffsetBitmap,
    /// Used addresses of the family that are not allocatable, as address values.
    out_of_range: RunSet,
}

impl FamilyPool {
    /// Validates `spec` and builds an empty pool.
    pub fn new(spec: &FamilySpec) -> Result<FamilyPool, SpecError> {
        let definition = Definition::new(spec)?;
        let space = OffsetSpace::new(&definition.allocatable);
        let allocated = OffsetBitmap::new(space.total());
        Ok(FamilyPool { definition, space, allocated, out_of_range: RunSet::default() })
    }

    #[must_use]
    pub fn family(&self) -> Family {
        self.definition.family
    }

    #[must_use]
    pub fn prefix(&self) -> u8 {
        self.definition.prefix
    }

    #[must_use]
    pub fn gateway(&self) -> Option<IpAddr> {
        self.definition.gateway
    }

    fn value(&self, ip: IpAddr) -> Result<u128, NotInPool> {
        if Family::of(ip) == self.family() { Ok(value_of(ip)) } else { Err(NotInPool::WrongFamily) }
    }

    fn address(&self, value: u128) -> Option<IpAddr> {
        self.family().address(value)
    }

    /// Marks the lowest free allocatable address used and returns it; `None` when the pool is
    /// full (answered from the counts). O(log n).
    #[must_use = "the address is marked used; dropping it leaks it until released"]
    pub fn allocate_lowest(&mut self) -> Option<IpAddr> {
        let offset = self.allocated.take_lowest()?;
        let ip = self.space.value_at(offset).and_then(|v| self.address(v));
        if ip.is_none() {
            let _ = self.allocated.remove(offset); // unreachable while the space is consistent
        }
        ip
    }

    /// Marks a specific address used, or says why it cannot be. O(log n).
    pub fn allocate(&mut self, ip: IpAddr) -> Result<(), AllocateError> {
        let value = self.value(ip)?;
        let Some(offset) = self.space.offset_of(value) else {
            return Err(self.definition.classify(value).err().unwrap_or(NotInPool::Outside).into());
        };
        if self.allocated.insert(offset) { Ok(()) } else { Err(AllocateError::AlreadyAllocated) }
    }

    /// Marks every allocatable address between `first` and `last` (inclusive, either order)
    /// used; addresses that are not allocatable are skipped. Returns how many were free
    /// (`u128::MAX` if all 2^128 of a whole IPv6 space were). O(log n) per chunk boundary
    /// and allocatable range crossed, not per address.
    pub fn allocate_range(&mut self, first: IpAddr, last: IpAddr) -> Result<u128, AllocateError> {
        let values = Span::new(self.value(first)?, self.value(last)?);
        let mut offsets = Vec::new();
        self.space.partition(values, |span| offsets.push(span), |_| ());
        let added = offsets.into_iter().fold(Tally::ZERO, |sum, span| sum.add(self.allocated.insert_span(span)));
        Ok(added.saturating())
    }

    /// Frees an address; true if it was used (in range or out of range).
    #[must_use = "false means the address was not in use"]
    pub fn release(&mut self, ip: IpAddr) -> bool {
        let Ok(value) = self.value(ip) else {
            return false;
        };
        match self.space.offset_of(value) {
            Some(offset) => self.allocated.remove(offset),
            None => self.out_of_range.remove(value),
        }
    }

    /// Whether an address is used (in range or out of range).
    #[must_use]
    pub fn is_allocated(&self, ip: IpAddr) -> bool {
        let Ok(value) = self.value(ip) else {
            return false;
        };
        match self.space.offset_of(value) {
            Some(offset) => self.allocated.contains(offset),
            None => self.out_of_range.contains(value),
        }
    }

    /// Whether an address would be allocatable, ignoring whether it is in use.
    pub fn check(&self, ip: IpAddr) -> Result<(), NotInPool> {
        self.definition.classify(self.value(ip)?)
    }

    /// Records an existing address (rebuilding from `IPAddress` objects). Addresses of the
    /// family that are not allocatable are remembered as out of range: they count as used and
    /// are freed by [`release`](Self::release).
    #[must_use = "OutOfRange and AlreadyUsed need reporting"]
    pub fn mark_used(&mut self, ip: IpAddr) -> Marked {
        let Ok(value) = self.value(ip) else {
            return Marked::WrongFamily;
        };
        match self.space.offset_of(value) {
            Some(offset) if self.allocated.insert(offset) => Marked::InRange,
            None if self.out_of_range.insert(value) => Marked::OutOfRange,
            _ => Marked::AlreadyUsed,
        }
    }

    /// Exact counts, O(1).
    #[must_use]
    pub fn counts(&self) -> Counts {
        let total = self.space.total();
        let in_range = self.allocated.count();
        let out_of_range = self.out_of_range.count();
        let used = in_range.add(out_of_range);
        let free = total.sub(in_range);
        Counts {
            total: total.saturating(),
            used: used.saturating(),
            in_range_used: in_range.saturating(),
            free: free.saturating(),
            out_of_range: out_of_range.saturating(),
            saturated: [total, used, in_range, free, out_of_range].iter().any(|count| count.exceeds_u128()),
        }
    }

    /// Builds a pool and records `existing` addresses in it. Returns the pool and the
    /// addresses that are not allocatable in it: out of range (remembered as used) and of the
    /// other family (not remembered). Duplicates are recorded once.
    pub fn rebuild(
        spec: &FamilySpec,
        existing: impl IntoIterator<Item = IpAddr>,
    ) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        let mut pool = FamilyPool::new(spec)?;
        let mut outside = Vec::new();
        for ip in existing {
            match pool.mark_used(ip) {
                Marked::OutOfRange | Marked::WrongFamily => outside.push(ip),
                Marked::InRange | Marked::AlreadyUsed => {}
            }
        }
        Ok((pool, outside))
    }

    /// The pool after an edit of its definition: every used address is carried over, those no
    /// longer allocatable as out of range (never dropped). Returns the new pool and the used
    /// addresses outside it, ascending (at most [`MAX_LISTED_OUTSIDE`] listed). Switching family while
    /// addresses are in use is refused ([`SpecError::FamilyChanged`]): rebuild instead.
    pub fn with_spec(&self, spec: &FamilySpec) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        let mut pool = FamilyPool::new(spec)?;
        let used = self.allocated.count().add(self.out_of_range.count());
        if pool.family() != self.family() {
            if used.is_zero() {
                return Ok((pool, Vec::new()));
            }
            return Err(SpecError::FamilyChanged { from: self.family(), to: pool.family(), in_use: used.saturating() });
        }
        let mut used: Vec<Span> = self.out_of_range.iter().collect();
        for offsets in self.allocated.runs() {
            self.space.values_of(offsets, |span| used.push(span));
        }
        used.sort_unstable();
        let mut outside = Vec::new();
        for span in used {
            pool.carry(span, &mut outside);
        }
        Ok((pool, outside))
    }

    /// Records a span of used address values: the allocatable part in the bitmap, the rest
    /// as out of range (listed in `outside` up to the cap).
    fn carry(&mut self, values: Span, outside: &mut Vec<IpAddr>) {
        let (mut inside, mut beyond) = (Vec::new(), Vec::new());
        self.space.partition(values, |span| inside.push(span), |span| beyond.push(span));
        for offsets in inside {
            let _ = self.allocated.insert_span(offsets);
        }
        for span in beyond {
            let _ = self.out_of_range.insert_span(span);
            let room = MAX_LISTED_OUTSIDE.saturating_sub(outside.len());
            let family = self.family();
            outside.extend((span.first..=span.last).take(room).filter_map(|value| family.address(value)));
        }
    }

    /// Whether the two pools' allocatable addresses intersect (same family only).
    #[must_use]
    pub fn overlaps(&self, other: &FamilyPool) -> bool {
        self.family() == other.family()
            && ranges::intersects(&self.definition.allocatable, &other.definition.allocatable)
    }

    /// The allocatable addresses as inclusive ranges, ascending.
    pub fn allocatable_ranges(&self) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
        self.space.value_ranges().filter_map(|span| self.address_pair(span))
    }

    /// The used addresses outside the allocatable set, as inclusive ranges, ascending.
    pub fn out_of_range_ranges(&self) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
        self.out_of_range.iter().filter_map(|span| self.address_pair(span))
    }

    fn address_pair(&self, span: Span) -> Option<(IpAddr, IpAddr)> {
        Some((self.address(span.first)?, self.address(span.last)?))
    }

    /// Estimate of the heap bytes held (not counting the `FamilyPool` value itself).
    /// O(number of partially used chunks).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.definition.heap_bytes()
            + self.space.heap_bytes()
            + self.allocated.heap_bytes()
            + self.out_of_range.heap_bytes()
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
