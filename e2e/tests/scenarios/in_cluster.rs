//! The in-cluster provider's integration scenarios, which ferro-ipam must pass as well.

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use serde_json::json;

use crate::{A_WHILE, PROMPTLY};

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_pool_allocates_with_prefix_and_gateway() {
    let s = Scope::new("ns-pool-allocates").await;
    let _p = s.provider();
    s.pool(
        "pool",
        json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"}),
    )
    .await
    .unwrap();
    s.claim("c1", "InClusterIPPool", "pool").await.unwrap();
    let address = s.wait_allocated("c1", PROMPTLY).await.unwrap();
    assert_eq!(address.spec.address, "10.0.0.10");
    assert_eq!(address.spec.prefix, 24);
    assert_eq!(address.spec.gateway.as_deref(), Some("10.0.0.1"));
    let claim = s.claims().get("c1").await.unwrap();
    assert_eq!(
        claim
            .status
            .and_then(|st| st.address_ref)
            .map(|r| r.name)
            .as_deref(),
        Some("c1")
    );
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_for_an_unknown_pool_kind_is_ignored() {
    let s = Scope::new("unknown-kind").await;
    let _p = s.provider();
    s.claim("c1", "SomeOtherPool", "pool").await.unwrap();
    s.stays("claim stays untouched", A_WHILE, || async {
        let claim = s.claims().get("c1").await.unwrap();
        claim.status.is_none() && claim.metadata.finalizers.is_none()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_for_a_missing_pool_gets_nothing_until_the_pool_appears() {
    let s = Scope::new("missing-pool").await;
    let _p = s.provider();
    s.claim("c1", "InClusterIPPool", "later").await.unwrap();
    let message = s.wait_reason("c1", "PoolNotReady", PROMPTLY).await.unwrap();
    assert!(message.contains("not found"), "{message}");
    assert!(s.addresses().get_opt("c1").await.unwrap().is_none());
    s.pool("later", json!({"addresses": ["10.1.0.5"], "prefix": 24}))
        .await
        .unwrap();
    assert_eq!(
        s.wait_allocated("c1", PROMPTLY).await.unwrap().spec.address,
        "10.1.0.5"
    );
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
