//! `IPAddress` objects touched by hand: one deleted while its claim lives comes back with the
//! same address; one made by hand (no claim behind it) keeps its address from every claim.

use ferro_ipam::api::keys::PROTECT_ADDRESS_FINALIZER;
use ferro_ipam_e2e::invariants::{self, HAND_MADE_LABEL};
use ferro_ipam_e2e::objects::Scope;
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;

use crate::{A_WHILE, PROMPTLY};

const IN_CLUSTER: &str = "InClusterIPPool";

#[tokio::test(flavor = "multi_thread")]
async fn ipaddress_deleted_by_hand_comes_back_with_the_same_address() {
    let s = Scope::new("address-deleted").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.60.0.10-10.60.0.20"], "prefix": 24, "gateway": "10.60.0.1"}))
        .await
        .unwrap();
    s.claim("a", IN_CLUSTER, "pool").await.unwrap();
    let first = s.wait_allocated("a", PROMPTLY).await.unwrap();
    assert_eq!(first.spec.address, "10.60.0.10");
    let first_uid = first.uid().unwrap();

    // Someone deletes the IPAddress; at once, another claim asks the same pool for an address.
    s.addresses().delete("a", &DeleteParams::default()).await.unwrap();
    s.claim("b", IN_CLUSTER, "pool").await.unwrap();
    assert_eq!(
        s.wait_allocated("b", PROMPTLY).await.unwrap().spec.address,
        "10.60.0.11",
        "the new claim must not get the address of the deleted IPAddress"
    );

    // ferro-ipam lets the old object go (it holds it with a finalizer) and writes a new one.
    s.eventually("the IPAddress is recreated", PROMPTLY, || async {
        s.addresses()
            .get_opt("a")
            .await
            .unwrap()
            .is_some_and(|a| a.uid() != Some(first_uid.clone()) && a.metadata.deletion_timestamp.is_none())
    })
    .await
    .unwrap();
    let again = s.wait_allocated("a", PROMPTLY).await.unwrap();
    assert_eq!(
        (again.spec.address.as_str(), again.spec.prefix, again.spec.gateway.as_deref()),
        ("10.60.0.10", 24, Some("10.60.0.1"))
    );
    assert_eq!(again.spec.claim_ref.name, "a");
    assert!(again.finalizers().iter().any(|f| f == PROTECT_ADDRESS_FINALIZER));
    assert!(
        again
            .owner_references()
            .iter()
            .any(|o| o.kind == "IPAddressClaim" && o.name == "a" && o.controller == Some(true))
    );
    let claim = s.claims().get("a").await.unwrap();
    assert_eq!(claim.status.and_then(|st| st.address_ref).map(|r| r.name).as_deref(), Some("a"));
    s.claim("c", IN_CLUSTER, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.60.0.12");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// An `IPAddress` of the pool that no claim asked for, as an operator writes one to keep an
/// address out of a pool.
async fn hand_made(s: &Scope, name: &str, address: &str) {
    s.create(json!({
        "apiVersion": ferro_ipam_e2e::objects::ipam_api_version(),
        "kind": "IPAddress",
        "metadata": {"name": name, "labels": {HAND_MADE_LABEL: "true"}},
        "spec": {
            "claimRef": {"name": name},
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": IN_CLUSTER, "name": "pool"},
            "address": address,
            "prefix": 24,
        },
    }))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn hand_made_ipaddress_is_never_handed_to_a_claim() {
    let s = Scope::new("address-hand-made").await;
    s.pool("pool", json!({"addresses": ["10.61.0.10-10.61.0.12"], "prefix": 24})).await.unwrap();
    // One made before ferro-ipam starts (it learns of it from its first listing), one after
    // (it learns of it from the watch).
    hand_made(&s, "reserved-before", "10.61.0.10").await;
    let _p = s.provider();
    hand_made(&s, "reserved-after", "10.61.0.11").await;
    s.eventually("the pool counts both", PROMPTLY, || async {
        let status = s.pools().get("pool").await.unwrap().status;
        status.and_then(|st| st.ip_addresses).is_some_and(|c| c.used == 2 && c.free == 1)
    })
    .await
    .unwrap();

    s.claim("a", IN_CLUSTER, "pool").await.unwrap();
    s.claim("b", IN_CLUSTER, "pool").await.unwrap();
    let mut got = Vec::new();
    let mut waiting = Vec::new();
    for name in ["a", "b"] {
        s.eventually("the claim is decided", PROMPTLY, || async {
            s.claim_ready(name).await.is_some_and(|(status, reason, _)| status == "True" || reason == "PoolExhausted")
        })
        .await
        .unwrap();
        match s.addresses().get_opt(name).await.unwrap() {
            Some(address) => got.push(address.spec.address),
            None => waiting.push(name),
        }
    }
    assert_eq!(got, ["10.61.0.12"], "only the address nobody holds is handed out");
    assert_eq!(waiting.len(), 1);
    let waiting = waiting[0];
    s.stays("the hand-made addresses stay as they are", A_WHILE, || async {
        let map = s.address_map().await.unwrap();
        map.get("reserved-before").map(String::as_str) == Some("10.61.0.10")
            && map.get("reserved-after").map(String::as_str) == Some("10.61.0.11")
            && s.addresses().get_opt(waiting).await.unwrap().is_none()
    })
    .await
    .unwrap();
    // ferro-ipam leaves the hand-made objects alone: no finalizer, no owner.
    for name in ["reserved-before", "reserved-after"] {
        let object = s.addresses().get(name).await.unwrap();
        assert!(object.finalizers().is_empty(), "{name}: {:?}", object.finalizers());
        assert!(object.owner_references().is_empty(), "{name}");
    }

    // Once the operator deletes one, its address is free for the waiting claim.
    s.addresses().delete("reserved-before", &DeleteParams::default()).await.unwrap();
    assert_eq!(s.wait_allocated(waiting, PROMPTLY).await.unwrap().spec.address, "10.61.0.10");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
