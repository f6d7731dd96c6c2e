//! The automatic control-plane VIP: an opted-in Cluster without an endpoint gets a VIP claim
//! it owns, its `spec.controlPlaneEndpoint` is written from the address, and the claim goes
//! when the Cluster goes.

use ferro_ipam::api::keys::CONTROL_PLANE_VIP_FINALIZER;
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::providers::{INFRA_GROUP, PROVIDER_A, install_kind, kind};
use crate::purpose::{VIPS, VM_IPS, labelled_global, labels, pool_of};
use crate::{A_WHILE, PROMPTLY};

const OPT_IN: &str = "ferro-ipam.dev/control-plane-vip";

fn cluster_resource() -> ApiResource {
    ferro_ipam_e2e::objects::capi().cluster_resource()
}

pub fn clusters(s: &Scope) -> Api<DynamicObject> {
    Api::namespaced_with(s.client.clone(), &s.ns, &cluster_resource())
}

/// A Cluster of provider A's infrastructure, opted in with `opt_in` (None: not opted in).
pub async fn cluster(s: &Scope, name: &str, opt_in: Option<&str>, spec: Value) {
    let mut spec = spec;
    spec["infrastructureRef"] = json!({"apiGroup": INFRA_GROUP, "kind": kind(PROVIDER_A, "Cluster"), "name": name});
    let labels = opt_in.map(|v| json!({OPT_IN: v})).unwrap_or(json!({}));
    s.create(json!({
        "apiVersion": ferro_ipam_e2e::objects::cluster_api_version(), "kind": "Cluster",
        "metadata": {"name": name, "labels": labels}, "spec": spec,
    }))
    .await
    .unwrap();
}

/// The Cluster's `spec.controlPlaneEndpoint` as (host, port), once a host is set.
async fn endpoint(s: &Scope, name: &str) -> Option<(String, i64)> {
    let cluster = clusters(s).get(name).await.ok()?;
    let endpoint = &cluster.data["spec"]["controlPlaneEndpoint"];
    let host = endpoint["host"].as_str().filter(|h| !h.is_empty())?.to_owned();
    Some((host, endpoint["port"].as_i64().unwrap_or(0)))
}

pub async fn wait_endpoint(s: &Scope, name: &str) -> (String, i64) {
    s.eventually(&format!("Cluster {name} has its control-plane endpoint"), PROMPTLY, || async {
        endpoint(s, name).await.is_some()
    })
    .await
    .unwrap();
    endpoint(s, name).await.unwrap()
}

pub async fn vip_pool(s: &Scope, name: &str, addresses: &str) -> String {
    labelled_global(s, name, addresses, labels(&[(VIPS, "true"), ("cluster.x-k8s.io/provider", PROVIDER_A)])).await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_opted_in_cluster_gets_its_endpoint_from_a_vip_and_gives_the_vip_back_when_deleted() {
    let s = Scope::wide("cluster-vip").await;
    install_kind(&s, PROVIDER_A, "Cluster").await;
    let _p = s.provider();
    let pool = vip_pool(&s, "vips", "10.110.20.10-10.110.20.20").await;
    cluster(&s, "wl", Some("true"), json!({})).await;
    let (host, port) = wait_endpoint(&s, "wl").await;
    assert_eq!((host.as_str(), port), ("10.110.20.10", 6443));
    let claim = s.claims().get("wl-control-plane-vip").await.unwrap();
    assert!(
        claim.owner_references().iter().any(|o| o.kind == "Cluster" && o.name == "wl" && o.controller == Some(true))
    );
    let address = s.addresses().get("wl-control-plane-vip").await.unwrap();
    assert_eq!(
        (address.spec.address.as_str(), pool_of(&address)),
        (host.as_str(), format!("GlobalInClusterIPPool/{pool}"))
    );
    s.eventually("an Event says where the endpoint came from", PROMPTLY, || async {
        s.events_about("Cluster", "wl").await.unwrap().iter().any(|(_, reason, _)| reason == "ControlPlaneVIPAssigned")
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();

    clusters(&s).delete("wl", &DeleteParams::default()).await.unwrap();
    s.eventually("the Cluster, its VIP claim and address are gone", PROMPTLY, || async {
        clusters(&s).get_opt("wl").await.unwrap().is_none()
            && s.claims().get_opt("wl-control-plane-vip").await.unwrap().is_none()
            && s.addresses().get_opt("wl-control-plane-vip").await.unwrap().is_none()
    })
    .await
    .unwrap();
    s.eventually("the pool counts no address", PROMPTLY, || async { s.global_pool_used(&pool).await == Some(0) })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn two_clusters_in_two_namespaces_share_a_global_vip_pool_with_distinct_vips() {
    let s = Scope::wide("cluster-vip-shared").await;
    let other = s.sibling("cluster-vip-shared-2").await;
    install_kind(&s, PROVIDER_A, "Cluster").await;
    let _p = s.provider();
    vip_pool(&s, "vips", "10.110.21.10-10.110.21.20").await;
    cluster(&s, "wl", Some("true"), json!({})).await;
    // The opt-in label may name the port.
    cluster(&other, "wl", Some("8443"), json!({})).await;
    let (a, port_a) = wait_endpoint(&s, "wl").await;
    let (b, port_b) = wait_endpoint(&other, "wl").await;
    assert_ne!(a, b, "two Clusters, two VIPs");
    assert_eq!((port_a, port_b), (6443, 8443));
    invariants::check(&s.client, &[&s.ns, &other.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_already_set_is_never_overwritten() {
    let s = Scope::wide("cluster-vip-set").await;
    install_kind(&s, PROVIDER_A, "Cluster").await;
    let _p = s.provider();
    vip_pool(&s, "vips", "10.110.22.10-10.110.22.20").await;
    cluster(&s, "wl", Some("true"), json!({"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 443}})).await;
    // Beside it, an opted-in Cluster without an endpoint, which does get a VIP meanwhile.
    cluster(&s, "bare", Some("true"), json!({})).await;
    s.stays("no VIP is claimed and the endpoint stays", A_WHILE, || async {
        s.claims().get_opt("wl-control-plane-vip").await.unwrap().is_none()
            && endpoint(&s, "wl").await == Some(("192.0.2.10".to_owned(), 443))
    })
    .await
    .unwrap();
    assert_eq!(wait_endpoint(&s, "bare").await, ("10.110.22.10".to_owned(), 6443));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_cluster_is_left_alone_until_it_is_unpaused() {
    let s = Scope::wide("cluster-vip-paused").await;
    install_kind(&s, PROVIDER_A, "Cluster").await;
    let _p = s.provider();
    vip_pool(&s, "vips", "10.110.23.10-10.110.23.20").await;
    cluster(&s, "wl", Some("true"), json!({"paused": true})).await;
    s.stays("a paused Cluster gets no VIP claim and no finalizer", A_WHILE, || async {
        s.claims().get_opt("wl-control-plane-vip").await.unwrap().is_none()
            && clusters(&s).get("wl").await.unwrap().finalizers().is_empty()
    })
    .await
    .unwrap();
    s.patch(&cluster_resource(), true, "wl", json!({"spec": {"paused": false}})).await.unwrap();
    assert_eq!(wait_endpoint(&s, "wl").await.0, "10.110.23.10");
    assert!(clusters(&s).get("wl").await.unwrap().finalizers().iter().any(|f| f == CONTROL_PLANE_VIP_FINALIZER));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_vip_and_vm_ips_example_assigns_the_endpoint_and_machine_addresses() {
    let s = Scope::wide("cluster-vip-example").await;
    let _p = s.provider();
    let path = ferro_ipam_e2e::plane::repo_root().join("docs/examples/vip-and-vm-ips.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace("namespace: default", &format!("namespace: {}", s.ns));
    // The example's global pool is renamed for this scenario, and everything carries its filter.
    let global = s.global_name("shared-vips");
    let text = text.replace("name: shared-vips", &format!("name: {global}"));
    let scratch = s.plane.dir.join(format!("{}-vip-and-vm-ips.yaml", s.ns));
    std::fs::write(&scratch, text).unwrap();
    let file = scratch.to_string_lossy().to_string();
    let filter = format!("cluster.x-k8s.io/watch-filter={}", s.filter.as_deref().unwrap_or_default());
    s.plane.kubectl_ok(&["apply", "-f", &file]).unwrap();
    s.plane.kubectl_ok(&["label", "--overwrite", "-f", &file, &filter]).unwrap();
    let (host, port) = wait_endpoint(&s, "workload").await;
    assert_eq!((host.as_str(), port), ("10.120.0.10", 6443));
    for machine in ["workload-cp-0", "workload-md-0"] {
        let address = s.wait_allocated(machine, PROMPTLY).await.unwrap();
        assert_eq!(pool_of(&address), "InClusterIPPool/node-ips", "{machine}");
        assert_eq!(address.spec.pool_ref.name, VM_IPS);
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_already_named_like_the_vip_claim_is_never_touched() {
    let s = Scope::wide("cluster-vip-name-taken").await;
    install_kind(&s, PROVIDER_A, "Cluster").await;
    let _p = s.provider();
    vip_pool(&s, "vips", "10.110.24.10-10.110.24.20").await;
    s.pool("own", json!({"addresses": ["10.110.25.10"], "prefix": 24})).await.unwrap();
    s.claim("wl-control-plane-vip", "InClusterIPPool", "own").await.unwrap();
    s.wait_allocated("wl-control-plane-vip", PROMPTLY).await.unwrap();
    cluster(&s, "wl", Some("true"), json!({})).await;
    s.eventually("a Warning says the name is taken", PROMPTLY, || async {
        s.events_about("Cluster", "wl")
            .await
            .unwrap()
            .iter()
            .any(|(t, r, _)| t == "Warning" && r == "ControlPlaneVIPClaimNameTaken")
    })
    .await
    .unwrap();
    assert_eq!(endpoint(&s, "wl").await, None, "the other claim's address is not the endpoint");
    clusters(&s).delete("wl", &DeleteParams::default()).await.unwrap();
    s.eventually("the Cluster goes", PROMPTLY, || async { clusters(&s).get_opt("wl").await.unwrap().is_none() })
        .await
        .unwrap();
    let kept = s.claims().get("wl-control-plane-vip").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none(), "the other claim is left alone");
}
