//! What every reconcile shares: the client, the index, the stores and the event recorder.

use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource};
use tracing::warn;

use crate::api::CapiVersion;
use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::index::{HolderKey, Index};
use crate::metrics::Metrics;

/// Shared state of the controllers.
pub struct Context {
    pub client: Client,
    pub index: Index,
    pub capi: CapiVersion,
    pub claim_resource: ApiResource,
    pub address_resource: ApiResource,
    pub addresses: super::address_cache::AddressCache,
    pub claims: Store<IPAddressClaim>,
    /// None when the API server serves no CAPI `Cluster` (then no claim waits for one).
    pub clusters: Option<Store<Cluster>>,
    /// The served `Cluster` resource, when there is one.
    pub cluster_resource: Option<ApiResource>,
    /// The infrastructure provider of a claim's owner, for purpose pools.
    pub providers: super::provider::Providers,
    pub recorder: Recorder,
    pub metrics: std::sync::Arc<Metrics>,
    /// Where a reconcile's misconfiguration is said (ERROR, gauge, readiness).
    pub misconfig: crate::misconfig::Misconfig,
    /// The cached claim versions this instance has written over.
    pub own_writes: super::own_writes::OwnWrites,
    /// When each pool's status was last written.
    pub pool_writes: super::pool::WriteThrottle,
    /// The namespace this instance is confined to (`--namespace`), if any.
    pub only_namespace: Option<String>,
    /// Whether this replica may write now (its leadership term is not suspended).
    pub fence: crate::client::Fence,
    /// The API server's clock: grace periods and condition times are on it.
    pub clock: crate::client::ServerClock,
    /// When each claim still waiting for its address was first seen (for the latency histogram).
    pub first_seen: std::sync::Mutex<std::collections::HashMap<HolderKey, std::time::Instant>>,
}

impl Context {
    /// Notes the first time a claim without an address is seen.
    pub fn seen(&self, holder: &HolderKey) {
        let mut seen = self.first_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.entry(holder.clone()).or_insert_with(std::time::Instant::now);
    }

    /// How long a claim has waited since it was first seen, forgetting it.
    pub fn waited(&self, holder: &HolderKey) -> Option<std::time::Duration> {
        let mut seen = self.first_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.remove(holder).map(|since| since.elapsed())
    }

    pub fn claim_api(&self, namespace: &str) -> Api<IPAddressClaim> {
        Api::namespaced_with(self.client.clone(), namespace, &self.claim_resource)
    }

    pub fn address_api(&self, namespace: &str) -> Api<IPAddress> {
        Api::namespaced_with(self.client.clone(), namespace, &self.address_resource)
    }

    /// The `IPAddress` of this name, as the watch last saw it.
    pub fn cached_address(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<IPAddress>> {
        self.addresses.get(namespace, name)
    }

    /// The claim of this name, as the watch last saw it.
    pub fn cached_claim(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<IPAddressClaim>> {
        self.claims.get(&ObjectRef::new_with(name, self.claim_resource.clone()).within(namespace))
    }

    /// The Cluster of this name, as the watch last saw it.
    pub fn cached_cluster(&self, namespace: &str, name: &str) -> Option<std::sync::Arc<Cluster>> {
        let (clusters, resource) = (self.clusters.as_ref()?, self.cluster_resource.as_ref()?);
        clusters.get(&ObjectRef::new_with(name, resource.clone()).within(namespace))
    }

    /// Records an Event on an object. A failure to record is logged, never fatal.
    pub async fn publish<K>(&self, object: &K, dyntype: &K::DynamicType, warning: bool, reason: &str, note: String)
    where
        K: Resource,
    {
        let event = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.to_owned(),
            note: Some(crate::api::bounded::truncate(&note, crate::api::bounded::EVENT_NOTE)),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        // A suspended term's Event waits for the fence rather than being refused and lost.
        self.fence.wait_open().await;
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(dyntype)).await {
            warn!(%error, reason, "could not record an event");
        }
    }
}
