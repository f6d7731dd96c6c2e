//! The checker against worlds made by hand: each rule finds what it is for, and a healthy world
//! passes.

use serde_json::{Value, json};

use super::*;
use crate::invariants::HAND_MADE_LABEL;
use crate::invariants::world::{Pool, PoolId};

const NS: &str = "team";

fn pool_ref(kind: &str, name: &str) -> Value {
    json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind, "name": name})
}

fn claim(name: &str, kind: &str, pool: &str) -> IPAddressClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"poolRef": pool_ref(kind, pool)},
        "status": {"addressRef": {"name": name}, "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("a claim")
}

fn address(name: &str, kind: &str, pool: &str, ip: &str) -> ferro_ipam::api::capi::IPAddress {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"claimRef": {"name": name}, "poolRef": pool_ref(kind, pool), "address": ip, "prefix": 24},
    }))
    .expect("an address")
}

fn pool(spec: Value, counts: (i64, i64, i64, i64)) -> Pool {
    let (total, used, free, out_of_range) = counts;
    Pool {
        labels: Default::default(),
        deleting: false,
        spec: serde_json::from_value(spec).expect("a spec"),
        status: Some(
            serde_json::from_value(
                json!({"ipAddresses": {"total": total, "used": used, "free": free, "outOfRange": out_of_range}}),
            )
            .expect("a status"),
        ),
    }
}

fn namespaced(name: &str) -> PoolId {
    PoolId::Namespaced { namespace: NS.to_owned(), name: name.to_owned() }
}

/// Pool `a` (10.0.0.1-4) with claims `x` and `y` holding .1 and .2, all consistent.
fn healthy() -> World {
    let mut world = World { namespaces: [NS.to_owned()].into(), ..World::default() };
    world.pools.insert(namespaced("a"), pool(json!({"addresses": ["10.0.0.1-10.0.0.4"], "prefix": 24}), (4, 2, 2, 0)));
    for (name, ip) in [("x", "10.0.0.1"), ("y", "10.0.0.2")] {
        world.claims.push(claim(name, "InClusterIPPool", "a"));
        world.addresses.push(address(name, "InClusterIPPool", "a", ip));
    }
    world
}

/// [`healthy`] and a second pool `b` of the namespace over `range`, whose claim `z` holds `ip`.
fn with_pool_b(range: &str, counts: (i64, i64, i64, i64), ip: &str) -> World {
    let mut world = healthy();
    world.pools.insert(namespaced("b"), pool(json!({"addresses": [range], "prefix": 24}), counts));
    world.claims.push(claim("z", "InClusterIPPool", "b"));
    world.addresses.push(address("z", "InClusterIPPool", "b", ip));
    world
}

fn findings(world: &World) -> Findings {
    super::findings(world, &Expected::default())
}

fn mentions(list: &[String], text: &str) -> bool {
    list.iter().any(|f| f.contains(text))
}

#[test]
fn a_consistent_world_passes() {
    assert_eq!(findings(&healthy()), Findings::default());
}

#[test]
fn one_address_in_two_overlapping_pools_of_a_namespace_is_fatal_at_once() {
    let world = with_pool_b("10.0.0.2-10.0.0.6", (5, 1, 4, 0), "10.0.0.2");
    let found = findings(&world);
    assert!(mentions(&found.fatal, "10.0.0.2 is held twice"), "{found:?}");
}

#[test]
fn a_global_pool_shares_addresses_with_every_namespace_but_namespaces_do_not_share() {
    let mut world = healthy();
    world.pools.insert(
        PoolId::Global { name: "g".into() },
        pool(json!({"addresses": ["10.0.0.9"], "prefix": 24}), (1, 1, 1, 1)),
    );
    let mut elsewhere = address("other", "InClusterIPPool", "a", "10.0.0.1");
    elsewhere.metadata.namespace = Some("elsewhere".into());
    world.addresses.push(elsewhere);
    assert!(findings(&world).fatal.is_empty(), "a namespaced pool of another namespace is independent");
    world.claims.push(claim("g", "GlobalInClusterIPPool", "g"));
    world.addresses.push(address("g", "GlobalInClusterIPPool", "g", "10.0.0.1"));
    let found = findings(&world);
    assert!(mentions(&found.fatal, "10.0.0.1 is held twice"), "{found:?}");
    assert!(mentions(&found.pending, "which GlobalInClusterIPPool g does not hand out"), "{found:?}");
}

#[test]
fn addresses_made_by_hand_may_collide_with_each_other_but_not_with_an_allocated_one() {
    let mut world = healthy();
    for name in ["hand-1", "hand-2"] {
        let mut by_hand = address(name, "InClusterIPPool", "a", "10.0.0.3");
        by_hand.metadata.labels = Some([(HAND_MADE_LABEL.to_owned(), "true".to_owned())].into());
        world.addresses.push(by_hand);
    }
    world.pools.insert(namespaced("a"), pool(json!({"addresses": ["10.0.0.1-10.0.0.4"], "prefix": 24}), (4, 4, 1, 0)));
    assert_eq!(findings(&world), Findings::default());
    world.addresses.last_mut().unwrap().spec.address = "10.0.0.2".into();
    assert!(mentions(&findings(&world).fatal, "10.0.0.2 is held twice"));
}

#[test]
fn an_annotation_naming_no_pool_kind_is_fatal_not_skipped() {
    let mut world = healthy();
    world.addresses[1].metadata.annotations =
        Some([("ferro-ipam.dev/allocated-from".to_owned(), "SomePool/a".to_owned())].into());
    assert!(mentions(&findings(&world).fatal, "names no pool of ours"));
}

#[test]
fn a_second_ipaddress_naming_a_claim_is_fatal() {
    let mut world = healthy();
    let mut second = address("x-again", "InClusterIPPool", "a", "10.0.0.3");
    second.spec.claim_ref.name = "x".into();
    world.addresses.push(second);
    let found = findings(&world);
    assert!(mentions(&found.fatal, "claim team/x has 2 IPAddresses"), "{found:?}");
}

#[test]
fn status_that_does_not_name_the_address_and_ready_claims_without_one_are_pending() {
    let mut world = healthy();
    world.claims[0].status.as_mut().unwrap().address_ref = None;
    world.claims.push(claim("ready-without", "InClusterIPPool", "a"));
    let found = findings(&world);
    assert!(found.fatal.is_empty(), "{found:?}");
    assert!(mentions(&found.pending, "claim team/x: status.addressRef is None"), "{found:?}");
    assert!(mentions(&found.pending, "claim team/ready-without is Ready but no IPAddress names it"), "{found:?}");
}

#[test]
fn an_address_without_its_claim_is_an_orphan() {
    let mut world = healthy();
    world.claims.remove(0);
    assert!(mentions(&findings(&world).pending, "IPAddress team/x has no claim (orphan)"));
}

#[test]
fn a_count_off_by_one_is_found_in_either_field() {
    for counts in [(5, 2, 3, 0), (4, 3, 2, 0), (4, 2, 1, 0), (4, 2, 2, 1)] {
        let mut world = healthy();
        world.pools.insert(namespaced("a"), pool(json!({"addresses": ["10.0.0.1-10.0.0.4"], "prefix": 24}), counts));
        let found = findings(&world);
        assert!(mentions(&found.pending, "the spec and objects say (4, 2, 2, 0)"), "{counts:?}: {found:?}");
    }
}

#[test]
fn overlapping_pools_may_report_fewer_free_addresses_by_what_the_other_holds() {
    let mut world = with_pool_b("10.0.0.3-10.0.0.6", (4, 1, 3, 0), "10.0.0.3");
    // `a` holds .1 .2 and may have skipped .3, which `b` holds: 2 or 1 free.
    for (free, fine) in [(2, true), (1, true), (0, false), (3, false)] {
        world.pools.get_mut(&namespaced("a")).unwrap().status.as_mut().unwrap().ip_addresses.as_mut().unwrap().free =
            free;
        let found = findings(&world);
        assert_eq!(found.is_empty(), fine, "free {free}: {found:?}");
    }
    // Per family, what it skipped shows as used.
    for (used, free, fine) in [("2", "2", true), ("3", "1", true), ("4", "0", false)] {
        let status = world.pools.get_mut(&namespaced("a")).unwrap().status.as_mut().unwrap();
        status.families = serde_json::from_value(
            json!([{"family": "IPv4", "total": "4", "used": used, "free": free, "outOfRange": "0"}]),
        )
        .unwrap();
        let found = findings(&world);
        assert_eq!(found.pending.iter().any(|f| f.contains("status.families")), !fine, "{used}/{free}: {found:?}");
    }
}

#[test]
fn an_address_outside_its_pool_is_found_unless_expected_and_counts_out_of_range() {
    let mut world = healthy();
    world.addresses[1].spec.address = "10.0.0.9".into();
    world.pools.insert(namespaced("a"), pool(json!({"addresses": ["10.0.0.1-10.0.0.4"], "prefix": 24}), (4, 2, 3, 1)));
    let found = findings(&world);
    assert_eq!(found.pending, ["IPAddress team/y holds 10.0.0.9, which InClusterIPPool team/a does not hand out"]);
    let expected = Expected { out_of_range: ["10.0.0.9".parse().unwrap()].into() };
    assert_eq!(super::findings(&world, &expected), Findings::default());
}

#[test]
fn a_purpose_claims_address_names_a_pool_labelled_for_the_purpose() {
    let mut world = healthy();
    let mut vips = pool(json!({"addresses": ["10.0.1.1-10.0.1.4"], "prefix": 24}), (4, 1, 3, 0));
    vips.labels.insert("cluster-api-vips".into(), "true".into());
    world.pools.insert(namespaced("vips"), vips);
    world.claims.push(claim("vip", "GlobalInClusterIPPool", "cluster-api-vips"));
    let mut address = address("vip", "GlobalInClusterIPPool", "cluster-api-vips", "10.0.1.1");
    address.metadata.annotations =
        Some([("ferro-ipam.dev/allocated-from".to_owned(), "InClusterIPPool/vips".to_owned())].into());
    world.addresses.push(address);
    assert_eq!(findings(&world), Findings::default());
    world.pools.get_mut(&namespaced("vips")).unwrap().labels.clear();
    assert!(mentions(&findings(&world).pending, "is no pool labelled cluster-api-vips"));
}

#[test]
fn a_pool_the_checker_finds_invalid_must_not_report_counts() {
    let mut world = healthy();
    world.pools.insert(namespaced("a"), pool(json!({"addresses": ["10.0.0.4-10.0.0.1"], "prefix": 24}), (4, 2, 2, 0)));
    assert!(mentions(&findings(&world).pending, "the spec describes no valid pool"));
    world.pools.get_mut(&namespaced("a")).unwrap().status = None;
    assert_eq!(findings(&world), Findings::default());
}
