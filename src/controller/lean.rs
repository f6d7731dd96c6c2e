//! Objects read lean off the wire: only the metadata ferro-ipam reads is parsed.
//!
//! kube's `Object` parses the whole `ObjectMeta`, `managedFields` included (about half of a
//! claim or an `IPAddress` as served), and its flattened `apiVersion`/`kind` make serde buffer
//! every field of the object before it is parsed. [`Lean`] parses the metadata the claim path
//! reads straight into place and skips everything else unread; the annotations of others are
//! dropped as they are read (see `wiring::support::lean`). Watches of claims and `IPAddress`es,
//! hundreds of thousands of objects at start-up, list through it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::core::{ApiResource, DynamicResourceScope, Object};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::controller::wiring::support::is_read_annotation;

/// An object of a dynamically typed resource, parsed lean. Derefs to the object.
#[derive(Clone, Debug)]
pub struct Lean<P: Clone, U: Clone>(pub Object<P, U>);

/// The metadata fields ferro-ipam reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    finalizers: Option<Vec<String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

#[derive(Deserialize)]
#[serde(bound = "P: DeserializeOwned, U: DeserializeOwned")]
struct Wire<P, U> {
    metadata: Meta,
    spec: P,
    #[serde(default = "none")]
    status: Option<U>,
}

fn none<U>() -> Option<U> {
    None
}

impl<'de, P, U> Deserialize<'de> for Lean<P, U>
where
    P: Clone + DeserializeOwned,
    U: Clone + DeserializeOwned,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let Wire { metadata: m, spec, status } = Wire::<P, U>::deserialize(deserializer)?;
        let annotations = m.annotations.map(|mut a| {
            a.retain(|key, _| is_read_annotation(key));
            a
        });
        let metadata = ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            labels: m.labels,
            annotations: annotations.filter(|a| !a.is_empty()),
            finalizers: m.finalizers,
            owner_references: m.owner_references,
            ..ObjectMeta::default()
        };
        Ok(Lean(Object { types: None, metadata, spec, status }))
    }
}

impl<P: Clone, U: Clone> kube::Resource for Lean<P, U> {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        Object::<P, U>::group(dt)
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        Object::<P, U>::version(dt)
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        Object::<P, U>::kind(dt)
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        Object::<P, U>::plural(dt)
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        Object::<P, U>::api_version(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// The same event, of the object inside.
pub fn unwrap_event<P: Clone, U: Clone>(
    event: kube::runtime::watcher::Event<Lean<P, U>>,
) -> kube::runtime::watcher::Event<Object<P, U>> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(o) => Event::Apply(o.0),
        Event::Delete(o) => Event::Delete(o.0),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.0),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::IPAddressClaim;
    use crate::controller::wiring::support::lean_object;

    #[test]
    fn a_lean_parse_equals_a_full_parse_made_lean() {
        let served = serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {
                "name": "vm-0", "namespace": "default", "uid": "u-1", "resourceVersion": "7", "generation": 3,
                "creationTimestamp": "2026-01-02T03:04:05Z", "deletionTimestamp": "2026-01-02T03:04:09Z",
                "generateName": "vm-", "selfLink": "/x",
                "labels": {"cluster.x-k8s.io/cluster-name": "wl"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "ferro-ipam.dev/requested-address": "10.0.0.9"},
                "finalizers": ["ipam.cluster.x-k8s.io/ReleaseAddress"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "Machine", "name": "m", "uid": "u-2", "controller": true}],
                "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
            },
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
            "status": {"addressRef": {"name": "vm-0"}},
        });
        let Lean(lean) = serde_json::from_value::<Lean<_, _>>(served.clone()).expect("a lean parse");
        let mut full: IPAddressClaim = serde_json::from_value(served).expect("a full parse");
        lean_object(&mut full);
        full.metadata.generate_name = None;
        assert_eq!(serde_json::to_value(&lean).ok(), serde_json::to_value(&full).ok());
        let lean: IPAddressClaim = lean;
        assert!(lean.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_claim_without_status_or_metadata_extras_parses() {
        let Lean(claim): Lean<crate::api::capi::ClaimSpec, crate::api::capi::ClaimStatus> =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "a"},
                "spec": {"poolRef": {"kind": "InClusterIPPool", "name": "p"}},
            }))
            .expect("parses");
        assert!(claim.status.is_none() && claim.metadata.annotations.is_none());
    }
}
