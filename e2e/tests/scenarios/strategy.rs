//! `allocationStrategy`: the order in which a pool hands out its free addresses.

use std::collections::BTreeSet;

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use serde_json::json;

use crate::PROMPTLY;

/// Waits until the claim's `IPAddress` is gone: its address is free again.
async fn wait_gone(s: &Scope, claim: &str) {
    s.eventually(&format!("{claim}'s IPAddress is deleted"), PROMPTLY, || async {
        s.addresses().get_opt(claim).await.unwrap().is_none() && s.claims().get_opt(claim).await.unwrap().is_none()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn least_recently_released_gives_a_replacement_machine_an_address_nobody_just_left() {
    let s = Scope::new("strategy-lrr").await;
    let _p = s.provider();
    let spec =
        json!({"addresses": ["10.60.0.10-10.60.0.13"], "prefix": 24, "allocationStrategy": "LeastRecentlyReleased"});
    s.pool("pool", spec).await.unwrap();
    for name in ["m-0", "m-1"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    assert_eq!(s.addresses().get("m-0").await.unwrap().spec.address, "10.60.0.10");
    s.delete_claim("m-0").await.unwrap();
    wait_gone(&s, "m-0").await;
    // Lowest would hand 10.60.0.10 straight back; the replacement gets one never released.
    s.claim("m-2", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("m-2", PROMPTLY).await.unwrap().spec.address, "10.60.0.12");
    s.claim("m-3", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("m-3", PROMPTLY).await.unwrap().spec.address, "10.60.0.13");
    // Only the released address is left: it is handed out, nothing is held back.
    s.claim("m-4", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("m-4", PROMPTLY).await.unwrap().spec.address, "10.60.0.10");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn random_hands_out_distinct_addresses_of_the_pool_and_prefix_pools_take_a_strategy_too() {
    let s = Scope::new("strategy-random").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.61.0.0/24"], "prefix": 24, "allocationStrategy": "Random"})).await.unwrap();
    s.prefix_pool(
        "prefixes",
        json!({"prefixes": ["fd00:61::/56"], "allocationPrefixLength": 64, "allocationStrategy": "LeastRecentlyReleased"}),
    )
    .await
    .unwrap();
    let names: Vec<String> = (0..8).map(|i| format!("r-{i}")).collect();
    for name in &names {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
    }
    s.claim("p-0", "InClusterPrefixPool", "prefixes").await.unwrap();
    let mut handed = BTreeSet::new();
    for name in &names {
        let address = s.wait_allocated(name, PROMPTLY).await.unwrap().spec.address;
        assert!(address.starts_with("10.61.0.") && address != "10.61.0.0" && address != "10.61.0.255", "{address}");
        handed.insert(address);
    }
    assert_eq!(handed.len(), names.len(), "{handed:?}");
    assert_eq!(s.wait_allocated("p-0", PROMPTLY).await.unwrap().spec.address, "fd00:61::");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_strategy_is_refused_by_the_api_server() {
    let s = Scope::new("strategy-refused").await;
    let error = s
        .pool("pool", json!({"addresses": ["10.62.0.1"], "prefix": 24, "allocationStrategy": "Highest"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("spec.allocationStrategy") && error.contains("Unsupported value"), "{error}");
}
