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

/// Pools by number: an address's holders are kept as 4-byte numbers, not as keys.
#[derive(Default)]
struct Numbers {
    keys: Vec<Arc<PoolKey>>,
    numbers: HashMap<Arc<PoolKey>, u32>,
}

impl Numbers {
    fn of(&mut self, pool: &Arc<PoolKey>) -> u32 {
        if let Some(&number) = self.numbers.get(pool) {
            return number;
        }
        let number = u32::try_from(self.keys.len()).expect("fewer than 2^32 pools");
        self.keys.push(pool.clone());
        self.numbers.insert(pool.clone(), number);
        number
    }

    fn key(&self, number: u32) -> &Arc<PoolKey> {
        &self.keys[number as usize]
    }
}

/// The holders of every held address. Nearly every address has one pool: that one is kept in
/// `first`, the others (pools that overlap) in `more`.
#[derive(Default)]
struct Held {
    first: HashMap<IpAddr, u32>,
    more: HashMap<IpAddr, Vec<u32>>,
    pools: Numbers,
}

impl Held {
    /// The pools holding `ip`.
    fn holders(&self, ip: IpAddr) -> impl Iterator<Item = &Arc<PoolKey>> + '_ {
        let first = self.first.get(&ip).copied();
        first.into_iter().chain(self.more.get(&ip).into_iter().flatten().copied()).map(|n| self.pools.key(n))
    }

    fn add(&mut self, ip: IpAddr, pool: &Arc<PoolKey>) {
        let number = self.pools.of(pool);
        match self.first.get(&ip) {
            None => {
                self.first.insert(ip, number);
            }
            Some(&first) if first == number => {}
            Some(_) => {
                let more = self.more.entry(ip).or_default();
                if !more.contains(&number) {
                    more.push(number);
                }
            }
        }
    }

    fn remove(&mut self, ip: IpAddr, pool: &PoolKey) {
        let Some(&number) = self.pools.numbers.get(pool) else { return };
        if self.first.get(&ip) == Some(&number) {
            match self.more.get_mut(&ip).and_then(Vec::pop) {
                Some(next) => {
                    self.first.insert(ip, next);
                }
                None => {
                    self.first.remove(&ip);
                }
            }
        } else if let Some(more) = self.more.get_mut(&ip) {
            more.retain(|&n| n != number);
        }
        if self.more.get(&ip).is_some_and(Vec::is_empty) {
            self.more.remove(&ip);
        }
    }
}

/// The holders of every held address, by pool.
#[derive(Default)]
pub struct Registry {
    held: Mutex<Held>,
}

impl Registry {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        lock(&self.held)
    }

    /// Records that `pool` holds `ip` (an existing object: a fact, whatever else holds it).
    pub fn add(&self, ip: IpAddr, pool: &Arc<PoolKey>) {
        self.held().add(ip, pool);
    }

    /// Records that `pool` holds `ip` unless a pool sharing its address space holds it; then
    /// names that pool. Check and record are one step, so two pools cannot both win.
    pub fn try_take(&self, ip: IpAddr, pool: &Arc<PoolKey>) -> Result<(), PoolKey> {
        let mut held = self.held();
        if let Some(other) = held.holders(ip).find(|p| share_addresses(p, pool)) {
            return Err((**other).clone());
        }
        held.add(ip, pool);
        Ok(())
    }

    /// Records that `pool` no longer holds `ip`.
    pub fn remove(&self, ip: IpAddr, pool: &PoolKey) {
        self.held().remove(ip, pool);
    }

    /// A pool sharing `pool`'s address space that holds `ip`, if any.
    pub fn held_elsewhere(&self, ip: IpAddr, pool: &PoolKey) -> Option<PoolKey> {
        self.held().holders(ip).find(|p| share_addresses(p, pool)).map(|p| (**p).clone())
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

    /// Pools that overlap: an address held by several, let go in any order.
    #[test]
    fn an_address_held_by_several_pools_is_held_until_the_last_lets_go() {
        let registry = Registry::default();
        let pools: Vec<Arc<PoolKey>> =
            ["a", "b", "c"].iter().map(|name| Arc::new(PoolKey::in_cluster(name, "p"))).collect();
        let global = PoolKey::global("g");
        let ip = "10.0.0.1".parse().unwrap();
        for pool in &pools {
            registry.add(ip, pool);
            registry.add(ip, pool);
        }
        for (n, pool) in [1, 0, 2].map(|n| (n, &pools[n])) {
            assert!(registry.held_elsewhere(ip, &global).is_some(), "held before {n} lets go");
            registry.remove(ip, pool);
            assert_ne!(registry.held_elsewhere(ip, &global), Some((**pool).clone()), "{n} let go");
        }
        assert_eq!(registry.held_elsewhere(ip, &global), None);
        let held = registry.held();
        assert!(held.first.is_empty() && held.more.is_empty(), "nothing is left of a let-go address");
    }

    proptest::proptest! {
        /// Against a plain model: the set of pools holding each address.
        #[test]
        fn the_registry_answers_as_a_set_of_holders_per_address_does(
            steps in proptest::collection::vec((0..3u8, 0..5usize, 0..3u8), 1..60),
        ) {
            let pools: Vec<Arc<PoolKey>> = vec![
                Arc::new(PoolKey::in_cluster("x", "a")),
                Arc::new(PoolKey::in_cluster("x", "b")),
                Arc::new(PoolKey::in_cluster("y", "a")),
                Arc::new(PoolKey::global("g")),
                Arc::new(PoolKey::global("h")),
            ];
            let ips: Vec<IpAddr> = (1..=3).map(|n| IpAddr::from([10, 0, 0, n])).collect();
            let registry = Registry::default();
            let mut model: HashMap<IpAddr, Vec<PoolKey>> = HashMap::new();
            for (op, pool, ip) in steps {
                let (pool, ip) = (&pools[pool], ips[ip as usize]);
                let holders = model.entry(ip).or_default();
                match op {
                    0 => {
                        registry.add(ip, pool);
                        if !holders.contains(pool) {
                            holders.push((**pool).clone());
                        }
                    }
                    1 => {
                        let sharing = holders.iter().any(|p| share_addresses(p, pool));
                        let taken = registry.try_take(ip, pool);
                        proptest::prop_assert_eq!(taken.is_err(), sharing);
                        if let Err(other) = taken {
                            proptest::prop_assert!(holders.contains(&other) && share_addresses(&other, pool));
                        } else if !holders.contains(pool) {
                            holders.push((**pool).clone());
                        }
                    }
                    _ => {
                        registry.remove(ip, pool);
                        holders.retain(|p| p != &**pool);
                    }
                }
                for ip in &ips {
                    for pool in &pools {
                        let expected = model.get(ip).is_some_and(|h| h.iter().any(|p| share_addresses(p, pool)));
                        let found = registry.held_elsewhere(*ip, pool);
                        proptest::prop_assert_eq!(found.is_some(), expected, "{} in {}", ip, pool);
                        if let Some(other) = found {
                            proptest::prop_assert!(model[ip].contains(&other));
                        }
                    }
                }
            }
        }
    }
}
