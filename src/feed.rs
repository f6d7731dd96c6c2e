//! The watches that fill the index: `IPAddress` objects become holds, pool objects become
//! allocators. Each feed also tells the index when its first full listing is done, and diffs
//! every re-listing so that objects deleted while the watch was down are forgotten.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::watcher::Event;
use tracing::{info, warn};

use crate::api::capi::IPAddress;
use crate::index::{HoldKind, HolderKey, Index, PoolKey, Trigger};

pub use blocks::{BlockFeed, block_holder, block_pool, granted};
pub use pool_object::PoolObject;
pub use spoke::SpokePools;

/// The bookkeeping of a watch's listings that both feeds share: which objects the current
/// listing brought, so that those it did not bring (deleted while the watch was down) are
/// forgotten at its end, and the end of the first listing.
struct Listings<K> {
    seen: Option<HashSet<K>>,
    on_first: Option<Box<dyn FnOnce() + Send>>,
}

/// How a listing ended.
struct ListingEnd<K> {
    /// Known objects the listing did not bring.
    gone: Vec<K>,
    /// It was the watch's first complete listing.
    first: bool,
}

impl<K: Clone + Eq + Hash> Listings<K> {
    /// `on_first` runs once, at the end of the first complete listing.
    fn new(on_first: impl FnOnce() + Send + 'static) -> Self {
        Listings { seen: None, on_first: Some(Box::new(on_first)) }
    }

    fn listed_once(&self) -> bool {
        self.on_first.is_none()
    }

    fn started(&mut self) {
        self.seen = Some(HashSet::new());
    }

    fn brought(&mut self, key: K) {
        if let Some(seen) = self.seen.as_mut() {
            seen.insert(key);
        }
    }

    fn ended<'a>(&mut self, known: impl Iterator<Item = &'a K>) -> ListingEnd<K>
    where
        K: 'a,
    {
        let gone = match self.seen.take() {
            Some(seen) => known.filter(|k| !seen.contains(*k)).cloned().collect(),
            None => Vec::new(),
        };
        let first = match self.on_first.take() {
            Some(done) => {
                done();
                true
            }
            None => false,
        };
        ListingEnd { gone, first }
    }
}

/// Feeds `IPAddress` watch events into the index.
pub struct AddressFeed {
    index: Index,
    /// The pool each address is in. Many addresses share a pool: they share its key too.
    known: HashMap<HolderKey, Arc<PoolKey>>,
    pools: HashSet<Arc<PoolKey>>,
    listings: Listings<HolderKey>,
    /// The watch failed since the last complete listing.
    stale: bool,
}

impl AddressFeed {
    /// `on_listed` runs once, after the first complete listing.
    pub fn new(index: Index, on_listed: impl FnOnce() + Send + 'static) -> Self {
        AddressFeed {
            index,
            known: HashMap::new(),
            pools: HashSet::new(),
            listings: Listings::new(on_listed),
            stale: false,
        }
    }

    pub fn apply(&mut self, event: &Event<IPAddress>) {
        match event {
            Event::Apply(address) => self.observe(address),
            Event::Delete(address) => self.forget(&holder_of(address)),
            Event::Init => self.listings.started(),
            Event::InitApply(address) => {
                self.listings.brought(holder_of(address));
                self.observe(address);
            }
            Event::InitDone => {
                let end = self.listings.ended(self.known.keys());
                for holder in end.gone {
                    self.forget(&holder);
                }
                if !end.first && self.stale {
                    self.stale = false;
                    self.index.set_ready();
                    info!("IPAddresses listed again after a watch failure: claims allocate again");
                }
            }
        }
    }

    /// The watch failed: addresses may have been made or deleted meanwhile, so no claim
    /// allocates until the listing that follows is complete.
    pub fn failed(&mut self) {
        // Before the first listing ends the index is not ready anyway.
        if self.listings.listed_once() && !self.stale {
            self.stale = true;
            self.index.set_stale();
            warn!("the IPAddress watch failed: allocations wait until every IPAddress is listed again");
        }
    }

    fn observe(&mut self, address: &IPAddress) {
        let holder = holder_of(address);
        let Some(pool) = PoolKey::of_address(&holder.namespace, &address.spec.pool_ref, address.annotations()) else {
            return;
        };
        let ip: Option<IpAddr> = address.spec.address.parse().ok();
        if ip.is_none() {
            warn!(address = %holder, value = %address.spec.address, "IPAddress records something that is not an IP address; ignoring it");
        }
        let before = self.known.get(&holder).map(|p| PoolKey::clone(p));
        let known = wake::Known {
            object: before.as_ref().and_then(|p| self.index.object_hold(p, &holder)),
            claim: self.index.claim_hold(&pool, &holder),
            pool: before,
        };
        if let Some(old) = known.pool.as_ref().filter(|old| **old != pool) {
            // Moved to another pool: it no longer holds its address in the old one.
            self.index.set_hold(old, &holder, HoldKind::Object, None);
        }
        self.index.set_hold(&pool, &holder, HoldKind::Object, ip);
        // The claim of the same name learns what it does not know yet (e.g. that it is being deleted).
        if wake::wakes_claim(address, &pool, ip, &known) {
            self.index.trigger(Trigger::Claim(holder.clone()));
        }
        let shared = match self.pools.get(&pool) {
            Some(shared) => shared.clone(),
            None => {
                let shared = Arc::new(pool);
                self.pools.insert(shared.clone());
                shared
            }
        };
        if let Some(old) = self.known.insert(holder, shared) {
            self.release(&old);
        }
    }

    /// Forgets the key of a pool the feed no longer knows any address in.
    fn release(&mut self, pool: &Arc<PoolKey>) {
        // One count is the caller's, one is `pools`'.
        if Arc::strong_count(pool) == 2 {
            self.pools.remove(pool);
        }
    }

    fn forget(&mut self, holder: &HolderKey) {
        if let Some(pool) = self.known.remove(holder) {
            self.release(&pool);
            self.index.set_hold(&pool, holder, HoldKind::Object, None);
            self.index.trigger(Trigger::Claim(holder.clone()));
        }
    }
}

fn holder_of(address: &IPAddress) -> HolderKey {
    HolderKey::new(&address.namespace().unwrap_or_default(), &address.name_any())
}

/// Feeds pool watch events (of one kind) into the index.
pub struct PoolFeed {
    index: Index,
    spokes: SpokePools,
    known: HashSet<PoolKey>,
    listings: Listings<PoolKey>,
}

impl PoolFeed {
    /// `on_listed` runs once, after the first complete listing.
    pub fn new(index: Index, spokes: SpokePools, on_listed: impl FnOnce() + Send + 'static) -> Self {
        PoolFeed { index, spokes, known: HashSet::new(), listings: Listings::new(on_listed) }
    }

    pub fn apply<K: PoolObject>(&mut self, event: &Event<K>) {
        match event {
            Event::Apply(pool) => self.observe(pool),
            Event::Delete(pool) => self.forget(&pool.key()),
            Event::Init => self.listings.started(),
            Event::InitApply(pool) => {
                self.listings.brought(pool.key());
                self.observe(pool);
            }
            Event::InitDone => {
                for key in self.listings.ended(self.known.iter()).gone {
                    self.forget(&key);
                }
            }
        }
    }

    fn observe<K: PoolObject>(&mut self, pool: &K) {
        let key = pool.key();
        let (spec, facts, remembered) = (pool.spec(), pool.facts(), pool.remembered());
        if !self.spokes.observe(&key, &spec, facts.clone(), &remembered) {
            self.index.upsert_pool(&key, spec, facts, &remembered);
        }
        self.known.insert(key);
    }

    fn forget(&mut self, key: &PoolKey) {
        if self.known.remove(key) {
            self.spokes.forget(key);
            self.index.remove_pool(key);
        }
    }
}

mod blocks;
mod pool_object;
mod spoke;
#[cfg(test)]
mod tests;
mod wake;
