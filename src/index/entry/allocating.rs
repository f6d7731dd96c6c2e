//! A pool entry's allocation for a claim. The claim gets, in this order: the address it holds
//! already, the address its `IPAddress` records, its reservation, the address it asks for (or
//! the one a deleted claim of its name had), else the strategy's next free address.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use super::{AllocError, Holds, PoolEntry, PoolState, Request};
use crate::allocator::{AllocateError, Family, FamilyPool};
use crate::index::keys::{HolderKey, PoolKey};
use crate::index::registry::Registry;
use crate::index::reservations::{ClaimOwner, Reserved};

impl PoolEntry {
    /// Allocates for a claim: the address it already holds, else a new one.
    /// An address the claim holds is returned again, unless another holder holds it too; an
    /// address its `IPAddress` records is adopted only as [`adopt`](Self::adopt) allows.
    pub fn allocate(&mut self, holder: &HolderKey, request: Request) -> Result<IpAddr, AllocError> {
        if let Some(ip) = self.claim_hold(holder) {
            return match self.held_by_others(holder, ip) {
                Some(reason) => Err(AllocError::Conflict { address: ip, reason }),
                None => Ok(ip),
            };
        }
        if let Some(ip) = self.object_hold(holder) {
            self.adopt(holder, ip, false)?;
            return Ok(ip);
        }
        if request.address.is_none()
            && let Some(reserved) = self.reservation_for(holder, &request)
        {
            return self.take_reserved(holder, &reserved);
        }
        let request = self.with_remembered(holder, request);
        let family = self.family_for(&request)?;
        if let Some(address) = request.address
            && let Some(own) = self.vet_requested(holder, address, &request.owners)?
        {
            return self.take_reserved(holder, &own);
        }
        let ip = self.take_free(family, request.address)?;
        self.hand_to(holder, ip);
        Ok(ip)
    }

    /// The request, asking for the claim's remembered address when it asks for no other and
    /// that address is still free: a claim re-created under the same name gets its address
    /// back. The memory is used up either way.
    fn with_remembered(&mut self, holder: &HolderKey, request: Request) -> Request {
        match self.remembered.remove(holder) {
            Some((ip, _))
                if request.address.is_none()
                    && request.family.is_none_or(|f| f == Family::of(ip))
                    && self.users_of(ip) == 0
                    && self.allocator_for(ip).is_some_and(|p| p.check(ip).is_ok() && !p.is_allocated(ip)) =>
            {
                Request { address: Some(ip), family: Some(Family::of(ip)), ..request }
            }
            _ => request,
        }
    }

    /// The family to allocate from: the one asked for, else the pool's first. Refused while the
    /// pool is missing or invalid, and when it has no addresses of that family.
    fn family_for(&self, request: &Request) -> Result<Family, AllocError> {
        let pools = match &self.state {
            PoolState::Missing => return Err(AllocError::PoolMissing),
            PoolState::Invalid { reason, .. } => return Err(AllocError::PoolInvalid(reason.clone())),
            PoolState::Ready { allocators, .. } => allocators,
        };
        let family = match request.family {
            Some(f) => f,
            None => pools.first().map(FamilyPool::family).ok_or(AllocError::PoolMissing)?,
        };
        pools.iter().find(|p| p.family() == family).ok_or(AllocError::FamilyNotInPool(family))?;
        Ok(family)
    }

    /// Whether the claim may have the address it asks for: its own reservation when the
    /// address is reserved for it (`Some`), the allocator's to decide (`None`), or refused when
    /// the address is reserved for another claim or another holder holds it.
    fn vet_requested(
        &self,
        holder: &HolderKey,
        address: IpAddr,
        owners: &[ClaimOwner],
    ) -> Result<Option<Reserved>, AllocError> {
        if let Some(own) = self.reserved(address).filter(|r| r.claim.matches(holder, owners)) {
            return Ok(Some(own.clone()));
        }
        if let Some(other) = self.reserved_for_another(address, holder, owners) {
            return Err(AllocError::Requested {
                address,
                reason: format!("it is reserved for {} ({})", other.claim, other.field),
            });
        }
        let mut holders: Vec<String> = self.holdings.users(address).map(ToString::to_string).collect();
        if !holders.is_empty() {
            holders.sort();
            let taken_by = holders.join(", ");
            return Err(AllocError::Requested { address, reason: format!("it is taken by {taken_by}") });
        }
        Ok(None)
    }

    /// Takes an address of `family` in its allocator and in the registry shared with
    /// overlapping pools: `address` when the claim asks for one, else the strategy's next.
    fn take_free(&mut self, family: Family, address: Option<IpAddr>) -> Result<IpAddr, AllocError> {
        let (registry, key, foreign) = (&self.registry, &self.key, &mut self.foreign);
        let (pool, leased) = match &mut self.state {
            PoolState::Ready { allocators, spec, .. } => {
                (allocators.iter_mut().find(|p| p.family() == family), spec.hub().is_some())
            }
            _ => (None, false),
        };
        let pool = pool.ok_or(AllocError::FamilyNotInPool(family))?;
        match address {
            Some(ip) => take_requested(pool, registry, key, ip),
            // A spoke pool with no block is not invalid: it waits for one.
            None if leased && pool.counts().total == 0 => Err(AllocError::Exhausted(family)),
            None => take_next(pool, registry, key, foreign),
        }
    }

    /// Records the claim as the only user of `ip`, which its allocator has marked, and stops
    /// its waiting for room.
    pub(super) fn hand_to(&mut self, holder: &HolderKey, ip: IpAddr) {
        let holds = self.holdings.get(holder);
        self.holdings.set(holder, Holds { claim: Some(ip), ..holds });
        self.waiting.remove(holder);
    }
}

/// Takes the requested `ip`, unless the allocator refuses it or an overlapping pool holds it
/// (then the allocator lets it go again).
fn take_requested(
    pool: &mut FamilyPool,
    registry: &Registry,
    key: &Arc<PoolKey>,
    ip: IpAddr,
) -> Result<IpAddr, AllocError> {
    pool.allocate(ip).map_err(|e: AllocateError| AllocError::Requested { address: ip, reason: e.to_string() })?;
    if let Err(other) = registry.try_take(ip, key) {
        let _ = pool.release(ip);
        return Err(AllocError::Requested { address: ip, reason: format!("it is taken in the overlapping {other}") });
    }
    Ok(ip)
}

/// Takes the strategy's next free address. One an overlapping pool holds stays marked here
/// and is skipped (`foreign`); a pool with nothing at all to hand out says why.
fn take_next(
    pool: &mut FamilyPool,
    registry: &Registry,
    key: &Arc<PoolKey>,
    foreign: &mut BTreeSet<IpAddr>,
) -> Result<IpAddr, AllocError> {
    let family = pool.family();
    if pool.counts().total == 0 && pool.hands_out_prefixes() {
        return Err(AllocError::PoolInvalid(
            "its prefixes leave no sub-prefix to hand out (every one overlaps excludedPrefixes)".to_owned(),
        ));
    }
    if pool.counts().total == 0 {
        return Err(AllocError::PoolInvalid(format!(
            "its {family} addresses leave nothing to hand out (reserved network/broadcast, gateway, excludedAddresses)"
        )));
    }
    loop {
        let ip = pool.allocate_next().ok_or(AllocError::Exhausted(family))?;
        // Taken and recorded as one step.
        match registry.try_take(ip, key) {
            Ok(()) => return Ok(ip),
            Err(_) => {
                foreign.insert(ip);
            }
        }
    }
}
