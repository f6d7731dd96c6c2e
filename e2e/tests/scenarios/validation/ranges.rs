//! Ranges written backwards: refused by the API server for IPv4 (CEL compares the two ends
//! octet by octet), reported on the pool for IPv6 (CEL has no arithmetic wide enough).

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::{IN_CLUSTER, wait_pool_event, wait_pool_reason};
use crate::{A_WHILE, PROMPTLY};

const BACKWARDS: &str = "provided range ends before it starts: write the lower address first";

/// Why the API server's answer to a backwards pool is wrong, if it is.
fn refused_naming(result: anyhow::Result<()>, field: &str) -> Option<String> {
    match result {
        Ok(()) => Some(format!("{field}: accepted")),
        Err(error) => {
            let message = format!("{error:#}");
            (!message.contains(&format!("{field}: Invalid value")) || !message.contains(BACKWARDS))
                .then(|| format!("{field}: the message does not name it with {BACKWARDS:?}: {message}"))
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn backwards_ipv4_ranges_are_refused_by_the_api_server_and_forward_or_equal_ends_accepted() {
    let s = Scope::new("backwards-v4").await;
    let _p = s.provider();
    let mut wrong = Vec::new();
    let cases: [(&str, Value, &str); 4] = [
        ("addresses", json!({"addresses": ["10.0.0.5", "10.0.0.20-10.0.0.10"], "prefix": 24}), "spec.addresses[1]"),
        // .2.1 lies above .1.255: the octets are weighed, not compared as text.
        ("octets", json!({"addresses": ["10.0.2.1-10.0.1.255"], "prefix": 16}), "spec.addresses[0]"),
        (
            "excluded",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.9-10.0.0.8"]}),
            "spec.excludedAddresses[0]",
        ),
        (
            "dual",
            json!({"addresses": ["fd00::10"], "prefix": 64, "dualStack": {"addresses": ["10.0.0.20-10.0.0.10"], "prefix": 24}}),
            "spec.dualStack.addresses[0]",
        ),
    ];
    for (name, spec, field) in &cases {
        wrong.extend(refused_naming(s.pool(&format!("bad-{name}"), spec.clone()).await, field));
        let global = s.global_pool(&s.global_name(&format!("bad-{name}")), spec.clone()).await;
        wrong.extend(refused_naming(global, field).map(|w| format!("global {w}")));
    }
    // An update that turns a range around is refused too, and leaves the pool as it was.
    s.pool("forward", json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24})).await.unwrap();
    let turned = s
        .pools()
        .patch(
            "forward",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"addresses": ["10.0.0.20-10.0.0.10"]}})),
        )
        .await
        .map(drop)
        .map_err(anyhow::Error::from);
    wrong.extend(refused_naming(turned, "spec.addresses[0]").map(|w| format!("update: {w}")));
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));

    // Equal ends are a range of one address.
    s.pool("single", json!({"addresses": ["10.0.1.10-10.0.1.10"], "prefix": 24})).await.unwrap();
    for (pool, claim, expected) in [("forward", "a", "10.0.0.10"), ("single", "b", "10.0.1.10")] {
        s.claim(claim, IN_CLUSTER, pool).await.unwrap();
        assert_eq!(s.wait_allocated(claim, PROMPTLY).await.unwrap().spec.address, expected, "claim {claim} of {pool}");
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// A list of `count` IPv4 ranges of two addresses each, all inside 10.1.0.0/16.
fn ipv4_ranges(count: usize) -> Vec<String> {
    (0..count)
        .map(|n| format!("10.1.{}.{}-10.1.{}.{}", n / 100, 2 * (n % 100) + 1, n / 100, 2 * (n % 100) + 2))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_range_rules_stay_within_the_cost_budget_with_every_list_full() {
    let s = Scope::new("backwards-budget").await;
    let max = ferro_ipam::api::pool::MAX_ENTRIES as usize;
    let full = ipv4_ranges(max);
    let full_v6: Vec<String> =
        (0..max).map(|n| format!("fd00:0:0:0:0:0:{:x}:1-fd00:0:0:0:0:0:{:x}:ffff", n, n)).collect();
    let spec = json!({"addresses": full, "prefix": 16, "excludedAddresses": full,
        "dualStack": {"addresses": full_v6, "prefix": 64, "excludedAddresses": full_v6}});
    if let Err(error) = s.pool("full", spec).await {
        panic!("a pool with {max} entries in every list was refused: {error:#}");
    }
    let mut backwards = ipv4_ranges(max);
    backwards[max - 1] = "10.1.250.9-10.1.250.2".to_owned();
    let refused =
        s.pool("full-backwards", json!({"addresses": backwards, "prefix": 16, "excludedAddresses": full})).await;
    if let Some(wrong) = refused_naming(refused, &format!("spec.addresses[{}]", max - 1)) {
        panic!("{wrong}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn backwards_ipv6_range_makes_the_pool_not_ready_and_keeps_its_addresses() {
    let s = Scope::new("backwards-range").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["fd00::2-fd00::9"], "prefix": 64})).await.unwrap();
    s.claim("a", IN_CLUSTER, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("a", PROMPTLY).await.unwrap().spec.address, "fd00::2");

    // CEL sees two IPv6 addresses; only ferro-ipam sees that the range runs backwards.
    s.pools()
        .patch("pool", &PatchParams::default(), &Patch::Merge(json!({"spec": {"addresses": ["fd00::9-fd00::2"]}})))
        .await
        .expect("the API server accepts a backwards IPv6 range");
    let (status, _, message) = wait_pool_reason(&s, "pool", "InvalidSpec").await;
    assert_eq!(status, "False");
    assert!(message.contains("fd00::9-fd00::2"), "{message}");
    let note = wait_pool_event(&s, "pool", "InvalidSpec").await;
    assert!(note.contains("fd00::9-fd00::2"), "{note}");

    // A new claim waits, naming the pool's problem; the allocated address is kept.
    s.claim("b", IN_CLUSTER, "pool").await.unwrap();
    let why = s.wait_reason("b", "PoolNotReady", PROMPTLY).await.unwrap();
    assert!(why.contains("fd00::9-fd00::2"), "{why}");
    s.stays("the allocated address stays", A_WHILE, || async {
        s.address_map().await.unwrap().get("a").map(String::as_str) == Some("fd00::2")
            && s.addresses().get_opt("b").await.unwrap().is_none()
    })
    .await
    .unwrap();

    // Fixed, the pool serves the waiting claim with another address.
    s.pools()
        .patch("pool", &PatchParams::default(), &Patch::Merge(json!({"spec": {"addresses": ["fd00::2-fd00::9"]}})))
        .await
        .unwrap();
    assert_eq!(s.wait_allocated("b", PROMPTLY).await.unwrap().spec.address, "fd00::3");
    let (status, _, _) = wait_pool_reason(&s, "pool", "Valid").await;
    assert_eq!(status, "True");
    assert_eq!(s.address_map().await.unwrap()["a"], "fd00::2");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
