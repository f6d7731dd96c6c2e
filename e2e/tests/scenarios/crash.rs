//! Crashes: the provider killed with SIGKILL in the middle of a storm of claims.

use std::time::Duration;

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use futures::{StreamExt, TryStreamExt};
use kube::api::ListParams;
use serde_json::json;

/// Creates `count` claims named `<prefix>-<n>` on `pool`, 32 requests at a time.
async fn storm(s: &Scope, prefix: &str, pool: &str, count: usize) {
    futures::stream::iter(0..count)
        .map(|n| async move { s.claim(&format!("{prefix}-{n}"), "InClusterIPPool", pool).await })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("creating the claims");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_in_the_middle_of_500_claims_loses_nothing_and_duplicates_nothing() {
    let s = Scope::new("sigkill-storm").await;
    s.pool("a", json!({"addresses": ["10.40.0.0/23"], "prefix": 23, "gateway": "10.40.0.1"})).await.unwrap();
    s.pool("b", json!({"addresses": ["fd00:40::/120"], "prefix": 120})).await.unwrap();
    let mut provider = s.provider();
    let (left, right) = futures::join!(storm(&s, "a", "a", 300), storm(&s, "b", "b", 200));
    let _ = (left, right);

    // Kill it while it is working: after some but not all addresses exist.
    s.eventually("the provider has written some addresses", Duration::from_secs(60), || async {
        s.addresses().list(&ListParams::default()).await.unwrap().items.len() >= 60
    })
    .await
    .unwrap();
    provider.kill();
    let written = s.addresses().list(&ListParams::default()).await.unwrap().items.len();
    assert!(written < 500, "the kill should land mid-storm ({written} addresses already)");

    // A second life, killed again, then a third that finishes.
    let mut second = s.provider();
    tokio::time::sleep(Duration::from_millis(700)).await;
    second.kill();
    let _third = s.provider();
    s.eventually("all 500 claims are Ready", Duration::from_secs(180), || async { s.ready_claims().await == 500 })
        .await
        .unwrap();
    let addresses = s.address_map().await.unwrap();
    assert_eq!(addresses.len(), 500, "exactly one address per claim");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
