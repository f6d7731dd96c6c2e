//! The in-cluster provider's scenarios about pausing, adoption, release and pool protection.

use ferro_ipam::api::InClusterIPPool;
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::core::ApiResource;
use serde_json::json;

use crate::{A_WHILE, PROMPTLY};

fn pools() -> ApiResource {
    ApiResource::erase::<InClusterIPPool>(&())
}

fn clusters() -> ApiResource {
    ferro_ipam_e2e::objects::capi().cluster_resource()
}

/// An IPAddress for claim `name` made by hand (or by another provider) before ferro-ipam runs.
async fn existing_address(s: &Scope, name: &str, ip: &str, owners: serde_json::Value) {
    s.create(json!({
        "apiVersion": ferro_ipam_e2e::objects::ipam_api_version(),
        "kind": "IPAddress",
        "metadata": {"name": name, "ownerReferences": owners},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"}, "address": ip, "prefix": 24},
    }))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn existing_ipaddress_without_owner_is_adopted_with_its_address() {
    let s = Scope::new("adopt-bare").await;
    s.pool("pool", json!({"addresses": ["10.20.0.1-10.20.0.9"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    existing_address(&s, "c", "10.20.0.7", json!([])).await;
    let _p = s.provider();
    let address = s.wait_allocated("c", PROMPTLY).await.unwrap();
    assert_eq!(address.spec.address, "10.20.0.7", "adopted, not renumbered");
    let claim_uid = s.claims().get("c").await.unwrap().uid().unwrap();
    s.eventually("the claim owns the adopted address", PROMPTLY, || async {
        let a = s.addresses().get("c").await.unwrap();
        a.owner_references().iter().any(|o| o.uid == claim_uid && o.controller == Some(true))
            && a.finalizers().iter().any(|f| f == "ipam.cluster.x-k8s.io/ProtectAddress")
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn existing_ipaddress_with_a_foreign_owner_is_adopted_and_keeps_it() {
    let s = Scope::new("adopt-foreign").await;
    s.pool("pool", json!({"addresses": ["10.21.0.1-10.21.0.9"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    let foreign = json!([{"apiVersion": "example.com/v1", "kind": "Other", "name": "o", "uid": "1b7a2e4c-0000-4000-8000-000000000001"}]);
    existing_address(&s, "c", "10.21.0.3", foreign).await;
    let _p = s.provider();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.21.0.3");
    s.eventually("both owners are there", PROMPTLY, || async {
        let owners = s.addresses().get("c").await.unwrap().owner_references().to_vec();
        owners.iter().any(|o| o.kind == "Other") && owners.iter().any(|o| o.kind == "IPAddressClaim")
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_cluster_blocks_its_claims_until_unpaused_by_annotation_or_spec() {
    let s = Scope::new("paused-cluster").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.22.0.1-10.22.0.9"], "prefix": 24})).await.unwrap();
    // Paused by spec.paused at creation.
    s.cluster("by-spec", true).await.unwrap();
    // Paused by annotation at creation.
    s.create(json!({"apiVersion": ferro_ipam_e2e::objects::cluster_api_version(), "kind": "Cluster", "metadata": {"name": "by-annotation", "annotations": {"cluster.x-k8s.io/paused": ""}}, "spec": {"paused": false}})).await.unwrap();
    let member = |cluster: &str| json!({"labels": {"cluster.x-k8s.io/cluster-name": cluster}});
    s.claim_with("a", "InClusterIPPool", "pool", member("by-spec")).await.unwrap();
    s.claim_with("b", "InClusterIPPool", "pool", member("by-annotation")).await.unwrap();
    s.stays("paused clusters' claims get nothing", A_WHILE, || async {
        s.addresses().get_opt("a").await.unwrap().is_none() && s.addresses().get_opt("b").await.unwrap().is_none()
    })
    .await
    .unwrap();
    s.patch(&clusters(), true, "by-spec", json!({"spec": {"paused": false}})).await.unwrap();
    s.patch(
        &clusters(),
        true,
        "by-annotation",
        json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}}),
    )
    .await
    .unwrap();
    let a = s.wait_allocated("a", PROMPTLY).await.unwrap();
    s.wait_allocated("b", PROMPTLY).await.unwrap();
    assert_eq!(a.labels().get("cluster.x-k8s.io/cluster-name").map(String::as_str), Some("by-spec"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn pausing_a_running_cluster_blocks_new_claims_and_deletion() {
    let s = Scope::new("pause-on-update").await;
    let p = s.provider();
    s.pool("pool", json!({"addresses": ["10.23.0.1-10.23.0.9"], "prefix": 24})).await.unwrap();
    s.cluster("wl", false).await.unwrap();
    let member = json!({"labels": {"cluster.x-k8s.io/cluster-name": "wl"}});
    s.claim_with("first", "InClusterIPPool", "pool", member.clone()).await.unwrap();
    s.wait_allocated("first", PROMPTLY).await.unwrap();
    s.patch(&clusters(), true, "wl", json!({"spec": {"paused": true}})).await.unwrap();
    // The Cluster's change brings its claims back to the provider, which leaves them alone.
    let first = format!("claim={}/first", s.ns);
    s.eventually("the provider has seen the Cluster paused", PROMPTLY, || async {
        p.logged(&["leaving the claim alone", &first, "Cluster wl is paused"])
    })
    .await
    .unwrap();
    s.claim_with("second", "InClusterIPPool", "pool", member).await.unwrap();
    s.delete_claim("first").await.unwrap();
    s.stays("nothing happens while paused", A_WHILE, || async {
        s.addresses().get_opt("second").await.unwrap().is_none()
            && s.addresses().get_opt("first").await.unwrap().is_some()
    })
    .await
    .unwrap();
    s.patch(&clusters(), true, "wl", json!({"spec": {"paused": false}})).await.unwrap();
    s.wait_allocated("second", PROMPTLY).await.unwrap();
    s.eventually("the first claim is released", PROMPTLY, || async {
        s.claims().get_opt("first").await.unwrap().is_none()
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_naming_its_cluster_in_spec_follows_that_cluster() {
    let s = Scope::new("cluster-by-spec").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.24.0.1-10.24.0.9"], "prefix": 24})).await.unwrap();
    s.cluster("wl", true).await.unwrap();
    s.create(json!({
        "apiVersion": ferro_ipam_e2e::objects::ipam_api_version(), "kind": "IPAddressClaim", "metadata": {"name": "c"},
        "spec": {"clusterName": "wl", "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"}},
    }))
    .await
    .unwrap();
    s.stays("held while paused", A_WHILE, || async { s.addresses().get_opt("c").await.unwrap().is_none() })
        .await
        .unwrap();
    s.patch(&clusters(), true, "wl", json!({"spec": {"paused": false}})).await.unwrap();
    let address = s.wait_allocated("c", PROMPTLY).await.unwrap();
    assert_eq!(address.labels().get("cluster.x-k8s.io/cluster-name").map(String::as_str), Some("wl"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_cluster_blocks_allocation_but_not_release() {
    let s = Scope::new("missing-cluster").await;
    let p = s.provider();
    s.pool("pool", json!({"addresses": ["10.25.0.1-10.25.0.9"], "prefix": 24})).await.unwrap();
    s.cluster("wl", false).await.unwrap();
    let member = |c: &str| json!({"labels": {"cluster.x-k8s.io/cluster-name": c}});
    s.claim_with("served", "InClusterIPPool", "pool", member("wl")).await.unwrap();
    s.wait_allocated("served", PROMPTLY).await.unwrap();
    s.claim_with("orphan", "InClusterIPPool", "pool", member("nowhere")).await.unwrap();
    s.stays("a claim of a missing cluster gets nothing", A_WHILE, || async {
        s.addresses().get_opt("orphan").await.unwrap().is_none()
    })
    .await
    .unwrap();
    // The Cluster goes; its fulfilled claim, being deleted, is still released. First the
    // provider must know the Cluster is gone (it then leaves the live claim alone).
    kube::Api::<kube::core::DynamicObject>::namespaced_with(s.client.clone(), &s.ns, &clusters())
        .delete("wl", &Default::default())
        .await
        .unwrap();
    let served = format!("claim={}/served", s.ns);
    s.eventually("the provider has seen the Cluster go", PROMPTLY, || async {
        p.logged(&["leaving the claim alone", &served, "Cluster wl does not exist"])
    })
    .await
    .unwrap();
    s.delete_claim("served").await.unwrap();
    s.eventually("the claim of the deleted cluster is released", PROMPTLY, || async {
        s.claims().get_opt("served").await.unwrap().is_none()
            && s.addresses().get_opt("served").await.unwrap().is_none()
    })
    .await
    .unwrap();
    // The claim that waited for its Cluster is served once the Cluster exists.
    s.cluster("nowhere", false).await.unwrap();
    s.wait_allocated("orphan", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_claim_is_left_alone_until_unpaused() {
    let s = Scope::new("paused-claim").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.26.0.1-10.26.0.9"], "prefix": 24})).await.unwrap();
    s.claim_with("c", "InClusterIPPool", "pool", json!({"annotations": {"cluster.x-k8s.io/paused": ""}}))
        .await
        .unwrap();
    s.stays("a paused claim gets nothing", A_WHILE, || async {
        let claim = s.claims().get("c").await.unwrap();
        claim.metadata.finalizers.is_none() && claim.status.is_none()
    })
    .await
    .unwrap();
    let claims = ferro_ipam_e2e::objects::capi().claim_resource();
    s.patch(&claims, true, "c", json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}})).await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn grace_period_keeps_the_address_after_claim_deletion_then_frees_it() {
    const GRACE: i64 = 4;
    let s = Scope::new("grace-period").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.27.0.1"], "prefix": 24, "addressReuseGracePeriodSeconds": GRACE}))
        .await
        .unwrap();
    s.claim("old", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("old", PROMPTLY).await.unwrap();
    s.delete_claim("old").await.unwrap();
    // The grace period runs from the deletion timestamp the API server wrote (whole seconds).
    let old = s.claims().get_opt("old").await.unwrap();
    let deleted =
        old.and_then(|c| c.metadata.deletion_timestamp).expect("the claim stays, held by its ReleaseAddress finalizer");
    let ends = deleted.0 + SignedDuration::from_secs(GRACE);
    s.claim("new", "InClusterIPPool", "pool").await.unwrap();
    // Until just before the grace period ends, the address and the deleting claim stay, and
    // nobody else gets the address.
    let almost = ends.duration_since(Timestamp::now()) - SignedDuration::from_millis(300);
    s.stays("the address is held during the grace period", almost.try_into().unwrap_or_default(), || async {
        s.addresses().get_opt("old").await.unwrap().is_some() && s.addresses().get_opt("new").await.unwrap().is_none()
    })
    .await
    .unwrap();
    // Then it is free, and the waiting claim gets it soon after.
    assert_eq!(s.wait_allocated("new", PROMPTLY).await.unwrap().spec.address, "10.27.0.1");
    let reused = Timestamp::now();
    assert!(reused >= ends, "reused at {reused}, before the grace period ended at {ends}");
    let late = reused.duration_since(ends);
    assert!(late < SignedDuration::from_secs(10), "reused {late} after the grace period ended");
    assert!(s.claims().get_opt("old").await.unwrap().is_none());
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_the_pool_during_teardown_skips_the_grace_period() {
    let s = Scope::new("grace-teardown").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.28.0.1"], "prefix": 24, "addressReuseGracePeriodSeconds": 3600}))
        .await
        .unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    s.pools().delete("pool", &Default::default()).await.unwrap();
    s.delete_claim("c").await.unwrap();
    s.eventually("claim, address and pool all go without waiting an hour", PROMPTLY, || async {
        s.claims().get_opt("c").await.unwrap().is_none()
            && s.addresses().get_opt("c").await.unwrap().is_none()
            && s.pools().get_opt("pool").await.unwrap().is_none()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn pool_with_addresses_is_protected_from_deletion_until_they_go() {
    let s = Scope::new("pool-finalizer").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.29.0.1-10.29.0.5"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    s.pools().delete("pool", &Default::default()).await.unwrap();
    s.stays("the pool stays while an address references it", A_WHILE, || async {
        s.pools().get_opt("pool").await.unwrap().is_some()
    })
    .await
    .unwrap();
    let pool = s.pools().get("pool").await.unwrap();
    let ready = pool.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "Deleting"));
    assert!(ready.message.contains("1 IPAddresses"), "{}", ready.message);
    s.delete_claim("c").await.unwrap();
    s.eventually("the pool goes once its last address is released", PROMPTLY, || async {
        s.pools().get_opt("pool").await.unwrap().is_none()
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn skip_annotation_lets_a_pool_with_addresses_be_deleted_for_clusterctl_move() {
    let s = Scope::new("pool-skip").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.30.0.1-10.30.0.5"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    s.patch(
        &pools(),
        true,
        "pool",
        json!({"metadata": {"annotations": {"ipam.cluster.x-k8s.io/skip-validate-delete-webhook": ""}}}),
    )
    .await
    .unwrap();
    s.pools().delete("pool", &Default::default()).await.unwrap();
    s.eventually("the pool goes although an address references it", PROMPTLY, || async {
        s.pools().get_opt("pool").await.unwrap().is_none()
    })
    .await
    .unwrap();
    // The address itself is untouched.
    assert_eq!(s.addresses().get("c").await.unwrap().spec.address, "10.30.0.1");
}

#[tokio::test(flavor = "multi_thread")]
async fn pool_status_counts_follow_gateway_reserved_and_ipv6_rules() {
    let s = Scope::new("pool-status").await;
    let _p = s.provider();
    // (pool, spec, total): the in-cluster provider's status tables.
    let cases = [
        ("gw-in", json!({"addresses": ["10.31.0.1-10.31.0.10"], "prefix": 24, "gateway": "10.31.0.1"}), 9),
        ("gw-out", json!({"addresses": ["10.31.1.2-10.31.1.10"], "prefix": 24, "gateway": "10.31.1.1"}), 9),
        ("no-gw", json!({"addresses": ["10.31.2.1-10.31.2.10"], "prefix": 24}), 10),
        ("net-bcast", json!({"addresses": ["10.31.3.0/24"], "prefix": 24, "gateway": "10.31.3.1"}), 253),
        (
            "net-bcast-kept",
            json!({"addresses": ["10.31.4.0/24"], "prefix": 24, "allocateReservedIPAddresses": true}),
            256,
        ),
        ("v6", json!({"addresses": ["fd00:31::/120"], "prefix": 120, "gateway": "fd00:31::1"}), 254),
        ("v6-huge", json!({"addresses": ["fd00:32::/64"], "prefix": 64}), i64::MAX),
    ];
    for (name, spec, _) in &cases {
        s.pool(name, spec.clone()).await.unwrap();
    }
    s.claim("c", "InClusterIPPool", "gw-in").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    for (name, _, total) in cases {
        s.eventually(&format!("{name} reports total {total}"), PROMPTLY, || async {
            let pool = s.pools().get(name).await.unwrap();
            pool.status.and_then(|st| st.ip_addresses).is_some_and(|c| c.total == total)
        })
        .await
        .unwrap();
    }
    let huge = s.pools().get("v6-huge").await.unwrap().status.unwrap();
    assert_eq!(huge.families[0].total, ((1u128 << 64) - 1).to_string(), "exact IPv6 count beside the saturated one");
    // Status writes are spaced out, so the claim's address may show up a moment after the totals.
    s.eventually("gw-in counts its one address", PROMPTLY, || async {
        let counts = s.pools().get("gw-in").await.unwrap().status.and_then(|st| st.ip_addresses);
        counts.is_some_and(|c| (c.used, c.free, c.out_of_range) == (1, 8, 0))
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn shrinking_a_pool_counts_addresses_out_of_range_and_never_hands_them_out() {
    let s = Scope::new("out-of-range").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.32.0.1-10.32.0.4"], "prefix": 24})).await.unwrap();
    for name in ["a", "b", "c"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    // Shrink to .1 and .4: .2 and .3 stay allocated but out of range.
    s.patch(&pools(), true, "pool", json!({"spec": {"addresses": ["10.32.0.1", "10.32.0.4"]}})).await.unwrap();
    s.eventually("status counts the out-of-range addresses", PROMPTLY, || async {
        let status = s.pools().get("pool").await.unwrap().status.unwrap_or_default();
        let counts = status.ip_addresses.unwrap_or_default();
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        (counts.total, counts.used, counts.free, counts.out_of_range) == (2, 3, 1, 2)
            && ready.is_some_and(|r| r.reason == "AddressesOutOfRange" && r.message.contains("10.32.0.2"))
    })
    .await
    .unwrap();
    s.claim("d", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("d", PROMPTLY).await.unwrap().spec.address, "10.32.0.4");
    s.claim("e", "InClusterIPPool", "pool").await.unwrap();
    s.wait_reason("e", "PoolExhausted", PROMPTLY).await.unwrap();
    let addresses = s.address_map().await.unwrap();
    assert_eq!(addresses.get("b").map(String::as_str), Some("10.32.0.2"), "kept, not dropped");
    invariants::Check::new(&s.client, &[&s.ns]).out_of_range(&["10.32.0.2", "10.32.0.3"]).run().await.unwrap();
}
