//! `InClusterPrefixPool` and `GlobalInClusterPrefixPool`, version `v1alpha2`: every field of the
//! in-cluster provider's prefix pools, plus the status ferro-ipam writes on its IP pools
//! (conditions, exact counts, sticky sub-prefixes).

use kube::CustomResource;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::keys::GLOBAL_IN_CLUSTER_PREFIX_POOL;
use super::pool::{IPPoolStatus, global_pool};
use super::prefix_validation;
use super::validation::{MAX_ENTRIES, MAX_ENTRY_LENGTH, apply_rules};
use crate::allocator::DEFAULT_ALLOCATION_LENGTH;

/// The sub-prefixes a pool hands out. Shared by both prefix-pool kinds.
#[expect(
    clippy::duplicated_attributes,
    reason = "clippy reads the repeated `type_ = ...` of the print columns as duplicated attributes"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterPrefixPool",
    namespaced,
    status = "IPPoolStatus",
    category = "cluster-api",
    doc = "InClusterPrefixPool hands out IPv6 sub-prefixes to IPAddressClaims of its namespace.",
    printcolumn(
        name = "Prefixes",
        type_ = "string",
        json_path = ".spec.prefixes",
        description = "List of prefixes to allocate sub-prefixes from"
    ),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.ipAddresses.total",
        description = "Count of allocatable sub-prefixes in the pool"
    ),
    printcolumn(
        name = "Free",
        type_ = "integer",
        json_path = ".status.ipAddresses.free",
        description = "Count of unallocated sub-prefixes in the pool"
    ),
    printcolumn(
        name = "Used",
        type_ = "integer",
        json_path = ".status.ipAddresses.used",
        description = "Count of allocated sub-prefixes in the pool"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the pool can hand out sub-prefixes"
    ),
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = spec_rules)]
pub struct PrefixPoolSpec {
    /// IPv6 CIDRs the sub-prefixes are taken from, each network-aligned (`fd00::/48`) and no
    /// longer than `allocationPrefixLength`. They may overlap; the union counts.
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = prefixes_rules)]
    pub prefixes: Vec<String>,

    /// Length of every handed-out sub-prefix (64: /64s). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 128), extend("default" = 64), transform = allocation_length_rules)]
    pub allocation_prefix_length: Option<i32>,

    /// IPv6 next hop written to every allocated `IPAddress` unchanged. It blocks no sub-prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRY_LENGTH))]
    pub gateway: Option<String>,

    /// IPv6 addresses, ranges `a-b` or CIDRs: a sub-prefix that overlaps one is never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = excluded_rules)]
    pub excluded_prefixes: Option<Vec<String>>,

    /// Which free address the pool hands out next: `Lowest` (the default), `LeastRecentlyReleased`
    /// (addresses not released lately first, then the one released longest ago, so a just-freed
    /// address is reused last) or `Random`. Requested and sticky addresses are not affected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_strategy: Option<super::strategy::AllocationStrategy>,

    /// Addresses kept for the claims that match (by claim name, or by the claim's owner). No
    /// other claim gets a reserved address; the matching claim gets it unless it requests another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = super::reservation::MAX_RESERVATIONS), transform = super::reservation::list_rules)]
    pub reservations: Option<Vec<super::reservation::Reservation>>,

    /// Global pools only: the namespaces whose claims the pool serves, by the Namespace's labels
    /// (`matchLabels`, `matchExpressions`). Unset: every namespace. A claim of a namespace it does
    /// not select waits with `Ready=False` (`NamespaceNotSelected`). The namespaced kind refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<super::tenancy::NamespaceSelector>,
}

impl PrefixPoolSpec {
    /// The allocation length in effect: the field, else its default (64), as upstream reads it.
    pub fn allocation_length(&self) -> i32 {
        match self.allocation_prefix_length {
            None | Some(0) => i32::from(DEFAULT_ALLOCATION_LENGTH),
            Some(length) => length,
        }
    }
}

global_pool!(
    /// The cluster-scoped prefix pool: claims in any namespace may reference it.
    /// Same spec and status as [`InClusterPrefixPool`].
    GlobalInClusterPrefixPool,
    PrefixPoolSpec,
    GLOBAL_IN_CLUSTER_PREFIX_POOL,
    "globalinclusterprefixpools"
);

fn item_rules(schema: &mut Schema, rules: Vec<kube::core::Rule>) {
    if let Some(mut items) = schema.get_mut("items").and_then(|i| Schema::try_from(i.take()).ok()) {
        apply_rules(&mut items, rules);
        schema.insert("items".to_owned(), items.to_value());
    }
}

fn spec_rules(schema: &mut Schema) {
    apply_rules(schema, prefix_validation::spec_rules());
}

fn prefixes_rules(schema: &mut Schema) {
    item_rules(schema, prefix_validation::prefix_rules());
    apply_rules(schema, prefix_validation::prefixes_rules());
}

fn excluded_rules(schema: &mut Schema) {
    item_rules(schema, prefix_validation::excluded_rules());
}

fn allocation_length_rules(schema: &mut Schema) {
    apply_rules(schema, prefix_validation::allocation_length_rules());
}
