//! Every pool of an inventory, of any kind, as one shape (no client required).

use crate::api::IPPoolStatus;
use crate::feed::PoolObject;
use crate::index::{PoolKey, PoolSpec};
use crate::preflight::gather::Inventory;

/// A pool object, read.
pub(super) struct Pool<'a> {
    pub key: PoolKey,
    pub spec: PoolSpec,
    pub status: Option<&'a IPPoolStatus>,
}

fn read<K: PoolObject>(pool: &K) -> Pool<'_> {
    Pool { key: pool.key(), spec: pool.spec(), status: pool.status() }
}

/// The pools of every kind: IP pools, then prefix pools.
pub(super) fn all(inventory: &Inventory) -> Vec<Pool<'_>> {
    let mut pools: Vec<Pool<'_>> = inventory.in_cluster_pools.iter().map(read).collect();
    pools.extend(inventory.global_pools.iter().map(read));
    pools.extend(inventory.in_cluster_prefix_pools.iter().map(read));
    pools.extend(inventory.global_prefix_pools.iter().map(read));
    pools
}
