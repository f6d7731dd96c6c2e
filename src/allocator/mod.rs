//! The IP address allocator: pure Rust, no Kubernetes types.
//!
//! A pool family's definition ([`FamilySpec`]: addresses, excluded addresses, prefix, gateway,
//! reserved-address flag) becomes a [`FamilyPool`]: the allocatable addresses laid out as a
//! linear offset space, and a sparse bitmap of the allocated offsets. Allocating the next free
//! address of the pool's [`Strategy`] (lowest, least recently released, random), a specific
//! address, releasing and looking up are O(log n); counts are O(1) and exact up to 2^128
//! addresses. See `docs/allocator.md` and `docs/allocation-strategy.md` for the design.
//!
//! A prefix pool ([`PrefixSpec`]) is a [`FamilyPool`] too: each slot of its offset space is one
//! sub-prefix of the allocation length, named by its network address, so a /64 out of a /32 is
//! one of 2^32 slots and memory still grows with what is handed out.
//!
//! This module uses only `std` and relative paths, so it also compiles on its own.

mod bitmap;
mod container;
mod entries;
mod family;
mod outcome;
mod pool;
mod prefix;
mod prefix_error;
mod ranges;
mod rank;
mod recency;
mod runs;
mod space;
mod spec;
mod strategy;
mod tally;

pub use self::entries::{EntryError, EntryKind, EntryRange, FamilySplit, parse_entry, split_by_family};
pub use self::family::{Family, value_of};
pub use self::outcome::{AllocateError, Counts, Marked, NotInPool};
pub use self::pool::{FamilyPool, MAX_LISTED_OUTSIDE};
pub use self::prefix::{DEFAULT_ALLOCATION_LENGTH, PrefixSpec};
pub use self::prefix_error::PrefixError;
pub use self::recency::MAX_REMEMBERED_RELEASES;
pub use self::spec::{FamilySpec, SpecError, SpecField};
pub use self::strategy::Strategy;

#[cfg(test)]
mod test_support;
