//! Pools shared by many management clusters through a hub: the `hub` field of a spoke's pool,
//! and the `AddressBlock` objects a spoke leases from the hub's pool.
//!
//! One management cluster, the hub, holds a range as an ordinary pool. Another, a spoke, serves
//! its claims from a pool whose `spec.hub` names the hub and the hub's pool: it asks the hub for
//! blocks of addresses, one `AddressBlock` object each in its own namespace of the hub, and hands
//! out addresses of the blocks the hub granted it, without a round trip per claim.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::core::Rule;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::validation::apply_rules;

/// API group of the objects a hub keeps for its spokes.
pub const HUB_GROUP: &str = "hub.ferro-ipam.dev";
/// On a hub Namespace: the spoke it belongs to. Only that namespace's blocks are granted, and
/// they are the named spoke's. Set by the hub's administrator, never by the spoke.
pub const SPOKE_LABEL: &str = "hub.ferro-ipam.dev/spoke";
/// On a hub pool (value `"true"`): spokes may lease blocks of it.
pub const SHARED_LABEL: &str = "hub.ferro-ipam.dev/shared";
/// On an `AddressBlock`: the spoke pool that leased it (`<kind>.<namespace>.<name>`, hashed to
/// fit a label value).
pub const SPOKE_POOL_LABEL: &str = "hub.ferro-ipam.dev/spoke-pool";
/// The key of the hub's kubeconfig in the Secret `spec.hub.kubeconfigSecret` names.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The Lease a spoke renews in its hub namespace while it runs.
pub const SPOKE_LEASE: &str = "ferro-ipam-spoke";

/// Block sizes a spoke may ask for, in addresses.
pub const BLOCK_SIZES: [u32; 7] = [4, 8, 16, 32, 64, 128, 256];
/// Addresses per block when `blockSize` is unset.
pub const DEFAULT_BLOCK_SIZE: u32 = 16;

/// `spec.hub` of a pool: its addresses are leased from a pool of another management cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HubSource {
    /// Name of a Secret in ferro-ipam's own namespace whose `kubeconfig` key holds this
    /// spoke's credentials for the hub's API server.
    #[schemars(length(min = 1, max = 253))]
    pub kubeconfig_secret: String,
    /// This spoke's namespace in the hub, labelled `hub.ferro-ipam.dev/spoke` by the hub's
    /// administrator. The blocks are kept there.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// The hub's pool, labelled `hub.ferro-ipam.dev/shared: "true"`.
    pub pool: HubPoolReference,
    /// Addresses per block: 4, 8, 16, 32, 64, 128 or 256. Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = block_size_rules)]
    pub block_size: Option<u32>,
}

impl HubSource {
    /// Addresses per block.
    pub fn block_size(&self) -> u32 {
        self.block_size.unwrap_or(DEFAULT_BLOCK_SIZE)
    }
}

/// A pool of the hub.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = pool_reference_rules)]
pub struct HubPoolReference {
    /// `GlobalInClusterIPPool` or `InClusterIPPool`.
    pub kind: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The namespace of an `InClusterIPPool`; unset for a `GlobalInClusterIPPool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub namespace: Option<String>,
}

/// Which family a block is of.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum BlockFamily {
    #[default]
    IPv4,
    IPv6,
}

/// A block of a hub pool's addresses, asked for by a spoke and granted by the hub: the hub's
/// ferro-ipam picks a free aligned CIDR of the pool, holds its addresses for the spoke and
/// writes it to the status. Deleting the object returns the block.
#[expect(
    clippy::duplicated_attributes,
    reason = "clippy reads the repeated `type_ = ...` of the print columns as duplicated attributes"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "hub.ferro-ipam.dev",
    version = "v1alpha1",
    kind = "AddressBlock",
    namespaced,
    status = "AddressBlockStatus",
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.pool.name", description = "The hub's pool"),
    printcolumn(name = "CIDR", type_ = "string", json_path = ".status.cidr", description = "The block granted"),
    printcolumn(
        name = "Granted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Granted\")].status",
        description = "Whether the hub granted the block"
    ),
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = block_spec_rules)]
pub struct AddressBlockSpec {
    /// The hub's pool the block is of.
    pub pool: HubPoolReference,
    /// The block's address family.
    pub family: BlockFamily,
    /// Addresses in the block: 4, 8, 16, 32, 64, 128 or 256.
    #[schemars(transform = block_size_rules)]
    pub size: u32,
    /// A specific block (a CIDR of `size` addresses): a spoke asks again for a block it holds
    /// addresses of. Unset: any free block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50))]
    pub cidr: Option<String>,
    /// The spoke pool that leases the block (`<kind>/<namespace>/<name>`), for people reading.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 600))]
    pub spoke_pool: String,
}

/// What the hub granted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddressBlockStatus {
    /// The block granted. Set once; never changed while the object exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// The network prefix length of the hub pool's family, for the spoke to check its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<i32>,
    /// The hub pool's gateway of the family, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// `Granted`: True once the block is the spoke's; False with the reason it is not (yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// CEL on a pool's spec: `hub` is set when the pool is made, and never added, changed or
/// removed: the pool's addresses would be handed out without a lease, or leases forgotten.
pub(crate) fn immutable_rule() -> Rule {
    Rule::new("has(self.hub) == has(oldSelf.hub) && (!has(self.hub) || self.hub == oldSelf.hub)").message(
        "spec.hub cannot be added, changed or removed once the pool exists: create another pool and move the claims to it",
    )
}

fn block_size_rules(schema: &mut Schema) {
    let sizes = BLOCK_SIZES.map(|s| s.to_string()).join(", ");
    let message = format!("must be one of {sizes}");
    apply_rules(schema, vec![Rule::new(format!("self in [{sizes}]")).message(message.as_str())]);
}

fn pool_reference_rules(schema: &mut Schema) {
    apply_rules(
        schema,
        vec![
            Rule::new("self.kind in ['GlobalInClusterIPPool', 'InClusterIPPool']")
                .message("kind must be GlobalInClusterIPPool or InClusterIPPool: blocks are leased from IP pools"),
            Rule::new("(self.kind == 'InClusterIPPool') == (has(self.namespace) && self.namespace != '')")
                .message("namespace: set it for an InClusterIPPool, leave it unset for a GlobalInClusterIPPool"),
        ],
    );
}

fn block_spec_rules(schema: &mut Schema) {
    apply_rules(
        schema,
        vec![Rule::new("self == oldSelf").message("spec is immutable: delete the block and ask for another")],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_size_defaults_to_sixteen_and_is_one_of_the_listed_sizes() {
        let source = HubSource::default();
        assert_eq!(source.block_size(), 16);
        assert!(BLOCK_SIZES.contains(&source.block_size()));
        assert!(BLOCK_SIZES.iter().all(|s| s.is_power_of_two()));
    }
}
