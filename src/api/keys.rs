//! Well-known names: API group, finalizers, labels and annotations.
//!
//! The values shared with Cluster API and the in-cluster provider are fixed by those projects;
//! ferro-ipam's own extensions live under `ferro-ipam.dev/`.

/// API group of the pools and of CAPI's claims and addresses.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// API group of CAPI's `Cluster`.
pub const CLUSTER_GROUP: &str = "cluster.x-k8s.io";

/// Kinds of pool this provider serves.
pub const IN_CLUSTER_IP_POOL: &str = "InClusterIPPool";
pub const GLOBAL_IN_CLUSTER_IP_POOL: &str = "GlobalInClusterIPPool";
pub const IN_CLUSTER_PREFIX_POOL: &str = "InClusterPrefixPool";
pub const GLOBAL_IN_CLUSTER_PREFIX_POOL: &str = "GlobalInClusterPrefixPool";

/// Finalizer on a claim until its address is released.
pub const RELEASE_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";
/// Finalizer on an `IPAddress` so that it is not deleted while its claim lives.
pub const PROTECT_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";
/// Finalizer on a pool while any `IPAddress` references it.
pub const PROTECT_POOL_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectPool";
/// Lets a pool be deleted although addresses reference it (used by `clusterctl move`).
pub const SKIP_DELETE_PROTECTION_ANNOTATION: &str = "ipam.cluster.x-k8s.io/skip-validate-delete-webhook";
/// clusterctl: set on every object `clusterctl move` deletes from the source cluster.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// CAPI: the cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// CAPI: an object (claim, pool or Cluster) that controllers must leave alone.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// CAPI: selects the objects a controller instance watches (`--watch-filter`).
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";
/// clusterctl: moves the pools along with the objects that reference them.
pub const MOVE_HIERARCHY_LABEL: &str = "clusterctl.cluster.x-k8s.io/move-hierarchy";

/// Name of the field manager ferro-ipam writes with.
pub const FIELD_MANAGER: &str = "ferro-ipam";

/// ferro-ipam: the address family a claim asks a dual-stack pool for (`IPv4` or `IPv6`).
pub const IP_FAMILY_ANNOTATION: &str = "ferro-ipam.dev/ip-family";
/// ferro-ipam: a specific address a claim asks for.
pub const REQUESTED_ADDRESS_ANNOTATION: &str = "ferro-ipam.dev/requested-address";

/// Purpose labels of a pool (value `"true"`): it serves claims that ask for "a VIP" or "a VM IP".
pub const VIPS_LABEL: &str = "cluster-api-vips";
pub const VM_IPS_LABEL: &str = "cluster-api-vm-ips";
/// On a namespaced purpose pool: when every such pool of the namespace is full, global pools of
/// the purpose are used next.
pub const ALLOW_OVERFLOW_VIPS_LABEL: &str = "cluster-api-allow-overflow-vips";
pub const ALLOW_OVERFLOW_VM_IPS_LABEL: &str = "cluster-api-allow-overflow-vm-ips";
/// On a purpose pool: it serves claims of every infrastructure provider, not only its own.
pub const ALLOW_ALL_PROVIDERS_LABEL: &str = "cluster-api-allow-all-providers";
/// clusterctl: the provider a CRD (and, by ferro-ipam's convention, a purpose pool) belongs to.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
/// ferro-ipam: on an `IPAddress` of a purpose claim, the pool that holds its address
/// (`InClusterIPPool/<name>` or `GlobalInClusterIPPool/<name>`). Its `spec.poolRef` stays the
/// claim's, as CAPI's validation requires.
pub const ALLOCATED_FROM_ANNOTATION: &str = "ferro-ipam.dev/allocated-from";
/// ferro-ipam: on a `Cluster`, asks for a control-plane VIP. `"true"` for port 6443, or the port.
pub const CONTROL_PLANE_VIP_LABEL: &str = "ferro-ipam.dev/control-plane-vip";
/// ferro-ipam: on an opted-in `Cluster` until its VIP claim is gone.
pub const CONTROL_PLANE_VIP_FINALIZER: &str = "ferro-ipam.dev/control-plane-vip";

/// The pool names that stand for a purpose (the purpose labels); no pool may be called so.
pub const RESERVED_NAMES: [&str; 2] = [VIPS_LABEL, VM_IPS_LABEL];
