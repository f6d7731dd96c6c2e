//! A pool entry's memories (sticky addresses, addresses skipped for overlapping pools), and
//! what the status reads off it.

use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;

use super::PoolEntry;
use crate::index::keys::HolderKey;

impl PoolEntry {
    /// Gives back the addresses skipped for overlapping pools that no longer hold them.
    /// Returns true when an address became free.
    pub fn release_foreign(&mut self) -> bool {
        let free: Vec<IpAddr> =
            self.foreign.iter().copied().filter(|ip| self.registry.held_elsewhere(*ip, &self.key).is_none()).collect();
        let mut freed = false;
        for ip in free {
            self.foreign.remove(&ip);
            freed |= self.reserved(ip).is_none() && self.allocator_for(ip).is_some_and(|pool| pool.release(ip));
        }
        freed
    }

    /// Remembers a released claim's address for a claim of the same name until `until`.
    pub fn remember(&mut self, holder: &HolderKey, ip: IpAddr, until: Timestamp) {
        self.remembered.insert(holder.clone(), (ip, until));
    }

    /// Forgets memories whose time is up.
    pub fn expire_remembered(&mut self, now: Timestamp) {
        self.remembered.retain(|_, (_, until)| *until > now);
    }

    /// The addresses remembered for released claims, with their deadlines.
    pub fn remembered(&self) -> Vec<(HolderKey, IpAddr, Timestamp)> {
        let mut all: Vec<_> = self.remembered.iter().map(|(h, (ip, until))| (h.clone(), *ip, *until)).collect();
        all.sort();
        all
    }

    /// The pool's allocatable ranges, every family.
    pub fn ranges(&self) -> Vec<(IpAddr, IpAddr)> {
        self.allocators().unwrap_or_default().iter().flat_map(|p| p.allocatable_ranges().collect::<Vec<_>>()).collect()
    }

    /// Holders whose `IPAddress` object records an address of this pool.
    pub fn object_holders(&self) -> Vec<HolderKey> {
        let mut holders: Vec<HolderKey> =
            self.holdings.iter().filter(|(_, h)| h.object.is_some()).map(|(k, _)| k.clone()).collect();
        holders.sort();
        holders
    }
}
