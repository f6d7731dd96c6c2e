//! Spoke pools (a pool with `spec.hub`) as the index sees them: their spec limited to the
//! blocks the hub leased to them. The pool watch hands a spoke pool's object here instead of
//! to the index directly; the spoke's session with the hub hands over the blocks. Until the
//! session has listed the blocks, none is known and nothing is allocatable: addresses already
//! held stay held (out of range), and nothing new is handed out on partial knowledge.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use ipnet::IpNet;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use crate::api::hub::HubSource;
use crate::index::{HolderKey, Index, PoolFacts, PoolKey, PoolSpec, within_blocks};
use crate::sync::lock;

/// What the pool watch last saw of a spoke pool.
#[derive(Clone)]
struct Seen {
    spec: crate::api::IPPoolSpec,
    facts: PoolFacts,
    remembered: Vec<(HolderKey, IpAddr, Timestamp)>,
}

#[derive(Default)]
struct Spoke {
    seen: Option<Seen>,
    /// The blocks the hub granted; None until the session has listed them.
    blocks: Option<Vec<IpNet>>,
    /// What keeps the session from the hub now, if anything (for the claims that wait).
    problem: Option<String>,
    /// Blocks of held addresses that the hub refused because someone else has them (a spoke
    /// restored from a backup taken before it gave them back): its addresses there are not its.
    lost: Vec<IpNet>,
}

/// How a spoke pool is leaving, as last seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leaving {
    pub deleting: bool,
    pub moving: bool,
}

/// Every spoke pool of this cluster. Cheap to clone.
#[derive(Clone)]
pub struct SpokePools {
    index: Index,
    pools: Arc<Mutex<HashMap<PoolKey, Spoke>>>,
    /// Moves whenever a spoke pool appears, changes its `spec.hub` or goes.
    changed: Arc<watch::Sender<u64>>,
}

impl SpokePools {
    pub fn new(index: Index) -> Self {
        SpokePools { index, pools: Arc::default(), changed: Arc::new(watch::channel(0).0) }
    }

    /// A pool object was seen: a spoke pool's goes to the index limited to its blocks. Returns
    /// false for any other pool, which the caller hands to the index as it is.
    pub fn observe(
        &self,
        key: &PoolKey,
        spec: &PoolSpec,
        facts: PoolFacts,
        remembered: &[(HolderKey, IpAddr, Timestamp)],
    ) -> bool {
        let PoolSpec::Addresses(spec) = spec else { return false };
        let Some(hub) = spec.hub.as_deref() else {
            self.forget(key);
            return false;
        };
        let mut pools = lock(&self.pools);
        let spoke = pools.entry(key.clone()).or_default();
        let hub_changed = spoke.seen.as_ref().and_then(|s| s.spec.hub.as_deref()) != Some(hub);
        if hub_changed {
            // Another hub, pool or namespace: the blocks known are not of it.
            spoke.blocks = None;
        }
        spoke.seen = Some(Seen { spec: spec.clone(), facts, remembered: remembered.to_vec() });
        self.apply(key, spoke, None);
        drop(pools);
        if hub_changed {
            self.changed.send_modify(|n| *n += 1);
        }
        true
    }

    /// The pool object is gone (or no longer a spoke pool).
    pub fn forget(&self, key: &PoolKey) {
        if lock(&self.pools).remove(key).is_some() {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// The blocks the hub granted to the pool, as the session listed them.
    pub fn set_blocks(&self, key: &PoolKey, mut blocks: Vec<IpNet>) {
        blocks.sort();
        let mut pools = lock(&self.pools);
        let Some(spoke) = pools.get_mut(key) else { return };
        if spoke.blocks.as_ref() != Some(&blocks) {
            spoke.blocks = Some(blocks);
            self.apply(key, spoke, None);
        }
    }

    /// Takes `block` out of the pool's allocatable addresses, only if no claim or `IPAddress`
    /// holds an address of it (checked under the pool's lock). True when it was taken out: the
    /// block may then be returned to the hub.
    pub fn vacate(&self, key: &PoolKey, block: IpNet) -> bool {
        let mut pools = lock(&self.pools);
        let Some(spoke) = pools.get_mut(key) else { return false };
        let Some(blocks) = spoke.blocks.as_ref() else { return false };
        let rest: Vec<IpNet> = blocks.iter().copied().filter(|b| *b != block).collect();
        let before = spoke.blocks.replace(rest);
        if self.apply(key, spoke, Some(block)) {
            true
        } else {
            spoke.blocks = before;
            false
        }
    }

    /// The blocks known for the pool; None until listed.
    #[cfg(test)]
    pub fn blocks(&self, key: &PoolKey) -> Option<Vec<IpNet>> {
        lock(&self.pools).get(key)?.blocks.clone()
    }

    /// Whether the pool is on its way out: being deleted, or being taken elsewhere by
    /// `clusterctl move`. None when the pool is not known.
    pub fn leaving(&self, key: &PoolKey) -> Option<Leaving> {
        let pools = lock(&self.pools);
        let facts = &pools.get(key)?.seen.as_ref()?.facts;
        Some(Leaving { deleting: facts.deleting, moving: facts.moving })
    }

    /// Every spoke pool with its `spec.hub`.
    pub fn sources(&self) -> Vec<(PoolKey, HubSource)> {
        lock(&self.pools)
            .iter()
            .filter_map(|(key, spoke)| Some((key.clone(), spoke.seen.as_ref()?.spec.hub.as_deref()?.clone())))
            .collect()
    }

    /// The spoke pool's spec as written (not limited to its blocks).
    pub fn spec(&self, key: &PoolKey) -> Option<crate::api::IPPoolSpec> {
        Some(lock(&self.pools).get(key)?.seen.as_ref()?.spec.clone())
    }

    /// Records what keeps the pool's session from the hub (None: nothing). True when it changed.
    pub fn set_problem(&self, key: &PoolKey, problem: Option<String>) -> bool {
        let mut pools = lock(&self.pools);
        let Some(spoke) = pools.get_mut(key) else { return false };
        let changed = spoke.problem != problem;
        spoke.problem = problem;
        changed
    }

    /// What keeps the pool's session from the hub, if anything.
    pub fn problem(&self, key: &PoolKey) -> Option<String> {
        lock(&self.pools).get(key)?.problem.clone()
    }

    /// Records the blocks the hub refused to give back to the pool because another holds them.
    /// Wakes the claims holding an address of a block newly lost, which then let it go.
    pub fn set_lost(&self, key: &PoolKey, mut lost: Vec<IpNet>) {
        lost.sort();
        let newly: Vec<IpNet> = {
            let mut pools = lock(&self.pools);
            let Some(spoke) = pools.get_mut(key) else { return };
            let newly = lost.iter().copied().filter(|b| !spoke.lost.contains(b)).collect();
            spoke.lost = lost;
            newly
        };
        for block in newly {
            for holder in self.index.holders_in(key, block) {
                self.index.trigger(crate::index::Trigger::Claim(holder));
            }
        }
    }

    /// The block the hub refused to give back to the pool that holds `ip`, if any.
    pub fn lost_block(&self, key: &PoolKey, ip: IpAddr) -> Option<IpNet> {
        lock(&self.pools).get(key)?.lost.iter().find(|b| b.contains(&ip)).copied()
    }

    /// Resolves each time a spoke pool appears, changes hub or goes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Hands the pool to the index, limited to its blocks (none while unknown). False when
    /// `vacated` still holds an address, and nothing changed.
    fn apply(&self, key: &PoolKey, spoke: &Spoke, vacated: Option<IpNet>) -> bool {
        let Some(seen) = &spoke.seen else { return false };
        let limited = within_blocks(&seen.spec, spoke.blocks.as_deref().unwrap_or_default());
        self.index
            .upsert_pool_unless(key, &PoolSpec::Addresses(limited), seen.facts.clone(), &seen.remembered, vacated)
            .is_some()
    }
}
