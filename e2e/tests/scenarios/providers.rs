//! Provider-scoped purpose pools: a labelled pool serves the infrastructure provider named by
//! its `cluster.x-k8s.io/provider` label, which ferro-ipam compares with the same label on the
//! CRD of the claim owner's kind, as clusterctl installs it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{Provider, invariants};

use crate::PROMPTLY;
use crate::purpose::{VIPS, ask, labelled_global, labels, pool_of};

/// The group of the infrastructure kinds these scenarios make up.
pub const INFRA_GROUP: &str = "infrastructure.e2e.ferro-ipam.dev";
/// Two made-up providers, each with a machine kind and a cluster kind.
pub const PROVIDER_A: &str = "infrastructure-e2e-a";
pub const PROVIDER_B: &str = "infrastructure-e2e-b";

/// The kinds of a made-up provider: `<Prefix>Machine` and `<Prefix>Cluster`.
pub fn kind(provider: &str, what: &str) -> String {
    let prefix = if provider == PROVIDER_A { "AlphaE2E" } else { "BetaE2E" };
    format!("{prefix}{what}")
}

/// Installs (once per control plane) a namespaced CRD of `kind` labelled with its provider.
pub async fn install_kind(s: &Scope, provider: &str, what: &str) {
    let kind = kind(provider, what);
    let plural = format!("{}s", kind.to_lowercase());
    let name = format!("{plural}.{INFRA_GROUP}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/provider": provider}},
        "spec": {
            "group": INFRA_GROUP, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    match api.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating CRD {name}: {error}"),
    }
    s.eventually("the CRD is served", PROMPTLY, || async {
        api.get(&name)
            .await
            .ok()
            .and_then(|c| c.status)
            .and_then(|st| st.conditions)
            .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Established" && c.status == "True"))
    })
    .await
    .unwrap();
}

/// Claim metadata owned by a machine of `provider`, as infrastructure providers own claims.
pub fn owned_by(provider: &str, machine: &str) -> Value {
    json!({"ownerReferences": [{
        "apiVersion": format!("{INFRA_GROUP}/v1beta1"), "kind": kind(provider, "Machine"),
        "name": machine, "uid": format!("{machine}-uid"), "controller": true, "blockOwnerDeletion": true,
    }]})
}

/// A scenario where both made-up providers' machine kinds exist, with its provider and a global
/// VIP pool on `addresses` that serves provider A only.
async fn with_a_pool_of_provider_a(hint: &str, addresses: &str) -> (Scope, Provider, String) {
    let s = Scope::wide(hint).await;
    install_kind(&s, PROVIDER_A, "Machine").await;
    install_kind(&s, PROVIDER_B, "Machine").await;
    let provider = s.provider();
    let pool_labels = labels(&[(VIPS, "true"), ("cluster.x-k8s.io/provider", PROVIDER_A)]);
    let pool = labelled_global(&s, "vips", addresses, pool_labels).await;
    (s, provider, pool)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_scoped_pool_refuses_another_providers_claim_with_a_clear_message() {
    let (s, _p, pool) = with_a_pool_of_provider_a("purpose-provider-scoped", "10.110.13.10-10.110.13.20").await;
    ask(&s, "of-a", VIPS, owned_by(PROVIDER_A, "machine-a")).await;
    ask(&s, "of-b", VIPS, owned_by(PROVIDER_B, "machine-b")).await;
    assert_eq!(pool_of(&s.wait_allocated("of-a", PROMPTLY).await.unwrap()), format!("GlobalInClusterIPPool/{pool}"));
    let message = s.wait_reason("of-b", "PoolNotReady", PROMPTLY).await.unwrap();
    for needle in [PROVIDER_B, &format!("serves only {PROVIDER_A}"), "cluster-api-allow-all-providers"] {
        assert!(message.contains(needle), "the message names {needle:?}: {message}");
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_allow_all_providers_label_shares_a_pool_with_every_provider() {
    let (s, _p, pool) = with_a_pool_of_provider_a("purpose-allow-all", "10.110.14.10-10.110.14.20").await;
    ask(&s, "of-b", VIPS, owned_by(PROVIDER_B, "machine-b")).await;
    s.wait_reason("of-b", "PoolNotReady", PROMPTLY).await.unwrap();
    // Labelling the pool is enough: the waiting claim is served without being touched.
    let resource = kube::core::ApiResource::erase::<ferro_ipam::api::GlobalInClusterIPPool>(&());
    s.patch(&resource, false, &pool, json!({"metadata": {"labels": {"cluster-api-allow-all-providers": "true"}}}))
        .await
        .unwrap();
    assert_eq!(pool_of(&s.wait_allocated("of-b", PROMPTLY).await.unwrap()), format!("GlobalInClusterIPPool/{pool}"));
    // A claim nobody owns has no provider: only such a pool serves it.
    ask(&s, "unowned", VIPS, json!({})).await;
    s.wait_allocated("unowned", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
