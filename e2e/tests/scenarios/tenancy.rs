//! Tenancy of global pools: `spec.namespaceSelector` decides which namespaces' claims a global
//! pool serves (docs/vip-and-vm-ips.md, "Which namespaces a global pool serves").

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::purpose::{ALL_PROVIDERS, VIPS, ask, labels};
use crate::{A_WHILE, PROMPTLY};

/// The label the scenarios select namespaces by.
const TENANT: &str = "tenancy.ferro-ipam.dev/tenant";

/// Sets the tenant label of a scenario's namespace.
async fn label_namespace(s: &Scope, tenant: &str) {
    let patch = json!({"metadata": {"labels": {TENANT: tenant}}});
    Api::<Namespace>::all(s.client.clone())
        .patch(&s.ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("labelling the namespace");
}

/// A selector of the namespaces labelled as tenant `tenant`.
fn selecting(tenant: &str) -> Value {
    json!({"matchLabels": {TENANT: tenant}})
}

/// A global pool of `addresses` serving the namespaces `selector` selects, with `labels`.
async fn global(s: &Scope, name: &str, addresses: &str, selector: Value, labels: Value) -> String {
    let name = s.global_name(name);
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": name, "labels": labels},
        "spec": {"addresses": [addresses], "prefix": 24, "namespaceSelector": selector},
    }))
    .await
    .unwrap();
    name
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_an_unselected_namespace_waits_until_the_namespace_is_relabelled() {
    let a = Scope::wide("tenancy-relabel").await;
    let b = a.sibling("tenancy-relabel-b").await;
    label_namespace(&a, &a.ns).await;
    let _p = a.provider();
    let pool = global(&a, "team", "10.120.0.1-10.120.0.9", selecting(&a.ns), json!({})).await;
    a.claim("mine", "GlobalInClusterIPPool", &pool).await.unwrap();
    b.claim("theirs", "GlobalInClusterIPPool", &pool).await.unwrap();
    a.wait_allocated("mine", PROMPTLY).await.unwrap();
    let message = b.wait_reason("theirs", "NamespaceNotSelected", PROMPTLY).await.unwrap();
    assert!(message.contains(&pool), "names the pool: {message}");
    assert!(message.contains(&format!("{TENANT}={}", a.ns)), "names the selector: {message}");
    assert!(message.contains(&b.ns), "names the namespace: {message}");
    assert!(b.addresses().get_opt("theirs").await.unwrap().is_none());

    label_namespace(&b, &a.ns).await;
    // Woken by the Namespace watch, not by a periodic retry.
    b.wait_allocated("theirs", std::time::Duration::from_secs(5)).await.unwrap();
    invariants::check(&a.client, &[&a.ns, &b.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unselected_claim_is_never_served_from_any_pool() {
    let a = Scope::wide("tenancy-never").await;
    let b = a.sibling("tenancy-never-b").await;
    let _p = a.provider();
    let vips = labels(&[(VIPS, "true"), ALL_PROVIDERS]);
    let closed = global(&a, "closed", "10.121.0.1-10.121.0.9", selecting(&a.ns), vips.clone()).await;
    // The open pool has no selector but carries no purpose label: nothing leads a claim of the
    // closed pool there.
    let open = global(&a, "open", "10.121.1.1-10.121.1.9", json!({}), json!({})).await;
    b.claim("direct", "GlobalInClusterIPPool", &closed).await.unwrap();
    ask(&b, "purpose", VIPS, json!({})).await;
    let direct = b.wait_reason("direct", "NamespaceNotSelected", PROMPTLY).await.unwrap();
    assert!(direct.contains(&closed), "{direct}");
    let purpose = b.wait_reason("purpose", "NamespaceNotSelected", PROMPTLY).await.unwrap();
    assert!(purpose.contains(&closed) && purpose.contains(&b.ns), "{purpose}");
    b.stays("neither claim gets an address anywhere", A_WHILE, || async { b.address_map().await.unwrap().is_empty() })
        .await
        .unwrap();
    assert_eq!(a.global_pool_used(&open).await.unwrap_or(0), 0);
    assert_eq!(a.global_pool_used(&closed).await.unwrap_or(0), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn bound_claims_keep_their_addresses_when_the_selector_stops_selecting_them() {
    let s = Scope::wide("tenancy-keep").await;
    label_namespace(&s, &s.ns).await;
    let _p = s.provider();
    let pool = global(&s, "team", "10.122.0.1-10.122.0.9", selecting(&s.ns), json!({})).await;
    s.claim("bound", "GlobalInClusterIPPool", &pool).await.unwrap();
    let bound = s.wait_allocated("bound", PROMPTLY).await.unwrap();
    let pools = kube::core::ApiResource::erase::<ferro_ipam::api::GlobalInClusterIPPool>(&());
    s.patch(&pools, false, &pool, json!({"spec": {"namespaceSelector": selecting("someone-else")}})).await.unwrap();
    s.claim("late", "GlobalInClusterIPPool", &pool).await.unwrap();
    s.wait_reason("late", "NamespaceNotSelected", PROMPTLY).await.unwrap();
    // A change of the bound claim has it reconciled now, under the new selector (otherwise only
    // a resync or a restart would, and the check below could pass without one).
    let touch = json!({"metadata": {"labels": {"touched": "after-the-selector-changed"}}});
    s.claims().patch("bound", &PatchParams::default(), &Patch::Merge(&touch)).await.unwrap();
    s.stays("the bound claim keeps its address and stays Ready", A_WHILE, || async {
        let address = s.addresses().get_opt("bound").await.unwrap();
        let ready = s.claim_ready("bound").await.is_some_and(|(status, _, _)| status == "True");
        ready && address.is_some_and(|a| a.spec.address == bound.spec.address)
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_refuses_a_selector_on_a_namespaced_pool_and_an_in_without_values() {
    let s = Scope::new("tenancy-refused").await;
    let namespaced = s.pool("p", json!({"addresses": ["10.123.0.1"], "prefix": 24, "namespaceSelector": {}})).await;
    let error = namespaced.expect_err("a namespaced pool takes no selector").to_string();
    assert!(error.contains("set the selector on a GlobalInClusterIPPool"), "{error}");
    let selector = json!({"matchExpressions": [{"key": TENANT, "operator": "In"}]});
    let spec = json!({"addresses": ["10.123.0.1"], "prefix": 24, "namespaceSelector": selector});
    let error = s.global_pool(&s.global_name("g"), spec).await.expect_err("In needs values").to_string();
    assert!(error.contains("In and NotIn need at least one value"), "{error}");
}
