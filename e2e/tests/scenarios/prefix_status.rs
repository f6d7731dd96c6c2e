//! Prefix pools' status, deletion protection and validation: the in-cluster provider v1.1.0's
//! prefix-pool scenarios (`internal/controllers/inclusterprefixpool_test.go`) and its prefix
//! webhook's table (`internal/webhooks/inclusterprefixpool_test.go`), against the real API
//! server, where CEL in the CRD refuses what the webhook refuses.

use ferro_ipam::api::IPPoolStatus;
use ferro_ipam::api::pool::IPAddressCounts;
use ferro_ipam_e2e::objects::Scope;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::{A_WHILE, PROMPTLY};

const PREFIX_POOL: &str = "InClusterPrefixPool";
const GLOBAL_PREFIX_POOL: &str = "GlobalInClusterPrefixPool";
const PROTECT_POOL: &str = "ipam.cluster.x-k8s.io/ProtectPool";

/// Status, finalizers and whether the pool still exists, for either kind.
async fn pool_state(s: &Scope, kind: &str, name: &str) -> Option<(Option<IPPoolStatus>, Vec<String>)> {
    if kind == GLOBAL_PREFIX_POOL {
        let pool = s.global_prefix_pools().get_opt(name).await.unwrap()?;
        Some((pool.status, pool.metadata.finalizers.unwrap_or_default()))
    } else {
        let pool = s.prefix_pools().get_opt(name).await.unwrap()?;
        Some((pool.status, pool.metadata.finalizers.unwrap_or_default()))
    }
}

async fn counts(s: &Scope, kind: &str, name: &str) -> Option<IPAddressCounts> {
    pool_state(s, kind, name).await?.0?.ip_addresses
}

async fn wait_counts(s: &Scope, kind: &str, name: &str, what: &str, check: impl Fn(&IPAddressCounts) -> bool) {
    s.eventually(what, PROMPTLY, || async { counts(s, kind, name).await.is_some_and(|c| check(&c)) }).await.unwrap();
}

async fn make_pool(s: &Scope, kind: &str, name: &str, spec: Value) {
    match kind {
        GLOBAL_PREFIX_POOL => s.global_prefix_pool(name, spec).await.unwrap(),
        _ => s.prefix_pool(name, spec).await.unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn both_kinds_report_slash_64_counts_as_claims_take_sub_prefixes() {
    let s = Scope::wide("prefix-counts").await;
    let _p = s.provider();
    // Disjoint prefixes: a global pool shares its space with the namespaced one (ferro-ipam never
    // hands out a sub-prefix one of them holds, and reports the overlap).
    for (kind, prefix) in [(PREFIX_POOL, "fd00::/62"), (GLOBAL_PREFIX_POOL, "fd20::/62")] {
        let name = s.global_name(&kind.to_lowercase());
        make_pool(&s, kind, &name, json!({"prefixes": [prefix]})).await;
        wait_counts(&s, kind, &name, "total 4, free 4", |c| (c.total, c.free, c.used) == (4, 4, 0)).await;
        let claim = format!("claim-{}", kind.to_lowercase());
        s.claim(&claim, kind, &name).await.unwrap();
        s.wait_allocated(&claim, PROMPTLY).await.unwrap();
        wait_counts(&s, kind, &name, "used 1, free 3", |c| (c.used, c.free) == (1, 3)).await;
        let families = pool_state(&s, kind, &name).await.unwrap().0.unwrap().families;
        assert_eq!(
            (families[0].family.as_str(), families[0].total.as_str(), families[0].free.as_str()),
            ("IPv6", "4", "3")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_allocation_length_counts_its_own_sub_prefixes() {
    let s = Scope::new("prefix-counts-56").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd40::/48"], "allocationPrefixLength": 56})).await.unwrap();
    wait_counts(&s, PREFIX_POOL, "pool", "total 256, free 256", |c| (c.total, c.free) == (256, 256)).await;
    s.claim("c", PREFIX_POOL, "pool").await.unwrap();
    wait_counts(&s, PREFIX_POOL, "pool", "used 1, free 255", |c| (c.used, c.free) == (1, 255)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_prefix_pools_saturate_the_int64_counts_and_keep_exact_ones() {
    let s = Scope::new("prefix-counts-huge").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd00::/8"], "allocationPrefixLength": 128})).await.unwrap();
    wait_counts(&s, PREFIX_POOL, "pool", "total saturated at int64 max", |c| c.total == i64::MAX).await;
    let families = pool_state(&s, PREFIX_POOL, "pool").await.unwrap().0.unwrap().families;
    assert_eq!(families[0].total, (1u128 << 120).to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn shrinking_the_prefixes_reports_the_sub_prefix_in_use_as_out_of_range() {
    let s = Scope::new("prefix-shrink").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd01::/62"]})).await.unwrap();
    s.claim("c", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "fd01::");
    let shrink = json!({"spec": {"prefixes": ["fd01:0:0:1::/64"]}});
    s.prefix_pools().patch("pool", &PatchParams::default(), &Patch::Merge(&shrink)).await.unwrap();
    wait_counts(&s, PREFIX_POOL, "pool", "outOfRange 1, used 1, free 1", |c| {
        (c.out_of_range, c.used, c.free, c.total) == (1, 1, 1, 1)
    })
    .await;
    let ready = s.prefix_pools().get("pool").await.unwrap().status.unwrap().conditions;
    assert!(ready.iter().any(|c| c.reason == "AddressesOutOfRange" && c.message.contains("fd01::")), "{ready:?}");
    // The out-of-range sub-prefix is kept; the one left in the pool goes to the next claim.
    s.claim("d", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("d", PROMPTLY).await.unwrap().spec.address, "fd01:0:0:1::");
    assert_eq!(s.addresses().get("c").await.unwrap().spec.address, "fd01::");
}

#[tokio::test(flavor = "multi_thread")]
async fn excluding_a_sub_prefix_in_use_reports_it_out_of_range_and_the_gateway_blocks_nothing() {
    let s = Scope::new("prefix-exclude").await;
    let _p = s.provider();
    s.prefix_pool("pool", json!({"prefixes": ["fd03::/62"]})).await.unwrap();
    s.claim("c", PREFIX_POOL, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "fd03::");
    let edit = json!({"spec": {"excludedPrefixes": ["fd03::/64"], "gateway": "fd03:0:0:1::1"}});
    s.prefix_pools().patch("pool", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    wait_counts(&s, PREFIX_POOL, "pool", "outOfRange 1, total 3", |c| (c.out_of_range, c.total) == (1, 3)).await;
    // fd03:0:0:1::/64 holds the gateway and is still handed out.
    s.claim("d", PREFIX_POOL, "pool").await.unwrap();
    let next = s.wait_allocated("d", PROMPTLY).await.unwrap();
    assert_eq!((next.spec.address.as_str(), next.spec.gateway.as_deref()), ("fd03:0:0:1::", Some("fd03:0:0:1::1")));
}

#[tokio::test(flavor = "multi_thread")]
async fn both_kinds_are_protected_from_deletion_while_a_sub_prefix_is_allocated() {
    let s = Scope::wide("prefix-protect").await;
    let _p = s.provider();
    for (kind, prefix) in [(PREFIX_POOL, "fd02::/63"), (GLOBAL_PREFIX_POOL, "fd22::/63")] {
        let name = s.global_name(&kind.to_lowercase());
        let claim = format!("claim-{}", kind.to_lowercase());
        make_pool(&s, kind, &name, json!({"prefixes": [prefix]})).await;
        s.claim(&claim, kind, &name).await.unwrap();
        s.wait_allocated(&claim, PROMPTLY).await.unwrap();
        s.eventually("ProtectPool and used 1", PROMPTLY, || async {
            let (status, finalizers) = pool_state(&s, kind, &name).await.unwrap();
            finalizers.iter().any(|f| f == PROTECT_POOL)
                && status.and_then(|st| st.ip_addresses).is_some_and(|c| c.used == 1)
        })
        .await
        .unwrap();
        if kind == GLOBAL_PREFIX_POOL {
            s.global_prefix_pools().delete(&name, &DeleteParams::default()).await.unwrap();
        } else {
            s.prefix_pools().delete(&name, &DeleteParams::default()).await.unwrap();
        }
        s.stays("the pool stays while its sub-prefix is allocated", A_WHILE, || async {
            pool_state(&s, kind, &name).await.is_some_and(|(_, f)| f.iter().any(|f| f == PROTECT_POOL))
        })
        .await
        .unwrap();
        s.delete_claim(&claim).await.unwrap();
        s.eventually("the pool is gone", PROMPTLY, || async { pool_state(&s, kind, &name).await.is_none() })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_refuses_what_the_prefix_webhook_refuses_naming_the_field() {
    let s = Scope::new("prefix-cel").await;
    for (spec, says) in [
        (json!({"prefixes": []}), "spec.prefixes: prefixes is required"),
        (
            json!({"prefixes": ["fd00::1"]}),
            "spec.prefixes[0]: Invalid value: \"fd00::1\": spec.prefixes: provided entry is not a valid IPv6 CIDR",
        ),
        (json!({"prefixes": ["fd00::1/64"]}), "spec.prefixes: CIDR must be network-aligned"),
        (json!({"prefixes": ["fd00::/65"]}), "spec.prefixes: CIDR prefix length must be <= allocationPrefixLength"),
        (json!({"prefixes": ["10.0.0.0/24"]}), "spec.prefixes: only IPv6 prefixes are supported"),
        (json!({"prefixes": ["fd00::/64"], "gateway": "10.0.0.1"}), "spec.gateway: provided gateway must be IPv6"),
        (
            json!({"prefixes": ["fd00::/64"], "excludedPrefixes": ["10.0.0.1"]}),
            "spec.excludedPrefixes: only IPv6 excluded prefixes are supported",
        ),
        (json!({"prefixes": ["fd00::/64"], "allocationPrefixLength": 0}), "spec.allocationPrefixLength"),
        (json!({"prefixes": ["fd00::/64"], "allocationPrefixLength": 129}), "spec.allocationPrefixLength"),
    ] {
        let error = s.prefix_pool("refused", spec.clone()).await.expect_err(&spec.to_string()).to_string();
        assert!(error.contains(says), "{spec}: expected {says:?} in {error}");
    }
    for (name, spec) in [
        ("disjoint", json!({"prefixes": ["fd00::/64", "fd01::/64"]})),
        ("custom", json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 56})),
        ("ninety-six", json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 96})),
        ("loopbacks", json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 128})),
        ("defaulted", json!({"prefixes": ["fd00::/48"]})),
    ] {
        s.prefix_pool(name, spec).await.unwrap();
    }
    let defaulted = s.prefix_pools().get("defaulted").await.unwrap();
    assert_eq!(defaulted.spec.allocation_prefix_length, Some(64), "the CRD defaults allocationPrefixLength to 64");
    let change = json!({"spec": {"allocationPrefixLength": 64}});
    let error = s.prefix_pools().patch("custom", &PatchParams::default(), &Patch::Merge(&change)).await.unwrap_err();
    assert!(error.to_string().contains("spec.allocationPrefixLength is immutable"), "{error}");
}
