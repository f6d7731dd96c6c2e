//! The analysis on synthetic clusters: no API server.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::findings::{ConflictKind, Findings, PrefixPools};
use super::{Inventory, analyse, text};
use crate::api::capi::{IPAddress, IPAddressClaim, LocalReference};
use crate::api::keys::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};
use crate::api::{CapiVersion, GlobalInClusterIPPool, InClusterIPPool};
use crate::fixtures::{claim, cluster};

fn pool(name: &str, spec: Value) -> InClusterIPPool {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": name, "namespace": "ns", "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"]},
        "spec": spec,
    }))
    .expect("a pool")
}

fn small_pool(name: &str) -> InClusterIPPool {
    pool(name, json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"}))
}

/// An `IPAddress` of claim `name` in pool `pool` of kind `kind`.
fn address_of(name: &str, kind: &str, pool: &str, ip: &str) -> IPAddress {
    serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind, "name": pool},
                 "address": ip, "prefix": 24},
    }))
    .expect("an address")
}

fn address(name: &str, pool: &str, ip: &str) -> IPAddress {
    address_of(name, "InClusterIPPool", pool, ip)
}

/// A claim its `IPAddress` already serves (status.addressRef names it).
fn served(name: &str, pool: &str) -> IPAddressClaim {
    let mut c = claim(name, pool);
    c.status = Some(crate::api::capi::ClaimStatus {
        address_ref: Some(LocalReference { name: name.into() }),
        conditions: Vec::new(),
    });
    c
}

fn inventory(pools: Vec<InClusterIPPool>, addresses: Vec<IPAddress>, claims: Vec<IPAddressClaim>) -> Inventory {
    Inventory { in_cluster_pools: pools, addresses, claims, ..Inventory::empty(CapiVersion::V1Beta2) }
}

fn findings(inventory: &Inventory) -> Findings {
    analyse(inventory, Timestamp::from_second(1_700_000_000).expect("a time"))
}

fn kinds(findings: &Findings) -> Vec<ConflictKind> {
    findings.conflicts.iter().map(|c| c.kind).collect()
}

#[test]
fn a_consistent_cluster_is_clean_and_every_served_claim_keeps_its_address() {
    let inv = inventory(
        vec![small_pool("p")],
        vec![address("a", "p", "10.0.0.12"), address("b", "p", "10.0.0.10")],
        vec![served("a", "p"), served("b", "p")],
    );
    let f = findings(&inv);
    assert!(f.clean, "{}", text(&f));
    assert_eq!((f.summary.pools, f.summary.addresses, f.summary.adopted, f.summary.conflicts), (1, 2, 2, 0));
    let adopted: Vec<(&str, &str)> =
        f.pools[0].adopted.iter().map(|a| (a.claim.as_str(), a.address.as_str())).collect();
    assert_eq!(adopted, [("ns/b", "10.0.0.10"), ("ns/a", "10.0.0.12")], "lowest first");
    assert_eq!((f.pools[0].total.as_str(), f.pools[0].free.as_str()), ("11", "9"));
}

#[test]
fn the_same_address_twice_in_a_pool_is_one_duplicate_conflict_naming_both_objects() {
    let inv = inventory(
        vec![small_pool("p")],
        vec![address("a", "p", "10.0.0.10"), address("copy", "p", "10.0.0.10")],
        vec![served("a", "p")],
    );
    let f = findings(&inv);
    assert!(!f.clean);
    assert_eq!(kinds(&f), [ConflictKind::Duplicate], "reported once, not again as a refused adoption");
    assert_eq!(f.conflicts[0].objects, ["ns/a", "ns/copy"]);
    assert_eq!(f.conflicts[0].address.as_deref(), Some("10.0.0.10"));
    assert_eq!(f.unclaimed, ["ns/copy"]);
    assert_eq!(f.summary.adopted, 0, "the controller would not adopt an address another IPAddress holds");
}

#[test]
fn an_address_outside_its_pool_or_not_an_address_is_reported() {
    let inv = inventory(
        vec![small_pool("p")],
        vec![address("a", "p", "10.0.0.99"), address("b", "p", "ten")],
        vec![served("a", "p"), served("b", "p")],
    );
    let f = findings(&inv);
    assert_eq!(kinds(&f), [ConflictKind::OutsidePool, ConflictKind::OutsidePool]);
    let addresses: Vec<_> = f.conflicts.iter().filter_map(|c| c.address.as_deref()).collect();
    assert!(addresses.contains(&"10.0.0.99") && addresses.contains(&"ten"), "{addresses:?}");
    assert_eq!(f.summary.adopted, 1, "a claim served from a shrunk pool keeps its address");
}

#[test]
fn addresses_of_a_missing_pool_are_foreign_and_other_providers_addresses_are_left_alone() {
    let inv = inventory(
        vec![small_pool("p")],
        vec![address("a", "gone", "10.0.0.10"), address_of("m", "IPPool", "metal", "10.0.0.10")],
        vec![],
    );
    let f = findings(&inv);
    assert_eq!(kinds(&f), [ConflictKind::Foreign]);
    assert!(f.conflicts[0].message.contains("InClusterIPPool ns/gone does not exist"), "{}", f.conflicts[0].message);
    assert_eq!(f.features.other_addresses, 1);
    assert_eq!(f.summary.addresses, 1);
}

#[test]
fn the_address_count_holds_the_sub_prefixes_of_prefix_pools() {
    let sub_prefix = address_of("s", "InClusterPrefixPool", "v6", "fd00:0:0:100::");
    let inv = inventory(vec![small_pool("p")], vec![address("a", "p", "10.0.0.10"), sub_prefix], vec![]);
    let f = findings(&inv);
    assert_eq!((f.summary.addresses, f.features.other_addresses), (2, 0));
}

#[test]
fn two_addresses_naming_one_claim_are_claimed_twice() {
    let mut second = address("b", "p", "10.0.0.11");
    second.spec.claim_ref.name = "a".into();
    let inv = inventory(vec![small_pool("p")], vec![address("a", "p", "10.0.0.10"), second], vec![served("a", "p")]);
    let f = findings(&inv);
    assert_eq!(kinds(&f), [ConflictKind::ClaimedTwice]);
    assert_eq!(f.conflicts[0].objects, ["ns/a", "ns/b"]);
}

#[test]
fn new_claims_get_the_lowest_free_addresses_and_the_rest_wait_for_room() {
    let one = pool("one", json!({"addresses": ["10.0.0.10-10.0.0.11"], "prefix": 24}));
    let mut claims = vec![served("held", "one"), claim("new", "one"), claim("late", "one")];
    claims[2].metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::from_second(2_000_000_000).unwrap()));
    claims[1].metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::from_second(1_000_000_000).unwrap()));
    let f = findings(&inventory(vec![one], vec![address("held", "one", "10.0.0.10")], claims));
    assert!(f.clean, "waiting is no conflict");
    assert_eq!(f.to_allocate.len(), 1);
    assert_eq!((f.to_allocate[0].claim.as_str(), f.to_allocate[0].address.as_deref()), ("ns/new", Some("10.0.0.11")));
    assert_eq!(f.waiting.len(), 1);
    assert_eq!((f.waiting[0].claim.as_str(), f.waiting[0].reason.as_str()), ("ns/late", "PoolExhausted"));
}

#[test]
fn claims_wait_with_the_controllers_reason() {
    let mut paused_pool = small_pool("paused");
    paused_pool.metadata.annotations = Some([(PAUSED_ANNOTATION.to_owned(), String::new())].into());
    let v6_backwards = pool("backwards", json!({"addresses": ["fd00::9-fd00::2"], "prefix": 64}));
    let mut paused_cluster = cluster("wl");
    paused_cluster.spec.paused = Some(true);
    let mut on_cluster = claim("on-paused-cluster", "p");
    on_cluster.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_owned(), "wl".to_owned())].into());
    let mut on_missing = claim("on-missing-cluster", "p");
    on_missing.spec.cluster_name = Some("nowhere".into());
    let mut inv = inventory(
        vec![small_pool("p"), paused_pool, v6_backwards],
        vec![],
        vec![
            claim("in-paused", "paused"),
            claim("no-pool", "absent"),
            claim("bad-pool", "backwards"),
            on_cluster,
            on_missing,
        ],
    );
    inv.clusters = Some(vec![paused_cluster]);
    let f = findings(&inv);
    let why = |name: &str| {
        let w = f.waiting.iter().find(|w| w.claim == format!("ns/{name}")).unwrap_or_else(|| panic!("{name} waits"));
        (w.reason.clone(), w.message.clone())
    };
    assert_eq!(why("in-paused"), ("Held".into(), "its pool is paused".into()));
    assert_eq!(why("no-pool").0, "PoolNotReady");
    assert!(why("no-pool").1.contains("not found"));
    assert_eq!(why("bad-pool").0, "PoolNotReady");
    assert!(why("bad-pool").1.contains("fd00::9-fd00::2"), "{}", why("bad-pool").1);
    assert_eq!(why("on-paused-cluster"), ("Held".into(), "Cluster wl is paused".into()));
    assert_eq!(why("on-missing-cluster"), ("Held".into(), "Cluster nowhere does not exist".into()));
    assert_eq!(f.summary.invalid_pools, 1, "the backwards IPv6 range makes its pool invalid");
    assert!(!f.clean);
}

#[test]
fn a_pool_the_crd_would_refuse_is_named_with_the_rules_message() {
    // Stored under the in-cluster provider's CRD, which has no such rule.
    let backwards = pool("old", json!({"addresses": ["10.0.0.20-10.0.0.10"], "prefix": 24}));
    let f = findings(&inventory(vec![backwards, small_pool("fine")], vec![], vec![]));
    let old = f.pools.iter().find(|p| p.name == "old").expect("the pool is listed");
    assert!(
        old.refused.iter().any(|m| m.contains("spec.addresses[0]") && m.contains("ends before it starts")),
        "{old:?}"
    );
    assert!(f.pools.iter().find(|p| p.name == "fine").is_some_and(|p| p.refused.is_empty() && p.invalid.is_none()));
    assert_eq!(f.summary.invalid_pools, 1);
    assert!(!f.clean);
}

#[test]
fn deleting_claims_are_released_not_waiting() {
    let mut going = served("going", "p");
    going.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH));
    let f = findings(&inventory(vec![small_pool("p")], vec![address("going", "p", "10.0.0.10")], vec![going]));
    assert_eq!((f.summary.releasing, f.summary.waiting, f.summary.adopted), (1, 0, 0));
    assert!(f.clean);
}

#[test]
fn features_in_use_are_counted() {
    let mut labelled = small_pool("vips");
    labelled.metadata.labels = Some([("cluster-api-vips".to_owned(), "true".to_owned())].into());
    let dual = pool(
        "dual",
        json!({"addresses": ["10.1.0.10"], "prefix": 24, "dualStack": {"addresses": ["fd00::10"], "prefix": 64}}),
    );
    let global = GlobalInClusterIPPool::new("g", small_pool("g").spec);
    let mut inv = inventory(vec![labelled, dual], vec![], vec![claim("vip", "cluster-api-vips")]);
    inv.global_pools = vec![global];
    inv.prefix_pools = PrefixPools { served: true, in_cluster: 2, global: 1 };
    let f = findings(&inv);
    assert_eq!((f.features.dual_stack_pools, f.features.purpose_pools, f.features.purpose_claims), (1, 1, 1));
    assert_eq!(f.features.prefix_pools, PrefixPools { served: true, in_cluster: 2, global: 1 });
    assert_eq!(f.summary.pools, 3);
    assert_eq!(f.to_allocate[0].pool, None, "a purpose claim's pool is chosen when ferro-ipam runs");
}

#[test]
fn the_json_shape_has_the_documented_names() {
    let inv = inventory(
        vec![small_pool("p")],
        vec![address("a", "p", "10.0.0.10"), address("copy", "p", "10.0.0.10")],
        vec![served("a", "p")],
    );
    let json = serde_json::to_value(findings(&inv)).expect("findings serialize");
    assert_eq!(json["formatVersion"], 1);
    assert_eq!(json["clean"], false);
    assert_eq!(json["capiVersion"], "v1beta2");
    for key in [
        "pools",
        "invalidPools",
        "addresses",
        "adopted",
        "conflicts",
        "waiting",
        "toAllocate",
        "releasing",
        "unclaimed",
        "unreadable",
    ] {
        assert!(json["summary"][key].is_u64(), "summary.{key} in {}", json["summary"]);
    }
    assert_eq!(json["conflicts"][0]["kind"], "duplicate");
    for kind in [
        ConflictKind::Duplicate,
        ConflictKind::OutsidePool,
        ConflictKind::Foreign,
        ConflictKind::ClaimedTwice,
        ConflictKind::NotAdoptable,
    ] {
        assert_eq!(
            serde_json::to_value(kind).expect("a kind serializes"),
            kind.as_str(),
            "the report names it as JSON does"
        );
    }
    assert_eq!(json["pools"][0]["kind"], "InClusterIPPool");
    assert_eq!(json["features"]["prefixPools"]["served"], false);
}

#[test]
fn odd_objects_do_not_panic_the_analysis() {
    let mut nameless = claim("", "p");
    nameless.metadata.namespace = None;
    let inv = inventory(
        vec![
            pool("neg", json!({"addresses": ["10.0.0.1"], "prefix": -1})),
            pool("empty", json!({"addresses": [], "prefix": 0})),
        ],
        vec![address("", "neg", ""), address("x", "empty", "::"), address_of("y", "", "", "10.0.0.1")],
        vec![nameless, claim("x", "empty"), claim("z", "neg")],
    );
    let f = findings(&inv);
    assert!(!f.clean);
    assert!(!text(&f).is_empty());
}

#[test]
fn a_claims_address_recorded_for_another_claim_is_not_adoptable() {
    let mut foreign = address("c", "p", "10.0.0.10");
    foreign.spec.claim_ref.name = "other".into();
    let f = findings(&inventory(vec![small_pool("p")], vec![foreign], vec![claim("c", "p")]));
    assert_eq!(kinds(&f), [ConflictKind::NotAdoptable]);
    assert!(f.conflicts[0].message.contains("belongs to claim \"other\""), "{}", f.conflicts[0].message);
    assert_eq!((f.summary.adopted, f.summary.to_allocate), (0, 0), "the claim is not served from another's address");
}

#[test]
fn an_unserved_claims_address_on_the_gateway_is_not_adopted() {
    let pool = pool("gw", json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "gateway": "10.0.0.1"}));
    let f = findings(&inventory(vec![pool], vec![address("c", "gw", "10.0.0.1")], vec![claim("c", "gw")]));
    let refused = f.conflicts.iter().find(|c| c.kind == ConflictKind::NotAdoptable).expect("refused");
    assert!(refused.message.contains("gateway"), "{}", refused.message);
    assert_eq!(f.summary.adopted, 0);
}

#[test]
fn a_reserved_address_another_claim_holds_is_reported_and_its_claim_waits() {
    let reserved = pool(
        "r",
        json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24,
               "reservations": [{"address": "10.0.0.12", "claimName": "vm-0"}, {"address": "10.0.0.13", "claimName": "vm-1"}]}),
    );
    let inv = inventory(
        vec![reserved],
        vec![address("a", "r", "10.0.0.12"), address("vm-1", "r", "10.0.0.13")],
        vec![served("a", "r"), served("vm-1", "r"), claim("vm-0", "r")],
    );
    let f = findings(&inv);
    assert_eq!(kinds(&f), [ConflictKind::ReservationHeld], "vm-1 holding its own is fine");
    let conflict = &f.conflicts[0];
    assert_eq!(
        (conflict.address.as_deref(), conflict.objects.as_slice()),
        (Some("10.0.0.12"), ["ns/a".to_owned()].as_slice())
    );
    assert!(
        conflict.message.contains("reserved for claim vm-0 (spec.reservations[0]) but ns/a holds it"),
        "{}",
        conflict.message
    );
    assert!(!f.clean);
    let waiting = f.waiting.iter().find(|w| w.claim == "ns/vm-0").expect("vm-0 waits");
    assert!(waiting.message.contains("reserved for this claim"), "{}", waiting.message);
}

#[test]
fn a_claim_of_a_namespace_a_global_pools_selector_leaves_out_waits_with_its_reason() {
    let global: GlobalInClusterIPPool = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": "g", "finalizers": ["ipam.cluster.x-k8s.io/ProtectPool"]},
        "spec": {"addresses": ["10.8.0.1-10.8.0.5"], "prefix": 24,
                 "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}},
    }))
    .expect("a global pool");
    let mut c = claim("c", "g");
    c.spec.pool_ref.kind = "GlobalInClusterIPPool".into();
    let mut inv = Inventory { global_pools: vec![global], ..inventory(vec![], vec![], vec![c]) };
    let waiting = |inv: &Inventory| findings(inv).waiting.into_iter().find(|w| w.claim == "ns/c");
    let unlisted = waiting(&inv).expect("waits while its namespace is unknown");
    assert_eq!(unlisted.reason, "Held", "never refused for a namespace not listed");
    inv.namespaces.insert("ns".into(), Default::default());
    let refused = waiting(&inv).expect("waits");
    assert_eq!(refused.reason, "NamespaceNotSelected");
    assert!(refused.message.starts_with("GlobalInClusterIPPool g: "), "{}", refused.message);
    inv.namespaces.insert("ns".into(), [("team".to_owned(), "x".to_owned())].into());
    assert!(waiting(&inv).is_none(), "served once the namespace is labelled");
}
