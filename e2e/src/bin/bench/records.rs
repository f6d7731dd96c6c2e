//! The least of each listed object that a provider reads, for the list floor: serde fills
//! these from a page of a list and skips every other field (`managedFields` among them) without
//! storing it. Timestamps stay strings: the floor reads them and interprets none.

#![expect(dead_code, reason = "the floor parses what a provider reads, and reads none of it itself")]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

/// One page of a list: its objects and where the next page starts.
#[derive(Debug, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(default)]
    pub metadata: ListMeta,
}

/// An object's metadata as a provider reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub generation: Option<i64>,
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub finalizers: Vec<String>,
    #[serde(default)]
    pub owner_references: Vec<OwnerReference>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub controller: Option<bool>,
    pub block_owner_deletion: Option<bool>,
}

/// An object: its metadata, its spec and, if it has one, its status.
#[derive(Debug, Deserialize)]
pub struct Record<Spec, Status> {
    pub metadata: Meta,
    pub spec: Spec,
    pub status: Option<Status>,
}

/// `spec.poolRef` of a claim or an address.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolRef {
    pub api_group: Option<String>,
    pub kind: String,
    pub name: String,
}

/// A reference by name (`status.addressRef`, `spec.claimRef`).
#[derive(Debug, Deserialize)]
pub struct NameRef {
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpec {
    pub pool_ref: PoolRef,
    pub cluster_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    pub address_ref: Option<NameRef>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<String>,
    pub severity: Option<String>,
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressSpec {
    pub claim_ref: NameRef,
    pub pool_ref: PoolRef,
    pub address: String,
    pub prefix: Option<i32>,
    pub gateway: Option<String>,
}

/// An `IPAddressClaim`.
pub type Claim = Record<ClaimSpec, ClaimStatus>;
/// An `IPAddress` (it has no status).
pub type Address = Record<AddressSpec, IgnoredAny>;

/// A pool of any kind, or a `Cluster`: few objects, their spec and status read whole.
#[derive(Debug, Deserialize)]
pub struct Whole {
    pub metadata: Meta,
    #[serde(default)]
    pub spec: Value,
    #[serde(default)]
    pub status: Value,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_served_claim_parses_into_its_record_and_managed_fields_are_skipped() {
        let served = json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {
                "namespace": "bench", "name": "claim-7", "uid": "u-7", "resourceVersion": "42", "generation": 1,
                "creationTimestamp": "2026-12-05T10:00:00Z", "labels": {"team": "a"},
                "annotations": {"note": "x"}, "finalizers": ["ipam.cluster.x-k8s.io/ReleaseAddress"],
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m",
                                     "uid": "u-m", "controller": true}],
                "managedFields": [{"manager": "ferro-ipam", "operation": "Update", "fieldsType": "FieldsV1",
                                   "fieldsV1": {"f:status": {"f:addressRef": {}}}}],
            },
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool-3"},
                     "clusterName": "c1"},
            "status": {
                "addressRef": {"name": "claim-7"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Allocated", "message": "allocated 10.3.0.9",
                                "lastTransitionTime": "2026-12-05T10:00:01Z", "observedGeneration": 1}],
                "deprecated": {"v1beta1": {"conditions": []}},
            },
        });
        let page: Page<Claim> =
            serde_json::from_value(json!({"metadata": {"continue": "next"}, "items": [served]})).unwrap();
        assert_eq!(page.metadata.continue_.as_deref(), Some("next"));
        let claim = &page.items[0];
        let meta = &claim.metadata;
        assert_eq!(
            (meta.namespace.as_deref(), meta.name.as_str(), meta.uid.as_str()),
            (Some("bench"), "claim-7", "u-7")
        );
        assert_eq!((meta.resource_version.as_str(), meta.generation), ("42", Some(1)));
        assert_eq!(meta.creation_timestamp.as_deref(), Some("2026-12-05T10:00:00Z"));
        assert_eq!(meta.deletion_timestamp, None);
        assert_eq!(meta.labels["team"], "a");
        assert_eq!(meta.annotations["note"], "x");
        assert_eq!(meta.finalizers, ["ipam.cluster.x-k8s.io/ReleaseAddress"]);
        assert_eq!(meta.owner_references[0].name, "m");
        assert_eq!(meta.owner_references[0].controller, Some(true));
        assert_eq!(claim.spec.pool_ref.api_group.as_deref(), Some("ipam.cluster.x-k8s.io"));
        assert_eq!(
            (claim.spec.pool_ref.kind.as_str(), claim.spec.pool_ref.name.as_str()),
            ("InClusterIPPool", "pool-3")
        );
        assert_eq!(claim.spec.cluster_name.as_deref(), Some("c1"));
        let status = claim.status.as_ref().unwrap();
        assert_eq!(status.address_ref.as_ref().map(|r| r.name.as_str()), Some("claim-7"));
        let ready = &status.conditions[0];
        assert_eq!((ready.type_.as_str(), ready.status.as_str()), ("Ready", "True"));
        assert_eq!(ready.reason.as_deref(), Some("Allocated"));
        assert_eq!(ready.message.as_deref(), Some("allocated 10.3.0.9"));
        assert_eq!(ready.last_transition_time.as_deref(), Some("2026-12-05T10:00:01Z"));
        assert_eq!((ready.severity.as_deref(), ready.observed_generation), (None, Some(1)));
    }

    #[test]
    fn a_served_address_parses_into_its_record() {
        let served = json!({
            "metadata": {"namespace": "bench", "name": "claim-7", "uid": "u-a", "resourceVersion": "43",
                         "managedFields": [{"manager": "m"}]},
            "spec": {"claimRef": {"name": "claim-7"},
                     "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool-3"},
                     "address": "10.3.0.9", "prefix": 16, "gateway": "10.3.0.1"},
        });
        let address: Address = serde_json::from_value(served).unwrap();
        assert_eq!(address.spec.claim_ref.name, "claim-7");
        assert_eq!(address.spec.pool_ref.name, "pool-3");
        assert_eq!((address.spec.address.as_str(), address.spec.prefix), ("10.3.0.9", Some(16)));
        assert_eq!(address.spec.gateway.as_deref(), Some("10.3.0.1"));
        assert!(address.status.is_none());
    }
}
