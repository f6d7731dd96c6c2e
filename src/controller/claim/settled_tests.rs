//! `settled`: which bound claims may wait for a background verification at start-up, and the
//! hold it leaves in the index. Each inconsistency between the claim, its `IPAddress` and the
//! index sends the claim to a reconcile instead.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::Event;
use serde_json::json;

use crate::api::capi::{IPAddress, IPAddressClaim};
use crate::api::keys::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use crate::contract::status::{self, Readiness};
use crate::controller::mock_api::{MockApi, World};
use crate::fixtures::{self, holder, ip};
use crate::index::{HoldKind, PoolFacts, PoolKey};

use super::settled;

const IP: &str = "10.0.0.12";

/// A restarted instance: the pool known, the address's object hold fed, nothing adopted yet.
fn restarted() -> (World, PoolKey) {
    let (client, _api) = MockApi::client(vec![]);
    let world = World::new(client);
    let key = PoolKey::in_cluster("ns", "pool");
    let spec: crate::api::IPPoolSpec =
        serde_json::from_value(json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"}))
            .expect("a pool spec");
    let facts = PoolFacts { uid: "pool-uid".into(), protected: true, ..PoolFacts::default() };
    world.ctx.index.upsert_pool(&key, &spec, facts, &[]);
    world.ctx.index.set_hold(&key, &holder("c"), HoldKind::Object, Some(ip(IP)));
    (world, key)
}

/// The claim as a provider leaves it: the finalizer on, the status naming `c` and `Ready`.
fn bound_claim(world: &World) -> IPAddressClaim {
    let mut claim = fixtures::claim("c", "pool");
    claim.metadata.finalizers = Some(vec![RELEASE_ADDRESS_FINALIZER.to_owned()]);
    let patch =
        status::patch(world.ctx.kube.capi, &claim, Some("c"), &Readiness::allocated(IP), world.ctx.kube.clock.now())
            .expect("a fresh claim needs its status");
    claim.status = Some(serde_json::from_value(patch["status"].clone()).expect("a claim status"));
    claim
}

fn address() -> IPAddress {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7", "finalizers": [PROTECT_ADDRESS_FINALIZER],
            "ownerReferences": [{"apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim", "name": "c",
                "uid": "c-uid", "controller": true}]},
        "spec": {"claimRef": {"name": "c"}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"},
                 "address": IP, "prefix": 24, "gateway": "10.0.0.1"}
    }))
    .expect("an address")
}

fn with_address(world: &mut World, address: IPAddress) {
    world.addresses.apply(&Event::Apply(address));
}

#[tokio::test]
async fn a_bound_claim_whose_address_the_index_holds_is_settled_and_the_claim_takes_the_hold() {
    let (mut world, pool) = restarted();
    with_address(&mut world, address());
    let claim = bound_claim(&world);
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), None);
    assert!(settled(Arc::new(claim), &world.ctx));
    assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), Some(ip(IP)), "adopted as the reconcile would");
}

#[tokio::test]
async fn any_inconsistency_sends_the_claim_to_a_reconcile() {
    type Spoil = fn(&mut IPAddressClaim, &mut IPAddress);
    let cases: [(&str, Spoil); 8] = [
        ("no finalizer", |c, _| c.metadata.finalizers = None),
        ("no status", |c, _| c.status = None),
        ("being deleted", |c, _| c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))),
        ("status names another address", |c, _| {
            if let Some(r) = c.status.as_mut().and_then(|s| s.address_ref.as_mut()) {
                r.name = "other".into();
            }
        }),
        ("address of another pool", |_, a| a.spec.pool_ref.name = "elsewhere".into()),
        ("address not owned by the claim", |_, a| a.metadata.owner_references = None),
        ("address not protected", |_, a| a.metadata.finalizers = None),
        ("address being deleted", |_, a| {
            a.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
        }),
    ];
    for (what, spoil) in cases {
        let (mut world, pool) = restarted();
        let (mut claim, mut object) = (bound_claim(&world), address());
        spoil(&mut claim, &mut object);
        with_address(&mut world, object);
        assert!(!settled(Arc::new(claim), &world.ctx), "{what}");
        assert_eq!(world.ctx.index.claim_hold(&pool, &holder("c")), None, "{what}: nothing adopted");
    }
}

#[tokio::test]
async fn a_claim_whose_address_the_index_does_not_hold_or_that_has_none_is_not_settled() {
    let (mut world, pool) = restarted();
    let claim = bound_claim(&world);
    assert!(!settled(Arc::new(claim.clone()), &world.ctx), "no IPAddress in the cache");
    world.ctx.index.set_hold(&pool, &holder("c"), HoldKind::Object, None);
    with_address(&mut world, address());
    assert!(!settled(Arc::new(claim), &world.ctx), "the index does not hold the address");
}
