//! A hub pool's blocks leased to spokes: each block is an aligned CIDR whose allocatable
//! addresses the pool's allocator marks used for as long as the block is leased, so that no
//! claim of the hub and no other block gets one of them.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{AllocError, PoolEntry};
use crate::allocator::{Family, FamilyPool, value_of};
use crate::index::keys::HolderKey;

/// Most candidate blocks looked at for one lease, so that a nearly full IPv6 range cannot keep
/// the pool's lock for long.
const MAX_CANDIDATES: u64 = 1 << 16;

/// The block of `size` addresses (a power of two) that starts at `first`.
fn block_at(family: Family, first: u128, size: u128) -> Option<IpNet> {
    let length = u8::try_from(family.bits() as u32 - size.trailing_zeros()).ok()?;
    IpNet::new(family.address(first)?, length).ok()
}

/// The addresses of a block, first to last.
fn addresses_of(block: IpNet) -> impl Iterator<Item = IpAddr> {
    let family = Family::of(block.network());
    let (first, last) = (value_of(block.network()), value_of(block.broadcast()));
    (first..=last).filter_map(move |v| family.address(v))
}

impl PoolEntry {
    /// Leases a free block of `size` addresses of `family` (or the `requested` one) to `holder`.
    /// A block holder that holds a block already gets it again. Refused when the pool has no
    /// such family, no block of that size whose allocatable addresses are all free, or the
    /// requested block is not free.
    pub fn lease_block(
        &mut self,
        holder: &HolderKey,
        family: Family,
        size: u32,
        requested: Option<IpNet>,
    ) -> Result<IpNet, AllocError> {
        if let Some(block) = self.leased.get(holder) {
            return Ok(*block);
        }
        let pool = self.family_pool(family).ok_or(AllocError::FamilyNotInPool(family))?;
        let block = match requested {
            Some(block) => {
                let free = Family::of(block.network()) == family
                    && u128::from(size) == block_size(block)
                    && block_is_free(pool, block);
                if !free {
                    return Err(AllocError::Requested {
                        address: block.network(),
                        reason: format!("the block {block} is not free in the pool"),
                    });
                }
                block
            }
            None => find_free_block(pool, family, u128::from(size)).ok_or(AllocError::Exhausted(family))?,
        };
        self.hold_block(holder, block);
        Ok(block)
    }

    /// Records that `holder` holds `block` (granted earlier, seen by the watch): its allocatable
    /// addresses are used. Returns the addresses of it other holders hold too (a conflict).
    pub fn hold_block(&mut self, holder: &HolderKey, block: IpNet) -> Vec<IpAddr> {
        if self.leased.get(holder) == Some(&block) {
            return Vec::new();
        }
        self.drop_block(holder);
        let shared: Vec<IpAddr> = self.leased_elsewhere(holder, block);
        self.leased.insert(holder.clone(), block);
        self.mark_block(block);
        shared
    }

    /// The addresses of `block` that other holders (claims, objects, other blocks) hold.
    fn leased_elsewhere(&self, holder: &HolderKey, block: IpNet) -> Vec<IpAddr> {
        let others: Vec<IpNet> = self.leased.iter().filter(|(h, _)| *h != holder).map(|(_, b)| *b).collect();
        addresses_of(block).filter(|ip| self.users_of(*ip) > 0 || others.iter().any(|b| b.contains(ip))).collect()
    }

    fn mark_block(&mut self, block: IpNet) {
        if let Some(pool) = self.allocator_for(block.network()) {
            let _ = pool.allocate_range(block.network(), block.broadcast());
        }
    }

    /// Ends `holder`'s lease: the block's addresses nobody else holds are free again. Returns
    /// true when any became free.
    pub fn drop_block(&mut self, holder: &HolderKey) -> bool {
        let Some(block) = self.leased.remove(holder) else { return false };
        let still: Vec<IpNet> = self.leased.values().copied().collect();
        let mut freed = false;
        for ip in addresses_of(block) {
            let held = self.users_of(ip) > 0
                || self.foreign.contains(&ip)
                || self.reserved(ip).is_some()
                || still.iter().any(|b| b.contains(&ip));
            if !held && let Some(pool) = self.allocator_for(ip) {
                freed |= pool.check(ip).is_ok() && pool.release(ip);
            }
        }
        freed
    }

    /// Marks every leased block used again in freshly built allocators.
    pub(super) fn carry_blocks_over(&mut self) {
        let blocks: Vec<IpNet> = self.leased.values().copied().collect();
        for block in blocks {
            self.mark_block(block);
        }
    }

    /// Whether a claim or an `IPAddress` holds an address of `block` (a spoke's pool, before it
    /// returns the block).
    pub fn holds_in(&self, block: IpNet) -> bool {
        self.holdings.addresses().iter().any(|ip| block.contains(ip))
    }

    /// The holders of addresses of `block`.
    pub fn holders_in(&self, block: IpNet) -> Vec<HolderKey> {
        self.holdings
            .iter()
            .filter(|(_, holds)| holds.addresses().any(|ip| block.contains(&ip)))
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// The blocks leased, by holder.
    pub fn leased_blocks(&self) -> impl Iterator<Item = (&HolderKey, &IpNet)> + '_ {
        self.leased.iter()
    }

    /// The holder of the leased block that contains `ip`, if any.
    pub fn block_holder(&self, ip: IpAddr) -> Option<&HolderKey> {
        self.leased.iter().find(|(_, b)| b.contains(&ip)).map(|(h, _)| h)
    }

    fn family_pool(&self, family: Family) -> Option<&FamilyPool> {
        self.allocators().ok()?.iter().find(|p| p.family() == family)
    }
}

fn block_size(block: IpNet) -> u128 {
    value_of(block.broadcast()) - value_of(block.network()) + 1
}

/// Whether some address of `block` is allocatable and every allocatable one is free.
fn block_is_free(pool: &FamilyPool, block: IpNet) -> bool {
    let mut allocatable = addresses_of(block).filter(|ip| pool.check(*ip).is_ok()).peekable();
    allocatable.peek().is_some() && allocatable.all(|ip| !pool.is_allocated(ip))
}

/// The lowest aligned block of `size` addresses with an allocatable address and none in use.
fn find_free_block(pool: &FamilyPool, family: Family, size: u128) -> Option<IpNet> {
    let mut looked = 0u64;
    let ranges: Vec<(IpAddr, IpAddr)> = pool.allocatable_ranges().collect();
    for (first, last) in ranges {
        let mut start = value_of(first) & !(size - 1);
        while start <= value_of(last) && looked < MAX_CANDIDATES {
            looked += 1;
            if let Some(block) = block_at(family, start, size)
                && block_is_free(pool, block)
            {
                return Some(block);
            }
            match start.checked_add(size) {
                Some(next) => start = next,
                None => break,
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_at_an_aligned_start_has_the_prefix_of_its_size() {
        assert_eq!(
            block_at(Family::V4, value_of("10.0.0.16".parse().unwrap()), 16),
            Some("10.0.0.16/28".parse().unwrap())
        );
        assert_eq!(
            block_at(Family::V6, value_of("fd00::100".parse().unwrap()), 256),
            Some("fd00::100/120".parse().unwrap())
        );
        assert_eq!(addresses_of("10.0.0.4/30".parse().unwrap()).count(), 4);
        assert_eq!(block_size("10.0.0.0/28".parse().unwrap()), 16);
    }
}
