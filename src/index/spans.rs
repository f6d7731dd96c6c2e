//! The allocatable ranges of every pool, grouped by address space and kept up to date when a
//! pool's spec changes, so that finding the pools a pool overlaps reads no other pool's state
//! and looks only at the pools it shares addresses with.

use std::collections::HashMap;
use std::net::IpAddr;

use super::keys::PoolKey;
use super::registry::share_addresses;

/// An address space: prefix pools or address pools, of one namespace or global (`None`).
type Space = (bool, Option<String>);

fn space_of(key: &PoolKey) -> Space {
    (key.kind.is_prefix(), if key.kind.is_global() { None } else { key.namespace.clone() })
}

/// Ranges by pool, by address space.
#[derive(Default)]
pub struct Spans {
    spaces: HashMap<Space, HashMap<PoolKey, Vec<(IpAddr, IpAddr)>>>,
}

impl Spans {
    /// Records a pool's allocatable ranges (none: it hands nothing out).
    pub fn set(&mut self, key: &PoolKey, ranges: Vec<(IpAddr, IpAddr)>) {
        let space = space_of(key);
        if ranges.is_empty() {
            self.remove(key);
            return;
        }
        self.spaces.entry(space).or_default().insert(key.clone(), ranges);
    }

    pub fn remove(&mut self, key: &PoolKey) {
        let space = space_of(key);
        if let Some(pools) = self.spaces.get_mut(&space) {
            pools.remove(key);
            if pools.is_empty() {
                self.spaces.remove(&space);
            }
        }
    }

    /// The pools sharing `pool`'s address space whose ranges intersect its own, sorted. A
    /// namespaced pool looks at its namespace and the global pools; a global pool at every pool
    /// of its sort.
    pub fn overlapping(&self, pool: &PoolKey) -> Vec<PoolKey> {
        let (prefix, namespace) = space_of(pool);
        let Some(ranges) = self.spaces.get(&(prefix, namespace.clone())).and_then(|pools| pools.get(pool)) else {
            return Vec::new();
        };
        let spaces: Vec<&HashMap<PoolKey, Vec<(IpAddr, IpAddr)>>> = match namespace {
            None => self.spaces.iter().filter(|((p, _), _)| *p == prefix).map(|(_, pools)| pools).collect(),
            Some(ns) => [(prefix, Some(ns)), (prefix, None)].iter().filter_map(|s| self.spaces.get(s)).collect(),
        };
        let mut found: Vec<PoolKey> = spaces
            .into_iter()
            .flat_map(|pools| pools.iter())
            .filter(|(other, theirs)| {
                share_addresses(other, pool) && ranges.iter().any(|(a, b)| theirs.iter().any(|(c, d)| a <= d && c <= b))
            })
            .map(|(other, _)| other.clone())
            .collect();
        found.sort();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(a: &str, b: &str) -> Vec<(IpAddr, IpAddr)> {
        vec![(a.parse().unwrap(), b.parse().unwrap())]
    }

    #[test]
    fn a_pool_overlaps_its_namespace_and_the_global_pools_only() {
        let mut spans = Spans::default();
        let a = PoolKey::in_cluster("ns", "a");
        let b = PoolKey::in_cluster("ns", "b");
        let elsewhere = PoolKey::in_cluster("other", "a");
        let global = PoolKey::global("g");
        spans.set(&a, range("10.0.0.1", "10.0.0.20"));
        spans.set(&b, range("10.0.0.15", "10.0.0.30"));
        spans.set(&elsewhere, range("10.0.0.1", "10.0.0.20"));
        spans.set(&global, range("10.0.0.19", "10.0.0.19"));
        assert_eq!(spans.overlapping(&a), vec![b.clone(), global.clone()]);
        assert_eq!(spans.overlapping(&elsewhere), vec![global.clone()]);
        let mut everyone = vec![elsewhere.clone(), a.clone(), b.clone()];
        everyone.sort();
        assert_eq!(spans.overlapping(&global), everyone, "a global pool shares with every namespace");

        // An edit that moves b away, and a pool that hands nothing out any more.
        spans.set(&b, range("10.0.1.1", "10.0.1.9"));
        spans.set(&global, Vec::new());
        assert!(spans.overlapping(&a).is_empty());
        spans.remove(&elsewhere);
        assert!(!spans.spaces.contains_key(&(false, Some("other".into()))), "an empty space is dropped");
    }
}
