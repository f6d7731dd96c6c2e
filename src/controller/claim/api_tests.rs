//! The claim reconcile against a scripted API server: every write path, in the order the API
//! server sees it, with the answers that make it branch (201, 409, 404), and the write fence.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use crate::api::keys::{ALLOCATED_FROM_ANNOTATION, PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER, VIPS_LABEL};
use crate::client::Fence;
use crate::controller::mock_api::{Expect, MockApi, World, path};
use crate::fixtures::{self, check, finalizers, holder, ip, owners};
use crate::index::{HolderKey, PoolFacts, PoolKey};

const IPAM: &str = "ipam.cluster.x-k8s.io/v1beta2";

fn claims(name: &str) -> String {
    path(IPAM, "ns", "ipaddressclaims", Some(name))
}

fn addresses(name: Option<&str>) -> String {
    path(IPAM, "ns", "ipaddresses", name)
}

/// The pool `ns/pool`: 10.0.0.10-10.0.0.20, /24, gateway 10.0.0.1, protected, no grace period.
fn with_pool(world: &World) -> PoolKey {
    let key = PoolKey::in_cluster("ns", "pool");
    let spec: crate::api::IPPoolSpec = serde_json::from_value(json!({
        "addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"
    }))
    .expect("a pool spec");
    let facts = PoolFacts { uid: "pool-uid".into(), protected: true, ..PoolFacts::default() };
    world.ctx.index.upsert_pool(&key, &spec, facts, &[]);
    key
}

/// The claim as the API server returns it after a write: `version` and our finalizer.
fn written_claim(version: &str) -> Value {
    let mut claim = serde_json::to_value(fixtures::claim("c", "pool")).unwrap();
    claim["metadata"]["resourceVersion"] = json!(version);
    claim["metadata"]["finalizers"] = json!([RELEASE_ADDRESS_FINALIZER]);
    claim
}

/// An `IPAddress` named like the claim, in its pool, holding `ip`.
fn address(ip: &str, finalizers: &[&str]) -> Value {
    json!({
        "apiVersion": IPAM, "kind": "IPAddress",
        "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7", "finalizers": finalizers},
        "spec": {"claimRef": {"name": "c"}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"},
                 "address": ip, "prefix": 24, "gateway": "10.0.0.1"}
    })
}

fn finalizer_added(body: &Value) -> Result<(), String> {
    check(finalizers(body).iter().any(|f| f == RELEASE_ADDRESS_FINALIZER), "the release finalizer is not added")?;
    check(body["metadata"]["resourceVersion"] == "1", "the patch is not guarded by the version acted on")
}

fn ready_with(address: &'static str) -> impl Fn(&Value) -> Result<(), String> {
    move |body| {
        check(body["status"]["addressRef"]["name"] == address, "status.addressRef does not name the address")?;
        let ready =
            body["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
        check(ready.is_some_and(|r| r["status"] == "True"), "no Ready=True condition")
    }
}

/// The status write of a served claim.
fn status_ready() -> Expect {
    Expect::new(Method::PATCH, format!("{}/status", claims("c"))).body(ready_with("c")).answer(200, written_claim("3"))
}

/// Reconciles the claim `ns/c` as first seen, against `script`, and expects it served.
async fn served_with(script: Vec<Expect>) -> (World, PoolKey) {
    let (client, api) = MockApi::client(script);
    let world = World::new(client);
    let pool = with_pool(&world);
    super::reconcile(Arc::new(fixtures::claim("c", "pool")), world.ctx.clone()).await.expect("the claim is served");
    api.finish();
    (world, pool)
}

#[tokio::test]
async fn a_new_claim_gets_its_finalizer_then_its_address_then_its_status() {
    let (world, pool) = served_with(vec![
        Expect::new(Method::PATCH, claims("c")).body(finalizer_added).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None))
            .body(|body| {
                let spec = &body["spec"];
                check(spec["address"] == "10.0.0.10", "not the pool's lowest free address")?;
                check(
                    spec["prefix"] == 24 && spec["gateway"] == "10.0.0.1",
                    "the pool's prefix and gateway are missing",
                )?;
                check(spec["claimRef"]["name"] == "c" && spec["poolRef"]["name"] == "pool", "wrong claim or pool")?;
                let owners = owners(body);
                check(
                    owners.iter().any(|o| o["uid"] == "c-uid" && o["controller"] == true),
                    "the claim does not own it",
                )?;
                check(owners.iter().any(|o| o["uid"] == "pool-uid"), "the pool does not own it")
            })
            .answer(201, address("10.0.0.10", &[PROTECT_ADDRESS_FINALIZER])),
        status_ready(),
    ])
    .await;
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), Some(ip("10.0.0.10")));
}

#[tokio::test]
async fn a_create_met_by_409_reads_the_existing_address_and_adopts_it() {
    let (world, pool) = served_with(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None)).refuse(409, "AlreadyExists"),
        Expect::new(Method::GET, addresses(Some("c"))).answer(200, address("10.0.0.15", &[])),
        Expect::new(Method::PATCH, addresses(Some("c")))
            .body(|body| {
                check(finalizers(body).iter().any(|f| f == PROTECT_ADDRESS_FINALIZER), "the address is not protected")?;
                check(owners(body).iter().any(|o| o["uid"] == "c-uid"), "the claim does not own it")?;
                check(body["metadata"]["resourceVersion"] == "7", "the patch is not guarded by the version read")
            })
            .answer(200, address("10.0.0.15", &[PROTECT_ADDRESS_FINALIZER])),
        status_ready(),
    ])
    .await;
    assert_eq!(
        world.ctx.index.claim_hold(&pool, &holder("c")),
        Some(ip("10.0.0.15")),
        "the claim holds the address its IPAddress records, not the one it picked"
    );
}

#[tokio::test]
async fn a_create_that_fails_on_the_wire_keeps_the_hold_for_the_next_attempt() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None)).refuse(500, "InternalError"),
        Expect::new(Method::PATCH, format!("{}/status", claims("c")))
            .body(|body| {
                let ready = body["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
                let message = ready.as_ref().and_then(|r| r["message"].as_str()).unwrap_or_default().to_owned();
                check(ready.is_some_and(|r| r["reason"] == "AllocationFailed"), "not AllocationFailed")?;
                check(
                    message.contains("refused by the test: InternalError"),
                    "the API server's message is not passed on",
                )
            })
            .answer(200, written_claim("3")),
        Expect::new(Method::POST, "/apis/events.k8s.io/v1/namespaces/ns/events")
            .body(|body| check(body["reason"] == "AllocationFailed", "no AllocationFailed Event"))
            .answer(201, json!({})),
    ]);
    let world = World::new(client);
    let pool = with_pool(&world);

    let error = super::reconcile(Arc::new(fixtures::claim("c", "pool")), world.ctx.clone()).await.unwrap_err();

    api.finish();
    assert!(error.to_string().contains("creating IPAddress ns/c"), "{error}");
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), Some(ip("10.0.0.10")));
}

#[tokio::test]
async fn a_claim_gone_before_its_status_is_written_takes_its_new_address_with_it() {
    // Found by the soak (seed 523): a term that began with a stale cache served a claim that had
    // been deleted meanwhile, and its new IPAddress stayed behind, an orphan nobody released.
    let mut created = address("10.0.0.10", &[PROTECT_ADDRESS_FINALIZER]);
    created["metadata"]["ownerReferences"] =
        json!([{"apiVersion": IPAM, "kind": "IPAddressClaim", "name": "c", "uid": "c-uid"}]);
    created["metadata"]["uid"] = json!("addr-uid");
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None)).answer(201, created.clone()),
        Expect::new(Method::PATCH, format!("{}/status", claims("c"))).refuse(404, "NotFound"),
        Expect::new(Method::GET, addresses(Some("c"))).answer(200, created),
        Expect::new(Method::PATCH, addresses(Some("c")))
            .body(|body| {
                check(!finalizers(body).iter().any(|f| f == PROTECT_ADDRESS_FINALIZER), "the protection stays")
            })
            .answer(200, address("10.0.0.10", &[])),
        Expect::new(Method::DELETE, addresses(Some("c")))
            .body(|body| {
                check(body["preconditions"]["uid"] == "addr-uid", "the delete is not bound to the object judged")
            })
            .answer(200, address("10.0.0.10", &[])),
    ]);
    let world = World::new(client);
    let pool = with_pool(&world);

    super::reconcile(Arc::new(fixtures::claim("c", "pool")), world.ctx.clone()).await.expect("nothing to retry");

    api.finish();
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), None, "the address is free again");
}

/// A deleted claim with our finalizer whose `IPAddress` the watch shows.
/// The patch that takes the deletion protection off the `IPAddress` (10.0.0.12).
fn protection_dropped() -> Expect {
    Expect::new(Method::PATCH, addresses(Some("c")))
        .body(|body| check(!finalizers(body).iter().any(|f| f == PROTECT_ADDRESS_FINALIZER), "the protection stays"))
        .answer(200, address("10.0.0.12", &[]))
}

/// A world whose pool holds 10.0.0.12 for claim `c`, with its protected `IPAddress` (uid
/// `addr-uid`) in the cache.
fn with_held_address(client: kube::Client) -> (World, PoolKey) {
    let mut world = World::new(client);
    let pool = with_pool(&world);
    let mut cached = address("10.0.0.12", &[PROTECT_ADDRESS_FINALIZER]);
    cached["metadata"]["uid"] = json!("addr-uid");
    world.addresses.apply(&Event::Apply(serde_json::from_value(cached).unwrap()));
    world.ctx.index.adopt(&pool, &holder("c"), ip("10.0.0.12"), true).unwrap();
    (world, pool)
}

fn deleted_claim() -> crate::api::capi::IPAddressClaim {
    let mut claim = fixtures::claim("c", "pool");
    claim.metadata.finalizers = Some(vec![RELEASE_ADDRESS_FINALIZER.into()]);
    claim.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    claim
}

#[tokio::test]
async fn a_deleted_claim_unprotects_and_deletes_its_address_then_drops_its_finalizer_tolerating_404s() {
    let (client, api) = MockApi::client(vec![
        protection_dropped(),
        // Someone deleted it meanwhile, and the claim is gone by the time its finalizer is.
        Expect::new(Method::DELETE, addresses(Some("c")))
            .body(|body| {
                check(body["preconditions"]["uid"] == "addr-uid", "the delete is not bound to the object judged")
            })
            .refuse(404, "NotFound"),
        Expect::new(Method::PATCH, claims("c"))
            .body(|body| check(finalizers(body).is_empty(), "the release finalizer stays"))
            .refuse(404, "NotFound"),
    ]);
    let (world, pool) = with_held_address(client);

    super::reconcile(Arc::new(deleted_claim()), world.ctx.clone()).await.expect("the claim is released");

    api.finish();
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), None, "the address is free again");
}

#[tokio::test]
async fn a_release_whose_address_was_replaced_meanwhile_keeps_the_claims_finalizer_and_looks_again() {
    // The delete is bound to the object judged (409: another object of the name stands there
    // now); the claim keeps its finalizer, so that the release is tried again on what is there.
    let (client, api) = MockApi::client(vec![
        protection_dropped(),
        Expect::new(Method::DELETE, addresses(Some("c"))).refuse(409, "Conflict"),
    ]);
    let (world, pool) = with_held_address(client);

    let action = super::reconcile(Arc::new(deleted_claim()), world.ctx.clone()).await.expect("looks again");

    api.finish();
    assert!(action.requeue_after().is_some(), "the release is not tried again");
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), Some(ip("10.0.0.12")), "the hold stays");
}

#[tokio::test]
async fn a_deleted_purpose_claim_whose_pool_the_index_does_not_know_still_releases_its_address() {
    // The index holds nothing for the claim, so its pool is unknown: the IPAddress the API server
    // has, owned by the claim, says which pool it came from, and goes.
    let mut live = address("10.0.0.12", &[PROTECT_ADDRESS_FINALIZER]);
    live["metadata"]["uid"] = json!("addr-uid");
    live["metadata"]["annotations"] = json!({ALLOCATED_FROM_ANNOTATION: "InClusterIPPool/vips"});
    live["spec"]["poolRef"]["name"] = json!(VIPS_LABEL);
    live["metadata"]["ownerReferences"] =
        json!([{"apiVersion": IPAM, "kind": "IPAddressClaim", "name": "c", "uid": "c-uid", "controller": true}]);
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::GET, addresses(Some("c"))).answer(200, live),
        protection_dropped(),
        Expect::new(Method::DELETE, addresses(Some("c")))
            .body(|body| {
                check(body["preconditions"]["uid"] == "addr-uid", "the delete is not bound to the object judged")
            })
            .answer(200, address("10.0.0.12", &[])),
        Expect::new(Method::PATCH, claims("c"))
            .body(|body| check(finalizers(body).is_empty(), "the release finalizer stays"))
            .answer(200, written_claim("9")),
    ]);
    let world = World::new(client);
    let mut claim = deleted_claim();
    claim.spec.pool_ref.name = VIPS_LABEL.into();

    super::reconcile(Arc::new(claim), world.ctx.clone()).await.expect("the claim is released");
    api.finish();
}

#[tokio::test]
async fn a_claim_on_an_exhausted_pool_says_so_in_its_status_and_an_event() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::PATCH, format!("{}/status", claims("c")))
            .body(|body| {
                let ready = body["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned());
                check(
                    ready.is_some_and(|r| r["status"] == "False" && r["reason"] == "PoolExhausted"),
                    "not PoolExhausted",
                )
            })
            .answer(200, written_claim("3")),
        Expect::new(Method::POST, "/apis/events.k8s.io/v1/namespaces/ns/events")
            .body(|body| check(body["type"] == "Warning" && body["reason"] == "PoolExhausted", "no warning Event"))
            .answer(201, json!({})),
    ]);
    let world = World::new(client);
    let pool = with_pool(&world);
    for n in 0..11 {
        let other = HolderKey::new("ns", &format!("other-{n}"));
        world.ctx.index.adopt(&pool, &other, ip(&format!("10.0.0.{}", 10 + n)), true).unwrap();
    }

    super::reconcile(Arc::new(fixtures::claim("c", "pool")), world.ctx.clone()).await.expect("the claim waits");

    api.finish();
}

#[tokio::test]
async fn a_suspended_term_sends_nothing_until_its_fence_opens_again() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None)).answer(201, address("10.0.0.10", &[PROTECT_ADDRESS_FINALIZER])),
        Expect::new(Method::PATCH, format!("{}/status", claims("c"))).answer(200, written_claim("3")),
    ]);
    let fence = Fence::closed();
    let world = World::with_fence(client, fence.clone());
    with_pool(&world);

    let reconcile = tokio::spawn(super::reconcile(Arc::new(fixtures::claim("c", "pool")), world.ctx.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(api.sent().is_empty(), "sent while suspended: {:?}", api.sent());
    assert!(!reconcile.is_finished(), "the reconcile gave up instead of waiting");

    fence.open_until(std::time::Instant::now() + Duration::from_secs(10));
    reconcile.await.unwrap().expect("the claim is served once the term resumes");
    api.finish();
}

#[tokio::test]
async fn a_claim_naming_its_running_cluster_finds_it_and_is_served_with_its_label() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, claims("c")).answer(200, written_claim("2")),
        Expect::new(Method::POST, addresses(None))
            .body(|body| {
                let label = &body["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"];
                check(label == "wl", "the address does not carry its Cluster's name")
            })
            .answer(201, address("10.0.0.10", &[PROTECT_ADDRESS_FINALIZER])),
        status_ready(),
    ]);
    let mut world = World::new(client);
    with_pool(&world);
    // Found by name in the store: a Cluster that is missing would hold the claim back.
    world.clusters.apply_watcher_event(&Event::Apply(fixtures::cluster("wl")));
    let mut claim = fixtures::claim("c", "pool");
    claim.spec.cluster_name = Some("wl".into());

    super::reconcile(Arc::new(claim), world.ctx.clone()).await.expect("served");
    api.finish();
}

#[tokio::test]
async fn an_ipaddress_its_claim_never_named_is_deleted_when_another_holder_has_its_address() {
    // What a create delayed past its term leaves: the claim's IPAddress holds 10.0.0.12, which
    // the next leader handed to `other`, and the claim's status names no address.
    let (client, api) = MockApi::client(vec![
        protection_dropped(),
        Expect::new(Method::DELETE, addresses(Some("c")))
            .body(|body| {
                check(body["preconditions"]["uid"] == "addr-uid", "the delete is not bound to the object judged")
            })
            .answer(200, address("10.0.0.12", &[])),
    ]);
    let mut world = World::new(client);
    let pool = with_pool(&world);
    world.ctx.index.adopt(&pool, &HolderKey::new("ns", "other"), ip("10.0.0.12"), true).unwrap();
    let mut unpublished = address("10.0.0.12", &[PROTECT_ADDRESS_FINALIZER]);
    unpublished["metadata"]["uid"] = json!("addr-uid");
    unpublished["metadata"]["ownerReferences"] = json!([{
        "apiVersion": IPAM, "kind": "IPAddressClaim", "name": "c", "uid": "c-uid", "controller": true
    }]);
    world.addresses.apply(&Event::Apply(serde_json::from_value(unpublished).unwrap()));
    let mut claim = fixtures::claim("c", "pool");
    claim.metadata.finalizers = Some(vec![RELEASE_ADDRESS_FINALIZER.into()]);

    super::reconcile(Arc::new(claim), world.ctx.clone()).await.expect("the reconcile goes on");

    api.finish();
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), None, "the claim took nothing");
    assert_eq!(world.ctx.index.claim_hold(&pool, &HolderKey::new("ns", "other")), Some(ip("10.0.0.12")));
}
