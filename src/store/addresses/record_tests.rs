use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::store::compact::parse_uuid;
use crate::store::lean::lean_object;

/// An `IPAddress` as served, made lean as the watch makes every object before the cache.
fn served(object: Value) -> IPAddress {
    let mut address: IPAddress = serde_json::from_value(object).expect("an IPAddress parses");
    lean_object(&mut address);
    address
}

/// The object the record of `address` gives back is `address`, field for field.
fn assert_round_trip(address: &IPAddress) {
    let (namespace, name) = (address.metadata.namespace.as_deref().unwrap(), address.metadata.name.as_deref().unwrap());
    let again = Record::of(address, name).materialise(namespace, name);
    assert_eq!(again.metadata, address.metadata);
    assert_eq!(again.spec, address.spec);
    assert_eq!(again.types, address.types);
    assert_eq!(again.status, address.status);
    assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(address).unwrap());
}

const CLAIM_UID: &str = "3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c";

fn made_by_a_provider(name: &str, ip: &str, gateway: Option<&str>, prefix: i32) -> Value {
    json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {
            "namespace": "default", "name": name, "uid": "00000000-0000-4000-8000-00000000000a",
            "resourceVersion": "48213", "generation": 1, "creationTimestamp": "2026-12-05T11:00:00Z",
            "labels": {"cluster.x-k8s.io/cluster-name": "workload-1"},
            "annotations": {
                "ferro-ipam.dev/allocated-from": "GlobalInClusterIPPool/shared",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
            "finalizers": ["ipam.cluster.x-k8s.io/ProtectAddress"],
            "ownerReferences": [
                {"apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim", "name": name,
                 "uid": CLAIM_UID, "controller": true, "blockOwnerDeletion": true},
                {"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool", "name": "pool-a",
                 "uid": "c0ffee00-0000-4000-8000-000000000001", "controller": false, "blockOwnerDeletion": true},
            ],
            "managedFields": [{"manager": "ferro-ipam", "operation": "Update"}],
        },
        "spec": {
            "claimRef": {"name": name},
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool-a"},
            "address": ip, "prefix": prefix, "gateway": gateway,
        },
    })
}

#[test]
fn an_address_made_by_a_provider_comes_back_field_for_field() {
    assert_round_trip(&served(made_by_a_provider("vm-0", "10.0.0.7", Some("10.0.0.1"), 24)));
    assert_round_trip(&served(made_by_a_provider("vm-1", "fd00::a", Some("fd00::1"), 64)));
    assert_round_trip(&served(made_by_a_provider("vm-2", "192.168.10.200", None, 32)));
    let address = served(made_by_a_provider("vm-0", "10.0.0.7", Some("10.0.0.1"), 24));
    let record = Record::of(&address, "vm-0");
    let shape = &*record.shape;
    assert!(matches!(shape.claim, Name::Own), "claimRef names the object itself: a flag");
    assert!(matches!(shape.owners.as_deref(), Some([Owner { name: Name::Own, uid: OwnerUid::InRecord, .. }, _])));
    assert_eq!(record.owner_uid, uuid_bytes(CLAIM_UID).unwrap(), "the claim's uid is the record's");
    assert!(shape.odd_address.is_none() && matches!(shape.gateway, Some(Address::Ip(_))));
    assert_eq!((&shape.resource_version, record.resource_version), (&Kept::InRecord, 48213));
    assert_eq!(shape.uid, Kept::InRecord);
}

/// The addresses one provider makes in one pool differ in their uids, versions, addresses and
/// claims (the claim's name is the address's own, its uid the record's): they share one shape.
#[test]
fn the_addresses_of_one_pool_share_one_shape() {
    let mut first = served(made_by_a_provider("vm-0", "10.0.0.7", Some("10.0.0.1"), 24));
    let mut second = served(made_by_a_provider("vm-1", "10.0.0.8", Some("10.0.0.1"), 24));
    first.metadata.owner_references.as_mut().unwrap()[0].uid = "00000000-0000-4000-8000-0000000000c1".into();
    second.metadata.owner_references.as_mut().unwrap()[0].uid = "00000000-0000-4000-8000-0000000000c2".into();
    second.metadata.uid = Some("00000000-0000-4000-8000-00000000000b".into());
    second.metadata.resource_version = Some("48299".into());
    let (a, b) = (Record::of(&first, "vm-0"), Record::of(&second, "vm-1"));
    assert!(std::ptr::eq(&*a.shape, &*b.shape), "one shape for both");
    assert_ne!(a.owner_uid, b.owner_uid);
    assert_round_trip(&first);
    assert_round_trip(&second);
    let other_pool = served(made_by_a_provider("vm-2", "10.0.0.9", Some("10.0.0.254"), 24));
    assert!(!std::ptr::eq(&*a.shape, &*Record::of(&other_pool, "vm-2").shape), "another gateway, another shape");
}

#[test]
fn text_without_an_exact_compact_form_comes_back_as_it_came() {
    let odd = served(json!({
        "metadata": {
            "namespace": "tenant-b", "name": "by-hand", "uid": "not-a-uuid",
            "resourceVersion": "v7-abc", "creationTimestamp": "2026-01-02T03:04:05Z",
            "deletionTimestamp": "2026-12-05T11:30:00Z",
            "labels": {}, "finalizers": ["example.com/keep", "ipam.cluster.x-k8s.io/ProtectAddress"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "someone-else",
                                 "uid": "3F2B8C1E-9D4A-4E6B-8A7C-1D2E3F4A5B6C"}],
        },
        "spec": {
            "claimRef": {"name": "another-claim"}, "poolRef": {"kind": "InClusterIPPool", "name": "pool-b"},
            "address": "010.0.0.1", "prefix": 8, "gateway": "FD00::1",
        },
    }));
    assert_round_trip(&odd);
    let record = Record::of(&odd, "by-hand");
    let shape = &*record.shape;
    assert!(shape.odd_address.is_some() && matches!(shape.gateway, Some(Address::Verbatim(_))));
    assert!(matches!(shape.uid, Kept::Verbatim(_)) && matches!(shape.resource_version, Kept::Verbatim(_)));
    assert!(
        matches!(shape.owners.as_deref(), Some([Owner { uid: OwnerUid::Here(Uid::Verbatim(_)), .. }])),
        "uppercase is not canonical"
    );

    let leading_zero = served(json!({
        "metadata": {"namespace": "ns", "name": "z", "resourceVersion": "007"},
        "spec": {"claimRef": {"name": "z"}, "poolRef": {"kind": "K", "name": "p"}, "address": "::ffff:10.0.0.1", "prefix": 0},
    }));
    assert_round_trip(&leading_zero);
    assert!(matches!(Record::of(&leading_zero, "z").shape.resource_version, Kept::Verbatim(_)));

    let bare = served(json!({
        "metadata": {"namespace": "ns", "name": "bare"},
        "spec": {"claimRef": {}, "poolRef": {"kind": "", "name": ""}, "address": "", "prefix": -1},
    }));
    assert_round_trip(&bare);
}

#[test]
fn uuids_are_read_only_in_their_canonical_spelling() {
    assert_eq!(parse_uuid(CLAIM_UID), Some(0x3f2b8c1e_9d4a_4e6b_8a7c_1d2e3f4a5b6c));
    assert_eq!(Uid::new(CLAIM_UID).text(), CLAIM_UID);
    assert_eq!(Uid::new("00000000-0000-0000-0000-000000000000").text(), "00000000-0000-0000-0000-000000000000");
    for odd in [
        "3F2B8C1E-9D4A-4E6B-8A7C-1D2E3F4A5B6C",
        "3f2b8c1e9d4a4e6b8a7c1d2e3f4a5b6c",
        "{3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6c}",
    ] {
        assert_eq!(parse_uuid(odd), None, "{odd}");
    }
    assert_eq!(parse_uuid("3f2b8c1e-9d4a-4e6b-8a7c-1d2e3f4a5b6+"), None);
    assert_eq!(parse_uuid("3f2b8c1e+9d4a-4e6b-8a7c-1d2e3f4a5b6c"), None);
}

/// What one address costs the cache, on a 64-bit target: its slot in the cache's chunks (the
/// namespace and the name, shared, and the record), and nothing else of its own when its
/// shape is its pool's. The bound catches a record that grows.
#[test]
fn a_record_stays_small() {
    let sizes = [
        ("Record", size_of::<Record>()),
        ("slot", size_of::<Option<super::super::Entry>>()),
        ("Shape", size_of::<Shape>()),
        ("Owner", size_of::<Owner>()),
    ];
    println!("{sizes:?}");
    assert!(size_of::<Record>() <= 80, "the record grew: {sizes:?}");
    assert!(size_of::<Option<super::super::Entry>>() <= 96, "the slot grew: {sizes:?}");
}

fn uid() -> impl Strategy<Value = String> {
    prop_oneof![any::<u128>().prop_map(|bits| Uid::Uuid(bits.to_be_bytes()).text()), "[-0-9a-fA-F]{0,40}"]
}

fn version() -> impl Strategy<Value = String> {
    prop_oneof![any::<u64>().prop_map(|n| n.to_string()), "[0-9a-z]{0,12}"]
}

fn address() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<Ipv4Addr>().prop_map(|ip| ip.to_string()),
        any::<Ipv6Addr>().prop_map(|ip| ip.to_string()),
        "[0-9a-fA-F.:]{0,24}",
    ]
}

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"
}

proptest! {
    #[test]
    fn any_address_comes_back_field_for_field(
        name in name(),
        claim in prop::option::of(name()),
        owner in prop::option::of((name(), uid(), any::<Option<bool>>())),
        claim_uid in uid(),
        uid in prop::option::of(uid()),
        version in prop::option::of(version()),
        ip in address(),
        gateway in prop::option::of(address()),
        prefix in any::<i32>(),
        label in prop::option::of("[a-z]{0,8}"),
    ) {
        let mut object = made_by_a_provider(&name, &ip, gateway.as_deref(), prefix);
        let meta = &mut object["metadata"];
        meta["uid"] = json!(uid);
        meta["resourceVersion"] = json!(version);
        meta["labels"] = json!(label.map(|value| json!({"cluster.x-k8s.io/cluster-name": value})));
        meta["ownerReferences"][0]["uid"] = json!(claim_uid);
        if let Some((owner, uid, controller)) = owner {
            meta["ownerReferences"][1] = json!({"apiVersion": "v1", "kind": "Thing", "name": owner, "uid": uid, "controller": controller});
        }
        object["spec"]["claimRef"]["name"] = json!(claim.unwrap_or_else(|| name.clone()));
        assert_round_trip(&served(object));
    }
}
