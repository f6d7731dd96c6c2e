//! `who-has` and `explain` on synthetic inventories (no API server).

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::api::capi::{IPAddress, IPAddressClaim, LocalReference};
use crate::api::{CapiVersion, InClusterIPPool};
use crate::fixtures::claim;
use crate::index::HolderKey;
use crate::preflight::build_index;
use crate::preflight::gather::Inventory;

use super::explain;
use super::who_has::{self, WhoHas};

fn pool() -> InClusterIPPool {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "p", "namespace": "ns", "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"]},
        "spec": {"addresses": ["10.0.0.10-10.0.0.13"], "prefix": 24, "gateway": "10.0.0.1", "excludedAddresses": ["10.0.0.13"],
                 "reservations": [{"address": "10.0.0.12", "claimName": "vm-r"}]},
    }))
    .expect("a pool")
}

fn address(name: &str, ip: &str) -> IPAddress {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"},
                 "address": ip, "prefix": 24},
    }))
    .expect("an address")
}

fn served(name: &str) -> IPAddressClaim {
    let mut c = claim(name, "p");
    c.status = Some(crate::api::capi::ClaimStatus {
        address_ref: Some(LocalReference { name: name.into() }),
        conditions: Vec::new(),
    });
    c
}

fn inventory(addresses: Vec<IPAddress>, claims: Vec<IPAddressClaim>) -> Inventory {
    Inventory { in_cluster_pools: vec![pool()], addresses, claims, ..Inventory::empty(CapiVersion::V1Beta2) }
}

fn look_up(inventory: &Inventory, ip: &str) -> WhoHas {
    let index = build_index(inventory, Timestamp::from_second(1_700_000_000).expect("a time"));
    who_has::answer(inventory, &index, ip.parse().expect("an address"))
}

#[test]
fn who_has_names_the_holder_and_what_the_pool_makes_of_each_address() {
    let inv = inventory(vec![address("a", "10.0.0.10")], vec![served("a")]);
    let held = look_up(&inv, "10.0.0.10");
    assert_eq!((held.held[0].ip_address.as_str(), held.held[0].claim.as_deref()), ("ns/a", Some("ns/a")));
    assert_eq!(held.pools[0].state, "held");
    let states: Vec<(String, bool)> = ["10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.1"]
        .iter()
        .map(|ip| look_up(&inv, ip).pools.first().map(|p| (p.state.clone(), p.could_hand_out)).expect("a pool"))
        .collect();
    assert_eq!(
        states,
        [("free".into(), true), ("reserved".into(), false), ("blocked".into(), false), ("blocked".into(), false)]
    );
    assert!(look_up(&inv, "10.0.0.99").pools.is_empty());
    assert!(who_has::text(&held).contains("held by IPAddress ns/a of InClusterIPPool ns/p"));
}

#[test]
fn explain_tells_a_reserved_claim_from_one_that_waits() {
    let inv = inventory(
        vec![address("vm-r", "10.0.0.12"), address("a", "10.0.0.10"), address("b", "10.0.0.11")],
        vec![served("vm-r"), served("a"), served("b"), claim("c", "p")],
    );
    let index = build_index(&inv, Timestamp::from_second(1_700_000_000).expect("a time"));
    let reserved = explain::answer(&inv, &index, &HolderKey::new("ns", "vm-r"), None);
    assert_eq!(
        (reserved.state.as_str(), reserved.origin.as_deref()),
        ("served", Some("reserved for it by spec.reservations[0]"))
    );
    let index = build_index(&inv, Timestamp::from_second(1_700_000_000).expect("a time"));
    let waiting = explain::answer(&inv, &index, &HolderKey::new("ns", "c"), None);
    assert_eq!(waiting.state, "pending");
    assert!(waiting.waits.as_deref().is_some_and(|w| w.starts_with("PoolExhausted: ")), "{waiting:?}");
    let missing = explain::answer(&inv, &index, &HolderKey::new("ns", "nope"), None);
    assert_eq!(missing.state, "notFound");
}

/// A global pool that serves the namespaces labelled `team: a`, with the VIP purpose label.
fn team_a_vips() -> crate::api::GlobalInClusterIPPool {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": "team-a", "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"],
                     "labels": {"cluster-api-vips": "true", "cluster-api-allow-all-providers": "true"}},
        "spec": {"addresses": ["10.9.0.1-10.9.0.5"], "prefix": 24, "namespaceSelector": {"matchLabels": {"team": "a"}}},
    }))
    .expect("a global pool")
}

#[test]
fn explain_says_the_claims_namespace_is_not_selected_by_the_pools_selector() {
    let mut direct = claim("direct", "team-a");
    direct.spec.pool_ref.kind = "GlobalInClusterIPPool".into();
    let mut vip = claim("vip", "cluster-api-vips");
    vip.spec.pool_ref.kind = "GlobalInClusterIPPool".into();
    let mut inv = Inventory { global_pools: vec![team_a_vips()], ..inventory(Vec::new(), vec![direct, vip]) };
    inv.namespaces.insert("ns".into(), [("team".to_owned(), "b".to_owned())].into());
    let index = build_index(&inv, Timestamp::from_second(1_700_000_000).expect("a time"));
    let answer = explain::answer(&inv, &index, &HolderKey::new("ns", "direct"), None);
    let waits = answer.waits.unwrap_or_default();
    assert!(waits.starts_with("NamespaceNotSelected: "), "{waits}");
    assert!(waits.contains("team=a") && waits.contains("namespace ns"), "{waits}");
    let answer = explain::answer(&inv, &index, &HolderKey::new("ns", "vip"), None);
    let verdict = &answer.candidates.first().expect("the labelled global pool").verdict;
    assert!(verdict.starts_with("passed over: its spec.namespaceSelector (team=a)"), "{verdict}");

    inv.namespaces.insert("ns".into(), [("team".to_owned(), "a".to_owned())].into());
    let index = build_index(&inv, Timestamp::from_second(1_700_000_000).expect("a time"));
    let answer = explain::answer(&inv, &index, &HolderKey::new("ns", "direct"), None);
    assert!(answer.waits.as_deref().is_some_and(|w| w.contains("hands it 10.9.0.1")), "{answer:?}");
}
