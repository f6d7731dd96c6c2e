//! The pool reconcile against a scripted API server: deletion protection put on and lifted,
//! the status with its counts, the Event of an invalid pool, and a conflict on the finalizer.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use crate::api::InClusterIPPool;
use crate::api::keys::PROTECT_POOL_FINALIZER;
use crate::controller::mock_api::{Expect, MockApi, World, path};
use crate::feed::PoolObject;
use crate::fixtures::{check, claim, finalizers};
use crate::index::{HoldKind, HolderKey};

const POOLS: &str = "ipam.cluster.x-k8s.io/v1alpha2";

fn pool_path(sub: &str) -> String {
    format!("{}{sub}", path(POOLS, "ns", "inclusterippools", Some("pool")))
}

/// `ns/pool` with `addresses`, its finalizers, and a deletion time when `deleting`.
fn pool(addresses: &[&str], finalizers: &[&str], deleting: bool) -> InClusterIPPool {
    let mut metadata = json!({"name": "pool", "namespace": "ns", "uid": "pool-uid", "resourceVersion": "4",
        "generation": 1, "finalizers": finalizers});
    if deleting {
        metadata["deletionTimestamp"] = json!("2026-12-03T10:00:00Z");
    }
    serde_json::from_value(json!({"apiVersion": POOLS, "kind": "InClusterIPPool", "metadata": metadata,
        "spec": {"addresses": addresses, "prefix": 24, "gateway": "10.0.0.1"}}))
    .expect("a pool")
}

/// The index as the watches would leave it: the pool, and `held` IPAddress objects in it.
fn world_with(pool: &InClusterIPPool, held: &[(&str, &str)], client: kube::Client) -> World {
    let world = World::new(client);
    world.ctx.index.upsert_pool(&pool.key(), pool.spec(), pool.facts(), &[]);
    for (name, ip) in held {
        world.ctx.index.set_hold(&pool.key(), &HolderKey::new("ns", name), HoldKind::Object, ip.parse().ok());
    }
    world
}

/// The API server's answer to a write: the pool object (its content does not matter here).
fn answer() -> Value {
    serde_json::to_value(pool(&["10.0.0.10-10.0.0.20"], &[PROTECT_POOL_FINALIZER], false)).unwrap()
}

/// A status write with `Ready=False`, `reason` and a message holding `says`, then a warning
/// Event of that reason.
fn not_ready_with_event(reason: &'static str, says: &'static str) -> Vec<Expect> {
    vec![
        Expect::new(Method::PATCH, pool_path("/status"))
            .body(move |body| {
                let ready = &body["status"]["conditions"][0];
                check(ready["status"] == "False" && ready["reason"] == reason, "not the expected reason")?;
                check(ready["message"].as_str().is_some_and(|m| m.contains(says)), "the message misses the point")
            })
            .answer(200, answer()),
        Expect::new(Method::POST, "/apis/events.k8s.io/v1/namespaces/ns/events")
            .body(move |body| check(body["type"] == "Warning" && body["reason"] == reason, "no warning Event"))
            .answer(201, json!({})),
    ]
}

#[tokio::test]
async fn a_new_pool_is_protected_first_and_nothing_else_is_written() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, pool_path(""))
            .body(|body| {
                check(finalizers(body).iter().any(|f| f == PROTECT_POOL_FINALIZER), "no protection finalizer")?;
                check(body["metadata"]["resourceVersion"] == "4", "not guarded by the version acted on")
            })
            .answer(200, answer()),
    ]);
    let pool = pool(&["10.0.0.10-10.0.0.20"], &[], false);
    let world = world_with(&pool, &[], client);

    super::reconcile(Arc::new(pool), world.ctx.clone()).await.expect("protected");
    api.finish();
}

#[tokio::test]
async fn a_protected_pool_gets_exact_counts_and_a_ready_condition() {
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, pool_path("/status"))
            .body(|body| {
                let counts = &body["status"]["ipAddresses"];
                check(counts["total"] == 11 && counts["used"] == 2 && counts["free"] == 9, "wrong counts")?;
                let ready = &body["status"]["conditions"][0];
                check(ready["type"] == "Ready" && ready["status"] == "True", "not Ready=True")?;
                check(ready["reason"] == "Valid", "not Valid: the addresses' claims were not found")
            })
            .answer(200, answer()),
    ]);
    let pool = pool(&["10.0.0.10-10.0.0.20"], &[PROTECT_POOL_FINALIZER], false);
    let world = world_with(&pool, &[("a", "10.0.0.10"), ("b", "10.0.0.11")], client);
    // The claims of both addresses exist, so neither address counts as unclaimed.
    let _ = world.claims.apply(&Event::Init);
    for name in ["a", "b"] {
        let _ = world.claims.apply(&Event::InitApply(claim(name, "pool")));
    }
    let _ = world.claims.apply(&Event::InitDone);

    super::reconcile(Arc::new(pool), world.ctx.clone()).await.expect("status written");
    api.finish();
}

#[tokio::test]
async fn an_invalid_pool_turns_not_ready_with_a_warning_event() {
    let (client, api) = MockApi::client(not_ready_with_event("InvalidSpec", "fd00::20-fd00::10"));
    let pool = pool(&["fd00::20-fd00::10"], &[PROTECT_POOL_FINALIZER], false);
    let world = world_with(&pool, &[], client);

    super::reconcile(Arc::new(pool), world.ctx.clone()).await.expect("reported");
    api.finish();
}

#[tokio::test]
async fn a_deleted_pool_keeps_its_protection_while_addresses_reference_it_and_lifts_it_after() {
    let pool = pool(&["10.0.0.10-10.0.0.20"], &[PROTECT_POOL_FINALIZER], true);
    // Still referenced: only the status changes, saying why the pool stays.
    let (client, api) = MockApi::client(not_ready_with_event("Deleting", " 1 IPAddresses"));
    let world = world_with(&pool, &[("a", "10.0.0.10")], client);
    super::reconcile(Arc::new(pool.clone()), world.ctx.clone()).await.expect("kept");
    api.finish();

    // Nothing references it any more: the finalizer goes.
    let (client, api) = MockApi::client(vec![
        Expect::new(Method::PATCH, pool_path(""))
            .body(|body| check(!finalizers(body).iter().any(|f| f == PROTECT_POOL_FINALIZER), "the protection stays"))
            .answer(200, answer()),
    ]);
    let world = world_with(&pool, &[], client);
    super::reconcile(Arc::new(pool), world.ctx.clone()).await.expect("lifted");
    api.finish();
}

#[tokio::test]
async fn a_conflict_on_the_finalizer_is_an_expected_retry() {
    let (client, api) = MockApi::client(vec![Expect::new(Method::PATCH, pool_path("")).refuse(409, "Conflict")]);
    let pool = pool(&["10.0.0.10-10.0.0.20"], &[], false);
    let world = world_with(&pool, &[], client);

    let error = super::reconcile(Arc::new(pool), world.ctx.clone()).await.unwrap_err();
    api.finish();
    assert_eq!(error.metric_label(), "conflict");
    assert_eq!(error.retry_after(), std::time::Duration::from_millis(200));
    assert!(!error.to_string().contains("Status {"), "the message carries a debug struct: {error}");
}

/// The `used` count the pool's metrics show, for IPv4.
fn used_in_metrics(world: &World) -> Option<String> {
    let text = world.ctx.report.metrics.encode();
    let line = text.lines().find(|l| l.starts_with("ferro_ipam_pool_addresses") && l.contains("state=\"used\""))?;
    line.rsplit(' ').next().map(str::to_owned)
}

#[tokio::test]
async fn a_pool_written_just_now_is_not_reported_again_until_its_write_interval_has_passed() {
    let (client, api) = MockApi::client(vec![Expect::new(Method::PATCH, pool_path("/status")).answer(200, answer())]);
    let pool = pool(&["10.0.0.10-10.0.0.20"], &[PROTECT_POOL_FINALIZER], false);
    let mut world = world_with(&pool, &[("a", "10.0.0.10")], client);
    let _ = world.claims.apply(&Event::Init);
    for name in ["a", "b"] {
        let _ = world.claims.apply(&Event::InitApply(claim(name, "pool")));
    }
    let _ = world.claims.apply(&Event::InitDone);
    // Writes at least 500 ms apart, as deployed.
    Arc::get_mut(&mut world.ctx).expect("not shared yet").writes.pools =
        crate::controller::write_throttle::WriteThrottle::new(Duration::from_millis(500), Duration::from_secs(5), 20);
    super::reconcile(Arc::new(pool.clone()), world.ctx.clone()).await.expect("status written");
    api.finish();
    assert_eq!(used_in_metrics(&world).as_deref(), Some("1.0"));

    // One more address: the wake-up that follows finds the pool written a moment ago. It waits
    // out the interval without walking the pool's holders (the metrics are not touched) and
    // without a request (the script holds none).
    world.ctx.index.set_hold(&pool.key(), &HolderKey::new("ns", "b"), HoldKind::Object, "10.0.0.11".parse().ok());
    let action = super::reconcile(Arc::new(pool), world.ctx.clone()).await.expect("deferred");
    api.finish();
    assert_eq!(api.sent().len(), 1, "only the first status write: {:?}", api.sent());
    let wait = format!("{action:?}");
    assert!(wait.contains("requeue_after: Some("), "not requeued: {wait}");
    assert_eq!(used_in_metrics(&world).as_deref(), Some("1.0"), "the report was computed anyway");
}
