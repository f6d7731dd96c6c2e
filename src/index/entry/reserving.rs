//! A pool entry's reservations: handing a reserved address to its claim, and to no other.
//!
//! A reserved address that its claim does not hold is marked used in the allocator, so the
//! strategy never hands it out; it is counted apart as reserved in the status.

use std::net::IpAddr;

use super::{AllocError, PoolEntry, PoolState, Request};
use crate::allocator::{Family, FamilyPool};
use crate::index::keys::HolderKey;
use crate::index::reservations::{self, ClaimOwner, Reserved};

impl PoolEntry {
    /// The pool's reservations (none while its spec is invalid or unknown).
    pub fn reservations(&self) -> &[Reserved] {
        match &self.state {
            PoolState::Ready { reservations, .. } => reservations,
            _ => &[],
        }
    }

    /// The reservation of `ip`, if any.
    pub fn reserved(&self, ip: IpAddr) -> Option<&Reserved> {
        self.reservations().iter().find(|r| r.address == ip)
    }

    /// The reservation of `ip` when it is for claims other than this one.
    pub(super) fn reserved_for_another(
        &self,
        ip: IpAddr,
        holder: &HolderKey,
        owners: &[ClaimOwner],
    ) -> Option<&Reserved> {
        self.reserved(ip).filter(|r| !r.claim.matches(holder, owners))
    }

    /// The reservation for the claim in the family it asks for (the pool's first by default).
    pub(super) fn reservation_for(&self, holder: &HolderKey, request: &Request) -> Option<Reserved> {
        let PoolState::Ready { allocators, reservations, .. } = &self.state else {
            return None;
        };
        let family = request.family.or_else(|| allocators.first().map(FamilyPool::family))?;
        reservations::for_claim(reservations, holder, &request.owners, family).cloned()
    }

    /// Hands the claim its reserved address, or says who holds it instead.
    pub(super) fn take_reserved(&mut self, holder: &HolderKey, reserved: &Reserved) -> Result<IpAddr, AllocError> {
        let ip = reserved.address;
        let refused = |reason: String| AllocError::Requested {
            address: ip,
            reason: format!("it is reserved for this claim ({}) but {reason}", reserved.field),
        };
        if let Some(reason) = self.held_by_others(holder, ip) {
            // Woken when that holder lets it go (see `drop_user`).
            self.wait_for_room(holder);
            return Err(refused(reason));
        }
        if let Err(other) = self.registry.try_take(ip, &self.key) {
            return Err(refused(format!("it is taken in the overlapping {other}")));
        }
        if let Some(pool) = self.allocator_for(ip) {
            let _ = pool.mark_used(ip); // set aside already; marked here should the spec be new
        }
        self.hand_to(holder, ip);
        Ok(ip)
    }

    /// Marks every reserved address nobody holds as used, so no strategy hands it out.
    pub(super) fn set_reserved_aside(&mut self) {
        let aside: Vec<IpAddr> =
            self.reservations().iter().map(|r| r.address).filter(|ip| self.users_of(*ip) == 0).collect();
        for ip in aside {
            if let Some(pool) = self.allocator_for(ip) {
                let _ = pool.mark_used(ip);
            }
        }
    }

    /// Each reservation with the holders of its address (its own claim, or others that hold it).
    pub fn reservation_holders(&self) -> Vec<(Reserved, Vec<HolderKey>)> {
        self.reservations()
            .iter()
            .map(|r| {
                let mut holders: Vec<HolderKey> = self.holdings.users(r.address).cloned().collect();
                holders.sort();
                (r.clone(), holders)
            })
            .collect()
    }

    /// How many reserved addresses of `family` nobody holds (set aside for their claims).
    pub fn reserved_aside(&self, family: Family) -> u128 {
        self.reservations().iter().filter(|r| Family::of(r.address) == family && self.users_of(r.address) == 0).count()
            as u128
    }
}
