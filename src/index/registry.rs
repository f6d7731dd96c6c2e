//! Which pools hold each address, across all pools. Pools that share an address space (two
//! pools of one namespace, or any pool and a global one) may overlap; the registry is what keeps
//! them from handing out one address twice.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::keys::PoolKey;
use crate::sync::lock;

/// Whether claims of two pools can end up on one network: pools of one namespace, or a global
/// pool and any other. Same-named pools of two namespaces are independent, as in the in-cluster
/// provider. Address pools and prefix pools hand out different things (an address, a
/// sub-prefix) and never share.
pub fn share_addresses(a: &PoolKey, b: &PoolKey) -> bool {
    a != b
        && a.kind.is_prefix() == b.kind.is_prefix()
        && (a.kind.is_global() || b.kind.is_global() || a.namespace == b.namespace)
}

/// The pools holding one address: one, but where pools overlap, so kept inline.
type Pools = smallvec::SmallVec<[Arc<PoolKey>; 1]>;

/// The holders of every held address, by pool.
#[derive(Default)]
pub struct Registry {
    held: Mutex<HashMap<IpAddr, Pools>>,
}

impl Registry {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Pools>> {
        lock(&self.held)
    }

    /// Records that `pool` holds `ip` (an existing object: a fact, whatever else holds it).
    pub fn add(&self, ip: IpAddr, pool: &Arc<PoolKey>) {
        let mut held = self.held();
        let pools = held.entry(ip).or_default();
        if !pools.iter().any(|p| p == pool) {
            pools.push(pool.clone());
        }
    }

    /// Records that `pool` holds `ip` unless a pool sharing its address space holds it; then
    /// names that pool. Check and record are one step, so two pools cannot both win.
    pub fn try_take(&self, ip: IpAddr, pool: &Arc<PoolKey>) -> Result<(), PoolKey> {
        let mut held = self.held();
        let pools = held.entry(ip).or_default();
        if let Some(other) = pools.iter().find(|p| share_addresses(p, pool)) {
            return Err((**other).clone());
        }
        if !pools.iter().any(|p| p == pool) {
            pools.push(pool.clone());
        }
        Ok(())
    }

    /// Records that `pool` no longer holds `ip`.
    pub fn remove(&self, ip: IpAddr, pool: &PoolKey) {
        let mut held = self.held();
        if let Some(pools) = held.get_mut(&ip) {
            pools.retain(|p| **p != *pool);
            if pools.is_empty() {
                held.remove(&ip);
            }
        }
    }

    /// A pool sharing `pool`'s address space that holds `ip`, if any.
    pub fn held_elsewhere(&self, ip: IpAddr, pool: &PoolKey) -> Option<PoolKey> {
        self.held().get(&ip)?.iter().find(|p| share_addresses(p, pool)).map(|p| (**p).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::PoolKind;

    #[test]
    fn pools_of_one_namespace_and_global_pools_share_addresses_other_namespaces_do_not() {
        let a = PoolKey::in_cluster("x", "a");
        assert!(share_addresses(&a, &PoolKey::in_cluster("x", "b")));
        assert!(share_addresses(&a, &PoolKey::global("g")));
        assert!(!share_addresses(&a, &PoolKey::in_cluster("y", "a")));
        assert!(!share_addresses(&a, &a));
        let prefixes = PoolKey::of_kind(PoolKind::InClusterPrefix, "x", "p");
        assert!(!share_addresses(&a, &prefixes));
        assert!(!share_addresses(&PoolKey::global("g"), &prefixes));
        assert!(share_addresses(&prefixes, &PoolKey::of_kind(PoolKind::GlobalPrefix, "", "gp")));
    }

    #[test]
    fn an_address_taken_in_one_pool_cannot_be_taken_in_a_pool_sharing_its_space() {
        let registry = Registry::default();
        let a = Arc::new(PoolKey::in_cluster("x", "a"));
        let b = Arc::new(PoolKey::global("g"));
        let other_ns = Arc::new(PoolKey::in_cluster("y", "c"));
        let ip = "10.0.0.1".parse().unwrap();
        assert_eq!(registry.try_take(ip, &a), Ok(()));
        assert_eq!(registry.try_take(ip, &b), Err((*a).clone()));
        assert_eq!(registry.try_take(ip, &other_ns), Ok(()));
        registry.remove(ip, &a);
        // The global pool shares its space with every namespace: the other namespace's hold counts.
        assert_eq!(registry.held_elsewhere(ip, &b), Some((*other_ns).clone()));
        registry.remove(ip, &other_ns);
        assert_eq!(registry.held_elsewhere(ip, &b), None);
    }
}
