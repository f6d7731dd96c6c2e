//! What the pool controller needs of either pool kind.

use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{GlobalInClusterIPPool, IPPoolSpec, IPPoolStatus, InClusterIPPool};
use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;

use crate::index::{HolderKey, PoolFacts, PoolKey};

use crate::api::keys::{PAUSED_ANNOTATION, PROTECT_POOL_FINALIZER};

/// A pool object of either kind.
pub trait PoolObject:
    Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
    fn spec(&self) -> &IPPoolSpec;
    fn status(&self) -> Option<&IPPoolStatus>;
    fn key(&self) -> PoolKey;
    /// The API of this kind: for the namespaced kind in `namespace` (all namespaces when None);
    /// the global kind ignores it.
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;

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
            grace_period_seconds: i64::from(self.spec().address_reuse_grace_period_seconds.unwrap_or(0).max(0)),
            labels: self.labels().clone(),
        }
    }
}

impl PoolObject for InClusterIPPool {
    fn spec(&self) -> &IPPoolSpec {
        &self.spec
    }
    fn status(&self) -> Option<&IPPoolStatus> {
        self.status.as_ref()
    }
    fn key(&self) -> PoolKey {
        PoolKey::in_cluster(&self.namespace().unwrap_or_default(), &self.name_any())
    }
    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl PoolObject for GlobalInClusterIPPool {
    fn spec(&self) -> &IPPoolSpec {
        &self.spec
    }
    fn status(&self) -> Option<&IPPoolStatus> {
        self.status.as_ref()
    }
    fn key(&self) -> PoolKey {
        PoolKey::global(&self.name_any())
    }
    fn api(client: Client, _namespace: Option<&str>) -> Api<Self> {
        Api::all(client)
    }
}
