//! A claim as the claim store keeps it: the fields the claim path reads, in a compact form.
//!
//! Kept: the namespace and name, uid, `resourceVersion`, generation, creation and deletion
//! times, labels, the annotations [`lean`](crate::store::lean::lean) keeps, finalizers, owner
//! references, `spec.poolRef`, `spec.clusterName`, and `status` (its `addressRef` and every
//! condition whole, which the claim's status write compares with). Dropped: everything else of
//! the metadata (`managedFields`, `generateName`, ...), which no step of the claim path reads.
//! [`ClaimRecord::object`] gives the claim back as the typed object the reconcile takes, equal
//! to the lean object the record was made from.
//!
//! Strings many claims share (namespace, pool, kinds, finalizers, label keys, condition types
//! and reasons) are [`Interned`], and so is the name, which the claim's `IPAddress` shares; a uid is kept as 16 bytes and a `resourceVersion` as a number
//! when they round-trip exactly, else as their text; times as their seconds.
//!
//! The record itself holds what differs from one claim to the next (80 bytes: the namespace
//! and name, uid, `resourceVersion`, creation time, owners and status). The rest (labels,
//! annotations, finalizers, the pool, the Cluster, the generation and the deletion time) is the
//! claim's [`Shape`], which the claims of one Cluster or one pool have the same: it is kept once,
//! [`Shared`] by all of them. A status is its own allocation: its `addressRef` and its
//! conditions' types, reasons and generations are a shape too, and what it holds itself is
//! each condition's message and time.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use smallvec::SmallVec;

use crate::api::capi::{ClaimSpec, ClaimStatus, Condition, IPAddressClaim, LocalReference, PoolReference};
use crate::intern::{self, Interned, Shared, Table};
use crate::store::compact::{Kept, Stamp, TimeText, Uid, uuid_bytes, uuid_text, version_number};

#[derive(Clone, Debug, PartialEq, Eq)]
struct Owner {
    api_version: Interned,
    kind: Interned,
    name: Box<str>,
    uid: Uid,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

/// Labels or annotations: the keys shared, the values not.
type Pairs = Box<[(Interned, Box<str>)]>;

/// What claims have in common (see the module), and where the record's own fields are to be
/// read.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Shape {
    uid: Kept,
    version: Kept,
    generation: Option<i64>,
    deleted: Stamp,
    labels: Pairs,
    annotations: Pairs,
    finalizers: Box<[Interned]>,
    pool_group: Option<Interned>,
    pool_kind: Interned,
    pool_name: Interned,
    cluster_name: Option<Interned>,
}

impl intern::Shape for Shape {
    fn table() -> &'static Mutex<Table<Shared<Self>>> {
        static TABLE: LazyLock<Mutex<Table<Shared<Shape>>>> = LazyLock::new(Mutex::default);
        &TABLE
    }
}

/// A condition but its message and time.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ConditionShape {
    type_: Interned,
    status: Interned,
    severity: Option<Interned>,
    reason: Option<Interned>,
    observed_generation: Option<i64>,
}

/// `status.addressRef`: most claims name an `IPAddress` of their own name.
#[derive(Debug, PartialEq, Eq, Hash)]
enum AddressRef {
    None,
    OwnName,
    Other(Box<str>),
}

/// A status but its conditions' messages and times.
#[derive(Debug, PartialEq, Eq, Hash)]
struct StatusShape {
    address_ref: AddressRef,
    conditions: Box<[ConditionShape]>,
}

impl intern::Shape for StatusShape {
    fn table() -> &'static Mutex<Table<Shared<Self>>> {
        static TABLE: LazyLock<Mutex<Table<Shared<StatusShape>>>> = LazyLock::new(Mutex::default);
        &TABLE
    }
}

/// A condition's own: its message and its `lastTransitionTime`.
#[derive(Clone, Debug, PartialEq)]
struct ConditionText {
    message: Option<Box<str>>,
    time: Option<TimeText>,
}

#[derive(Clone, Debug, PartialEq)]
struct StatusRecord {
    shape: Shared<StatusShape>,
    /// One per condition of the shape, in its order. Most claims have the one `Ready`
    /// condition: kept in the status's own allocation.
    texts: SmallVec<[ConditionText; 1]>,
}

/// One claim, compact. See the module doc for what is kept.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRecord {
    pub namespace: Interned,
    /// Interned: the one copy the record of the claim's `IPAddress` and the index share.
    pub name: Interned,
    shape: Shared<Shape>,
    /// The uid's bytes, when the shape says the record keeps it.
    uid: [u8; 16],
    /// The `resourceVersion`'s number, when the shape says the record keeps it.
    version: u64,
    created: Stamp,
    owners: Box<[Owner]>,
    status: Option<Box<StatusRecord>>,
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Pairs {
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
        let (uid_kept, uid) = Kept::of(meta.uid.as_deref(), uuid_bytes);
        let (version_kept, version) = Kept::of(meta.resource_version.as_deref(), version_number);
        let shape = Shape {
            uid: uid_kept,
            version: version_kept,
            generation: meta.generation,
            deleted: Stamp::new(meta.deletion_timestamp.as_ref()),
            labels: pairs(meta.labels.as_ref()),
            annotations: pairs(meta.annotations.as_ref()),
            finalizers: meta.finalizers.iter().flatten().map(|f| Interned::new(f)).collect(),
            pool_group: claim.spec.pool_ref.api_group.as_deref().map(Interned::new),
            pool_kind: Interned::new(&claim.spec.pool_ref.kind),
            pool_name: Interned::new(&claim.spec.pool_ref.name),
            cluster_name: claim.spec.cluster_name.as_deref().map(Interned::new),
        };
        ClaimRecord {
            namespace: Interned::new(meta.namespace.as_deref().unwrap_or_default()),
            name: Interned::new(name),
            shape: Shared::new(shape),
            uid: uid.unwrap_or_default(),
            version: version.unwrap_or_default(),
            created: Stamp::new(meta.creation_timestamp.as_ref()),
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
            status: claim.status.as_ref().map(|status| Box::new(status_record(name, status))),
        }
    }

    /// The claim again, as the typed object the claim path reads.
    pub fn object(&self) -> IPAddressClaim {
        let shape = &*self.shape;
        let metadata = ObjectMeta {
            namespace: Some(self.namespace.to_string()),
            name: Some(self.name.to_string()),
            uid: shape.uid.text(self.uid, uuid_text),
            resource_version: shape.version.text(self.version, |n| n.to_string()),
            generation: shape.generation,
            creation_timestamp: self.created.time(),
            deletion_timestamp: shape.deleted.time(),
            labels: map(&shape.labels),
            annotations: map(&shape.annotations),
            finalizers: (!shape.finalizers.is_empty())
                .then(|| shape.finalizers.iter().map(|f| f.to_string()).collect()),
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
            cluster_name: shape.cluster_name.as_ref().map(|n| n.to_string()),
            pool_ref: PoolReference {
                api_group: shape.pool_group.as_ref().map(|g| g.to_string()),
                kind: shape.pool_kind.to_string(),
                name: shape.pool_name.to_string(),
            },
        };
        let status = self.status.as_deref().map(|status| ClaimStatus {
            address_ref: match &status.shape.address_ref {
                AddressRef::None => None,
                AddressRef::OwnName => Some(LocalReference { name: self.name.to_string() }),
                AddressRef::Other(name) => Some(LocalReference { name: name.to_string() }),
            },
            conditions: status.shape.conditions.iter().zip(&status.texts).map(|(c, text)| condition(c, text)).collect(),
        });
        IPAddressClaim { types: None, metadata, spec, status }
    }
}

/// Drops the shapes no record holds any more.
pub fn sweep_shapes() {
    intern::sweep_shapes::<Shape>();
    intern::sweep_shapes::<StatusShape>();
}

fn status_record(name: &str, status: &ClaimStatus) -> StatusRecord {
    let (conditions, texts): (Vec<ConditionShape>, _) = status
        .conditions
        .iter()
        .map(|c| {
            let shape = ConditionShape {
                type_: Interned::new(&c.type_),
                status: Interned::new(&c.status),
                severity: c.severity.as_deref().map(Interned::new),
                reason: c.reason.as_deref().map(Interned::new),
                observed_generation: c.observed_generation,
            };
            let text = ConditionText {
                message: c.message.as_deref().map(Into::into),
                time: c.last_transition_time.as_deref().map(TimeText::new),
            };
            (shape, text)
        })
        .unzip();
    let address_ref = match &status.address_ref {
        None => AddressRef::None,
        Some(r) if r.name == name => AddressRef::OwnName,
        Some(r) => AddressRef::Other(r.name.as_str().into()),
    };
    StatusRecord { shape: Shared::new(StatusShape { address_ref, conditions: conditions.into() }), texts }
}

fn condition(c: &ConditionShape, text: &ConditionText) -> Condition {
    Condition {
        type_: c.type_.to_string(),
        status: c.status.to_string(),
        severity: c.severity.as_ref().map(|s| s.to_string()),
        reason: c.reason.as_ref().map(|s| s.to_string()),
        message: text.message.as_ref().map(|s| s.to_string()),
        last_transition_time: text.time.as_ref().map(TimeText::text),
        observed_generation: c.observed_generation,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::store::lean::lean_object;

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
        assert_eq!(version_number("7"), Some(7));
        assert_eq!(version_number("007"), None, "a leading zero would not be written back");
        assert_eq!(version_number("+7"), None);
        assert_eq!(version_number("18446744073709551616"), None, "beyond 64 bits");
    }

    /// What a claim costs the store beyond what it shares: the record in its chunk, and the one
    /// allocation of its status (the `Ready` condition's message and time inside it). The
    /// bounds catch a record that grows.
    #[test]
    fn a_record_stays_small() {
        let sizes = [
            ("ClaimRecord", size_of::<ClaimRecord>()),
            ("StatusRecord", size_of::<StatusRecord>()),
            ("ConditionText", size_of::<ConditionText>()),
            ("Shape", size_of::<Shape>()),
        ];
        println!("{sizes:?}");
        assert!(size_of::<ClaimRecord>() <= 80, "the record grew: {sizes:?}");
        assert!(size_of::<StatusRecord>() <= 56, "the status grew: {sizes:?}");
    }

    fn bound_claim(name: &str, uid: &str, version: &str, ip: &str, at: &str) -> IPAddressClaim {
        served(serde_json::json!({
            "metadata": {
                "name": name, "namespace": "default", "uid": uid, "resourceVersion": version, "generation": 1,
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"cluster.x-k8s.io/cluster-name": "wl"},
                "finalizers": ["ipam.cluster.x-k8s.io/ReleaseAddress"],
            },
            "spec": {"clusterName": "wl", "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
            "status": {"addressRef": {"name": name}, "conditions": [
                {"type": "Ready", "status": "True", "reason": "Allocated", "message": format!("allocated {ip}"),
                 "lastTransitionTime": at, "observedGeneration": 1}]},
        }))
    }

    /// The bound claims of one Cluster and pool differ in their names, uids, versions and
    /// messages and condition times (to the second or finer): they share one shape and one
    /// status shape.
    #[test]
    fn the_claims_of_one_cluster_and_pool_share_their_shapes() {
        let a = bound_claim("vm-0", "0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1b", "100", "10.0.0.1", "2026-01-02T03:04:06Z");
        let b = bound_claim(
            "vm-1",
            "0b4e6a2c-9f1d-4c3e-8a7b-5d6e7f809a1c",
            "101",
            "10.0.0.2",
            "2026-01-02T03:04:07.123456789Z",
        );
        let (ra, rb) = (ClaimRecord::new(&a), ClaimRecord::new(&b));
        assert!(std::ptr::eq(&*ra.shape, &*rb.shape), "one shape");
        let (sa, sb) = (ra.status.as_deref().unwrap(), rb.status.as_deref().unwrap());
        assert!(std::ptr::eq(&*sa.shape, &*sb.shape), "one status shape");
        assert_eq!(serde_json::to_value(ra.object()).ok(), serde_json::to_value(&a).ok());
        assert_eq!(serde_json::to_value(rb.object()).ok(), serde_json::to_value(&b).ok());
    }

    fn uid() -> impl Strategy<Value = String> {
        prop_oneof![any::<u128>().prop_map(|bits| Uid::Uuid(bits.to_be_bytes()).text()), "[-0-9a-fA-F]{0,40}"]
    }

    fn text() -> impl Strategy<Value = String> {
        "[-0-9a-zA-Z:.]{0,24}"
    }

    proptest! {
        #[test]
        fn any_claim_comes_back_field_for_field(
            uid in prop::option::of(uid()),
            version in prop::option::of(prop_oneof![any::<u64>().prop_map(|n| n.to_string()), text()]),
            generation in any::<Option<i64>>(),
            deleted in any::<bool>(),
            label in prop::option::of(text()),
            finalizers in prop::collection::vec("[a-z./]{1,12}", 0..3),
            owner in prop::option::of((text(), uid())),
            cluster in prop::option::of("[a-z]{1,8}"),
            address_ref in prop::option::of(prop_oneof![Just("vm".to_owned()), text()]),
            conditions in prop::collection::vec(
                (text(), prop::option::of(text()), prop::option::of(prop_oneof![
                    Just("2026-01-02T03:04:06Z".to_owned()), Just("2026-01-02T03:04:06.25Z".to_owned()), text()]),
                    any::<Option<i64>>()),
                0..3),
        ) {
            let conditions: Vec<_> = conditions.into_iter().map(|(reason, message, time, generation)| serde_json::json!({
                "type": "Ready", "status": "True", "reason": reason, "message": message,
                "lastTransitionTime": time, "observedGeneration": generation,
            })).collect();
            let mut claim = served(serde_json::json!({
                "metadata": {
                    "name": "vm", "namespace": "ns", "uid": uid, "resourceVersion": version, "generation": generation,
                    "deletionTimestamp": deleted.then_some("2026-01-02T03:04:05Z"),
                    "labels": label.map(|v| serde_json::json!({"cluster.x-k8s.io/cluster-name": v})),
                    "finalizers": finalizers,
                    "ownerReferences": owner.map(|(name, uid)| serde_json::json!([
                        {"apiVersion": "v1", "kind": "Thing", "name": name, "uid": uid}])),
                },
                "spec": {"clusterName": cluster, "poolRef": {"kind": "InClusterIPPool", "name": "p"}},
                "status": {"addressRef": address_ref.map(|name| serde_json::json!({"name": name})), "conditions": conditions},
            }));
            let back = ClaimRecord::new(&claim).object();
            if claim.metadata.finalizers.as_ref().is_some_and(Vec::is_empty) {
                claim.metadata.finalizers = None;
            }
            prop_assert_eq!(serde_json::to_value(&back).ok(), serde_json::to_value(&claim).ok());
        }
    }
}
