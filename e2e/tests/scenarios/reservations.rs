//! `spec.reservations`: addresses kept for the claims consumers create, matched by the claim's
//! name (CAPV, CAPIC) or its owner (CAPM3's Metal3Data), on dual-stack and prefix pools.

use ferro_ipam::api::keys::CLUSTER_NAME_LABEL;
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use serde_json::json;

use crate::PROMPTLY;

const IN_CLUSTER: &str = "InClusterIPPool";

/// `status.ipAddresses.reserved` of the pool, once written (None: nothing set aside).
async fn reserved_count(s: &Scope, pool: &str) -> Option<Option<i64>> {
    Some(s.pools().get(pool).await.ok()?.status?.ip_addresses?.reserved)
}

#[tokio::test(flavor = "multi_thread")]
async fn reserved_addresses_go_to_the_consumers_claims_they_name_and_to_no_other() {
    let s = Scope::new("reservations").await;
    let _p = s.provider();
    s.cluster("wl", false).await.unwrap();
    let capv_claim = "wl-md-0-x7k2p-0-0";
    s.pool(
        "pool",
        json!({
            "addresses": ["10.64.0.10-10.64.0.13"], "prefix": 24, "gateway": "10.64.0.1",
            "dualStack": {"addresses": ["fd00:64::10-fd00:64::20"], "prefix": 64},
            "reservations": [
                {"address": "10.64.0.10", "claimName": capv_claim},
                {"address": "10.64.0.11", "owner": {"kind": "Metal3Data", "name": "wl-workers-template-0"}},
                {"address": "fd00:64::15", "claimName": "nic-wl-cp-4kq9z-ipv6"},
            ],
        }),
    )
    .await
    .unwrap();
    s.eventually("the status counts three reserved addresses", PROMPTLY, || async {
        reserved_count(&s, "pool").await == Some(Some(3))
    })
    .await
    .unwrap();

    // A claim nothing is reserved for gets neither reserved address; then the pool is full for it.
    s.claim("other-0", IN_CLUSTER, "pool").await.unwrap();
    s.claim("other-1", IN_CLUSTER, "pool").await.unwrap();
    let mut others = [
        s.wait_allocated("other-0", PROMPTLY).await.unwrap().spec.address,
        s.wait_allocated("other-1", PROMPTLY).await.unwrap().spec.address,
    ];
    others.sort();
    assert_eq!(others, ["10.64.0.12", "10.64.0.13"]);
    s.claim("other-2", IN_CLUSTER, "pool").await.unwrap();
    s.wait_reason("other-2", "PoolExhausted", PROMPTLY).await.unwrap();

    // The claims as CAPV, CAPM3 and CAPIC write them.
    let labels = json!({CLUSTER_NAME_LABEL: "wl"});
    let owner = |kind: &str, name: &str| {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": kind, "name": name,
               "uid": "6f1c2a4e-3b7d-4c1e-9a55-0c1d2e3f4a5b", "controller": true})
    };
    let capv = json!({"labels": labels, "ownerReferences": [owner("VSphereVM", "wl-md-0-x7k2p")]});
    s.claim_with(capv_claim, IN_CLUSTER, "pool", capv).await.unwrap();
    let capm3 = json!({"labels": labels, "ownerReferences": [owner("Metal3Data", "wl-workers-template-0")]});
    s.claim_with("wl-workers-template-0-pool", IN_CLUSTER, "pool", capm3).await.unwrap();
    let capic = json!({"labels": labels, "ownerReferences": [owner("IonosCloudMachine", "wl-cp-4kq9z")]});
    s.claim_with("nic-wl-cp-4kq9z-ipv6", IN_CLUSTER, "pool", capic).await.unwrap();
    assert_eq!(s.wait_allocated(capv_claim, PROMPTLY).await.unwrap().spec.address, "10.64.0.10");
    assert_eq!(s.wait_allocated("wl-workers-template-0-pool", PROMPTLY).await.unwrap().spec.address, "10.64.0.11");
    assert_eq!(s.wait_allocated("nic-wl-cp-4kq9z-ipv6", PROMPTLY).await.unwrap().spec.address, "fd00:64::15");
    s.eventually("nothing is set aside once every reserved claim holds its address", PROMPTLY, || async {
        reserved_count(&s, "pool").await == Some(None)
    })
    .await
    .unwrap();
    s.wait_reason("other-2", "PoolExhausted", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prefix_pool_keeps_a_reserved_sub_prefix_for_its_claim() {
    let s = Scope::new("reservations-prefix").await;
    let _p = s.provider();
    s.prefix_pool(
        "prefixes",
        json!({"prefixes": ["fd00:66::/62"], "allocationPrefixLength": 64,
               "reservations": [{"address": "fd00:66::", "claimName": "node-0"}]}),
    )
    .await
    .unwrap();
    s.claim("other", "InClusterPrefixPool", "prefixes").await.unwrap();
    assert_eq!(s.wait_allocated("other", PROMPTLY).await.unwrap().spec.address, "fd00:66:0:1::");
    s.claim("node-0", "InClusterPrefixPool", "prefixes").await.unwrap();
    let node = s.wait_allocated("node-0", PROMPTLY).await.unwrap();
    assert_eq!((node.spec.address.as_str(), node.spec.prefix), ("fd00:66::", 64));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
