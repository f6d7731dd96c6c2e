//! One pool's allocation state: its allocators, and who holds which address.
//!
//! An address is held by a claim (from the moment it is allocated until the claim is released)
//! and by the `IPAddress` object that records it (from the watch). Claim and object share a
//! namespace and name, so both holds are keyed by [`HolderKey`]. The allocator marks an address
//! used exactly while at least one holder holds it: an address is never freed while either the
//! claim or its object still stands, and two holders of one address are a conflict to report.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;

use std::sync::Arc;

use crate::allocator::{Family, FamilyPool, Marked};

use super::PoolFacts;
use super::keys::PoolKey;
use super::registry::Registry;
use super::reservations::{ClaimOwner, Reserved};
use super::spec::PoolSpec;

mod allocating;
mod leasing;
mod memories;
mod reserving;

use super::holdings::{Holdings, Holds};
use super::keys::HolderKey;

/// What a claim asks of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// The family to allocate from; the pool's first family when unset.
    pub family: Option<Family>,
    /// A specific address.
    pub address: Option<IpAddr>,
    /// The claim's owners, which reservations may match.
    pub owners: Vec<ClaimOwner>,
}

/// Why a pool could not hand out an address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("the pool does not exist (yet)")]
    PoolMissing,
    #[error("the pool's spec is invalid: {0}")]
    PoolInvalid(String),
    #[error("the pool has no {0} addresses")]
    FamilyNotInPool(Family),
    #[error("the pool has no free {0} address")]
    Exhausted(Family),
    #[error("the requested address {address} cannot be allocated: {reason}")]
    Requested { address: IpAddr, reason: String },
    /// The claim's own `IPAddress` records an address it cannot have: someone else holds it, or
    /// the pool may not hand it out.
    #[error("{address} cannot be the claim's: {reason}")]
    Conflict { address: IpAddr, reason: String },
}

/// Which of a holder's holds a change is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldKind {
    /// The `IPAddress` object that records the address.
    Object,
    /// The claim, from allocation until it is released.
    Claim,
}

/// The pool object as the index knows it: the one place its spec, facts and allocators live.
pub enum PoolState {
    /// No object: not listed yet, or deleted. Holds stay; nothing is handed out.
    Missing,
    /// An object whose spec describes no addresses, and why.
    Invalid { spec: PoolSpec, facts: PoolFacts, reason: String },
    /// An object whose allocators hand out addresses, and the addresses it keeps for claims.
    Ready { spec: PoolSpec, facts: PoolFacts, allocators: Vec<FamilyPool>, reservations: Vec<Reserved> },
}

impl PoolState {
    fn spec(&self) -> Option<&PoolSpec> {
        match self {
            PoolState::Missing => None,
            PoolState::Invalid { spec, .. } | PoolState::Ready { spec, .. } => Some(spec),
        }
    }

    fn facts(&self) -> Option<&PoolFacts> {
        match self {
            PoolState::Missing => None,
            PoolState::Invalid { facts, .. } | PoolState::Ready { facts, .. } => Some(facts),
        }
    }
}

/// What applying a pool object changed.
pub struct Applied {
    /// The object is new to the index (start-up, leader change, or created).
    pub first_sight: bool,
    pub spec_changed: bool,
    pub facts_changed: bool,
    /// Held addresses that lie outside the pool as it is now.
    pub outside: Vec<IpAddr>,
}

/// One pool's state.
pub struct PoolEntry {
    key: Arc<PoolKey>,
    registry: Arc<Registry>,
    state: PoolState,
    /// Each holder's holds, and who holds each address.
    holdings: Holdings,
    waiting: BTreeSet<HolderKey>,
    /// The address each recently released claim had, and until when it is remembered. A
    /// memory reserves nothing: the address is free for anyone, and a claim of the same name
    /// gets it back only if nobody took it meanwhile.
    remembered: HashMap<HolderKey, (IpAddr, Timestamp)>,
    /// Addresses this pool's allocator skips because an overlapping pool holds them.
    foreign: BTreeSet<IpAddr>,
    /// Holders of an address whose other holders changed (a conflict began or ended): their
    /// claims are to look again.
    woken: BTreeSet<HolderKey>,
    /// Blocks of a hub pool leased to spokes, by the `AddressBlock` that holds each.
    leased: std::collections::BTreeMap<HolderKey, ipnet::IpNet>,
}

impl PoolEntry {
    pub fn new(key: PoolKey, registry: Arc<Registry>) -> Self {
        PoolEntry {
            key: Arc::new(key),
            registry,
            foreign: BTreeSet::new(),
            state: PoolState::Missing,
            holdings: Holdings::default(),
            waiting: BTreeSet::new(),
            remembered: HashMap::new(),
            woken: BTreeSet::new(),
            leased: std::collections::BTreeMap::new(),
        }
    }

    /// The pool object was seen (created or changed). A new or edited spec gets new allocators,
    /// with every held address carried over; changed facts are only recorded.
    pub fn apply(&mut self, spec: &PoolSpec, facts: PoolFacts) -> Applied {
        let first_sight = matches!(self.state, PoolState::Missing);
        let spec_changed = self.state.spec() != Some(spec);
        let facts_changed = self.state.facts() != Some(&facts);
        let outside = if spec_changed {
            let released = self.released_oldest_first();
            let checked = spec.allocators().and_then(|a| spec.reservations(&a).map(|r| (a, r)));
            self.state = match checked {
                Ok((allocators, reservations)) => {
                    PoolState::Ready { spec: spec.clone(), facts, allocators, reservations }
                }
                Err(reason) => PoolState::Invalid { spec: spec.clone(), facts, reason },
            };
            let outside = self.carry_holds_over();
            self.set_reserved_aside();
            self.recall_releases(released);
            outside
        } else {
            match &mut self.state {
                PoolState::Invalid { facts: old, .. } | PoolState::Ready { facts: old, .. } => *old = facts,
                PoolState::Missing => {}
            }
            self.out_of_range()
        };
        Applied { first_sight, spec_changed, facts_changed, outside }
    }

    /// The pool object is gone: holds stay, nothing can be allocated.
    pub fn delete(&mut self) {
        self.state = PoolState::Missing;
    }

    /// The pool's spec, when its object is known.
    pub fn spec(&self) -> Option<&PoolSpec> {
        self.state.spec()
    }

    /// The pool's facts, when its object is known.
    pub fn facts(&self) -> Option<&PoolFacts> {
        self.state.facts()
    }

    /// Whether the index knows no object of this pool.
    pub fn is_missing(&self) -> bool {
        matches!(self.state, PoolState::Missing)
    }

    fn allocators_mut(&mut self) -> Option<&mut Vec<FamilyPool>> {
        match &mut self.state {
            PoolState::Ready { allocators, .. } => Some(allocators),
            _ => None,
        }
    }

    /// The free addresses whose release order the allocators remember, released longest ago
    /// first (`LeastRecentlyReleased` pools only).
    pub fn released_oldest_first(&self) -> Vec<IpAddr> {
        match &self.state {
            PoolState::Ready { allocators, .. } => {
                allocators.iter().flat_map(FamilyPool::released_oldest_first).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Tells a `LeastRecentlyReleased` pool's allocators that these free addresses were
    /// released, in this order (oldest first); held addresses and other strategies are left be.
    pub fn recall_releases(&mut self, released: impl IntoIterator<Item = IpAddr>) {
        for ip in released {
            if self.users_of(ip) == 0
                && !self.foreign.contains(&ip)
                && let Some(pool) = self.allocator_for(ip)
            {
                let _ = pool.recall_release(ip);
            }
        }
    }

    /// Marks every held address in new allocators; returns those that now lie outside the pool.
    fn carry_holds_over(&mut self) -> Vec<IpAddr> {
        self.foreign.clear();
        let mut outside = Vec::new();
        let users = self.holdings.addresses();
        if let Some(pools) = self.allocators_mut() {
            for ip in users {
                match pools.iter_mut().find(|p| p.family() == Family::of(ip)) {
                    Some(pool) => {
                        if pool.mark_used(ip) == Marked::OutOfRange {
                            outside.push(ip);
                        }
                    }
                    None => outside.push(ip),
                }
            }
        }
        outside.sort();
        self.carry_blocks_over();
        outside
    }

    /// Records or drops one hold of a holder. Returns true when an address became free.
    pub fn set_hold(&mut self, holder: &HolderKey, kind: HoldKind, ip: Option<IpAddr>) -> bool {
        let before = self.holdings.get(holder);
        let mut holds = before;
        match kind {
            HoldKind::Object => holds.object = ip,
            HoldKind::Claim => holds.claim = ip,
        }
        if holds == before {
            return false;
        }
        self.holdings.set(holder, holds);
        let mut freed = false;
        for old in before.addresses() {
            if !holds.uses(old) {
                freed |= self.dropped_user(old);
            }
        }
        for new in holds.addresses() {
            if !before.uses(new) {
                self.added_user(new);
            }
        }
        freed
    }

    fn allocator_for(&mut self, ip: IpAddr) -> Option<&mut FamilyPool> {
        self.allocators_mut()?.iter_mut().find(|p| p.family() == Family::of(ip))
    }

    /// A holder has begun to hold `ip` (the holdings say so already).
    fn added_user(&mut self, ip: IpAddr) {
        let users = self.holdings.users_of(ip);
        if users > 1 {
            // A conflict began: every holder's claim is to report it.
            self.woken.extend(self.holdings.users(ip).cloned());
        }
        if users == 1 {
            self.registry.add(ip, &self.key);
            // Held here now: no longer merely skipped for an overlapping pool.
            if !self.foreign.remove(&ip)
                && let Some(pool) = self.allocator_for(ip)
            {
                let _ = pool.mark_used(ip);
            }
        }
    }

    /// A holder has let go of `ip` (the holdings say so already). Returns true when it became free.
    fn dropped_user(&mut self, ip: IpAddr) -> bool {
        if self.holdings.users_of(ip) > 0 {
            // A conflict may have ended: the holders left look again.
            self.woken.extend(self.holdings.users(ip).cloned());
            return false;
        }
        self.registry.remove(ip, &self.key);
        if self.block_holder(ip).is_some() {
            // Leased to a spoke: it stays used while the block is.
            return false;
        }
        if self.registry.held_elsewhere(ip, &self.key).is_some() {
            // An overlapping pool holds it too: keep skipping it.
            self.foreign.insert(ip);
            return false;
        }
        if self.reserved(ip).is_some() {
            // Free for its claim only: it stays set aside, and the waiting claims look again
            // (its claim may be one of them).
            return true;
        }
        self.allocator_for(ip).is_some_and(|pool| pool.release(ip))
    }

    /// How many holders hold an address.
    pub fn users_of(&self, ip: IpAddr) -> usize {
        self.holdings.users_of(ip)
    }

    /// The address a holder's claim holds, if any.
    pub fn claim_hold(&self, holder: &HolderKey) -> Option<IpAddr> {
        self.holdings.get(holder).claim
    }

    /// The address a holder's `IPAddress` object holds, if any.
    pub fn object_hold(&self, holder: &HolderKey) -> Option<IpAddr> {
        self.holdings.get(holder).object
    }

    /// Makes `ip`, which the claim's `IPAddress` records, the claim's address: only if nobody
    /// else holds it, here or in an overlapping pool, and, unless `bound` (the claim's status
    /// already names that `IPAddress`: it was served before, perhaps from a pool since shrunk),
    /// the pool may hand it out (in range, not the gateway, not reserved or excluded). A refused
    /// address stays held by the object, so it is never handed to another claim.
    pub fn adopt(&mut self, holder: &HolderKey, ip: IpAddr, bound: bool) -> Result<(), AllocError> {
        let conflict = self.held_by_others(holder, ip).or_else(|| {
            if bound {
                return None;
            }
            let PoolState::Ready { allocators: pools, .. } = &self.state else {
                return None;
            };
            match pools.iter().find(|p| p.family() == Family::of(ip)) {
                None => Some(format!("the pool has no {} addresses", Family::of(ip))),
                Some(pool) => pool.check(ip).err().map(|why| format!("the pool may not hand it out ({why})")),
            }
        });
        if let Some(reason) = conflict {
            return Err(AllocError::Conflict { address: ip, reason });
        }
        self.set_hold(holder, HoldKind::Claim, Some(ip));
        self.waiting.remove(holder);
        Ok(())
    }

    /// Who else holds `ip`, in words, if anyone: another holder in this pool, or an
    /// overlapping pool.
    pub(crate) fn held_by_others(&self, holder: &HolderKey, ip: IpAddr) -> Option<String> {
        let mut others: Vec<String> =
            self.holdings.users(ip).filter(|h| *h != holder).map(ToString::to_string).collect();
        others.sort();
        if !others.is_empty() {
            return Some(format!("IPAddress {} also holds it", crate::api::bounded::list(&others, 5)));
        }
        if let Some(block) = self.block_holder(ip) {
            return Some(format!("it is in the block AddressBlock {block} leased to a spoke"));
        }
        self.registry.held_elsewhere(ip, &self.key).map(|other| format!("the overlapping {other} holds it"))
    }

    /// The holders whose conflicts began or ended since the last call.
    pub fn take_woken(&mut self) -> Vec<HolderKey> {
        std::mem::take(&mut self.woken).into_iter().collect()
    }

    /// Remembers a claim that found the pool full, to wake it when an address is freed.
    pub fn wait_for_room(&mut self, holder: &HolderKey) {
        self.waiting.insert(holder.clone());
    }

    /// Stops waiting for a claim (deleted, or allocated elsewhere).
    pub fn stop_waiting(&mut self, holder: &HolderKey) {
        self.waiting.remove(holder);
    }

    /// How many claims wait for this pool.
    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }

    /// The claims waiting for room, which are handed over (and forgotten) to be retried.
    pub fn take_waiting(&mut self) -> Vec<HolderKey> {
        std::mem::take(&mut self.waiting).into_iter().collect()
    }

    /// How many addresses are held, by anyone.
    pub fn held_addresses(&self) -> usize {
        self.holdings.address_count()
    }

    /// How many `IPAddress` objects are known to reference the pool.
    pub fn address_objects(&self) -> usize {
        self.holdings.iter().filter(|(_, h)| h.object.is_some()).count()
    }

    /// The pool this entry is of.
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Whether nothing is left in the entry: no holds, no waiting claims, no remembered address.
    pub fn is_vacant(&self) -> bool {
        self.holdings.is_empty() && self.waiting.is_empty() && self.remembered.is_empty() && self.leased.is_empty()
    }

    /// How many claims hold an address whose `IPAddress` is not known (yet).
    pub fn in_flight(&self) -> usize {
        self.holdings.iter().filter(|(_, h)| h.claim.is_some() && h.object.is_none()).count()
    }

    /// Addresses held by more than one holder, with their holders.
    pub fn conflicts(&self) -> Vec<(IpAddr, Vec<HolderKey>)> {
        self.holdings
            .addresses()
            .into_iter()
            .filter(|&ip| self.holdings.users_of(ip) > 1)
            .map(|ip| {
                let mut holders: Vec<HolderKey> = self.holdings.users(ip).cloned().collect();
                holders.sort();
                (ip, holders)
            })
            .collect()
    }

    /// The allocators (for counts), or why there are none.
    pub fn allocators(&self) -> Result<&[FamilyPool], &str> {
        match &self.state {
            PoolState::Missing => Err("the pool object is not known"),
            PoolState::Invalid { reason, .. } => Err(reason),
            PoolState::Ready { allocators, .. } => Ok(allocators),
        }
    }

    /// Held addresses that lie in no allocator of their family (e.g. a pool that was shrunk).
    pub fn out_of_range(&self) -> Vec<IpAddr> {
        let PoolState::Ready { allocators: pools, .. } = &self.state else {
            return Vec::new();
        };
        // Every pool event asks: one pass over the holders, and only what lies outside sorted.
        let mut outside: Vec<IpAddr> = self
            .holdings
            .iter()
            .flat_map(|(_, holds)| holds.addresses())
            .filter(|&ip| !pools.iter().any(|p| p.family() == Family::of(ip) && p.check(ip).is_ok()))
            .collect();
        outside.sort();
        outside.dedup();
        outside
    }
}
