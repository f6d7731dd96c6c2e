//! One family of one pool: its definition, its offset space, the allocated offsets, and the
//! used addresses that fall outside the allocatable set ("out of range").
//!
//! The same type serves prefix pools: there a slot of the offset space is one sub-prefix, and
//! the address that names it is the sub-prefix's network address.

use std::net::IpAddr;

use super::bitmap::OffsetBitmap;
use super::family::{Family, value_of};
use super::outcome::{AllocateError, Counts, Marked, NotInPool};
use super::prefix::PrefixSpec;
use super::ranges::{self, Span};
use super::recency::ReleaseOrder;
use super::runs::RunSet;
use super::space::OffsetSpace;
use super::spec::{Definition, FamilySpec, SpecError};
use super::strategy::{Rng, Strategy};
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
    /// Used addresses of the family that are not allocatable, as address values (not slots).
    out_of_range: RunSet,
    strategy: Strategy,
    /// `LeastRecentlyReleased` only: free offsets by release time. They stay set in
    /// `allocated`, so the lowest-free search passes over them; they are free all the same.
    released: ReleaseOrder,
    /// `Random` only: where picks come from.
    rng: Rng,
}

/// Where a used address goes: a slot of the offset space, or out of range.
enum Place {
    Offset(u128),
    OutOfRange(u128),
}

impl FamilyPool {
    /// Validates `spec` and builds an empty pool.
    pub fn new(spec: &FamilySpec) -> Result<FamilyPool, SpecError> {
        Ok(FamilyPool::of(Definition::new(spec)?))
    }

    /// Validates a prefix pool's `spec` and builds an empty pool whose addresses are the
    /// network addresses of its sub-prefixes.
    pub fn of_prefixes(spec: &PrefixSpec) -> Result<FamilyPool, SpecError> {
        Ok(FamilyPool::of(Definition::of_prefixes(spec)?))
    }

    fn of(definition: Definition) -> FamilyPool {
        let space = OffsetSpace::new(&definition.allocatable);
        let allocated = OffsetBitmap::new(space.total());
        FamilyPool {
            definition,
            space,
            allocated,
            out_of_range: RunSet::default(),
            strategy: Strategy::Lowest,
            released: ReleaseOrder::default(),
            rng: Rng::from_os(),
        }
    }

    /// The order in which [`allocate_next`](Self::allocate_next) hands out free addresses.
    #[must_use]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Changes the strategy. Leaving `LeastRecentlyReleased` forgets the release order.
    /// Choosing `Random` builds its index once: O(c log c) for c used chunks.
    pub fn set_strategy(&mut self, strategy: Strategy) {
        if strategy != Strategy::LeastRecentlyReleased {
            while let Some(offset) = self.released.pop_oldest() {
                let _ = self.allocated.remove(offset);
            }
        }
        if strategy == Strategy::Random {
            self.allocated.keep_ranks();
        }
        self.strategy = strategy;
    }

    /// Seeds the `Random` strategy's picks (they come from the operating system otherwise).
    pub fn seed(&mut self, seed: u64) {
        self.rng = Rng::seeded(seed);
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

    /// Whether the pool hands out sub-prefixes (a prefix pool) rather than single addresses.
    #[must_use]
    pub fn hands_out_prefixes(&self) -> bool {
        !self.definition.gateway_blocks
    }

    fn shift(&self) -> u32 {
        self.definition.shift
    }

    /// The slot an address names: the address itself, or a sub-prefix's number.
    fn value(&self, ip: IpAddr) -> Result<u128, NotInPool> {
        if Family::of(ip) != self.family() {
            return Err(NotInPool::WrongFamily);
        }
        let value = value_of(ip);
        let host = (1u128 << self.shift()) - 1;
        if value & host != 0 { Err(NotInPool::Unaligned) } else { Ok(value >> self.shift()) }
    }

    /// The address that names slot `value`.
    fn address(&self, value: u128) -> Option<IpAddr> {
        self.family().address(value.checked_shl(self.shift())?)
    }

    /// The addresses slots `span` cover.
    fn address_span(&self, span: Span) -> Span {
        let host = (1u128 << self.shift()) - 1;
        Span::new(span.first << self.shift(), (span.last << self.shift()) | host)
    }

    /// Where a used address of the family is kept; `None` for the other family.
    fn place(&self, ip: IpAddr) -> Option<Place> {
        match self.value(ip) {
            Err(NotInPool::WrongFamily) => None,
            Ok(slot) => Some(match self.space.offset_of(slot) {
                Some(offset) => Place::Offset(offset),
                None => Place::OutOfRange(value_of(ip)),
            }),
            Err(_) => Some(Place::OutOfRange(value_of(ip))),
        }
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

    /// Marks the next free address of the pool's [`Strategy`] used and returns it; `None` when
    /// the pool is full. O(log n) for each strategy (`Random`: expected, over the used chunks).
    #[must_use = "the address is marked used; dropping it leaks it until released"]
    pub fn allocate_next(&mut self) -> Option<IpAddr> {
        let offset = match self.strategy {
            Strategy::Lowest => self.allocated.take_lowest()?,
            Strategy::LeastRecentlyReleased => match self.allocated.take_lowest() {
                Some(offset) => offset,
                // Every free offset is parked: the one released longest ago, still set.
                None => self.released.pop_oldest()?,
            },
            Strategy::Random => {
                let free = self.counts().free;
                let k = self.rng.below(free);
                self.allocated.take_nth_clear(k)?
            }
        };
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
        if self.released.unpark(offset) || self.allocated.insert(offset) {
            Ok(())
        } else {
            Err(AllocateError::AlreadyAllocated)
        }
    }

    /// Marks every allocatable address between `first` and `last` (inclusive, either order)
    /// used; addresses that are not allocatable are skipped. In a prefix pool, every sub-prefix
    /// that starts between them. Returns how many were free
    /// (`u128::MAX` if all 2^128 of a whole IPv6 space were). O(log n) per chunk boundary
    /// and allocatable range crossed, not per address.
    pub fn allocate_range(&mut self, first: IpAddr, last: IpAddr) -> Result<u128, AllocateError> {
        let slot = |ip: IpAddr| match self.value(ip) {
            Err(NotInPool::Unaligned) => Ok(value_of(ip) >> self.shift()),
            other => other,
        };
        let values = Span::new(slot(first)?, slot(last)?);
        let mut offsets = Vec::new();
        self.space.partition(values, |span| offsets.push(span), |_| ());
        let mut added = Tally::ZERO;
        for span in offsets {
            let parked = self.released.unpark_span(span).len() as u128;
            added = added.add(Tally::of(parked)).add(self.allocated.insert_span(span));
        }
        Ok(added.saturating())
    }

    /// Frees an address; true if it was used (in range or out of range).
    #[must_use = "false means the address was not in use"]
    pub fn release(&mut self, ip: IpAddr) -> bool {
        match self.place(ip) {
            Some(Place::Offset(offset)) if self.released.contains(offset) => false,
            Some(Place::Offset(offset)) if self.strategy == Strategy::LeastRecentlyReleased => {
                self.allocated.contains(offset) && self.park(offset)
            }
            Some(Place::Offset(offset)) => self.allocated.remove(offset),
            Some(Place::OutOfRange(value)) => self.out_of_range.remove(value),
            None => false,
        }
    }

    /// Queues a set offset as released last; the one that falls out of the memory is cleared.
    fn park(&mut self, offset: u128) -> bool {
        if let Some(forgotten) = self.released.park(offset) {
            let _ = self.allocated.remove(forgotten);
        }
        true
    }

    /// The free addresses whose release order is remembered (`LeastRecentlyReleased`),
    /// released longest ago first.
    #[must_use]
    pub fn released_oldest_first(&self) -> Vec<IpAddr> {
        self.released
            .oldest_first()
            .filter_map(|offset| self.space.value_at(offset))
            .filter_map(|v| self.address(v))
            .collect()
    }

    /// Remembers a free address as released now (`LeastRecentlyReleased` only): carrying the
    /// order over an edit of the pool, or taking it from a memory that outlived the process.
    /// False when the address is not free and allocatable here, or the strategy is another.
    pub fn recall_release(&mut self, ip: IpAddr) -> bool {
        if self.strategy != Strategy::LeastRecentlyReleased {
            return false;
        }
        match self.place(ip) {
            Some(Place::Offset(offset)) if !self.released.contains(offset) && self.allocated.insert(offset) => {
                self.park(offset)
            }
            _ => false,
        }
    }

    /// Whether an address is used (in range or out of range).
    #[must_use]
    pub fn is_allocated(&self, ip: IpAddr) -> bool {
        match self.place(ip) {
            Some(Place::Offset(offset)) => self.allocated.contains(offset) && !self.released.contains(offset),
            Some(Place::OutOfRange(value)) => self.out_of_range.contains(value),
            None => false,
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
        match self.place(ip) {
            None => Marked::WrongFamily,
            Some(Place::Offset(offset)) if self.released.unpark(offset) || self.allocated.insert(offset) => {
                Marked::InRange
            }
            Some(Place::OutOfRange(value)) if self.out_of_range.insert(value) => Marked::OutOfRange,
            Some(_) => Marked::AlreadyUsed,
        }
    }

    /// Exact counts, O(1).
    #[must_use]
    pub fn counts(&self) -> Counts {
        let total = self.space.total();
        let in_range = self.allocated.count().sub(Tally::of(self.released.len() as u128));
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
    /// The strategy and the release order it remembers are carried over too.
    pub fn with_spec(&self, spec: &FamilySpec) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        self.carried_into(FamilyPool::new(spec)?)
    }

    /// [`with_spec`](Self::with_spec) for a prefix pool. Its allocation length cannot change
    /// ([`SpecError::GranularityChanged`]).
    pub fn with_prefixes(&self, spec: &PrefixSpec) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        let pool = FamilyPool::of_prefixes(spec)?;
        if pool.shift() != self.shift() {
            return Err(SpecError::GranularityChanged { from: self.prefix(), to: pool.prefix() });
        }
        self.carried_into(pool)
    }

    fn carried_into(&self, pool: FamilyPool) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        if self.released.len() == 0 {
            return self.used_carried_into(pool);
        }
        let mut used_only = self.clone();
        used_only.set_strategy(Strategy::Lowest);
        let (mut pool, outside) = used_only.used_carried_into(pool)?;
        pool.set_strategy(self.strategy);
        for ip in self.released_oldest_first() {
            let _ = pool.recall_release(ip);
        }
        Ok((pool, outside))
    }

    /// Carries the used addresses and the strategy (not the release order) into `pool`.
    fn used_carried_into(&self, mut pool: FamilyPool) -> Result<(FamilyPool, Vec<IpAddr>), SpecError> {
        if pool.shift() != self.shift() {
            return Err(SpecError::GranularityChanged { from: self.prefix(), to: pool.prefix() });
        }
        pool.set_strategy(self.strategy);
        pool.rng = self.rng.clone();
        let used = self.allocated.count().add(self.out_of_range.count());
        if pool.family() != self.family() {
            if used.is_zero() {
                return Ok((pool, Vec::new()));
            }
            return Err(SpecError::FamilyChanged { from: self.family(), to: pool.family(), in_use: used.saturating() });
        }
        let mut slots: Vec<Span> = Vec::new();
        for offsets in self.allocated.runs() {
            self.space.values_of(offsets, |span| slots.push(span));
        }
        let mut outside = Vec::new();
        if self.shift() == 0 {
            slots.extend(self.out_of_range.iter());
            slots.sort_unstable();
            for span in slots {
                pool.carry(span, &mut outside);
            }
        } else {
            for span in slots {
                pool.carry(span, &mut outside);
            }
            // Out-of-range addresses of a prefix pool are single holders: each goes where it
            // belongs in the new pool.
            for span in self.out_of_range.iter() {
                for value in span.first..=span.last {
                    if let Some(ip) = self.family().address(value)
                        && pool.mark_used(ip) == Marked::OutOfRange
                        && outside.len() < MAX_LISTED_OUTSIDE
                    {
                        outside.push(ip);
                    }
                }
            }
            outside.sort_unstable();
        }
        Ok((pool, outside))
    }

    /// Records a span of used slots: the allocatable part in the bitmap, the rest as out of
    /// range (listed in `outside` up to the cap). Each slot of a prefix pool out of range is
    /// recorded by its network address.
    fn carry(&mut self, values: Span, outside: &mut Vec<IpAddr>) {
        let (mut inside, mut beyond) = (Vec::new(), Vec::new());
        self.space.partition(values, |span| inside.push(span), |span| beyond.push(span));
        for offsets in inside {
            let _ = self.allocated.insert_span(offsets);
        }
        for span in beyond {
            if self.shift() == 0 {
                let _ = self.out_of_range.insert_span(span);
            } else {
                for slot in span.first..=span.last {
                    let _ = self.out_of_range.insert(slot << self.shift());
                }
            }
            let room = MAX_LISTED_OUTSIDE.saturating_sub(outside.len());
            outside.extend((span.first..=span.last).take(room).filter_map(|value| self.address(value)));
        }
    }

    /// Whether the two pools' allocatable addresses intersect (same family only).
    #[must_use]
    pub fn overlaps(&self, other: &FamilyPool) -> bool {
        let addresses =
            |pool: &FamilyPool| pool.definition.allocatable.iter().map(|&s| pool.address_span(s)).collect::<Vec<_>>();
        self.family() == other.family() && ranges::intersects(&addresses(self), &addresses(other))
    }

    /// The allocatable addresses as inclusive ranges, ascending (a prefix pool's: every address
    /// of its allocatable sub-prefixes).
    pub fn allocatable_ranges(&self) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
        self.space.value_ranges().filter_map(|span| self.address_pair(self.address_span(span)))
    }

    /// The used addresses outside the allocatable set, as inclusive ranges, ascending.
    pub fn out_of_range_ranges(&self) -> impl Iterator<Item = (IpAddr, IpAddr)> + '_ {
        self.out_of_range.iter().filter_map(|span| self.address_pair(span))
    }

    fn address_pair(&self, span: Span) -> Option<(IpAddr, IpAddr)> {
        Some((self.family().address(span.first)?, self.family().address(span.last)?))
    }

    /// Estimate of the heap bytes held (not counting the `FamilyPool` value itself).
    /// O(number of partially used chunks).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.definition.heap_bytes()
            + self.space.heap_bytes()
            + self.allocated.heap_bytes()
            + self.out_of_range.heap_bytes()
            + self.released.heap_bytes()
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
