//! Feeds the hub's `AddressBlock` watch into the index: a granted block (its `status.cidr`
//! set) keeps its addresses used in the hub's pool until the object is deleted. The first
//! listing is part of the index's readiness, so the hub hands out no address of a block
//! granted before it started.

use std::collections::HashMap;

use ipnet::IpNet;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use tracing::{error, warn};

use super::Listings;
use crate::api::PoolReference;
use crate::api::hub::AddressBlock;
use crate::index::{HolderKey, Index, PoolKey, PoolKind};

/// Feeds `AddressBlock` watch events into the index.
pub struct BlockFeed {
    index: Index,
    known: HashMap<HolderKey, (PoolKey, IpNet)>,
    listings: Listings<HolderKey>,
}

/// The pool an `AddressBlock` is of, as the index names it.
pub fn block_pool(block: &AddressBlock) -> Option<PoolKey> {
    let pool = &block.spec.pool;
    let reference = PoolReference { api_group: None, kind: pool.kind.clone(), name: pool.name.clone() };
    let kind = PoolKind::of_reference(&reference).filter(|k| !k.is_prefix())?;
    Some(PoolKey::of_kind(kind, pool.namespace.as_deref().unwrap_or_default(), &pool.name))
}

/// The index's name of a block's holder: its namespace and name.
pub fn block_holder(block: &AddressBlock) -> HolderKey {
    HolderKey::new(&block.namespace().unwrap_or_default(), &block.name_any())
}

/// The block granted, if any.
pub fn granted(block: &AddressBlock) -> Option<IpNet> {
    block.status.as_ref()?.cidr.as_deref()?.parse().ok()
}

impl BlockFeed {
    /// `on_listed` runs once, after the first complete listing.
    pub fn new(index: Index, on_listed: impl FnOnce() + Send + 'static) -> Self {
        BlockFeed { index, known: HashMap::new(), listings: Listings::new(on_listed) }
    }

    pub fn apply(&mut self, event: &Event<AddressBlock>) {
        match event {
            Event::Apply(block) => self.observe(block),
            Event::Delete(block) => self.forget(&block_holder(block)),
            Event::Init => self.listings.started(),
            Event::InitApply(block) => {
                self.listings.brought(block_holder(block));
                self.observe(block);
            }
            Event::InitDone => {
                for holder in self.listings.ended(self.known.keys()).gone {
                    self.forget(&holder);
                }
            }
        }
    }

    fn observe(&mut self, block: &AddressBlock) {
        let holder = block_holder(block);
        let (Some(pool), Some(cidr)) = (block_pool(block), granted(block)) else {
            // Not granted (yet): nothing held. A grant is never taken back while the object
            // stands, so a block known before keeps its addresses.
            if !self.known.contains_key(&holder) && block.status.as_ref().is_some_and(|s| s.cidr.is_some()) {
                warn!(block = %holder, "AddressBlock has a status.cidr that is not a CIDR; ignoring it");
            }
            return;
        };
        if let Some((old_pool, old)) = self.known.get(&holder)
            && (*old_pool != pool || *old != cidr)
        {
            self.index.drop_block(old_pool, &holder);
        }
        let shared = self.index.hold_block(&pool, &holder, cidr);
        if !shared.is_empty() {
            error!(
                block = %holder, %cidr, pool = %pool, shared = shared.len(),
                "AddressBlock holds addresses someone else holds too: they stay held by both until one lets go; find them with `ferro-ipam who-has`"
            );
        }
        self.known.insert(holder, (pool, cidr));
    }

    fn forget(&mut self, holder: &HolderKey) {
        if let Some((pool, _)) = self.known.remove(holder) {
            self.index.drop_block(&pool, holder);
        }
    }
}
