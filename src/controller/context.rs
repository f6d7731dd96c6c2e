//! What every reconcile shares, in four groups: the API server (`Kube`), what the watches last
//! saw (`Caches`), what the controllers say (`Report`), and what this instance remembers of its
//! own writes (`Writes`); besides them the index, and the namespace this instance serves.

use std::sync::Arc;

use kube::core::ApiResource;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{debug, warn};

use super::error::describe;

use crate::api::CapiVersion;
use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::client::{Fence, ServerClock};
use crate::index::Index;
use crate::metrics::Metrics;
use crate::misconfig::Misconfig;

use super::latency::Latency;
use super::own_writes::OwnWrites;
use super::write_throttle::WriteThrottle;
use crate::client::providers::Providers;
use crate::store::addresses::AddressCache;
use crate::store::claims::ClaimStore;
use crate::store::namespaces::NamespaceLabels;

/// Shared state of the controllers.
pub struct Context {
    pub kube: Kube,
    pub index: Index,
    pub caches: Caches,
    pub report: Report,
    pub writes: Writes,
    /// The namespace this instance is confined to (`--namespace`), if any.
    pub only_namespace: Option<String>,
}

/// The API server: the client, the resources it serves, and when and by which clock to write.
pub struct Kube {
    pub client: Client,
    pub capi: CapiVersion,
    pub claim_resource: ApiResource,
    pub address_resource: ApiResource,
    /// The served `Cluster` resource; None when the API server serves no CAPI `Cluster`.
    pub cluster_resource: Option<ApiResource>,
    /// Whether this replica may write now (its leadership term is not suspended).
    pub fence: Fence,
    /// The API server's clock: grace periods and condition times are on it.
    pub clock: ServerClock,
}

/// What the watches last saw.
pub struct Caches {
    pub addresses: AddressCache,
    pub claims: ClaimStore,
    /// None when the API server serves no CAPI `Cluster` (then no claim waits for one).
    pub clusters: Option<Store<Cluster>>,
    /// The infrastructure provider of a claim's owner, for purpose pools.
    pub providers: Providers,
    /// Every Namespace's labels, for the selectors of global pools; None when this instance
    /// serves one namespace (and no global pool).
    pub namespaces: Option<NamespaceLabels>,
    /// The spoke pools, their blocks and what keeps them from their hub.
    pub spokes: crate::feed::SpokePools,
}

/// What the controllers say: Events, metrics, misconfigurations, and the allocation latency.
pub struct Report {
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Where a reconcile's misconfiguration is said (ERROR, gauge, readiness).
    pub misconfig: Misconfig,
    pub latency: Latency,
}

/// What this instance remembers of its own writes.
pub struct Writes {
    /// The cached claim versions this instance has written over.
    pub own: OwnWrites,
    /// When each pool's status was last written.
    pub pools: WriteThrottle,
}

impl Context {
    pub fn claim_api(&self, namespace: &str) -> Api<IPAddressClaim> {
        Api::namespaced_with(self.kube.client.clone(), namespace, &self.kube.claim_resource)
    }

    pub fn address_api(&self, namespace: &str) -> Api<IPAddress> {
        Api::namespaced_with(self.kube.client.clone(), namespace, &self.kube.address_resource)
    }

    /// The `IPAddress` of this name, as the watch last saw it.
    pub fn cached_address(&self, namespace: &str, name: &str) -> Option<Arc<IPAddress>> {
        self.caches.addresses.get(namespace, name)
    }

    /// The claim of this name, as the watch last saw it.
    pub fn cached_claim(&self, namespace: &str, name: &str) -> Option<Arc<IPAddressClaim>> {
        self.caches.claims.get(namespace, name)
    }

    /// The Cluster of this name, as the watch last saw it.
    pub fn cached_cluster(&self, namespace: &str, name: &str) -> Option<Arc<Cluster>> {
        let (clusters, resource) = (self.caches.clusters.as_ref()?, self.kube.cluster_resource.as_ref()?);
        clusters.get(&ObjectRef::new_with(name, resource.clone()).within(namespace))
    }

    /// The labels of Namespace `name`, as the Namespace watch last saw them; None while unknown.
    pub fn namespace_labels(&self, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
        self.caches.namespaces.as_ref()?.of(name)
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
        self.kube.fence.wait_open().await;
        if let Err(error) = self.report.recorder.publish(&event, &object.object_ref(dyntype)).await {
            let object = match object.namespace() {
                Some(namespace) => format!("{namespace}/{}", object.name_any()),
                None => object.name_any(),
            };
            if namespace_terminating(&error) {
                debug!(%object, reason, "no event recorded: its namespace is being deleted");
            } else {
                warn!(%object, reason, error = %describe(&error), "could not record an event");
            }
        }
    }
}

/// An Event refused because its namespace is being deleted, as every Event of a namespace's
/// last moments is: expected, and nothing to act on.
fn namespace_terminating(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403
        && status.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 403 as the API server writes it, with one cause.
    fn forbidden(cause: &str) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "unable to create new content",
            "details": {"kind": "events", "causes": [{"reason": cause, "field": "metadata.namespace"}]},
        }))
        .expect("a Status");
        kube::Error::Api(status.boxed())
    }

    #[test]
    fn only_a_namespace_being_deleted_makes_a_refused_event_expected() {
        assert!(namespace_terminating(&forbidden("NamespaceTerminating")));
        assert!(!namespace_terminating(&forbidden("FieldValueForbidden")), "another 403 is a warning");
    }
}
