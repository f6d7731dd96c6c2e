//! Builders of hub and spoke inventories for the tests of preflight and the inspect commands.
//!
//! The hub has a `GlobalInClusterIPPool` `shared` (`10.0.0.10-10.0.0.200`, gateway `10.0.0.1`),
//! labelled shared, and a spoke namespace `spoke-east` of the spoke `east`. The spoke has an
//! `InClusterIPPool` `ns/nodes` of the same range whose `spec.hub` names that pool.

use serde_json::{Value, json};

use crate::api::capi::{IPAddress, IPAddressClaim};
use crate::api::hub::{AddressBlock, SHARED_LABEL, SPOKE_LABEL};
use crate::api::{CapiVersion, GlobalInClusterIPPool, InClusterIPPool};

use super::gather::Inventory;

const RANGE: &str = "10.0.0.10-10.0.0.200";

/// The hub's shared pool `name`.
pub fn shared_pool(name: &str) -> GlobalInClusterIPPool {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": name, "labels": {SHARED_LABEL: "true"}, "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"]},
        "spec": {"addresses": [RANGE], "prefix": 24, "gateway": "10.0.0.1"},
    }))
    .expect("a shared pool")
}

/// A block of `shared` in `namespace`, granted `cidr` when given.
pub fn block(namespace: &str, name: &str, size: u32, cidr: Option<&str>) -> AddressBlock {
    let status = cidr.map_or(Value::Null, |cidr| json!({"cidr": cidr, "prefix": 24, "gateway": "10.0.0.1"}));
    serde_json::from_value(json!({
        "apiVersion": "hub.ferro-ipam.dev/v1alpha1", "kind": "AddressBlock",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"pool": {"kind": "GlobalInClusterIPPool", "name": "shared"}, "family": "IPv4", "size": size,
                 "spokePool": "InClusterIPPool ns/nodes"},
        "status": status,
    }))
    .expect("a block")
}

/// The hub: the shared pool, its blocks, and the namespace `spoke-east` labelled for `east`.
pub fn hub(blocks: Vec<AddressBlock>) -> Inventory {
    let mut inventory =
        Inventory { global_pools: vec![shared_pool("shared")], blocks, ..Inventory::empty(CapiVersion::V1Beta2) };
    inventory.namespaces.insert("spoke-east".into(), [(SPOKE_LABEL.to_owned(), "east".to_owned())].into());
    inventory.namespaces.insert("spoke-west".into(), Default::default());
    inventory
}

/// A claim of the hub's shared pool.
pub fn hub_claim(name: &str) -> IPAddressClaim {
    let mut claim = crate::fixtures::claim(name, "shared");
    claim.spec.pool_ref.kind = "GlobalInClusterIPPool".into();
    claim
}

/// The spoke pool `ns/nodes`, leasing blocks of the hub's `shared` in `spoke-east`.
pub fn spoke_pool() -> InClusterIPPool {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "nodes", "namespace": "ns", "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"]},
        "spec": {"addresses": [RANGE], "prefix": 24, "gateway": "10.0.0.1", "excludedAddresses": ["10.0.0.20"],
                 "hub": {"kubeconfigSecret": "hub", "namespace": "spoke-east",
                         "pool": {"kind": "GlobalInClusterIPPool", "name": "shared"}}},
    }))
    .expect("a spoke pool")
}

/// The `IPAddress` of claim `name` of the spoke pool.
pub fn spoke_address(name: &str, ip: &str) -> IPAddress {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "nodes"},
                 "address": ip, "prefix": 24, "gateway": "10.0.0.1"},
    }))
    .expect("an address")
}

/// A claim of the spoke pool; `bound` when its status names its `IPAddress`.
pub fn spoke_claim(name: &str, bound: bool) -> IPAddressClaim {
    let mut claim = crate::fixtures::claim(name, "nodes");
    if bound {
        claim.status = Some(crate::api::capi::ClaimStatus {
            address_ref: Some(crate::api::capi::LocalReference { name: name.into() }),
            conditions: Vec::new(),
        });
    }
    claim
}

/// The spoke: its pool, addresses and claims.
pub fn spoke(addresses: Vec<IPAddress>, claims: Vec<IPAddressClaim>) -> Inventory {
    Inventory { in_cluster_pools: vec![spoke_pool()], addresses, claims, ..Inventory::empty(CapiVersion::V1Beta2) }
}
