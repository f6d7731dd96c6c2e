//! Spoke pools (`spec.hub` set) as a read-only command sees them (pure: no client). A spoke
//! pool hands out only the addresses of the blocks its hub leased it, and those blocks live in
//! the hub: here none is known. So what the pool could hand out, and whether a new claim would
//! get an address or wait, is not known here; an address its spec as written allows may be in
//! one of its blocks.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::allocator::{Family, FamilyPool};
use crate::api::IPPoolSpec;
use crate::api::hub::{HubPoolReference, HubSource};
use crate::feed::PoolObject;
use crate::index::{PoolKey, build_allocators};

use super::gather::Inventory;

/// What a read-only command can say of a spoke pool's room.
pub(crate) const NOT_KNOWN: &str = "served from blocks leased from the hub; not known here";

/// One spoke pool: its hub, and its allocators as its spec is written (every block allowed).
struct Spoke {
    hub: HubSource,
    written: Vec<FamilyPool>,
}

/// The spoke pools of an inventory.
#[derive(Default)]
pub(crate) struct Spokes {
    pools: BTreeMap<PoolKey, Spoke>,
}

/// `<kind> [<namespace>/]<name>` of a hub's pool, as pool keys print.
pub(crate) fn hub_pool_name(pool: &HubPoolReference) -> String {
    match pool.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(ns) => format!("{} {ns}/{}", pool.kind, pool.name),
        None => format!("{} {}", pool.kind, pool.name),
    }
}

/// The spoke pool in words: `a spoke pool of the hub's <pool> (hub namespace <ns>)`.
pub(crate) fn spoke_pool_of(hub: &HubSource) -> String {
    format!("a spoke pool of the hub's {} (hub namespace {})", hub_pool_name(&hub.pool), hub.namespace)
}

impl Spokes {
    /// The IP pools of `inventory` whose `spec.hub` is set.
    pub fn of(inventory: &Inventory) -> Self {
        let mut pools = BTreeMap::new();
        let specs = inventory
            .in_cluster_pools
            .iter()
            .map(|p| (p.key(), &p.spec))
            .chain(inventory.global_pools.iter().map(|p| (p.key(), &p.spec)));
        for (key, spec) in specs {
            if let Some(spoke) = Self::spoke(spec) {
                pools.insert(key, spoke);
            }
        }
        Spokes { pools }
    }

    fn spoke(spec: &IPPoolSpec) -> Option<Spoke> {
        let hub = spec.hub.as_deref()?.clone();
        // A spec the controller refuses allows nothing; the pool is reported invalid anyway.
        let written = build_allocators(spec).unwrap_or_default();
        Some(Spoke { hub, written })
    }

    /// The hub of `pool`, when it is a spoke pool.
    pub fn hub(&self, pool: &PoolKey) -> Option<&HubSource> {
        self.pools.get(pool).map(|s| &s.hub)
    }

    /// Whether `pool` is a spoke pool whose spec as written may hand out `ip`: then the address
    /// is the pool's if a block of the hub holds it, which is not known here.
    pub fn may_hold(&self, pool: &PoolKey, ip: IpAddr) -> bool {
        self.pools
            .get(pool)
            .is_some_and(|s| s.written.iter().any(|f| f.family() == Family::of(ip) && f.check(ip).is_ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::hub::HubPoolReference;

    fn source() -> HubSource {
        HubSource {
            kubeconfig_secret: "hub".into(),
            namespace: "spoke-a".into(),
            pool: HubPoolReference { kind: "GlobalInClusterIPPool".into(), name: "shared".into(), namespace: None },
            block_size: None,
        }
    }

    #[test]
    fn a_spoke_pool_may_hold_what_its_written_spec_allows_and_nothing_else() {
        let mut spec = crate::fixtures::pool_spec(&["10.0.0.10-10.0.0.40"]).with_gateway("10.0.0.1");
        spec.excluded_addresses = Some(vec!["10.0.0.20".into()]);
        spec.hub = Some(Box::new(source()));
        let spokes =
            Spokes { pools: [(PoolKey::in_cluster("ns", "p"), Spokes::spoke(&spec).expect("a spoke"))].into() };
        let key = PoolKey::in_cluster("ns", "p");
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert!(spokes.may_hold(&key, ip("10.0.0.33")));
        assert!(!spokes.may_hold(&key, ip("10.0.0.20")), "excluded by the spec itself");
        assert!(!spokes.may_hold(&key, ip("10.0.0.99")), "outside its ranges");
        assert!(!spokes.may_hold(&PoolKey::in_cluster("ns", "other"), ip("10.0.0.33")), "not a spoke pool");
        assert_eq!(
            spoke_pool_of(spokes.hub(&key).expect("its hub")),
            "a spoke pool of the hub's GlobalInClusterIPPool shared (hub namespace spoke-a)"
        );
    }
}
