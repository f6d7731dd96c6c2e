//! Objects read lean off the wire: only the metadata ferro-ipam reads is parsed.
//!
//! kube's `Object` parses the whole `ObjectMeta`, `managedFields` included (about half of a
//! claim or an `IPAddress` as served), and its flattened `apiVersion`/`kind` make serde buffer
//! every field of the object before it is parsed. [`Lean`] parses the metadata the claim path
//! reads straight into place and skips everything else unread; the annotations of others are
//! dropped as they are read (see [`lean`]). Watches of claims and `IPAddress`es,
//! hundreds of thousands of objects at start-up, list through it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::core::{ApiResource, DynamicResourceScope, Object};
use kube::runtime::reflector;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

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

/// A store of a dynamically typed resource, and its writer.
pub fn store_with<K>(resource: ApiResource) -> (reflector::Store<K>, reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ApiResource> + Clone + 'static,
{
    let writer = reflector::store::Writer::new(resource);
    (writer.as_reader(), writer)
}

/// The annotations ferro-ipam reads: its own, the IPAM group's and Cluster API's (`paused`).
const READ_ANNOTATIONS: [&str; 3] = ["ferro-ipam.dev/", "ipam.cluster.x-k8s.io/", "cluster.x-k8s.io/"];

/// Whether ferro-ipam reads annotations of this key.
pub fn is_read_annotation(key: &str) -> bool {
    READ_ANNOTATIONS.iter().any(|prefix| key.starts_with(prefix))
}

/// Drops what no controller reads before an object reaches a store: `managedFields` (about half
/// of a claim or address as served) and the annotations of others (`kubectl apply`'s copy of the
/// whole object, for one). Patches built from cached objects are merge patches that name the
/// fields they set, never `managedFields` or annotations, so they are unaffected.
pub fn lean<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.self_link = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| is_read_annotation(key));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// [`lean`], and the `apiVersion` and `kind` every object of a dynamically typed store repeats.
pub fn lean_object<P: Clone, U: Clone>(object: &mut Object<P, U>) {
    lean(object);
    object.types = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::IPAddressClaim;

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

    #[test]
    fn a_lean_object_keeps_the_annotations_ferro_ipam_reads_and_nothing_else_of_the_metadata_noise() {
        let mut claim: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {
                "name": "vm-0", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
                "labels": {"cluster.x-k8s.io/cluster-name": "wl"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"a whole\": \"object\"}",
                    "ferro-ipam.dev/requested-address": "10.0.0.9",
                    "cluster.x-k8s.io/paused": "",
                    "ipam.cluster.x-k8s.io/skip-validate-delete-webhook": "",
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
        }))
        .expect("a claim parses");
        lean_object(&mut claim);
        let kept: Vec<&str> = claim.metadata.annotations.iter().flatten().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kept,
            [
                "cluster.x-k8s.io/paused",
                "ferro-ipam.dev/requested-address",
                "ipam.cluster.x-k8s.io/skip-validate-delete-webhook"
            ]
        );
        assert!(claim.metadata.managed_fields.is_none() && claim.types.is_none());
        assert_eq!(claim.metadata.labels.as_ref().map(|l| l.len()), Some(1), "labels are read: kept");
        assert_eq!(claim.metadata.resource_version.as_deref(), Some("7"), "patches name the version they expect");

        let mut bare: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vm-1", "annotations": {"example.com/note": "x"}},
            "spec": {"poolRef": {"kind": "InClusterIPPool", "name": "p"}},
        }))
        .expect("a claim parses");
        lean_object(&mut bare);
        assert!(bare.metadata.annotations.is_none(), "nothing read is left: no map at all");
    }
}
