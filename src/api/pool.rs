//! `InClusterIPPool` and `GlobalInClusterIPPool`, version `v1alpha2`: every field of the
//! in-cluster provider's pools, plus status conditions and exact per-family counts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::keys::GLOBAL_IN_CLUSTER_IP_POOL;
use super::validation::{self, apply_rules};

// The limits live with the CEL rules they bound; named here too, where the fields use them.
pub use super::validation::{MAX_ENTRIES, MAX_ENTRY_LENGTH};

/// The addresses a pool hands out. Shared by both pool kinds.
#[expect(
    clippy::duplicated_attributes,
    reason = "clippy reads the repeated `type_ = ...` of the print columns as duplicated attributes"
)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterIPPool",
    namespaced,
    status = "IPPoolStatus",
    category = "cluster-api",
    doc = "InClusterIPPool hands out IP addresses to IPAddressClaims of its namespace.",
    printcolumn(
        name = "Addresses",
        type_ = "string",
        json_path = ".spec.addresses",
        description = "List of addresses, to allocate from"
    ),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.ipAddresses.total",
        description = "Count of IPs configured for the pool"
    ),
    printcolumn(
        name = "Free",
        type_ = "integer",
        json_path = ".status.ipAddresses.free",
        description = "Count of unallocated IPs in the pool"
    ),
    printcolumn(
        name = "Used",
        type_ = "integer",
        json_path = ".status.ipAddresses.used",
        description = "Count of allocated IPs in the pool"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the pool can hand out addresses"
    ),
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = spec_rules)]
pub struct IPPoolSpec {
    /// IP addresses the pool hands out: single addresses, ranges `a-b` and CIDRs, all of one
    /// family, all inside the network of the lowest address with `prefix`. May be non-contiguous.
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = addresses_rules)]
    pub addresses: Vec<String>,

    /// Network prefix length written to every allocated `IPAddress` (0-32 for IPv4, 0-128 for IPv6).
    #[schemars(range(min = 0, max = 128))]
    pub prefix: i32,

    /// Gateway written to every allocated `IPAddress`; never handed out itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRY_LENGTH))]
    pub gateway: Option<String>,

    /// Addresses, ranges or CIDRs never handed out, although inside `addresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = excluded_rules)]
    pub excluded_addresses: Option<Vec<String>>,

    /// Hand out the network address (the first of `<lowest>/<prefix>`) and, for IPv4, the
    /// broadcast address too. Off by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "allocateReservedIPAddresses")]
    pub allocate_reserved_ip_addresses: Option<bool>,

    /// Seconds an address stays reserved after its claim is deleted, before it can be handed out
    /// again. The claim's deletion is held for that long. Unset or 0: reusable at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub address_reuse_grace_period_seconds: Option<i32>,

    /// ferro-ipam extension: the pool's second address family, making it dual-stack. IPv6 beside
    /// IPv4 `addresses`, or IPv4 beside IPv6 ones, with their own prefix, gateway and excluded
    /// addresses. A claim picks the family with the `ferro-ipam.dev/ip-family` annotation (or a
    /// name ending in `-ipv4`/`-ipv6`); otherwise it gets the family of `addresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_stack: Option<SecondFamily>,

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

    /// ferro-ipam extension: the pool is a spoke of a pool in another management cluster, the
    /// hub. It hands out only addresses of the blocks the hub leased to it, asking for more as
    /// claims come and returning empty ones. `addresses`, `prefix` and `gateway` stay as on the
    /// hub's pool. See the shared pools page of the docs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<Box<super::hub::HubSource>>,
}

/// The second family of a dual-stack pool. The same rules as the first apply to it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = second_family_rules)]
pub struct SecondFamily {
    /// Addresses of the second family: single addresses, ranges `a-b` and CIDRs.
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = second_addresses_rules)]
    pub addresses: Vec<String>,

    /// Network prefix length of this family's addresses.
    #[schemars(range(min = 0, max = 128))]
    pub prefix: i32,

    /// Gateway of this family; never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRY_LENGTH))]
    pub gateway: Option<String>,

    /// Addresses of this family never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_ENTRIES), inner(length(min = 1, max = MAX_ENTRY_LENGTH)), transform = second_excluded_rules)]
    pub excluded_addresses: Option<Vec<String>>,
}

/// Observed state of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolStatus {
    /// Address counts, as the in-cluster provider reports them. Counts beyond the int64 range
    /// (large IPv6 pools) saturate at its maximum; `families` has the exact figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<IPAddressCounts>,

    /// Exact counts per address family, as decimal strings (an IPv6 pool can hold 2^128).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["family"]))]
    pub families: Vec<FamilyCounts>,

    /// Addresses of recently deleted claims, remembered until `until` (sticky addresses): a claim
    /// re-created under the same namespace and name gets its address back if it is still free.
    /// Nothing is reserved: any claim may take the address meanwhile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub recently_released: Vec<ReleasedAddress>,

    /// `Ready` tells whether the pool can hand out addresses, and why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// An address kept for the claim that held it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ReleasedAddress {
    pub address: String,
    /// `<namespace>/<name>` of the deleted claim.
    pub claim: String,
    /// When the address stops being kept (RFC 3339).
    pub until: String,
}

/// Pool-wide counts, compatible with the in-cluster provider's status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressCounts {
    /// Addresses the pool can hand out (excluded, reserved and gateway addresses not counted).
    pub total: i64,
    /// `IPAddress` objects that reference the pool, out-of-range ones included.
    pub used: i64,
    /// Addresses still free to hand out.
    pub free: i64,
    /// `IPAddress` objects that reference the pool but whose address is not in it (any more).
    pub out_of_range: i64,
    /// Addresses of `spec.reservations` their claims do not hold yet: neither free nor used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<i64>,
}

/// Exact counts for one address family, as decimal strings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FamilyCounts {
    /// `IPv4` or `IPv6`.
    pub family: String,
    pub total: String,
    pub used: String,
    pub free: String,
    pub out_of_range: String,
    /// Reserved addresses their claims do not hold yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<String>,
}

/// Defines a cluster-scoped pool kind: the namespaced kind's spec and status, its own kind and
/// plural (kube's derive makes namespaced kinds only).
macro_rules! global_pool {
    ($(#[$doc:meta])* $name:ident, $spec:ty, $kind:expr, $plural:literal) => {
        $(#[$doc])*
        #[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq)]
        pub struct $name {
            #[serde(flatten, default)]
            pub types: Option<kube::core::TypeMeta>,
            pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            pub spec: $spec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$crate::api::pool::IPPoolStatus>,
        }

        impl $name {
            pub fn new(name: &str, spec: $spec) -> Self {
                use kube::core::Resource as _;
                Self {
                    types: Some(kube::core::TypeMeta {
                        api_version: Self::api_version(&()).into_owned(),
                        kind: Self::kind(&()).into_owned(),
                    }),
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }

        impl kube::core::Resource for $name {
            type DynamicType = ();
            type Scope = kube::core::ClusterResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $crate::api::keys::IPAM_GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1alpha2".into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use global_pool;

global_pool!(
    /// The cluster-scoped pool: claims in any namespace may reference it.
    /// Same spec and status as [`InClusterIPPool`].
    GlobalInClusterIPPool,
    IPPoolSpec,
    GLOBAL_IN_CLUSTER_IP_POOL,
    "globalinclusterippools"
);

fn spec_rules(schema: &mut Schema) {
    apply_rules(schema, vec![super::hub::immutable_rule()]);
    apply_rules(schema, validation::family_rules("spec"));
    apply_rules(schema, validation::spec_rules());
    apply_rules(schema, vec![super::reservation::gateway_rule()]);
}

fn second_family_rules(schema: &mut Schema) {
    apply_rules(schema, validation::family_rules("spec.dualStack"));
}

fn entry_rules(schema: &mut Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| Schema::try_from(i.take()).ok()) {
        let mut items = items;
        apply_rules(&mut items, validation::entry_rules());
        schema.insert("items".to_owned(), items.to_value());
    }
}

fn addresses_rules(schema: &mut Schema) {
    entry_rules(schema);
    apply_rules(schema, validation::addresses_rules("spec"));
}

fn excluded_rules(schema: &mut Schema) {
    entry_rules(schema);
    apply_rules(schema, validation::excluded_rules("spec"));
}

fn second_addresses_rules(schema: &mut Schema) {
    entry_rules(schema);
    apply_rules(schema, validation::addresses_rules("spec.dualStack"));
}

fn second_excluded_rules(schema: &mut Schema) {
    entry_rules(schema);
    apply_rules(schema, validation::excluded_rules("spec.dualStack"));
}
