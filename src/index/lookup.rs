//! One address as one pool sees it, for read-only answers (`ferro-ipam who-has`).

use std::net::IpAddr;

use crate::allocator::{Family, NotInPool};

use super::{Index, PoolKey, lock};

/// What a pool says of an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressState {
    /// The pool's spec is invalid or its object unknown: it hands out nothing.
    NotServing,
    /// Of the other family than the pool's, or in none of its ranges.
    NotInPool,
    /// In its ranges, but never handed out: excluded, the gateway, a network or broadcast
    /// address, or (prefix pools) not a sub-prefix's network address.
    Blocked(NotInPool),
    /// Allocatable and used: by a holder, a reservation set aside, or an overlapping pool.
    Used,
    /// Allocatable and free.
    Free,
}

impl Index {
    /// What `pool` says of `ip`.
    pub fn address_state(&self, pool: &PoolKey, ip: IpAddr) -> AddressState {
        let Some(slot) = self.existing_slot(pool) else {
            return AddressState::NotServing;
        };
        let slot = lock(&slot);
        let Ok(allocators) = slot.allocators() else {
            return AddressState::NotServing;
        };
        let Some(allocator) = allocators.iter().find(|a| a.family() == Family::of(ip)) else {
            return AddressState::NotInPool;
        };
        match allocator.check(ip) {
            Err(NotInPool::Outside | NotInPool::WrongFamily) => AddressState::NotInPool,
            Err(why) => AddressState::Blocked(why),
            Ok(()) if allocator.is_allocated(ip) => AddressState::Used,
            Ok(()) => AddressState::Free,
        }
    }
}
