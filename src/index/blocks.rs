//! The index's side of pools shared through a hub. On the hub: the blocks of a pool leased to
//! spokes, each held for the `AddressBlock` that records it. On a spoke: what its pool's
//! allocators have free, which tells it when to lease another block.

use std::net::IpAddr;

use ipnet::IpNet;

use super::{AllocError, HolderKey, Index, PoolKey, Trigger};
use crate::allocator::Family;
use crate::sync::lock;

/// One family of a pool: its free and used addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub family: Family,
    pub free: u128,
    pub used: u128,
}

impl Index {
    /// Leases a free block of `pool` to `holder` (an `AddressBlock`), or the `requested` one.
    pub fn lease_block(
        &self,
        pool: &PoolKey,
        holder: &HolderKey,
        family: Family,
        size: u32,
        requested: Option<IpNet>,
    ) -> Result<IpNet, AllocError> {
        let slot = self.existing_slot(pool).ok_or(AllocError::PoolMissing)?;
        let mut slot = lock(&slot);
        if slot.is_missing() {
            return Err(AllocError::PoolMissing);
        }
        let block = slot.lease_block(holder, family, size, requested)?;
        drop(slot);
        self.trigger(Trigger::Pool(pool.clone()));
        Ok(block)
    }

    /// Records a block the hub granted (seen by the watch). Returns the addresses of it that
    /// others hold too: a conflict to report, never resolved by taking one from its holder.
    pub fn hold_block(&self, pool: &PoolKey, holder: &HolderKey, block: IpNet) -> Vec<IpAddr> {
        let slot = self.slot(pool);
        let shared = lock(&slot).hold_block(holder, block);
        self.trigger(Trigger::Pool(pool.clone()));
        shared
    }

    /// Ends a block's lease: its addresses are free again for the hub's claims and other blocks.
    pub fn drop_block(&self, pool: &PoolKey, holder: &HolderKey) {
        let Some(slot) = self.existing_slot(pool) else { return };
        {
            let mut slot = lock(&slot);
            if slot.drop_block(holder) {
                self.wake_waiting(&mut slot);
            }
        }
        self.trigger(Trigger::Pool(pool.clone()));
        self.prune(pool);
    }

    /// The blocks of `pool` leased to spokes, by their holders.
    pub fn leased_blocks(&self, pool: &PoolKey) -> Vec<(HolderKey, IpNet)> {
        self.existing_slot(pool)
            .map(|slot| lock(&slot).leased_blocks().map(|(h, b)| (h.clone(), *b)).collect())
            .unwrap_or_default()
    }

    /// Each family of `pool` with its free and used addresses, and how many claims wait for it.
    pub fn room(&self, pool: &PoolKey) -> (Vec<Room>, usize) {
        let Some(slot) = self.existing_slot(pool) else { return (Vec::new(), 0) };
        let slot = lock(&slot);
        let rooms = slot
            .allocators()
            .map(|families| {
                families
                    .iter()
                    .map(|f| {
                        let counts = f.counts();
                        Room { family: f.family(), free: counts.free, used: counts.used }
                    })
                    .collect()
            })
            .unwrap_or_default();
        (rooms, slot.waiting_count())
    }

    /// The addresses held in `pool` that its allocators do not hand out (on a spoke: held
    /// addresses outside every block it knows).
    pub fn outside(&self, pool: &PoolKey) -> Vec<IpAddr> {
        self.existing_slot(pool).map(|slot| lock(&slot).out_of_range()).unwrap_or_default()
    }

    /// The holders of addresses of `block` in `pool`.
    pub fn holders_in(&self, pool: &PoolKey, block: IpNet) -> Vec<HolderKey> {
        self.existing_slot(pool).map(|slot| lock(&slot).holders_in(block)).unwrap_or_default()
    }

    /// Whether a claim or an `IPAddress` of `pool` holds an address of `block`.
    pub fn holds_in(&self, pool: &PoolKey, block: IpNet) -> bool {
        self.existing_slot(pool).is_some_and(|slot| lock(&slot).holds_in(block))
    }
}
