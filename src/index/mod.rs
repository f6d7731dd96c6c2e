//! The allocation index: every pool's allocator and holders, in memory.
//!
//! It is a cache of what the API server says, rebuilt from the `IPAddress` objects at start-up
//! (and at every leader change, since each leadership term starts a fresh index). Claims may
//! allocate only once it is [ready](Index::wait_ready): both pool kinds and all addresses listed.
//! Each pool has its own lock, so claims of different pools allocate in parallel while one
//! pool's allocations are serialised.

mod blocks;
mod entry;
mod holdings;
mod keys;
mod leased;
mod lookup;
mod registry;
mod report;
mod reservations;
mod spans;
mod spec;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::sync::{mpsc, watch};

use crate::sync::{lock, read, write};

pub use blocks::Room;
pub use entry::{AllocError, HoldKind, PoolEntry, Request};
pub use keys::{HolderKey, PoolKey, PoolKind};
pub use leased::within_blocks;
pub use lookup::AddressState;
use registry::Registry;
pub use registry::share_addresses;
pub use report::{FamilyReport, PoolReport};
pub use reservations::{ClaimMatch, ClaimOwner, Reserved};
pub use spec::{PoolSpec, build_allocators, build_prefix_allocator, family_settings};

/// What the index asks the controllers to look at again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A claim that waited for room: an address of its pool was freed.
    Claim(HolderKey),
    /// A pool whose counts or holders changed.
    Pool(PoolKey),
}

/// Facts of a pool object the claim controller needs besides its allocator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolFacts {
    pub uid: String,
    /// The pool carries its deletion-protection finalizer: addresses may be allocated from it.
    pub protected: bool,
    pub paused: bool,
    pub deleting: bool,
    /// The pool carries `ipam.cluster.x-k8s.io/skip-validate-delete-webhook`: `clusterctl move`
    /// is taking it (with its claims and addresses) to another management cluster.
    pub moving: bool,
    pub grace_period_seconds: i64,
    pub labels: std::collections::BTreeMap<String, String>,
    /// A global pool's `spec.namespaceSelector`: the namespaces whose claims it serves (None:
    /// every namespace; a namespaced pool serves its own and has none).
    pub namespace_selector: Option<crate::api::NamespaceSelector>,
}

/// The shared index. Cheap to clone.
#[derive(Clone)]
pub struct Index {
    pools: Arc<RwLock<HashMap<PoolKey, Arc<Mutex<PoolEntry>>>>>,
    /// How long a released claim's address is remembered for a claim of the same name (zero: not
    /// at all). A memory reserves nothing.
    sticky: SignedDuration,
    registry: Arc<Registry>,
    triggers: mpsc::UnboundedSender<Trigger>,
    ready: Arc<watch::Sender<bool>>,
    /// Purpose claims that found no pool with room: any pool change may be the one they need.
    purpose_waiters: Arc<Mutex<HashSet<HolderKey>>>,
    /// Every pool's allocatable ranges, for overlap checks that lock no other pool.
    spans: Arc<RwLock<spans::Spans>>,
    /// The time sticky addresses are remembered by: the API server's, not the local clock.
    clock: Clock,
    /// How many times a pool appeared, changed its spec or facts, or went (see
    /// [`Index::pool_changes`]).
    changes: Arc<AtomicU64>,
}

/// Where the index reads the time.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

impl Index {
    /// A new, not yet ready index, and the stream of triggers it emits. Released addresses are
    /// remembered for `sticky` for a claim of the same namespace and name.
    pub fn new(sticky: std::time::Duration) -> (Index, mpsc::UnboundedReceiver<Trigger>) {
        Index::with_clock(sticky, Arc::new(Timestamp::now))
    }

    /// Like [`Index::new`], reading the time from `clock`.
    pub fn with_clock(sticky: std::time::Duration, clock: Clock) -> (Index, mpsc::UnboundedReceiver<Trigger>) {
        let (triggers, receiver) = mpsc::unbounded_channel();
        let (ready, _) = watch::channel(false);
        let sticky = SignedDuration::try_from(sticky).unwrap_or(SignedDuration::MAX);
        let index = Index {
            pools: Arc::default(),
            sticky,
            registry: Arc::default(),
            triggers,
            ready: Arc::new(ready),
            purpose_waiters: Arc::default(),
            spans: Arc::default(),
            clock,
            changes: Arc::default(),
        };
        (index, receiver)
    }

    fn slot(&self, key: &PoolKey) -> Arc<Mutex<PoolEntry>> {
        if let Some(slot) = read(&self.pools).get(key) {
            return slot.clone();
        }
        let mut pools = write(&self.pools);
        pools
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Mutex::new(PoolEntry::new(key.clone(), self.registry.clone()))))
            .clone()
    }

    fn existing_slot(&self, key: &PoolKey) -> Option<Arc<Mutex<PoolEntry>>> {
        read(&self.pools).get(key).cloned()
    }

    /// Asks the controllers to look at something again.
    pub fn trigger(&self, trigger: Trigger) {
        // The receiver is gone only while shutting down.
        let _ = self.triggers.send(trigger);
    }

    fn wake_waiting(&self, slot: &mut PoolEntry) {
        for holder in slot.take_waiting() {
            self.trigger(Trigger::Claim(holder));
        }
    }

    /// Records a pool's new allocatable ranges and returns the pools whose overlap with it may
    /// have changed: those it overlapped before the change and those it overlaps after.
    fn respan(&self, key: &PoolKey, ranges: Vec<(IpAddr, IpAddr)>) -> Vec<PoolKey> {
        let mut spans = write(&self.spans);
        let mut touched = spans.overlapping(key);
        spans.set(key, ranges);
        touched.extend(spans.overlapping(key));
        touched.sort();
        touched.dedup();
        touched
    }

    fn trigger_pools(&self, pools: Vec<PoolKey>) {
        for pool in pools {
            self.trigger(Trigger::Pool(pool));
        }
    }

    /// Marks the index complete: every pool and address has been listed once.
    pub fn set_ready(&self) {
        self.ready.send_replace(true);
    }

    /// Marks the index incomplete again (a watch it depends on failed): claims wait in
    /// [`Index::wait_ready`] until it is whole.
    pub fn set_stale(&self) {
        self.ready.send_replace(false);
    }

    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Waits until the index is complete.
    pub async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        // Err means the sender is gone, which cannot happen while `self` holds it.
        let _ = ready.wait_for(|r| *r).await;
    }

    /// A pool object was seen (created or changed). Rebuilds its allocators when the spec changed.
    /// Returns the held addresses that lie outside the (new) pool.
    pub fn upsert_pool(
        &self,
        key: &PoolKey,
        spec: impl Into<PoolSpec>,
        facts: PoolFacts,
        remembered: &[(HolderKey, IpAddr, Timestamp)],
    ) -> Vec<IpAddr> {
        self.upsert_pool_unless(key, &spec.into(), facts, remembered, None).unwrap_or_default()
    }

    /// [`upsert_pool`](Self::upsert_pool), unless `vacated` holds an address: a spoke drops a
    /// block from its pool only while no claim holds an address of it, checked and applied
    /// under the pool's lock so that no claim can take one in between. None when refused.
    pub fn upsert_pool_unless(
        &self,
        key: &PoolKey,
        spec: &PoolSpec,
        facts: PoolFacts,
        remembered: &[(HolderKey, IpAddr, Timestamp)],
        vacated: Option<ipnet::IpNet>,
    ) -> Option<Vec<IpAddr>> {
        let slot = self.slot(key);
        let mut slot = lock(&slot);
        if vacated.is_some_and(|block| slot.holds_in(block)) {
            return None;
        }
        if slot.is_missing() && !self.sticky.is_zero() {
            // First sight of the pool (start-up, leader change): take the addresses its status
            // remembers for released claims.
            let now = (self.clock)();
            for (holder, ip, until) in remembered.iter().filter(|(_, _, until)| *until > now) {
                slot.remember(holder, *ip, *until);
            }
        }
        let applied = slot.apply(spec, facts);
        if applied.first_sight {
            // The release order of a `LeastRecentlyReleased` pool died with the process that
            // knew it; the sticky memory in the pool's status is the part that outlived it.
            let mut released: Vec<_> = remembered.iter().map(|(_, ip, until)| (*until, *ip)).collect();
            released.sort();
            slot.recall_releases(released.into_iter().map(|(_, ip)| ip));
        }
        let neighbours = if applied.spec_changed { self.respan(key, slot.ranges()) } else { Vec::new() };
        if applied.spec_changed || applied.facts_changed {
            self.changes.fetch_add(1, Ordering::SeqCst);
            self.wake_purpose_waiters();
            self.wake_waiting(&mut slot);
        }
        // The pools it overlapped before or overlaps now are to look at their overlaps again;
        // no other pool's can have changed. While the index is first built, every pool is
        // reconciled once its listing ends anyway.
        if self.is_ready() || !applied.first_sight {
            self.trigger_pools(neighbours);
        }
        self.trigger(Trigger::Pool(key.clone()));
        Some(applied.outside)
    }

    /// A pool object is gone. Its holders stay (their objects still exist until deleted).
    pub fn remove_pool(&self, key: &PoolKey) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        if let Some(slot) = self.existing_slot(key) {
            let mut slot = lock(&slot);
            slot.delete();
            let neighbours = self.respan(key, Vec::new());
            self.wake_waiting(&mut slot);
            self.trigger_pools(neighbours);
        }
        self.prune(key);
        self.wake_purpose_waiters();
    }

    /// Drops the slot of a pool whose object is gone (or never was) once nothing in it is left:
    /// no holds, no waiting claims, no remembered addresses. Only a slot nobody else is using
    /// right now is dropped, so no hold can land in a slot that is no longer in the map.
    fn prune(&self, key: &PoolKey) {
        let mut pools = write(&self.pools);
        let vacant = pools.get(key).is_some_and(|slot| {
            // Cloning a slot needs the map's lock, held here: a count of one stays one.
            Arc::strong_count(slot) == 1 && slot.try_lock().is_ok_and(|s| s.is_missing() && s.is_vacant())
        });
        if vacant {
            pools.remove(key);
        }
    }

    /// A count of pool changes: appearances, changes of spec or facts, removals. It moves before
    /// the claims waiting on such changes are woken, so a claim that signs up to wait and then
    /// finds the count moved since it read the pools knows it may have missed its wake.
    pub fn pool_changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// Remembers a purpose claim to be triggered when any pool appears, changes or goes.
    pub fn wait_for_purpose_pools(&self, holder: &HolderKey) {
        lock(&self.purpose_waiters).insert(holder.clone());
    }

    fn wake_purpose_waiters(&self) {
        let waiting = std::mem::take(&mut *lock(&self.purpose_waiters));
        for holder in waiting {
            self.trigger(Trigger::Claim(holder));
        }
    }

    /// A purpose claim found its pool: it no longer waits for the others it tried.
    pub fn stop_waiting(&self, pools: &[PoolKey], holder: &HolderKey) {
        for pool in pools {
            if let Some(slot) = self.existing_slot(pool) {
                lock(&slot).stop_waiting(holder);
            }
        }
        lock(&self.purpose_waiters).remove(holder);
    }

    /// Every known pool carrying `label`, with all its labels.
    pub fn pools_labelled(&self, label: &str) -> Vec<(PoolKey, BTreeMap<String, String>)> {
        let slots: Vec<(PoolKey, Arc<Mutex<PoolEntry>>)> =
            read(&self.pools).iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        slots
            .into_iter()
            .filter_map(|(key, slot)| {
                let slot = lock(&slot);
                let labels = &slot.facts()?.labels;
                labels.contains_key(label).then(|| (key, labels.clone()))
            })
            .collect()
    }

    /// The address a claim holds in `pool`, if any.
    pub fn claim_hold(&self, pool: &PoolKey, holder: &HolderKey) -> Option<IpAddr> {
        self.existing_slot(pool).and_then(|slot| lock(&slot).claim_hold(holder))
    }

    /// Whether `pool` could hand out an address now: it is valid and has a free one.
    pub fn has_room(&self, pool: &PoolKey) -> bool {
        self.existing_slot(pool).is_some_and(|slot| {
            let slot = lock(&slot);
            slot.allocators().is_ok_and(|families| families.iter().any(|f| f.counts().free > 0))
        })
    }

    /// Facts of a pool, when its object is known.
    pub fn pool_facts(&self, key: &PoolKey) -> Option<PoolFacts> {
        self.existing_slot(key).and_then(|slot| lock(&slot).facts().cloned())
    }

    /// The spec of a pool, when its object is known.
    pub fn pool_spec(&self, key: &PoolKey) -> Option<PoolSpec> {
        self.existing_slot(key).and_then(|slot| lock(&slot).spec().cloned())
    }

    /// Records or drops a hold on `pool` (`ip` None drops it).
    pub fn set_hold(&self, pool: &PoolKey, holder: &HolderKey, kind: HoldKind, ip: Option<IpAddr>) {
        let slot = if ip.is_some() { Some(self.slot(pool)) } else { self.existing_slot(pool) };
        let Some(slot) = slot else { return };
        {
            let mut slot = lock(&slot);
            if slot.set_hold(holder, kind, ip) {
                self.wake_waiting(&mut slot);
            }
            self.wake_conflicting(&mut slot);
        }
        drop(slot);
        // Any dropped hold changes the pool's report, as an object's hold does.
        if kind == HoldKind::Object || ip.is_none() {
            self.trigger(Trigger::Pool(pool.clone()));
        }
        if ip.is_none() {
            self.prune(pool);
        }
    }

    /// The address an `IPAddress` object of this holder records in `pool`.
    pub fn object_hold(&self, pool: &PoolKey, holder: &HolderKey) -> Option<IpAddr> {
        self.existing_slot(pool).and_then(|slot| lock(&slot).object_hold(holder))
    }

    /// Allocates an address of `pool` for a claim; the same address again for the same claim.
    /// A claim that finds the pool full is remembered and triggered when an address is freed.
    pub fn allocate(&self, pool: &PoolKey, holder: &HolderKey, request: Request) -> Result<IpAddr, AllocError> {
        let slot = self.slot(pool);
        let mut slot = lock(&slot);
        let result = slot.allocate(holder, request);
        if matches!(result, Err(AllocError::Exhausted(_))) {
            slot.wait_for_room(holder);
        }
        self.wake_conflicting(&mut slot);
        result
    }

    /// Makes the address the claim's `IPAddress` records the claim's, if nobody else holds it
    /// and (unless the claim is `bound` to it: its status names the `IPAddress`) the pool may
    /// hand it out (see [`PoolEntry::adopt`]).
    pub fn adopt(&self, pool: &PoolKey, holder: &HolderKey, ip: IpAddr, bound: bool) -> Result<(), AllocError> {
        let slot = self.slot(pool);
        let mut slot = lock(&slot);
        let result = slot.adopt(holder, ip, bound);
        self.wake_conflicting(&mut slot);
        result
    }

    /// Whether a holder other than `holder` holds `ip`, in this pool or an overlapping one.
    pub fn held_by_others(&self, pool: &PoolKey, holder: &HolderKey, ip: IpAddr) -> bool {
        let slot = self.slot(pool);
        lock(&slot).held_by_others(holder, ip).is_some()
    }

    /// Triggers the claims whose address gained or lost another holder.
    fn wake_conflicting(&self, slot: &mut PoolEntry) {
        for holder in slot.take_woken() {
            self.trigger(Trigger::Claim(holder));
        }
    }

    /// Remembers a claim to be triggered when the pool changes or an address of it is freed.
    pub fn wait_for_pool(&self, pool: &PoolKey, holder: &HolderKey) {
        lock(&self.slot(pool)).wait_for_room(holder);
    }

    /// Drops the hold of a claim whose `IPAddress` was never seen (the pool is going away and
    /// the claim will not be served from it), so that it no longer keeps the pool protected.
    pub fn drop_unwritten(&self, pool: &PoolKey, holder: &HolderKey) {
        if let Some(slot) = self.existing_slot(pool) {
            let mut slot = lock(&slot);
            if slot.object_hold(holder).is_none() && slot.claim_hold(holder).is_some() {
                slot.set_hold(holder, HoldKind::Claim, None);
                self.trigger(Trigger::Pool(pool.clone()));
            }
        }
    }

    /// Drops a claim's hold and its wait in every pool (a purpose claim whose pool is unknown).
    pub fn release_claim_everywhere(&self, holder: &HolderKey) {
        let keys: Vec<PoolKey> = read(&self.pools).keys().cloned().collect();
        for key in keys {
            self.release_claim(&key, holder);
        }
        lock(&self.purpose_waiters).remove(holder);
    }

    /// Drops a claim's hold and its wait. Its address is remembered for a claim of the same name
    /// for the sticky window (it is free for anyone meanwhile).
    pub fn release_claim(&self, pool: &PoolKey, holder: &HolderKey) {
        if let Some(slot) = self.existing_slot(pool) {
            let mut slot = lock(&slot);
            slot.stop_waiting(holder);
            if let Some(ip) = slot.claim_hold(holder)
                && !self.sticky.is_zero()
            {
                let until = (self.clock)().saturating_add(self.sticky).unwrap_or(Timestamp::MAX);
                slot.remember(holder, ip, until);
            }
            let held = slot.claim_hold(holder).is_some();
            if slot.set_hold(holder, HoldKind::Claim, None) {
                self.wake_waiting(&mut slot);
            }
            self.wake_conflicting(&mut slot);
            drop(slot);
            // The pool's report changes: a pool being deleted may have waited for this very
            // claim (a claim hold without its IPAddress counts as an address in flight).
            if held {
                self.trigger(Trigger::Pool(pool.clone()));
            }
        }
        self.prune(pool);
    }

    /// Forgets remembered addresses whose time is up, and gives back addresses skipped for
    /// overlapping pools that no longer hold them, in every pool.
    pub fn expire_remembered(&self) {
        let now = (self.clock)();
        let slots: Vec<_> = read(&self.pools).values().cloned().collect();
        let mut vacant = Vec::new();
        for slot in slots {
            let mut slot = lock(&slot);
            slot.expire_remembered(now);
            if slot.release_foreign() {
                self.wake_waiting(&mut slot);
            }
            if slot.is_missing() && slot.is_vacant() {
                vacant.push(slot.key().clone());
            }
        }
        for key in vacant {
            self.prune(&key);
        }
    }

    /// How many pools the index keeps a slot for.
    pub fn slots(&self) -> usize {
        read(&self.pools).len()
    }

    /// How many claims wait for a pool, over every pool.
    pub fn waiting_claims(&self) -> usize {
        let slots: Vec<_> = read(&self.pools).values().cloned().collect();
        slots.iter().map(|slot| lock(slot).waiting_count()).sum()
    }

    /// Counts, conflicts and validity of a pool, for its status.
    pub fn report(&self, pool: &PoolKey) -> PoolReport {
        let Some(slot) = self.existing_slot(pool) else {
            return PoolReport::default();
        };
        let mut report = PoolReport::of(&lock(&slot));
        report.overlaps = read(&self.spans).overlapping(pool);
        report
    }
}

#[cfg(test)]
mod adoption_tests;
#[cfg(test)]
mod blocks_tests;
#[cfg(test)]
mod tests;
