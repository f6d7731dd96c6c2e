//! The in-cluster provider's integration scenarios, which ferro-ipam must pass as well.

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::{A_WHILE, PROMPTLY};

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_pool_allocates_with_prefix_and_gateway() {
    let s = Scope::new("ns-pool-allocates").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"})).await.unwrap();
    s.claim("c1", "InClusterIPPool", "pool").await.unwrap();
    let address = s.wait_allocated("c1", PROMPTLY).await.unwrap();
    assert_eq!(address.spec.address, "10.0.0.10");
    assert_eq!(address.spec.prefix, 24);
    assert_eq!(address.spec.gateway.as_deref(), Some("10.0.0.1"));
    let claim = s.claims().get("c1").await.unwrap();
    assert_eq!(claim.status.and_then(|st| st.address_ref).map(|r| r.name).as_deref(), Some("c1"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_for_an_unknown_pool_kind_is_ignored() {
    let s = Scope::new("unknown-kind").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.1.1.5"], "prefix": 24})).await.unwrap();
    s.claim("c1", "SomeOtherPool", "pool").await.unwrap();
    // Beside it, a claim of the same pool name with our kind, which the provider does serve.
    s.claim("ours", "InClusterIPPool", "pool").await.unwrap();
    s.stays("claim stays untouched", A_WHILE, || async {
        let claim = s.claims().get("c1").await.unwrap();
        claim.status.is_none() && claim.metadata.finalizers.is_none()
    })
    .await
    .unwrap();
    assert_eq!(s.wait_allocated("ours", PROMPTLY).await.unwrap().spec.address, "10.1.1.5");
    assert!(s.addresses().get_opt("c1").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_for_a_missing_pool_gets_nothing_until_the_pool_appears() {
    let s = Scope::new("missing-pool").await;
    let _p = s.provider();
    s.claim("c1", "InClusterIPPool", "later").await.unwrap();
    let message = s.wait_reason("c1", "PoolNotReady", PROMPTLY).await.unwrap();
    assert!(message.contains("not found"), "{message}");
    assert!(s.addresses().get_opt("c1").await.unwrap().is_none());
    s.pool("later", json!({"addresses": ["10.1.0.5"], "prefix": 24})).await.unwrap();
    assert_eq!(s.wait_allocated("c1", PROMPTLY).await.unwrap().spec.address, "10.1.0.5");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn reserved_and_excluded_addresses_are_skipped() {
    let s = Scope::new("reserved-excluded").await;
    let _p = s.provider();
    // 10.2.0.0 is the network address, .1 the gateway, .2 excluded: .3 comes first.
    s.pool("pool", json!({"addresses": ["10.2.0.0-10.2.0.5"], "prefix": 24, "gateway": "10.2.0.1", "excludedAddresses": ["10.2.0.2"]})).await.unwrap();
    // A /30 whose broadcast .7 is reserved: only .5 and .6 are handed out.
    s.pool("small", json!({"addresses": ["10.2.1.4/30"], "prefix": 30})).await.unwrap();
    s.claim("a", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("a", PROMPTLY).await.unwrap().spec.address, "10.2.0.3");
    let mut got = Vec::new();
    for name in ["b", "c"] {
        s.claim(name, "InClusterIPPool", "small").await.unwrap();
        got.push(s.wait_allocated(name, PROMPTLY).await.unwrap().spec.address);
    }
    assert_eq!(got, ["10.2.1.5", "10.2.1.6"]);
    s.claim("d", "InClusterIPPool", "small").await.unwrap();
    s.wait_reason("d", "PoolExhausted", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn allocate_reserved_addresses_hands_out_network_and_broadcast() {
    let s = Scope::new("allocate-reserved").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.3.0.0/30"], "prefix": 30, "allocateReservedIPAddresses": true}))
        .await
        .unwrap();
    for name in ["a", "b", "c", "d"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    let all: Vec<String> = s.address_map().await.unwrap().into_values().collect();
    let mut all = all;
    all.sort();
    assert_eq!(all, ["10.3.0.0", "10.3.0.1", "10.3.0.2", "10.3.0.3"]);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_order_addresses_hand_out_the_lowest_first() {
    let s = Scope::new("out-of-order").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.4.0.50", "10.4.0.20-10.4.0.21", "10.4.0.8/30"], "prefix": 24}))
        .await
        .unwrap();
    let mut got = Vec::new();
    for name in ["a", "b", "c", "d"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        got.push(s.wait_allocated(name, PROMPTLY).await.unwrap().spec.address);
    }
    assert_eq!(got, ["10.4.0.8", "10.4.0.9", "10.4.0.10", "10.4.0.11"]);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn pool_without_gateway_writes_addresses_without_gateway() {
    let s = Scope::new("no-gateway").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.5.0.1-10.5.0.3"], "prefix": 24})).await.unwrap();
    s.claim("a", "InClusterIPPool", "pool").await.unwrap();
    let address = s.wait_allocated("a", PROMPTLY).await.unwrap();
    assert_eq!(address.spec.address, "10.5.0.1");
    assert_eq!(address.spec.gateway, None);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn single_ip_pools_hand_out_their_one_address() {
    let s = Scope::new("single-ip").await;
    let _p = s.provider();
    s.pool("v4", json!({"addresses": ["192.168.7.7"], "prefix": 24})).await.unwrap();
    s.pool("v6", json!({"addresses": ["fd00:7::7"], "prefix": 64})).await.unwrap();
    s.claim("a", "InClusterIPPool", "v4").await.unwrap();
    s.claim("b", "InClusterIPPool", "v6").await.unwrap();
    assert_eq!(s.wait_allocated("a", PROMPTLY).await.unwrap().spec.address, "192.168.7.7");
    assert_eq!(s.wait_allocated("b", PROMPTLY).await.unwrap().spec.address, "fd00:7::7");
    // Only after "a" holds the one address: created at once, either claim could win it.
    s.claim("c", "InClusterIPPool", "v4").await.unwrap();
    s.wait_reason("c", "PoolExhausted", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slash_32_pool_has_nothing_to_allocate_and_says_why() {
    // As in the in-cluster provider, the network address of <address>/<prefix> is reserved, and
    // for a /32 that is the address itself: the pool says so instead of silently staying empty.
    let s = Scope::new("slash-32").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["192.168.7.7"], "prefix": 32})).await.unwrap();
    s.eventually("the pool reports it has no allocatable address", PROMPTLY, || async {
        let pool = s.pools().get("pool").await.unwrap();
        pool.status.is_some_and(|st| {
            st.conditions.iter().any(|c| {
                c.type_ == "Ready"
                    && c.status == "False"
                    && c.reason == "NoAllocatableAddresses"
                    && c.message.contains("allocateReservedIPAddresses")
            })
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn global_pool_serves_claims_of_any_namespace_with_distinct_addresses() {
    let a = Scope::wide("global-any-ns").await;
    let b = a.sibling("global-any-ns-b").await;
    let _p = a.provider();
    let pool = a.global_name("shared");
    a.global_pool(&pool, json!({"addresses": ["10.6.0.1-10.6.0.10"], "prefix": 24, "gateway": "10.6.0.254"}))
        .await
        .unwrap();
    // Same claim name in two namespaces: two addresses, each named after its claim in its namespace.
    a.claim("same", "GlobalInClusterIPPool", &pool).await.unwrap();
    b.claim("same", "GlobalInClusterIPPool", &pool).await.unwrap();
    let x = a.wait_allocated("same", PROMPTLY).await.unwrap();
    let y = b.wait_allocated("same", PROMPTLY).await.unwrap();
    assert_ne!(x.spec.address, y.spec.address);
    assert_eq!(x.spec.gateway.as_deref(), Some("10.6.0.254"));
    invariants::check(&a.client, &[&a.ns, &b.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn same_named_pools_in_two_namespaces_are_independent() {
    let a = Scope::wide("same-name-pools").await;
    let b = a.sibling("same-name-pools-b").await;
    let _p = a.provider();
    a.pool("pool", json!({"addresses": ["10.7.0.1"], "prefix": 24})).await.unwrap();
    b.pool("pool", json!({"addresses": ["10.7.0.1"], "prefix": 24})).await.unwrap();
    a.claim("c", "InClusterIPPool", "pool").await.unwrap();
    b.claim("c", "InClusterIPPool", "pool").await.unwrap();
    // Each pool hands out its only address: neither is exhausted by the other.
    assert_eq!(a.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.7.0.1");
    assert_eq!(b.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.7.0.1");
    invariants::check(&a.client, &[&a.ns, &b.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_and_global_pool_of_one_name_are_independent() {
    let s = Scope::wide("ns-and-global").await;
    let _p = s.provider();
    let name = s.global_name("pool");
    s.pool(&name, json!({"addresses": ["10.8.0.1"], "prefix": 24})).await.unwrap();
    s.global_pool(&name, json!({"addresses": ["10.8.1.1"], "prefix": 24})).await.unwrap();
    s.claim("ns", "InClusterIPPool", &name).await.unwrap();
    s.claim("global", "GlobalInClusterIPPool", &name).await.unwrap();
    assert_eq!(s.wait_allocated("ns", PROMPTLY).await.unwrap().spec.address, "10.8.0.1");
    let global = s.wait_allocated("global", PROMPTLY).await.unwrap();
    assert_eq!(global.spec.address, "10.8.1.1");
    assert_eq!(global.spec.pool_ref.kind, "GlobalInClusterIPPool");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// Pauses a pool and waits until the provider has seen it paused. Nothing it writes tells of a
/// pause, so the pause comes with a spec edit that changes nothing (an explicit grace period of
/// zero): once the pool's Ready condition reports that generation, the provider has read the
/// object that carries the annotation.
async fn pause_pool_and_wait_until_seen(s: &Scope, name: &str) {
    let patch = json!({
        "metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}},
        "spec": {"addressReuseGracePeriodSeconds": 0},
    });
    let paused = s.pools().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let generation = paused.metadata.generation.expect("a generation");
    s.eventually("the provider has seen the pool paused", PROMPTLY, || async {
        let status = s.pools().get(name).await.unwrap().status.unwrap_or_default();
        status.conditions.iter().any(|c| c.type_ == "Ready" && c.observed_generation >= Some(generation))
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_pool_blocks_allocation_and_claim_deletion_until_unpaused() {
    let s = Scope::new("paused-pool").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.9.0.1-10.9.0.5"], "prefix": 24})).await.unwrap();
    s.claim("before", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("before", PROMPTLY).await.unwrap();
    pause_pool_and_wait_until_seen(&s, "pool").await;
    s.claim("during", "InClusterIPPool", "pool").await.unwrap();
    s.delete_claim("before").await.unwrap();
    s.stays("nothing moves while the pool is paused", A_WHILE, || async {
        s.addresses().get_opt("during").await.unwrap().is_none()
            && s.addresses().get_opt("before").await.unwrap().is_some()
    })
    .await
    .unwrap();
    let pools = kube::core::ApiResource::erase::<ferro_ipam::api::InClusterIPPool>(&());
    s.patch(&pools, true, "pool", json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}}))
        .await
        .unwrap();
    s.wait_allocated("during", PROMPTLY).await.unwrap();
    s.eventually("the deleted claim is released", PROMPTLY, || async {
        s.claims().get_opt("before").await.unwrap().is_none()
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn exhausted_namespaced_pool_serves_the_waiting_claim_once_an_address_is_freed() {
    let s = Scope::new("exhausted-ns").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.10.0.1-10.10.0.2"], "prefix": 24})).await.unwrap();
    for name in ["a", "b"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    s.claim("waiting", "InClusterIPPool", "pool").await.unwrap();
    let message = s.wait_reason("waiting", "PoolExhausted", PROMPTLY).await.unwrap();
    assert!(message.contains("no free"), "{message}");
    assert!(s.addresses().get_opt("waiting").await.unwrap().is_none());
    let freed = s.addresses().get("a").await.unwrap().spec.address;
    s.delete_claim("a").await.unwrap();
    // Served at once, without waiting for a periodic retry.
    let address = s.wait_allocated("waiting", std::time::Duration::from_secs(5)).await.unwrap();
    assert_eq!(address.spec.address, freed);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn exhausted_global_pool_serves_the_waiting_claim_once_an_address_is_freed() {
    let s = Scope::wide("exhausted-global").await;
    let _p = s.provider();
    let pool = s.global_name("g");
    s.global_pool(&pool, json!({"addresses": ["10.11.0.1"], "prefix": 24})).await.unwrap();
    s.claim("a", "GlobalInClusterIPPool", &pool).await.unwrap();
    s.wait_allocated("a", PROMPTLY).await.unwrap();
    s.claim("waiting", "GlobalInClusterIPPool", &pool).await.unwrap();
    s.wait_reason("waiting", "PoolExhausted", PROMPTLY).await.unwrap();
    s.delete_claim("a").await.unwrap();
    assert_eq!(s.wait_allocated("waiting", std::time::Duration::from_secs(5)).await.unwrap().spec.address, "10.11.0.1");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn growing_an_exhausted_pool_serves_the_waiting_claim() {
    let s = Scope::new("grow-pool").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.12.0.1"], "prefix": 24})).await.unwrap();
    s.claim("a", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("a", PROMPTLY).await.unwrap();
    s.claim("b", "InClusterIPPool", "pool").await.unwrap();
    s.wait_reason("b", "PoolExhausted", PROMPTLY).await.unwrap();
    let pools = kube::core::ApiResource::erase::<ferro_ipam::api::InClusterIPPool>(&());
    s.patch(&pools, true, "pool", json!({"spec": {"addresses": ["10.12.0.1-10.12.0.2"]}})).await.unwrap();
    assert_eq!(s.wait_allocated("b", PROMPTLY).await.unwrap().spec.address, "10.12.0.2");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
