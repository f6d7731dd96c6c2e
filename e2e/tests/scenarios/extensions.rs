//! ferro-ipam's extensions: dual-stack pools and requested addresses.

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use serde_json::json;

use crate::PROMPTLY;

fn dual_stack_pool() -> serde_json::Value {
    json!({
        "addresses": ["10.50.0.10-10.50.0.20"], "prefix": 24, "gateway": "10.50.0.1",
        "dualStack": {"addresses": ["fd00:50::10-fd00:50::20"], "prefix": 64, "gateway": "fd00:50::1", "excludedAddresses": ["fd00:50::10"]},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn dual_stack_pool_hands_out_each_family_with_its_prefix_and_gateway() {
    let s = Scope::new("dual-stack").await;
    let _p = s.provider();
    s.pool("pool", dual_stack_pool()).await.unwrap();
    s.claim("plain", "InClusterIPPool", "pool").await.unwrap();
    s.claim_with("v6", "InClusterIPPool", "pool", json!({"annotations": {"ferro-ipam.dev/ip-family": "IPv6"}}))
        .await
        .unwrap();
    let plain = s.wait_allocated("plain", PROMPTLY).await.unwrap();
    assert_eq!(
        (plain.spec.address.as_str(), plain.spec.prefix, plain.spec.gateway.as_deref()),
        ("10.50.0.10", 24, Some("10.50.0.1"))
    );
    let v6 = s.wait_allocated("v6", PROMPTLY).await.unwrap();
    assert_eq!(
        (v6.spec.address.as_str(), v6.spec.prefix, v6.spec.gateway.as_deref()),
        ("fd00:50::11", 64, Some("fd00:50::1"))
    );
    s.eventually("status counts each family", PROMPTLY, || async {
        let status = s.pools().get("pool").await.unwrap().status.unwrap_or_default();
        let families: Vec<(String, String, String)> =
            status.families.iter().map(|f| (f.family.clone(), f.total.clone(), f.used.clone())).collect();
        families == [("IPv4".into(), "11".into(), "1".into()), ("IPv6".into(), "16".into(), "1".into())]
            && status.ip_addresses.is_some_and(|c| c.total == 27 && c.used == 2)
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn capic_style_machine_gets_both_families_from_one_dual_stack_pool() {
    let s = Scope::new("dual-stack-capic").await;
    let _p = s.provider();
    s.pool("pool", dual_stack_pool()).await.unwrap();
    s.claim("nic-machine-0-ipv4", "InClusterIPPool", "pool").await.unwrap();
    s.claim("nic-machine-0-ipv6", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("nic-machine-0-ipv4", PROMPTLY).await.unwrap().spec.address, "10.50.0.10");
    assert_eq!(s.wait_allocated("nic-machine-0-ipv6", PROMPTLY).await.unwrap().spec.address, "fd00:50::11");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn dual_stack_block_of_the_same_family_is_refused_by_the_api_server() {
    let s = Scope::new("dual-stack-refused").await;
    let error = s
        .pool(
            "pool",
            json!({"addresses": ["10.51.0.1"], "prefix": 24, "dualStack": {"addresses": ["10.52.0.1"], "prefix": 24}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("spec.dualStack.addresses must be of the other IP family"), "{error}");
    let error = s
        .pool("pool", json!({"addresses": ["10.51.0.1"], "prefix": 24, "dualStack": {"addresses": ["fd00::1"], "prefix": 64, "gateway": "10.51.0.254"}}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("spec.dualStack.gateway: provided gateway and addresses are of mixed IP families"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requested_address_is_granted_when_free_and_refused_with_the_reason_otherwise() {
    let s = Scope::new("requested").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.53.0.1-10.53.0.20"], "prefix": 24, "gateway": "10.53.0.1", "excludedAddresses": ["10.53.0.15"]})).await.unwrap();
    let ask = |ip: &str| json!({"annotations": {"ferro-ipam.dev/requested-address": ip}});
    s.claim_with("wants-17", "InClusterIPPool", "pool", ask("10.53.0.17")).await.unwrap();
    assert_eq!(s.wait_allocated("wants-17", PROMPTLY).await.unwrap().spec.address, "10.53.0.17");
    for (name, ip, why) in [
        ("taken", "10.53.0.17", "taken by"),
        ("excluded", "10.53.0.15", "excludedAddresses"),
        ("gateway", "10.53.0.1", "gateway"),
        ("outside", "10.99.0.1", "not in the pool"),
        ("garbage", "ten", "is not an IP address"),
    ] {
        s.claim_with(name, "InClusterIPPool", "pool", ask(ip)).await.unwrap();
        let message = s.wait_reason(name, "AllocationFailed", PROMPTLY).await.unwrap();
        assert!(message.contains(why), "{name}: {message}");
        assert!(s.addresses().get_opt(name).await.unwrap().is_none(), "{name}: never silently another address");
    }
    let taken = s.wait_reason("taken", "AllocationFailed", PROMPTLY).await.unwrap();
    assert!(taken.contains(&format!("{}/wants-17", s.ns)), "names the holder: {taken}");
    s.eventually("a Warning Event on the claim", PROMPTLY, || async {
        let events = s.events_about("IPAddressClaim", "taken").await.unwrap();
        events.iter().any(|(kind, reason, _)| kind == "Warning" && reason == "AllocationFailed")
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn recreated_claim_gets_its_previous_address_back_across_a_restart() {
    let s = Scope::new("sticky").await;
    let mut provider = s.provider();
    s.pool("pool", json!({"addresses": ["10.54.0.1-10.54.0.9"], "prefix": 24})).await.unwrap();
    for name in ["a", "vm-0", "b"] {
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    let before = s.addresses().get("vm-0").await.unwrap().spec.address;
    assert_eq!(before, "10.54.0.2");
    // The machine is re-created: its claim deleted, then made again under the same name. "a" goes
    // too, so a lower address is free when the claim comes back.
    for name in ["a", "vm-0"] {
        s.delete_claim(name).await.unwrap();
    }
    s.eventually("the claims are gone", PROMPTLY, || async {
        s.claims().get_opt("vm-0").await.unwrap().is_none() && s.claims().get_opt("a").await.unwrap().is_none()
    })
    .await
    .unwrap();
    s.eventually("the pool status remembers the address", PROMPTLY, || async {
        let status = s.pools().get("pool").await.unwrap().status.unwrap_or_default();
        status.recently_released.iter().any(|r| r.address == before && r.claim == format!("{}/vm-0", s.ns))
    })
    .await
    .unwrap();
    // The provider restarts before the claim comes back: the memory is in the pool's status.
    provider.kill();
    let _provider = s.provider();
    s.claim("vm-0", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(
        s.wait_allocated("vm-0", PROMPTLY).await.unwrap().spec.address,
        before,
        "its own address, not the lowest free"
    );
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.54.0.1");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remembered_address_taken_meanwhile_is_not_taken_back() {
    let s = Scope::new("sticky-taken").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.55.0.1-10.55.0.5"], "prefix": 24})).await.unwrap();
    s.claim("vm-0", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("vm-0", PROMPTLY).await.unwrap().spec.address, "10.55.0.1");
    s.delete_claim("vm-0").await.unwrap();
    s.eventually("the claim is gone", PROMPTLY, || async { s.claims().get_opt("vm-0").await.unwrap().is_none() })
        .await
        .unwrap();
    // Lowest free first for everyone else, as in the in-cluster provider.
    s.claim("other", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("other", PROMPTLY).await.unwrap().spec.address, "10.55.0.1");
    s.claim("vm-0", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("vm-0", PROMPTLY).await.unwrap().spec.address, "10.55.0.2");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

async fn pool_reason(s: &Scope, name: &str) -> Option<(String, String)> {
    let status = s.pools().get(name).await.ok()?.status?;
    status.conditions.into_iter().find(|c| c.type_ == "Ready").map(|c| (c.reason, c.message))
}

#[tokio::test(flavor = "multi_thread")]
async fn overlapping_pools_are_reported_and_never_hand_out_one_address_twice() {
    let s = Scope::new("overlap").await;
    let p = s.provider();
    s.pool("a", json!({"addresses": ["10.56.0.1-10.56.0.4"], "prefix": 24})).await.unwrap();
    s.pool("b", json!({"addresses": ["10.56.0.3-10.56.0.6"], "prefix": 24})).await.unwrap();
    for pool in ["a", "b"] {
        let reported = s
            .eventually(&format!("pool {pool} reports the overlap"), PROMPTLY, || async {
                pool_reason(&s, pool).await.is_some_and(|(reason, _)| reason == "OverlapsOtherPools")
            })
            .await;
        assert!(reported.is_ok(), "{pool}: {:?}\n{}", pool_reason(&s, pool).await, p.log_tail(60));
    }
    let (_, message) = pool_reason(&s, "a").await.unwrap();
    assert!(message.contains(&format!("InClusterIPPool {}/b", s.ns)), "{message}");
    s.eventually("a Warning Event says so", PROMPTLY, || async {
        let events = s.events_about("InClusterIPPool", "a").await.unwrap();
        events.iter().any(|(kind, reason, _)| kind == "Warning" && reason == "OverlapsOtherPools")
    })
    .await
    .unwrap();
    // Fill both pools: eight claims would fit in their 8 entries, but only 6 distinct addresses exist.
    let claims: Vec<String> = (0..4).flat_map(|n| [format!("a-{n}"), format!("b-{n}")]).collect();
    for claim in &claims {
        s.claim(claim, "InClusterIPPool", &claim[..1]).await.unwrap();
    }
    s.eventually("every claim is served or told its pool is exhausted", PROMPTLY, || async {
        let mut decided = 0;
        for claim in &claims {
            let ready = s.claim_ready(claim).await;
            decided +=
                usize::from(ready.is_some_and(|(status, reason, _)| status == "True" || reason == "PoolExhausted"));
        }
        decided == claims.len()
    })
    .await
    .unwrap();
    // No address twice across the two pools, one per claim, and counts that allow for the overlap.
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
    let addresses = s.address_map().await.unwrap();
    let distinct: std::collections::BTreeSet<&String> = addresses.values().collect();
    assert_eq!((addresses.len(), distinct.len()), (6, 6), "six distinct addresses for eight claims: {addresses:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ipaddress_no_claim_owns_is_reported_on_its_pool() {
    let s = Scope::new("unclaimed").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.57.0.1-10.57.0.5"], "prefix": 24})).await.unwrap();
    s.create(json!({
        "apiVersion": ferro_ipam_e2e::objects::ipam_api_version(), "kind": "IPAddress",
        "metadata": {"name": "by-hand", "labels": {ferro_ipam_e2e::invariants::HAND_MADE_LABEL: "true"}},
        "spec": {"claimRef": {"name": "by-hand"}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"}, "address": "10.57.0.1", "prefix": 24},
    }))
    .await
    .unwrap();
    s.eventually("the pool names the unclaimed address", PROMPTLY, || async {
        pool_reason(&s, "pool")
            .await
            .is_some_and(|(reason, message)| reason == "UnclaimedAddresses" && message.contains("by-hand"))
    })
    .await
    .unwrap();
    s.eventually("a Warning Event says so", PROMPTLY, || async {
        let events = s.events_about("InClusterIPPool", "pool").await.unwrap();
        events.iter().any(|(kind, reason, _)| kind == "Warning" && reason == "UnclaimedAddresses")
    })
    .await
    .unwrap();
    s.claim("c", "InClusterIPPool", "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.57.0.2");
}

/// Applies an example manifest from docs/examples/ into the scenario's namespace.
fn apply_example(s: &Scope, file: &str) {
    let path = ferro_ipam_e2e::plane::repo_root().join("docs/examples").join(file);
    let text = std::fs::read_to_string(&path).unwrap().replace("namespace: default", &format!("namespace: {}", s.ns));
    let scratch = s.plane.dir.join(format!("{}-{file}", s.ns));
    std::fs::write(&scratch, text).unwrap();
    s.plane.kubectl_ok(&["apply", "-f", &scratch.to_string_lossy()]).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_documented_examples_apply_and_every_claim_is_served() {
    let s = Scope::new("examples").await;
    let _p = s.provider();
    apply_example(&s, "dual-stack.yaml");
    apply_example(&s, "requested-and-sticky.yaml");
    let v4 = s.wait_allocated("nic-worker-0-ipv4", PROMPTLY).await.unwrap();
    let v6 = s.wait_allocated("nic-worker-0-ipv6", PROMPTLY).await.unwrap();
    let annotated = s.wait_allocated("worker-1-eth0-v6", PROMPTLY).await.unwrap();
    assert_eq!((v4.spec.address.as_str(), v4.spec.gateway.as_deref()), ("10.0.10.10", Some("10.0.10.1")));
    // The two IPv6 claims are served in either order.
    let mut v6s = [v6.spec.address.clone(), annotated.spec.address.clone()];
    v6s.sort();
    assert_eq!(v6s, ["fd00:10::10", "fd00:10::11"]);
    assert_eq!((v6.spec.prefix, v6.spec.gateway.as_deref()), (64, Some("fd00:10::1")));
    assert_eq!(s.wait_allocated("ingress-vip", PROMPTLY).await.unwrap().spec.address, "10.0.20.42");
    apply_example(&s, "allocation-strategy.yaml");
    assert_eq!(s.wait_allocated("worker-0", PROMPTLY).await.unwrap().spec.address, "10.0.30.10");
    apply_example(&s, "reservations.yaml");
    let reserved = s.wait_allocated("wl-control-plane-0-0-0", PROMPTLY).await.unwrap();
    assert_eq!(reserved.spec.address, "10.0.40.10");
    assert_eq!(s.wait_allocated("wl-md-0-abcde-0-0", PROMPTLY).await.unwrap().spec.address, "10.0.40.12");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
