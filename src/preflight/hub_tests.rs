//! Preflight on a hub (its granted blocks are used) and on a spoke (its blocks are not known
//! here): synthetic inventories, no API server.

use k8s_openapi::jiff::Timestamp;

use super::findings::{ConflictKind, Findings};
use super::gather::Inventory;
use super::hub_fixtures::{block, hub, hub_claim, spoke, spoke_address, spoke_claim};
use super::spokes::NOT_KNOWN;
use super::{analyse, text};

fn findings(inventory: &Inventory) -> Findings {
    analyse(inventory, Timestamp::from_second(1_700_000_000).expect("a time"))
}

#[test]
fn a_hubs_granted_blocks_are_never_handed_to_its_own_claims() {
    let blocks = vec![
        block("spoke-east", "b-0", 16, Some("10.0.0.0/28")),
        block("spoke-east", "b-1", 16, Some("10.0.0.16/28")),
        // Asked for, not granted: it holds nothing.
        block("spoke-west", "b-2", 16, None),
    ];
    let f = findings(&Inventory { claims: vec![hub_claim("c")], ..hub(blocks) });
    let given: Vec<(&str, Option<&str>)> =
        f.to_allocate.iter().map(|n| (n.claim.as_str(), n.address.as_deref())).collect();
    assert_eq!(given, [("ns/c", Some("10.0.0.32"))], "the lowest address outside both granted blocks");
    let pool = &f.pools[0];
    assert_eq!((pool.total.as_str(), pool.free.as_str()), ("191", "169"), "10-31 are leased");
    assert!(pool.hub.is_none(), "a hub's pool is no spoke pool");
    assert!(f.clean, "{}", text(&f));
}

#[test]
fn a_spoke_pools_new_claims_are_not_told_to_wait_and_its_addresses_are_not_outside_it() {
    let inv = spoke(
        vec![spoke_address("a", "10.0.0.50"), spoke_address("b", "10.0.0.250")],
        vec![spoke_claim("a", false), spoke_claim("b", true), spoke_claim("c", false)],
    );
    let f = findings(&inv);
    assert!(f.waiting.is_empty(), "its blocks, not known here, decide: {:?}", f.waiting);
    assert!(f.to_allocate.is_empty(), "{:?}", f.to_allocate);
    let claims: Vec<&str> = f.spoke_claims.iter().map(|c| c.claim.as_str()).collect();
    assert_eq!(claims, ["ns/c"]);
    let note = &f.spoke_claims[0].note;
    assert!(
        note.starts_with("a spoke pool of the hub's GlobalInClusterIPPool shared (hub namespace spoke-east)")
            && note.ends_with(NOT_KNOWN),
        "{note}"
    );
    assert_eq!(f.summary.spoke_claims, 1);
    // An address its written spec allows is taken to be in a block; one outside it is not.
    let conflicts: Vec<(ConflictKind, Option<&str>)> =
        f.conflicts.iter().map(|c| (c.kind, c.address.as_deref())).collect();
    assert_eq!(conflicts, [(ConflictKind::OutsidePool, Some("10.0.0.250"))]);
    let adopted: Vec<&str> = f.pools[0].adopted.iter().map(|a| a.address.as_str()).collect();
    assert_eq!(
        adopted,
        ["10.0.0.50", "10.0.0.250"],
        "an unbound claim's address in the spoke pool's ranges is adopted"
    );
    assert!(f.pools[0].hub.as_deref().is_some_and(|h| h.ends_with(NOT_KNOWN)), "{:?}", f.pools[0]);
    let report = text(&f);
    assert!(
        report.contains(&format!(
            "Claims of spoke pools, {NOT_KNOWN}: 1\n  ns/c: InClusterIPPool ns/nodes, a spoke pool"
        )),
        "{report}"
    );
    assert!(report.contains("InClusterIPPool ns/nodes: a spoke pool of the hub's"), "{report}");
    assert!(!report.contains("0 of 0 free"), "{report}");
}

#[test]
fn the_json_of_a_cluster_without_spoke_pools_has_no_spoke_fields() {
    let json = serde_json::to_value(findings(&hub(Vec::new()))).expect("json");
    assert!(json.get("spokeClaims").is_none() && json["summary"].get("spokeClaims").is_none(), "{json}");
    assert!(json["pools"][0].get("hub").is_none(), "{json}");
    let json = serde_json::to_value(findings(&spoke(Vec::new(), vec![spoke_claim("c", false)]))).expect("json");
    assert_eq!(json["spokeClaims"][0]["pool"], "InClusterIPPool ns/nodes", "{json}");
    assert_eq!(json["summary"]["spokeClaims"], 1);
}
