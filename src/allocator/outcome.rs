//! What the pool answers: why an address is not allocatable, why an allocation failed, what
//! recording an existing address did, and the pool's counts.

use std::error::Error;
use std::fmt;

/// Why an address is not allocatable in a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NotInPool {
    /// Not covered by any `addresses` entry.
    Outside,
    /// Covered by an `excludedAddresses` entry.
    Excluded,
    /// The pool's gateway.
    Gateway,
    /// The network address of `<lowest>/<prefix>` (or, for IPv4, its broadcast address), held
    /// back because `allocateReservedIPAddresses` is false.
    Reserved,
    /// Of the other IP family than the pool.
    WrongFamily,
    /// In a prefix pool: not the network address of a sub-prefix of the allocation length.
    Unaligned,
}

impl fmt::Display for NotInPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotInPool::Outside => "the address is not in the pool's addresses",
            NotInPool::Excluded => "the address is in the pool's excludedAddresses",
            NotInPool::Gateway => "the address is the pool's gateway",
            NotInPool::Reserved => {
                "the address is the subnet's network or broadcast address, which the pool \
                 reserves unless allocateReservedIPAddresses is true"
            }
            NotInPool::WrongFamily => "the address is not of the pool's IP family",
            NotInPool::Unaligned => {
                "the address is not the network address of a sub-prefix of the pool's allocationPrefixLength"
            }
        })
    }
}

impl Error for NotInPool {}

/// Why a specific address could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocateError {
    /// The address is allocatable but already in use.
    AlreadyAllocated,
    /// The address is not allocatable in this pool.
    NotInPool { reason: NotInPool },
}

impl fmt::Display for AllocateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocateError::AlreadyAllocated => f.write_str("the address is already allocated"),
            AllocateError::NotInPool { reason } => reason.fmt(f),
        }
    }
}

impl Error for AllocateError {}

impl From<NotInPool> for AllocateError {
    fn from(reason: NotInPool) -> Self {
        AllocateError::NotInPool { reason }
    }
}

/// What recording an existing address (`FamilyPool::mark_used`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Marked {
    /// Allocatable and now marked used.
    InRange,
    /// Same family but not allocatable: remembered as used and out of range.
    OutOfRange,
    /// Already recorded (in range or out of range): a second holder of the address.
    AlreadyUsed,
    /// Of the other family: not recorded (a pool family cannot hold it).
    WrongFamily,
}

/// A pool's address counts, exact and O(1).
///
/// A count is 2^128 only for a whole IPv6 space (`::/0` with `allocate_reserved`, no gateway,
/// nothing excluded); `u128` stops one short, so such a count reads `u128::MAX` and
/// `saturated` is true.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// Allocatable addresses: the addresses minus excluded, gateway and reserved.
    pub total: u128,
    /// Used addresses: in range plus out of range.
    pub used: u128,
    /// Used addresses that are allocatable.
    pub in_range_used: u128,
    /// `total - in_range_used`: addresses `allocate_lowest` can still hand out.
    pub free: u128,
    /// Used addresses that are not allocatable (outside, excluded, gateway or reserved).
    pub out_of_range: u128,
    /// A count above was 2^128 and reads `u128::MAX`.
    pub saturated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_errors_say_why() {
        assert_eq!(AllocateError::from(NotInPool::Gateway).to_string(), "the address is the pool's gateway");
        assert!(
            AllocateError::NotInPool { reason: NotInPool::Reserved }
                .to_string()
                .contains("allocateReservedIPAddresses")
        );
        assert_eq!(AllocateError::AlreadyAllocated.to_string(), "the address is already allocated");
    }
}
