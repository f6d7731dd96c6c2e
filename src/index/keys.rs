//! How the index names pools and the claims/addresses that hold addresses in them.

use std::fmt;

use crate::intern::Interned;

use crate::api::PoolReference;
use crate::api::keys::{
    ALLOCATED_FROM_ANNOTATION, GLOBAL_IN_CLUSTER_IP_POOL, GLOBAL_IN_CLUSTER_PREFIX_POOL, IN_CLUSTER_IP_POOL,
    IN_CLUSTER_PREFIX_POOL, IPAM_GROUP,
};

/// The pool kinds ferro-ipam serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PoolKind {
    /// `InClusterIPPool`: serves claims of its own namespace.
    InCluster,
    /// `GlobalInClusterIPPool`: serves claims of every namespace.
    Global,
    /// `InClusterPrefixPool`: hands out sub-prefixes to claims of its own namespace.
    InClusterPrefix,
    /// `GlobalInClusterPrefixPool`: hands out sub-prefixes to claims of every namespace.
    GlobalPrefix,
}

impl PoolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::InCluster => IN_CLUSTER_IP_POOL,
            PoolKind::Global => GLOBAL_IN_CLUSTER_IP_POOL,
            PoolKind::InClusterPrefix => IN_CLUSTER_PREFIX_POOL,
            PoolKind::GlobalPrefix => GLOBAL_IN_CLUSTER_PREFIX_POOL,
        }
    }

    /// Whether pools of this kind are cluster-scoped.
    pub fn is_global(self) -> bool {
        matches!(self, PoolKind::Global | PoolKind::GlobalPrefix)
    }

    /// Whether pools of this kind hand out sub-prefixes.
    pub fn is_prefix(self) -> bool {
        matches!(self, PoolKind::InClusterPrefix | PoolKind::GlobalPrefix)
    }

    fn of_name(kind: &str) -> Option<PoolKind> {
        match kind {
            IN_CLUSTER_IP_POOL => Some(PoolKind::InCluster),
            GLOBAL_IN_CLUSTER_IP_POOL => Some(PoolKind::Global),
            IN_CLUSTER_PREFIX_POOL => Some(PoolKind::InClusterPrefix),
            GLOBAL_IN_CLUSTER_PREFIX_POOL => Some(PoolKind::GlobalPrefix),
            _ => None,
        }
    }

    /// The pool kind a `poolRef` names, when it is one of ours. An empty or missing `apiGroup`
    /// (a `v1beta1` nil) counts as ours, as it does for the in-cluster provider.
    pub fn of_reference(pool_ref: &PoolReference) -> Option<PoolKind> {
        let group_is_ours = pool_ref.api_group.as_deref().is_none_or(|g| g.is_empty() || g == IPAM_GROUP);
        if !group_is_ours {
            return None;
        }
        PoolKind::of_name(&pool_ref.kind)
    }
}

/// A pool: kind, namespace (namespaced pools only) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    pub kind: PoolKind,
    pub namespace: Option<String>,
    pub name: String,
}

impl PoolKey {
    pub fn in_cluster(namespace: &str, name: &str) -> Self {
        PoolKey { kind: PoolKind::InCluster, namespace: Some(namespace.to_owned()), name: name.to_owned() }
    }

    pub fn global(name: &str) -> Self {
        PoolKey { kind: PoolKind::Global, namespace: None, name: name.to_owned() }
    }

    /// A pool of `kind` named `name`; `namespace` is kept for namespaced kinds only.
    pub fn of_kind(kind: PoolKind, namespace: &str, name: &str) -> Self {
        let namespace = (!kind.is_global()).then(|| namespace.to_owned());
        PoolKey { kind, namespace, name: name.to_owned() }
    }

    /// The pool a claim or address in `namespace` references, if it is one of ours.
    pub fn from_reference(namespace: &str, pool_ref: &PoolReference) -> Option<Self> {
        Some(PoolKey::of_kind(PoolKind::of_reference(pool_ref)?, namespace, &pool_ref.name))
    }

    /// How the allocated-from annotation of an `IPAddress` names this pool: `<kind>/<name>`
    /// (a namespaced pool is always in the address's own namespace).
    pub fn annotation_value(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.name)
    }

    /// The pool whose address an `IPAddress` of `namespace` records: the one its allocated-from
    /// annotation names (purpose claims), else the one its `poolRef` names.
    pub fn of_address(
        namespace: &str,
        pool_ref: &PoolReference,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Option<Self> {
        if let Some((kind, name)) = annotations.get(ALLOCATED_FROM_ANNOTATION).and_then(|v| v.split_once('/')) {
            return PoolKind::of_name(kind).map(|kind| PoolKey::of_kind(kind, namespace, name));
        }
        Self::from_reference(namespace, pool_ref)
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind.as_str(), self.name),
            None => write!(f, "{} {}", self.kind.as_str(), self.name),
        }
    }
}

/// A claim and the `IPAddress` it owns share namespace and name: this is that pair. The index
/// keeps several copies of each (its holds, the users of its address, waits): both strings are
/// [`Interned`], so a copy is two pointers, and the name is the one copy the claim store's and
/// the `IPAddress` cache's records of the pair hold too.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HolderKey {
    pub namespace: Interned,
    pub name: Interned,
}

impl HolderKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        HolderKey { namespace: Interned::new(namespace), name: Interned::new(name) }
    }
}

impl fmt::Display for HolderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(group: Option<&str>, kind: &str) -> PoolReference {
        PoolReference { api_group: group.map(str::to_owned), kind: kind.to_owned(), name: "p".to_owned() }
    }

    #[test]
    fn claims_for_our_kinds_are_ours_with_or_without_group() {
        assert_eq!(PoolKind::of_reference(&reference(Some(IPAM_GROUP), "InClusterIPPool")), Some(PoolKind::InCluster));
        assert_eq!(PoolKind::of_reference(&reference(None, "GlobalInClusterIPPool")), Some(PoolKind::Global));
        assert_eq!(PoolKind::of_reference(&reference(Some(""), "InClusterIPPool")), Some(PoolKind::InCluster));
        assert_eq!(
            PoolKind::of_reference(&reference(Some(IPAM_GROUP), "InClusterPrefixPool")),
            Some(PoolKind::InClusterPrefix)
        );
        assert_eq!(PoolKind::of_reference(&reference(None, "GlobalInClusterPrefixPool")), Some(PoolKind::GlobalPrefix));
    }

    #[test]
    fn a_global_prefix_pool_is_one_pool_from_every_namespace() {
        let g = reference(None, "GlobalInClusterPrefixPool");
        assert_eq!(PoolKey::from_reference("a", &g), PoolKey::from_reference("b", &g));
        let n = reference(None, "InClusterPrefixPool");
        assert_ne!(PoolKey::from_reference("a", &n), PoolKey::from_reference("b", &n));
    }

    #[test]
    fn claims_for_other_groups_or_kinds_are_not_ours() {
        assert_eq!(PoolKind::of_reference(&reference(Some("ipam.metal3.io"), "InClusterIPPool")), None);
        assert_eq!(PoolKind::of_reference(&reference(Some(IPAM_GROUP), "IPPool")), None);
    }

    #[test]
    fn the_allocated_from_annotation_names_the_pool_over_the_pool_ref() {
        let purpose = PoolReference { name: "cluster-api-vips".into(), ..reference(None, "GlobalInClusterIPPool") };
        let pool = PoolKey::in_cluster("team", "vips");
        let annotations =
            std::collections::BTreeMap::from([(ALLOCATED_FROM_ANNOTATION.to_owned(), pool.annotation_value())]);
        assert_eq!(PoolKey::of_address("team", &purpose, &annotations), Some(pool));
        let global = PoolKey::global("shared");
        let annotations =
            std::collections::BTreeMap::from([(ALLOCATED_FROM_ANNOTATION.to_owned(), global.annotation_value())]);
        assert_eq!(PoolKey::of_address("team", &purpose, &annotations), Some(global));
        let plain = reference(None, "InClusterIPPool");
        assert_eq!(PoolKey::of_address("team", &plain, &Default::default()), Some(PoolKey::in_cluster("team", "p")));
    }

    #[test]
    fn namespaced_and_global_pools_of_one_name_are_distinct() {
        let r = reference(None, "InClusterIPPool");
        let g = reference(None, "GlobalInClusterIPPool");
        assert_ne!(PoolKey::from_reference("a", &r), PoolKey::from_reference("a", &g));
        assert_ne!(PoolKey::from_reference("a", &r), PoolKey::from_reference("b", &r));
        assert_eq!(PoolKey::from_reference("a", &g), PoolKey::from_reference("b", &g));
    }
}
