//! What the index feed, the pool controller, preflight and the inspect commands read of a pool
//! object of any kind.

use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{
    GlobalInClusterIPPool, GlobalInClusterPrefixPool, IPPoolStatus, InClusterIPPool, InClusterPrefixPool,
};
use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;

use crate::index::{HolderKey, PoolFacts, PoolKey, PoolKind, PoolSpec};

use crate::api::keys::{
    DELETE_FOR_MOVE_ANNOTATION, PAUSED_ANNOTATION, PROTECT_POOL_FINALIZER, SKIP_DELETE_PROTECTION_ANNOTATION,
};

/// A pool object of any kind.
pub trait PoolObject:
    Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
    fn spec(&self) -> PoolSpec;
    /// `addressReuseGracePeriodSeconds`; prefix pools have none (as in the in-cluster provider).
    fn grace_period_seconds(&self) -> i32;
    fn status(&self) -> Option<&IPPoolStatus>;
    fn key(&self) -> PoolKey;
    /// The API of this kind: for the namespaced kind in `namespace` (all namespaces when None);
    /// the global kind ignores it.
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;
    /// The namespaces whose claims the pool serves: a global pool's selector; None for every
    /// namespace, and for a namespaced pool (its own namespace).
    fn namespace_selector(&self) -> Option<crate::api::NamespaceSelector> {
        None
    }

    /// The addresses its status keeps for released claims (sticky addresses).
    fn remembered(&self) -> Vec<(HolderKey, IpAddr, Timestamp)> {
        self.status()
            .map(|s| s.recently_released.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                let (namespace, name) = r.claim.split_once('/')?;
                Some((HolderKey::new(namespace, name), r.address.parse().ok()?, r.until.parse().ok()?))
            })
            .collect()
    }

    /// What the claim controller needs to know of the pool besides its spec.
    fn facts(&self) -> PoolFacts {
        PoolFacts {
            uid: self.uid().unwrap_or_default(),
            protected: self.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER),
            paused: self.annotations().contains_key(PAUSED_ANNOTATION),
            deleting: self.meta().deletion_timestamp.is_some(),
            moving: [SKIP_DELETE_PROTECTION_ANNOTATION, DELETE_FOR_MOVE_ANNOTATION]
                .iter()
                .any(|a| self.annotations().contains_key(*a)),
            grace_period_seconds: i64::from(self.grace_period_seconds().max(0)),
            labels: self.labels().clone(),
            namespace_selector: self.namespace_selector(),
        }
    }
}

/// Implements [`PoolObject`] for a namespaced (`namespaced`) or cluster-scoped (`global`) kind.
macro_rules! pool_object {
    ($type:ty, $kind:expr, namespaced, $grace:expr) => {
        impl PoolObject for $type {
            fn key(&self) -> PoolKey {
                PoolKey::of_kind($kind, &self.namespace().unwrap_or_default(), &self.name_any())
            }
            fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
                match namespace {
                    Some(ns) => Api::namespaced(client, ns),
                    None => Api::all(client),
                }
            }
            pool_object!(@methods $grace);
        }
    };
    ($type:ty, $kind:expr, global, $grace:expr) => {
        impl PoolObject for $type {
            fn key(&self) -> PoolKey {
                PoolKey::of_kind($kind, "", &self.name_any())
            }
            fn api(client: Client, _namespace: Option<&str>) -> Api<Self> {
                Api::all(client)
            }
            fn namespace_selector(&self) -> Option<crate::api::NamespaceSelector> {
                self.spec.namespace_selector.clone()
            }
            pool_object!(@methods $grace);
        }
    };
    (@methods $grace:expr) => {
        fn spec(&self) -> PoolSpec {
            PoolSpec::from(&self.spec)
        }
        fn grace_period_seconds(&self) -> i32 {
            let grace: fn(&Self) -> i32 = $grace;
            grace(self)
        }
        fn status(&self) -> Option<&IPPoolStatus> {
            self.status.as_ref()
        }
    };
}

pool_object!(InClusterIPPool, PoolKind::InCluster, namespaced, |p| p
    .spec
    .address_reuse_grace_period_seconds
    .unwrap_or(0));
pool_object!(GlobalInClusterIPPool, PoolKind::Global, global, |p| p
    .spec
    .address_reuse_grace_period_seconds
    .unwrap_or(0));
// Prefix pools have no grace period, as in the in-cluster provider.
pool_object!(InClusterPrefixPool, PoolKind::InClusterPrefix, namespaced, |_| 0);
pool_object!(GlobalInClusterPrefixPool, PoolKind::GlobalPrefix, global, |_| 0);
