//! A claim as the claim store keeps it: the fields the claim path reads, in a compact form.
//!
//! Kept: the namespace and name, uid, `resourceVersion`, generation, creation and deletion
//! times, labels, the annotations [`lean`](crate::controller::wiring) keeps, finalizers, owner
//! references, `spec.poolRef`, `spec.clusterName`, and `status` (its `addressRef` and every
//! condition whole, which the claim's status write compares with). Dropped: everything else of
//! the metadata (`managedFields`, `generateName`, ...), which no step of the claim path reads.
//! [`ClaimRecord::object`] gives the claim back as the typed object the reconcile takes, equal
//! to the lean object the record was made from.
//!
//! Strings many claims share (namespace, pool, kinds, finalizers, label keys, condition types
//! and reasons) are [`Interned`], and so is the name, which the claim's `IPAddress` shares; a uid is kept as 16 bytes and a `resourceVersion` as a number
//! when they round-trip exactly, else as their text; times as their seconds.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use smallvec::SmallVec;

use crate::api::capi::{ClaimSpec, ClaimStatus, Condition, IPAddressClaim, LocalReference, PoolReference};
use crate::controller::compact::{Stamp, TimeText, Uid, Version};
use crate::intern::Interned;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Owner {
    api_version: Interned,
    kind: Interned,
    name: Box<str>,
    uid: Uid,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

#[derive(Clone, Debug, PartialEq)]
struct ConditionRecord {
    type_: Interned,
    status: Interned,
    severity: Option<Interned>,
    reason: Option<Interned>,
    message: Option<Box<str>>,
    last_transition_time: Option<TimeText>,
    observed_generation: Option<i64>,
}

/// `status.addressRef`: most claims name an `IPAddress` of their own name.
#[derive(Clone, Debug, PartialEq)]
enum AddressRef {
    None,
    OwnName,
    Other(Box<str>),
}

#[derive(Clone, Debug, PartialEq)]
struct StatusRecord {
    address_ref: AddressRef,
    /// Most claims have the one `Ready` condition: kept in the status's own allocation.
    conditions: SmallVec<[ConditionRecord; 1]>,
}

/// One claim, compact. See the module doc for what is kept.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRecord {
    pub namespace: Interned,
    /// Interned: the one copy the record of the claim's `IPAddress` and the index share.
    pub name: Interned,
    uid: Option<Uid>,
    version: Option<Version>,
    generation: Option<i64>,
    created: Stamp,
    deleted: Stamp,
    labels: Box<[(Interned, Box<str>)]>,
    annotations: Box<[(Interned, Box<str>)]>,
    /// Most claims have the one finalizer: kept in the record, not in an allocation of its own.
    finalizers: SmallVec<[Interned; 1]>,
    owners: Box<[Owner]>,
    pool_group: Option<Interned>,
    pool_kind: Interned,
    pool_name: Interned,
    cluster_name: Option<Interned>,
    status: Option<Box<StatusRecord>>,
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Box<[(Interned, Box<str>)]> {
    map.into_iter().flatten().map(|(k, v)| (Interned::new(k), v.as_str().into())).collect()
}

fn map(pairs: &[(Interned, Box<str>)]) -> Option<BTreeMap<String, String>> {
    (!pairs.is_empty()).then(|| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

impl ClaimRecord {
    /// The record of a claim (as the watch delivers it, lean or not).
    pub fn new(claim: &IPAddressClaim) -> ClaimRecord {
        let meta = &claim.metadata;
        let name: &str = meta.name.as_deref().unwrap_or_default();
        ClaimRecord {
            namespace: Interned::new(meta.namespace.as_deref().unwrap_or_default()),
            name: Interned::new(name),
            uid: meta.uid.as_deref().map(Uid::new),
            version: meta.resource_version.as_deref().map(Version::new),
            generation: meta.generation,
            created: Stamp::new(meta.creation_timestamp.as_ref()),
            deleted: Stamp::new(meta.deletion_timestamp.as_ref()),
            labels: pairs(meta.labels.as_ref()),
            annotations: pairs(meta.annotations.as_ref()),
            finalizers: meta.finalizers.iter().flatten().map(|f| Interned::new(f)).collect(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| Owner {
                    api_version: Interned::new(&o.api_version),
                    kind: Interned::new(&o.kind),
                    name: o.name.as_str().into(),
                    uid: Uid::new(&o.uid),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
            pool_group: claim.spec.pool_ref.api_group.as_deref().map(Interned::new),
            pool_kind: Interned::new(&claim.spec.pool_ref.kind),
            pool_name: Interned::new(&claim.spec.pool_ref.name),
            cluster_name: claim.spec.cluster_name.as_deref().map(Interned::new),
            status: claim.status.as_ref().map(|status| Box::new(status_record(name, status))),
        }
    }

    /// The claim again, as the typed object the claim path reads.
    pub fn object(&self) -> IPAddressClaim {
        let metadata = ObjectMeta {
            namespace: Some(self.namespace.to_string()),
            name: Some(self.name.to_string()),
            uid: self.uid.as_ref().map(Uid::text),
            resource_version: self.version.as_ref().map(Version::text),
            generation: self.generation,
            creation_timestamp: self.created.time(),
            deletion_timestamp: self.deleted.time(),
            labels: map(&self.labels),
            annotations: map(&self.annotations),
            finalizers: (!self.finalizers.is_empty()).then(|| self.finalizers.iter().map(|f| f.to_string()).collect()),
            owner_references: (!self.owners.is_empty()).then(|| {
                self.owners
                    .iter()
                    .map(|o| OwnerReference {
                        api_version: o.api_version.to_string(),
                        kind: o.kind.to_string(),
                        name: o.name.to_string(),
                        uid: o.uid.text(),
                        controller: o.controller,
                        block_owner_deletion: o.block_owner_deletion,
                    })
                    .collect()
            }),
            ..ObjectMeta::default()
        };
        let spec = ClaimSpec {
            cluster_name: self.cluster_name.as_ref().map(|n| n.to_string()),
            pool_ref: PoolReference {
                api_group: self.pool_group.as_ref().map(|g| g.to_string()),
                kind: self.pool_kind.to_string(),
                name: self.pool_name.to_string(),
            },
        };
        let status = self.status.as_deref().map(|status| ClaimStatus {
            address_ref: match &status.address_ref {
                AddressRef::None => None,
                AddressRef::OwnName => Some(LocalReference { name: self.name.to_string() }),
                AddressRef::Other(name) => Some(LocalReference { name: name.to_string() }),
            },
            conditions: status.conditions.iter().map(condition).collect(),
        });
        IPAddressClaim { types: None, metadata, spec, status }
    }
}

fn status_record(name: &str, status: &ClaimStatus) -> StatusRecord {
    StatusRecord {
        address_ref: match &status.address_ref {
            None => AddressRef::None,
            Some(r) if r.name == name => AddressRef::OwnName,
            Some(r) => AddressRef::Other(r.name.as_str().into()),
        },
        conditions: status
            .conditions
            .iter()
            .map(|c| ConditionRecord {
                type_: Interned::new(&c.type_),
                status: Interned::new(&c.status),
                severity: c.severity.as_deref().map(Interned::new),
                reason: c.reason.as_deref().map(Interned::new),
                message: c.message.as_deref().map(Into::into),
                last_transition_time: c.last_transition_time.as_deref().map(TimeText::new),
                observed_generation: c.observed_generation,
            })
            .collect(),
    }
}

fn condition(c: &ConditionRecord) -> Condition {
    Condition {
        type_: c.type_.to_string(),
        status: c.status.to_string(),
        severity: c.severity.as_ref().map(|s| s.to_string()),
        reason: c.reason.as_ref().map(|s| s.to_string()),
        message: c.message.as_ref().map(|s| s.to_string()),
        last_transition_time: c.last_transition_time.as_ref().map(TimeText::text),
        observed_generation: c.observed_generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::wiring::support::lean_object;

    fn served(value: serde_json::Value) -> IPAddressClaim {
        let mut claim: IPAddressClaim = serde_json::from_value(value).expect("a claim parses");
        lean_object(&mut claim);
        claim
    }

    #[test]
    fn a_record_gives_back_the_lean_claim_it_was_made_from() {
        let claims = [
            serde_json::json!({
                "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
                "metadata": {
                    "name": "vm-0", "namespace": "default", "uid": "0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1b",
                    "resourceVersion": "12345", "generation": 2, "creationTimestamp": "2026-01-02T03:04:05Z",
                    "labels": {"cluster.x-k8s.io/cluster-name": "wl", "role": "worker"},
                    "annotations": {"ferro-ipam.dev/requested-address": "10.0.0.9", "other.io/x": "dropped"},
                    "finalizers": ["ipam.cluster.x-k8s.io/ReleaseAddress", "example.com/keep"],
                    "ownerReferences": [{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "VSphereMachine", "name": "m-0", "uid": "0B4E6A2C-9F1D-4C3E-8A7B-5D6E7F809A1B",
                        "controller": true, "blockOwnerDeletion": true}],
                    "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                },
                "spec": {"clusterName": "wl", "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
                "status": {"addressRef": {"name": "vm-0"}, "conditions": [
                    {"type": "Ready", "status": "True", "reason": "Allocated", "message": "10.0.0.9 from p",
                     "lastTransitionTime": "2026-01-02T03:04:06Z", "observedGeneration": 2}]},
            }),
            serde_json::json!({
                "metadata": {"name": "vm-1", "namespace": "ns", "uid": "not-a-uuid", "resourceVersion": "0042",
                    "deletionTimestamp": "2026-01-02T03:04:05Z", "finalizers": []},
                "spec": {"poolRef": {"kind": "GlobalInClusterIPPool", "name": "g"}},
                "status": {"addressRef": {"name": "elsewhere"}, "conditions": [
                    {"type": "Ready", "status": "False", "severity": "Warning", "reason": "PoolExhausted"}, {"type": "Odd"}]},
            }),
            serde_json::json!({
                "metadata": {"name": "vm-2", "namespace": "ns", "resourceVersion": "x7"},
                "spec": {"poolRef": {"kind": "InClusterIPPool", "name": "p"}},
                "status": {},
            }),
        ];
        for value in claims {
            let mut claim = served(value);
            let back = ClaimRecord::new(&claim).object();
            // An empty list is kept as none: no step tells them apart.
            if claim.metadata.finalizers.as_ref().is_some_and(Vec::is_empty) {
                claim.metadata.finalizers = None;
            }
            assert_eq!(serde_json::to_value(&back).ok(), serde_json::to_value(&claim).ok());
        }
    }

    #[test]
    fn uids_and_versions_are_numbers_only_when_they_round_trip() {
        assert!(matches!(Uid::new("0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1b"), Uid::Uuid(_)));
        assert!(matches!(Uid::new("0B4E6A2C-9F1D-4C3E-8A7B-5D6E7F809A1B"), Uid::Verbatim(_)));
        assert!(matches!(Uid::new("0b4e6a2c+9f1d-4c3e-8a7b-5d6e7f809a1b"), Uid::Verbatim(_)));
        assert_eq!(Uid::new("0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1b").text(), "0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1b");
        assert_eq!(Version::new("7"), Version::Number(7));
        assert_eq!(Version::new("007").text(), "007");
        assert_eq!(Version::new("18446744073709551616").text(), "18446744073709551616");
    }

    /// What a claim costs the store beyond its strings: the record in its chunk, and the one
    /// allocation of its status (the `Ready` condition inside it). The bound catches a record
    /// that grows.
    #[test]
    fn a_record_stays_small() {
        let sizes = [
            ("ClaimRecord", size_of::<ClaimRecord>()),
            ("StatusRecord", size_of::<StatusRecord>()),
            ("ConditionRecord", size_of::<ConditionRecord>()),
            ("finalizers", size_of::<SmallVec<[Interned; 1]>>()),
        ];
        println!("{sizes:?}");
        assert!(size_of::<ClaimRecord>() <= 208, "the record grew: {sizes:?}");
        assert!(size_of::<StatusRecord>() <= 128, "the status grew: {sizes:?}");
    }
}
