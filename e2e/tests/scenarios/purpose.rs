//! Purpose pools: claims that ask for "a VIP" or "a VM IP" and get an address from the pools
//! labelled for it, one scenario per rule of docs/vip-and-vm-ips.md. Every scenario runs its
//! provider with `--watch-filter`, so it sees only its own pools, global ones included.

use ferro_ipam::api::InClusterIPPool;
use ferro_ipam::api::capi::IPAddress;
use ferro_ipam::api::keys::ALLOCATED_FROM_ANNOTATION;
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use kube::ResourceExt;
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::{A_WHILE, PROMPTLY};

pub const VIPS: &str = "cluster-api-vips";
pub const VM_IPS: &str = "cluster-api-vm-ips";
pub const ALL_PROVIDERS: (&str, &str) = ("cluster-api-allow-all-providers", "true");

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect())
}

/// An `InClusterIPPool` of this namespace with `addresses` and `labels`, returned once the
/// running provider reports it Ready: a purpose claim is matched against the pools ferro-ipam
/// has seen, so a scenario about which pool wins must not race the pool's arrival.
pub async fn labelled_pool(s: &Scope, name: &str, addresses: &str, labels: Value) {
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": name, "labels": labels},
        "spec": {"addresses": [addresses], "prefix": 24},
    }))
    .await
    .unwrap();
    wait_ready(s, name, false).await;
}

/// A `GlobalInClusterIPPool` (named by [`Scope::global_name`]) with `addresses` and `labels`,
/// returned once the running provider reports it Ready (see [`labelled_pool`]).
pub async fn labelled_global(s: &Scope, name: &str, addresses: &str, labels: Value) -> String {
    let name = s.global_name(name);
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": name, "labels": labels},
        "spec": {"addresses": [addresses], "prefix": 24},
    }))
    .await
    .unwrap();
    wait_ready(s, &name, true).await;
    name
}

/// Waits until the running provider reports the pool `name` (global or of this namespace) Ready.
async fn wait_ready(s: &Scope, name: &str, global: bool) {
    s.eventually(&format!("pool {name} Ready"), PROMPTLY, || async {
        let ready = if global { s.global_pool_ready(name).await } else { s.pool_ready(name).await };
        ready.is_some_and(|(status, _, _)| status == "True")
    })
    .await
    .unwrap();
}

/// A claim for "a VIP" (`VIPS`) or "a VM IP" (`VM_IPS`), the way a template carries it.
pub async fn ask(s: &Scope, claim: &str, purpose: &str, metadata: Value) {
    s.claim_with(claim, "GlobalInClusterIPPool", purpose, metadata).await.unwrap();
}

/// A claim of Cluster `wl`.
fn of_wl() -> Value {
    json!({"labels": {"cluster.x-k8s.io/cluster-name": "wl"}})
}

/// The pool an address came from, as its annotation names it.
pub fn pool_of(address: &IPAddress) -> String {
    address.annotations().get(ALLOCATED_FROM_ANNOTATION).cloned().unwrap_or_default()
}

async fn events_with(s: &Scope, kind: &str, name: &str, reason: &str) -> bool {
    s.events_about(kind, name).await.unwrap().iter().any(|(t, r, _)| t == "Warning" && r == reason)
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_labelled_pools_serve_vips_and_vm_ips_before_global_ones() {
    let s = Scope::wide("purpose-namespaced-first").await;
    let _p = s.provider();
    labelled_global(&s, "vips", "10.110.0.0/29", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "vips", "10.110.1.10-10.110.1.11", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "nodes", "10.110.2.10-10.110.2.12", labels(&[(VM_IPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "vip-0", VIPS, json!({})).await;
    ask(&s, "vm-0", VM_IPS, json!({})).await;
    let vip = s.wait_allocated("vip-0", PROMPTLY).await.unwrap();
    let vm = s.wait_allocated("vm-0", PROMPTLY).await.unwrap();
    assert_eq!((vip.spec.address.as_str(), pool_of(&vip).as_str()), ("10.110.1.10", "InClusterIPPool/vips"));
    assert_eq!((vm.spec.address.as_str(), pool_of(&vm).as_str()), ("10.110.2.10", "InClusterIPPool/nodes"));
    // CAPI's validation wants the address to repeat the claim's poolRef.
    assert_eq!((vip.spec.pool_ref.kind.as_str(), vip.spec.pool_ref.name.as_str()), ("GlobalInClusterIPPool", VIPS));
    assert!(vip.owner_references().iter().any(|o| o.kind == "InClusterIPPool" && o.name == "vips"));
    s.eventually("the chosen pool counts the address", PROMPTLY, || async { s.pool_used("vips").await == Some(1) })
        .await
        .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn one_global_pool_with_both_labels_serves_vips_and_vm_ips_when_the_namespace_has_none() {
    let s = Scope::wide("purpose-both-labels").await;
    let _p = s.provider();
    let shared = labelled_global(
        &s,
        "shared",
        "10.110.8.10-10.110.8.13",
        labels(&[(VIPS, "true"), (VM_IPS, "true"), ALL_PROVIDERS]),
    )
    .await;
    ask(&s, "vip", VIPS, json!({})).await;
    ask(&s, "vm", VM_IPS, json!({})).await;
    let vip = s.wait_allocated("vip", PROMPTLY).await.unwrap();
    let vm = s.wait_allocated("vm", PROMPTLY).await.unwrap();
    let expected = format!("GlobalInClusterIPPool/{shared}");
    assert_eq!((pool_of(&vip), pool_of(&vm)), (expected.clone(), expected));
    assert_ne!(vip.spec.address, vm.spec.address);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn full_namespaced_pools_fail_with_out_of_vips_on_the_claim_and_its_cluster() {
    let s = Scope::wide("purpose-out-of-vips").await;
    let _p = s.provider();
    s.cluster("wl", false).await.unwrap();
    let global = labelled_global(&s, "vips", "10.110.3.0/30", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "vips", "10.110.4.10", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "nodes", "10.110.5.10-10.110.5.20", labels(&[(VM_IPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "vip-a", VIPS, of_wl()).await;
    assert_eq!(s.wait_allocated("vip-a", PROMPTLY).await.unwrap().spec.address, "10.110.4.10");
    ask(&s, "vip-b", VIPS, of_wl()).await;
    let message = s.wait_reason("vip-b", "PoolExhausted", PROMPTLY).await.unwrap();
    assert!(message.contains("cluster-api-allow-overflow-vips"), "the message says how to overflow: {message}");
    s.eventually("out-of-vips on the claim and on its Cluster", PROMPTLY, || async {
        events_with(&s, "IPAddressClaim", "vip-b", "out-of-vips").await
            && events_with(&s, "Cluster", "wl", "out-of-vips").await
    })
    .await
    .unwrap();
    s.stays("the global pool is not used without the overflow label", A_WHILE, || async {
        s.global_pool_used(&global).await.is_none_or(|used| used == 0)
            && s.addresses().get_opt("vip-b").await.unwrap().is_none()
    })
    .await
    .unwrap();
    // With the label, the waiting claim goes on to the global pool.
    let overflow = json!({"metadata": {"labels": {"cluster-api-allow-overflow-vips": "true"}}});
    s.patch(&ApiResource::erase::<InClusterIPPool>(&()), true, "vips", overflow).await.unwrap();
    let overflowed = s.wait_allocated("vip-b", PROMPTLY).await.unwrap();
    assert_eq!(pool_of(&overflowed), format!("GlobalInClusterIPPool/{global}"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_short_of_both_gets_out_of_vips_and_vm_ips() {
    let s = Scope::wide("purpose-short-of-both").await;
    let _p = s.provider();
    s.cluster("wl", false).await.unwrap();
    labelled_pool(&s, "everything", "10.110.6.10", labels(&[(VIPS, "true"), (VM_IPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "vm-a", VM_IPS, of_wl()).await;
    s.wait_allocated("vm-a", PROMPTLY).await.unwrap();
    ask(&s, "vip-b", VIPS, of_wl()).await;
    s.wait_reason("vip-b", "PoolExhausted", PROMPTLY).await.unwrap();
    s.eventually("out-of-vips-and-vm-ips on the claim and on its Cluster", PROMPTLY, || async {
        events_with(&s, "IPAddressClaim", "vip-b", "out-of-vips-and-vm-ips").await
            && events_with(&s, "Cluster", "wl", "out-of-vips-and-vm-ips").await
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_overflow_label_sends_claims_on_to_global_pools_when_namespaced_ones_are_full() {
    let s = Scope::wide("purpose-overflow").await;
    let _p = s.provider();
    let global = labelled_global(&s, "vm-ips", "10.110.7.0/30", labels(&[(VM_IPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(
        &s,
        "nodes",
        "10.110.9.10",
        labels(&[(VM_IPS, "true"), ALL_PROVIDERS, ("cluster-api-allow-overflow-vm-ips", "true")]),
    )
    .await;
    ask(&s, "vm-a", VM_IPS, json!({})).await;
    assert_eq!(pool_of(&s.wait_allocated("vm-a", PROMPTLY).await.unwrap()), "InClusterIPPool/nodes");
    ask(&s, "vm-b", VM_IPS, json!({})).await;
    let overflowed = s.wait_allocated("vm-b", PROMPTLY).await.unwrap();
    assert_eq!(pool_of(&overflowed), format!("GlobalInClusterIPPool/{global}"));
    assert_eq!(overflowed.spec.address, "10.110.7.1");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_waiting_on_full_pools_is_served_when_an_address_is_freed() {
    let s = Scope::wide("purpose-freed").await;
    let _p = s.provider();
    labelled_pool(&s, "vips", "10.110.10.10", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "first", VIPS, json!({})).await;
    s.wait_allocated("first", PROMPTLY).await.unwrap();
    ask(&s, "second", VIPS, json!({})).await;
    s.wait_reason("second", "PoolExhausted", PROMPTLY).await.unwrap();
    s.delete_claim("first").await.unwrap();
    assert_eq!(s.wait_allocated("second", PROMPTLY).await.unwrap().spec.address, "10.110.10.10");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn direct_pool_refs_to_a_labelled_pool_behave_as_before() {
    let s = Scope::wide("purpose-direct").await;
    let _p = s.provider();
    labelled_pool(&s, "vips", "10.110.11.10-10.110.11.11", labels(&[(VIPS, "true"), ALL_PROVIDERS])).await;
    s.claim("direct", "InClusterIPPool", "vips").await.unwrap();
    let direct = s.wait_allocated("direct", PROMPTLY).await.unwrap();
    assert_eq!((direct.spec.pool_ref.kind.as_str(), direct.spec.pool_ref.name.as_str()), ("InClusterIPPool", "vips"));
    assert!(!direct.annotations().contains_key(ALLOCATED_FROM_ANNOTATION));
    ask(&s, "by-label", VIPS, json!({})).await;
    let by_label = s.wait_allocated("by-label", PROMPTLY).await.unwrap();
    assert_ne!(direct.spec.address, by_label.spec.address, "both share the pool's addresses");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_named_like_a_purpose_is_refused_by_the_api_server() {
    let s = Scope::new("purpose-reserved").await;
    for (kind, result) in [
        ("InClusterIPPool", s.pool(VIPS, json!({"addresses": ["10.110.12.10"], "prefix": 24})).await),
        ("GlobalInClusterIPPool", s.global_pool(VM_IPS, json!({"addresses": ["10.110.12.11"], "prefix": 24})).await),
    ] {
        let error = result.expect_err("a reserved name").to_string();
        assert!(error.contains("metadata.name") && error.contains("reserved"), "{kind}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn several_qualifying_pools_are_used_in_order_of_name() {
    let s = Scope::wide("purpose-order").await;
    let _p = s.provider();
    // Created in the other order: what counts is the name.
    labelled_pool(&s, "b-vm-ips", "10.110.15.10-10.110.15.11", labels(&[(VM_IPS, "true"), ALL_PROVIDERS])).await;
    labelled_pool(&s, "a-vm-ips", "10.110.16.10", labels(&[(VM_IPS, "true"), ALL_PROVIDERS])).await;
    ask(&s, "first", VM_IPS, json!({})).await;
    assert_eq!(pool_of(&s.wait_allocated("first", PROMPTLY).await.unwrap()), "InClusterIPPool/a-vm-ips");
    ask(&s, "second", VM_IPS, json!({})).await;
    let second = s.wait_allocated("second", PROMPTLY).await.unwrap();
    assert_eq!((pool_of(&second).as_str(), second.spec.address.as_str()), ("InClusterIPPool/b-vm-ips", "10.110.15.10"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
