//! The control-plane VIP reconcile against a scripted API server: the VIP claim asked for, the
//! endpoint written from its address, the claim released with its Cluster, and a claim of its
//! name that is not the Cluster's left alone.

use std::sync::Arc;

use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::api::keys::{CONTROL_PLANE_VIP_FINALIZER, CONTROL_PLANE_VIP_LABEL};
use crate::controller::mock_api::{Expect, MockApi, World, path};
use crate::fixtures::{self, check};

const IPAM: &str = "ipam.cluster.x-k8s.io/v1beta2";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

/// The Cluster `ns/wl`, asking for a VIP on port 6443, with our finalizer.
fn opted_in() -> Cluster {
    let mut cluster = fixtures::cluster("wl");
    cluster.metadata.uid = Some("wl-uid".into());
    cluster.metadata.resource_version = Some("5".into());
    cluster.labels_mut().insert(CONTROL_PLANE_VIP_LABEL.into(), "true".into());
    cluster.metadata.finalizers = Some(vec![CONTROL_PLANE_VIP_FINALIZER.into()]);
    cluster
}

/// The Cluster's VIP claim as the watch shows it, served with `IPAddress` `wl-control-plane-vip`.
fn vip_claim() -> IPAddressClaim {
    let mut claim = fixtures::claim(&super::claim_name("wl"), "cluster-api-vips");
    claim.labels_mut().insert(super::ROLE_LABEL.into(), super::ROLE.into());
    claim.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "wl", "uid": "wl-uid", "controller": true
    }))
    .unwrap()]);
    claim.status = serde_json::from_value(json!({"addressRef": {"name": super::claim_name("wl")}})).unwrap();
    claim.metadata.uid = Some("vip-uid".into());
    claim
}

/// The Cluster with its endpoint at `host`.
fn with_endpoint(host: &str) -> Cluster {
    let mut cluster = opted_in();
    cluster.spec.control_plane_endpoint =
        Some(crate::api::capi::ApiEndpoint { host: Some(host.into()), port: Some(6443) });
    cluster
}

fn vip_address(ip: &str) -> IPAddress {
    serde_json::from_value(json!({
        "apiVersion": IPAM, "kind": "IPAddress",
        "metadata": {"name": super::claim_name("wl"), "namespace": "ns"},
        "spec": {"claimRef": {"name": super::claim_name("wl")},
                 "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "cluster-api-vips"},
                 "address": ip, "prefix": 24}
    }))
    .unwrap()
}

fn event(reason: &'static str) -> Expect {
    Expect::new(Method::POST, EVENTS)
        .body(move |body: &Value| check(body["reason"] == reason, "not the expected Event"))
        .answer(201, json!({}))
}

#[tokio::test]
async fn an_opted_in_cluster_without_a_claim_asks_for_one_from_the_vip_pools() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::POST, path(IPAM, "ns", "ipaddressclaims", None))
            .body(|body| {
                check(body["metadata"]["name"] == "wl-control-plane-vip", "not the VIP claim's name")?;
                check(body["metadata"]["labels"][super::ROLE_LABEL] == super::ROLE, "no role label")?;
                check(body["metadata"]["ownerReferences"][0]["uid"] == "wl-uid", "the Cluster does not own it")?;
                let pool = &body["spec"]["poolRef"];
                check(
                    pool["kind"] == "GlobalInClusterIPPool" && pool["name"] == "cluster-api-vips",
                    "not the VIP pools",
                )?;
                check(body["spec"]["clusterName"] == "wl", "the claim does not name its Cluster")
            })
            .answer(201, serde_json::to_value(vip_claim()).unwrap()),
    ]);
    let world = World::new(client);

    super::reconcile(Arc::new(opted_in()), world.ctx.clone()).await.expect("asked");
    api.finish();
}

#[tokio::test]
async fn the_claims_address_becomes_the_endpoint_guarded_by_the_clusters_version() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, path("cluster.x-k8s.io/v1beta2", "ns", "clusters", Some("wl")))
            .body(|body| {
                let endpoint = &body["spec"]["controlPlaneEndpoint"];
                check(endpoint["host"] == "10.0.0.5" && endpoint["port"] == 6443, "not the VIP and port")?;
                check(body["metadata"]["resourceVersion"] == "5", "not guarded by the version acted on")
            })
            .answer(200, serde_json::to_value(opted_in()).unwrap()),
        event("ControlPlaneVIPAssigned"),
    ]);
    let mut world = World::new(client);
    let _ = world.claims.apply(&Event::Apply(vip_claim()));
    world.addresses.apply(&Event::Apply(vip_address("10.0.0.5")));

    super::reconcile(Arc::new(opted_in()), world.ctx.clone()).await.expect("written");
    api.finish();
}

#[tokio::test]
async fn a_deleted_cluster_releases_its_vip_claim_tolerating_a_404() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::DELETE, path(IPAM, "ns", "ipaddressclaims", Some("wl-control-plane-vip")))
            .body(|body| check(body["preconditions"]["uid"] == "vip-uid", "the delete is not for the claim judged"))
            .refuse(404, "NotFound"),
        event("ControlPlaneVIPReleased"),
    ]);
    let world = World::new(client);
    let _ = world.claims.apply(&Event::Apply(vip_claim()));
    let mut cluster = opted_in();
    cluster.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));

    super::reconcile(Arc::new(cluster), world.ctx.clone()).await.expect("released");
    api.finish();
}

#[tokio::test]
async fn a_claim_of_the_vip_claims_name_that_is_not_the_clusters_is_left_alone_and_reported() {
    let (client, api) = MockApi::client(vec![event("ControlPlaneVIPClaimNameTaken")]);
    let world = World::new(client);
    // No role label and no owner: somebody else's claim.
    let foreign = fixtures::claim(&super::claim_name("wl"), "cluster-api-vips");
    let _ = world.claims.apply(&Event::Apply(foreign));

    super::reconcile(Arc::new(opted_in()), world.ctx.clone()).await.expect("reported");
    api.finish();
}

#[tokio::test]
async fn a_vip_claim_whose_address_is_not_seen_is_left_alone_whatever_the_endpoint() {
    // A restart lists the claim before its IPAddress, or the IPAddress was deleted by hand: the
    // endpoint may be this claim's own address. Nothing is written (the script is empty).
    let (client, api) = MockApi::client(vec![]);
    let world = World::new(client);
    let _ = world.claims.apply(&Event::Apply(vip_claim()));

    super::reconcile(Arc::new(with_endpoint("10.0.0.5")), world.ctx.clone()).await.expect("waits");
    api.finish();
}

#[tokio::test]
async fn nothing_is_judged_before_the_index_is_complete() {
    let (client, api) = MockApi::client(vec![]);
    let world = World::new(client);
    world.ctx.index.set_stale();
    let _ = world.claims.apply(&Event::Apply(vip_claim()));
    let cluster = Arc::new(with_endpoint("10.0.0.5"));
    let waiting = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        super::reconcile(cluster.clone(), world.ctx.clone()),
    )
    .await;
    assert!(waiting.is_err(), "the reconcile went on before the index was complete");
    // Complete, the address is seen to be the endpoint: still nothing to write.
    let mut addresses = world.addresses;
    addresses.apply(&Event::Apply(vip_address("10.0.0.5")));
    world.ctx.index.set_ready();
    super::reconcile(cluster, world.ctx.clone()).await.expect("kept");
    api.finish();
}

#[tokio::test]
async fn a_vip_claim_holding_another_address_than_the_endpoint_is_deleted_by_uid() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::DELETE, path(IPAM, "ns", "ipaddressclaims", Some("wl-control-plane-vip")))
            .body(|body| check(body["preconditions"]["uid"] == "vip-uid", "the delete is not for the claim judged"))
            .answer(200, serde_json::to_value(vip_claim()).unwrap()),
        event("ControlPlaneVIPReleased"),
    ]);
    let mut world = World::new(client);
    let _ = world.claims.apply(&Event::Apply(vip_claim()));
    world.addresses.apply(&Event::Apply(vip_address("10.0.0.6")));

    super::reconcile(Arc::new(with_endpoint("192.0.2.10")), world.ctx.clone()).await.expect("released");
    api.finish();
}

#[tokio::test]
async fn the_finalizer_stays_while_the_api_server_still_has_the_vip_claim() {
    // The cache has not listed the claim yet; the API server has it.
    let claim_path = path(IPAM, "ns", "ipaddressclaims", Some("wl-control-plane-vip"));
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::GET, &claim_path).answer(200, serde_json::to_value(vip_claim()).unwrap()),
    ]);
    let world = World::new(client);
    let mut cluster = opted_in();
    cluster.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));

    super::reconcile(Arc::new(cluster.clone()), world.ctx.clone()).await.expect("waits");
    api.finish();

    // Once the API server says it is gone, the finalizer goes.
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::GET, &claim_path).refuse(404, "NotFound"),
        Expect::new(Method::PATCH, path("cluster.x-k8s.io/v1beta2", "ns", "clusters", Some("wl")))
            .body(|body| check(body["metadata"]["finalizers"] == json!([]), "the finalizer is not dropped"))
            .answer(200, serde_json::to_value(opted_in()).unwrap()),
    ]);
    let world = World::new(client);
    super::reconcile(Arc::new(cluster), world.ctx.clone()).await.expect("dropped");
    api.finish();
}
