//! Prefix pools: the in-cluster provider v1.1.0's prefix-claim scenarios
//! (`internal/controllers/ipaddressclaim_prefix_test.go`), against the real API server, plus
//! what ferro-ipam adds (an exhausted claim served once a sub-prefix frees up, adoption).

use ferro_ipam_e2e::objects::Scope;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::{A_WHILE, PROMPTLY};

const PREFIX_POOL: &str = "InClusterPrefixPool";
const GLOBAL_PREFIX_POOL: &str = "GlobalInClusterPrefixPool";

/// Claims `names` one after the other and returns (address, prefix, gateway) of each.
async fn claim_all(s: &Scope, kind: &str, pool: &str, names: &[&str]) -> Vec<(String, i32, Option<String>)> {
    let mut got = Vec::new();
    for name in names {
        s.claim(name, kind, pool).await.unwrap();
        let address = s.wait_allocated(name, PROMPTLY).await.unwrap();
        got.push((address.spec.address, address.spec.prefix, address.spec.gateway));
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn prefix_pool_allocates_deterministic_non_overlapping_slash_64s_with_the_gateway() {
    let s = Scope::new("prefix-64").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd00::/62"], "gateway": "fd10::1"})).await.unwrap();
    let got = claim_all(&s, PREFIX_POOL, "pool", &["c1", "c2"]).await;
    let gateway = Some("fd10::1".to_owned());
    assert_eq!(got, [("fd00::".to_owned(), 64, gateway.clone()), ("fd00:0:0:1::".to_owned(), 64, gateway)]);
    let address = s.addresses().get("c1").await.unwrap();
    assert_eq!(address.spec.pool_ref.kind, PREFIX_POOL);
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_prefix_pool_allocates_nothing_until_unpaused() {
    let s = Scope::new("prefix-paused").await;
    let _p = s.provider();
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": PREFIX_POOL,
        "metadata": {"name": "pool", "annotations": {"cluster.x-k8s.io/paused": ""}},
        "spec": {"prefixes": ["fd04::/63"]},
    }))
    .await
    .unwrap();
    s.claim("c", PREFIX_POOL, "pool").await.unwrap();
    s.stays("no IPAddress while the pool is paused", A_WHILE, || async {
        s.addresses().get_opt("c").await.unwrap().is_none()
    })
    .await
    .unwrap();
    let unpause = json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}});
    s.prefix_pools().patch("pool", &PatchParams::default(), &Patch::Merge(&unpause)).await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "fd04::");
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_allocation_length_hands_out_slash_56s() {
    let s = Scope::new("prefix-56").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd06::/48"], "allocationPrefixLength": 56})).await.unwrap();
    let got = claim_all(&s, PREFIX_POOL, "pool", &["c1", "c2"]).await;
    assert_eq!(got, [("fd06::".to_owned(), 56, None), ("fd06:0:0:100::".to_owned(), 56, None)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn standalone_and_aggregate_sources_are_used_in_address_order() {
    let s = Scope::new("prefix-mixed").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd00:0:0:1::/64", "fd10::/48"], "allocationPrefixLength": 64}))
        .await
        .unwrap();
    let got: Vec<String> = claim_all(&s, PREFIX_POOL, "pool", &["c1", "c2"]).await.into_iter().map(|g| g.0).collect();
    assert_eq!(got, ["fd00:0:0:1::", "fd10::"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn global_prefix_pool_allocates_across_namespaces() {
    let s = Scope::wide("prefix-global").await;
    let other = s.sibling("prefix-global-2").await;
    let _p = s.provider();
    let pool = s.global_name("prefixes");
    // Upstream's case uses fd01::/63; a global pool shares its space with every namespace's
    // prefix pools, and the scenarios share one API server, so this one has a range of its own.
    s.global_prefix_pool(&pool, json!({"prefixes": ["fd31::/63"]})).await.unwrap();
    s.claim("c1", GLOBAL_PREFIX_POOL, &pool).await.unwrap();
    assert_eq!(s.wait_allocated("c1", PROMPTLY).await.unwrap().spec.address, "fd31::");
    other.claim("c2", GLOBAL_PREFIX_POOL, &pool).await.unwrap();
    let second = other.wait_allocated("c2", PROMPTLY).await.unwrap();
    assert_eq!((second.spec.address.as_str(), second.spec.prefix), ("fd31:0:0:1::", 64));
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_prefix_claim_releases_its_sub_prefix() {
    let s = Scope::new("prefix-release").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd05::/63"]})).await.unwrap();
    s.claim("c", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "fd05::");
    s.delete_claim("c").await.unwrap();
    s.eventually("the IPAddress is gone", PROMPTLY, || async { s.addresses().get_opt("c").await.unwrap().is_none() })
        .await
        .unwrap();
    // Freed: the next claim gets it again (lowest first).
    s.claim("next", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("next", PROMPTLY).await.unwrap().spec.address, "fd05::");
}

#[tokio::test(flavor = "multi_thread")]
async fn exhausted_prefix_pool_hands_out_nothing_more_until_a_sub_prefix_frees_up() {
    let s = Scope::new("prefix-exhausted").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd07::/64"]})).await.unwrap();
    s.claim("c1", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c1", PROMPTLY).await.unwrap().spec.address, "fd07::");
    s.claim("c2", PREFIX_POOL, "pool").await.unwrap();
    s.wait_reason("c2", "PoolExhausted", PROMPTLY).await.unwrap();
    s.stays("one IPAddress only", A_WHILE, || async { s.address_map().await.unwrap().len() == 1 }).await.unwrap();
    s.eventually("status: total 1, used 1, free 0", PROMPTLY, || async {
        let counts = s.prefix_pools().get("pool").await.unwrap().status.and_then(|st| st.ip_addresses);
        counts.is_some_and(|c| (c.total, c.used, c.free) == (1, 1, 0))
    })
    .await
    .unwrap();
    // ferro-ipam: the waiting claim is served as soon as the sub-prefix is free.
    s.delete_claim("c1").await.unwrap();
    assert_eq!(s.wait_allocated("c2", PROMPTLY).await.unwrap().spec.address, "fd07::");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_provider_adopts_the_sub_prefixes_in_use_and_hands_out_the_next() {
    let s = Scope::new("prefix-adopt").await;
    let provider = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd08::/62"], "excludedPrefixes": ["fd08:0:0:1::/64"]})).await.unwrap();
    let first: Vec<String> = claim_all(&s, PREFIX_POOL, "pool", &["a", "b"]).await.into_iter().map(|g| g.0).collect();
    assert_eq!(first, ["fd08::", "fd08:0:0:2::"]);
    drop(provider);
    let _p = s.provider();
    let next: Vec<String> = claim_all(&s, PREFIX_POOL, "pool", &["c"]).await.into_iter().map(|g| g.0).collect();
    assert_eq!(next, ["fd08:0:0:3::"]);
    s.claim("d", PREFIX_POOL, "pool").await.unwrap();
    s.wait_reason("d", "PoolExhausted", PROMPTLY).await.unwrap();
    let mut all: Vec<String> = s.address_map().await.unwrap().into_values().collect();
    all.sort();
    assert_eq!(all, ["fd08:0:0:2::", "fd08:0:0:3::", "fd08::"], "three distinct sub-prefixes, none twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_documented_prefix_pool_example_applies_and_skips_its_excluded_sub_prefix() {
    let s = Scope::new("prefix-example").await;
    let _p = s.provider();
    let path = ferro_ipam_e2e::plane::repo_root().join("docs/examples/prefix-pools.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace("namespace: default", &format!("namespace: {}", s.ns));
    let scratch = s.plane.dir.join(format!("{}-prefix-pools.yaml", s.ns));
    std::fs::write(&scratch, text).unwrap();
    s.plane.kubectl_ok(&["apply", "-f", &scratch.to_string_lossy()]).unwrap();
    let mut got = Vec::new();
    for name in ["worker-0-delegated", "worker-1-delegated"] {
        let address = s.wait_allocated(name, PROMPTLY).await.unwrap();
        assert_eq!((address.spec.prefix, address.spec.gateway.as_deref()), (64, Some("fd00:20::1")));
        got.push(address.spec.address);
    }
    got.sort();
    assert_eq!(got, ["fd00:20:0:2::", "fd00:20::"], "both in either order, the excluded /64 skipped");
}
