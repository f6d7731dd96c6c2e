//! `who-has`, `top` and `explain` on a hub and on a spoke (synthetic inventories, no API server).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::api::capi::{ClaimStatus, Condition};
use crate::api::hub::SHARED_LABEL;
use crate::index::HolderKey;
use crate::preflight::build_index;
use crate::preflight::gather::Inventory;
use crate::preflight::hub_fixtures::{block, hub, shared_pool, spoke, spoke_address, spoke_claim};
use crate::preflight::spokes::NOT_KNOWN;

use super::who_has::{self, WhoHas};
use super::{explain, top};

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("a time")
}

fn look_up(inventory: &Inventory, ip: &str) -> WhoHas {
    who_has::answer(inventory, &build_index(inventory, now()), ip.parse().expect("an address"))
}

#[test]
fn who_has_on_a_hub_names_the_block_its_spoke_and_the_spoke_pool() {
    let inv = hub(vec![block("spoke-east", "b-1", 16, Some("10.0.0.16/28")), block("spoke-west", "b-2", 16, None)]);
    let leased = look_up(&inv, "10.0.0.20");
    assert!(leased.held.is_empty());
    let blocks: Vec<_> = leased
        .blocks
        .iter()
        .map(|b| {
            (b.pool.as_str(), b.address_block.as_str(), b.cidr.as_str(), b.spoke.as_deref(), b.spoke_pool.as_deref())
        })
        .collect();
    assert_eq!(
        blocks,
        [(
            "GlobalInClusterIPPool shared",
            "spoke-east/b-1",
            "10.0.0.16/28",
            Some("east"),
            Some("InClusterIPPool ns/nodes")
        )]
    );
    assert_eq!((leased.pools[0].state.as_str(), leased.pools[0].could_hand_out), ("held", false));
    let shown = who_has::text(&leased);
    assert!(
        shown.starts_with("10.0.0.20: leased in AddressBlock spoke-east/b-1 (10.0.0.16/28) of GlobalInClusterIPPool shared\n  spoke:      east\n  spoke pool: InClusterIPPool ns/nodes\n"),
        "{shown}"
    );
    let json = serde_json::to_value(&leased).expect("json");
    assert_eq!(json["blocks"][0]["addressBlock"], "spoke-east/b-1", "{json}");
    assert_eq!(json["blocks"][0]["spokePool"], "InClusterIPPool ns/nodes", "{json}");

    let free = look_up(&inv, "10.0.0.40");
    assert!(free.blocks.is_empty());
    assert_eq!(free.pools[0].state, "free");
    assert!(serde_json::to_value(&free).expect("json").get("blocks").is_none(), "no blocks field without a block");
}

#[test]
fn who_has_on_a_spoke_never_calls_an_address_of_its_spoke_pool_free_or_excluded_by_the_hub() {
    let inv = spoke(vec![spoke_address("a", "10.0.0.50")], vec![spoke_claim("a", true)]);
    let state = |ip: &str| {
        let answer = look_up(&inv, ip);
        answer.pools.first().map(|p| (p.state.clone(), p.blocked.clone(), p.could_hand_out, p.hub.is_some()))
    };
    assert_eq!(state("10.0.0.50"), Some(("held".into(), None, false, true)));
    assert_eq!(state("10.0.0.60"), Some(("unknown".into(), None, false, true)), "in its ranges, its blocks unknown");
    let excluded = state("10.0.0.20").expect("in its ranges");
    assert_eq!((excluded.0.as_str(), excluded.1.is_some()), ("blocked", true), "excluded by its own spec");
    assert_eq!(state("10.0.0.1").map(|s| s.0), Some("blocked".into()), "its gateway");
    assert_eq!(state("10.0.1.1"), None, "outside its ranges");
    let shown = who_has::text(&look_up(&inv, "10.0.0.60"));
    assert!(shown.contains(&format!("InClusterIPPool ns/nodes: unknown; a spoke pool of the hub's GlobalInClusterIPPool shared (hub namespace spoke-east): {NOT_KNOWN}")), "{shown}");
}

#[test]
fn top_on_a_hub_counts_each_spokes_blocks_and_addresses_per_shared_pool() {
    let mut inv = hub(vec![
        block("spoke-east", "b-1", 16, Some("10.0.0.16/28")),
        block("spoke-east", "b-2", 8, Some("10.0.0.40/29")),
        block("spoke-west", "b-3", 16, Some("10.0.0.48/28")),
        block("spoke-west", "b-4", 16, None),
    ]);
    let mut idle = shared_pool("idle");
    idle.metadata.labels = Some(BTreeMap::from([(SHARED_LABEL.to_owned(), "true".to_owned())]));
    inv.global_pools.push(idle);
    let answer = top::answer(&inv, None, now(), None);
    let usage: Vec<_> = answer
        .shared
        .iter()
        .flat_map(|s| {
            s.spokes
                .iter()
                .map(move |u| (s.pool.as_str(), u.spoke.as_deref(), u.namespace.as_str(), u.blocks, u.addresses))
        })
        .collect();
    assert_eq!(
        usage,
        [
            ("GlobalInClusterIPPool shared", Some("east"), "spoke-east", 2, 24),
            ("GlobalInClusterIPPool shared", None, "spoke-west", 1, 16),
        ]
    );
    assert_eq!(answer.shared.len(), 2, "the idle shared pool too");
    let table = top::text(&answer);
    let lines: Vec<&str> = table.lines().skip_while(|l| !l.starts_with("SHARED POOL")).collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[1].starts_with("GlobalInClusterIPPool idle    -      -           0       0"), "{table}");
    assert!(lines[2].starts_with("GlobalInClusterIPPool shared  east   spoke-east  2       24"), "{table}");
    let json = serde_json::to_value(&answer).expect("json");
    assert_eq!(json["shared"][1]["spokes"][0]["addresses"], 24, "{json}");
    assert!(top::answer(&inv, Some("ns"), now(), None).shared.is_empty(), "global pools are in no namespace");
}

#[test]
fn explain_says_a_claim_of_a_spoke_pool_waits_for_the_hub_and_quotes_why() {
    let message = "InClusterIPPool ns/nodes has no free address in the blocks it holds: waiting for a block of the hub's GlobalInClusterIPPool shared (hub namespace spoke-east); the hub cannot serve it now: reading Secret hub: not found";
    let mut waiting = spoke_claim("c", false);
    waiting.status = Some(ClaimStatus {
        address_ref: None,
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: Some("WaitingForHub".into()),
            message: Some(message.into()),
            ..Condition::default()
        }],
    });
    let inv = spoke(vec![spoke_address("a", "10.0.0.50")], vec![spoke_claim("a", true), waiting]);
    let index = build_index(&inv, now());
    let answer = explain::answer(&inv, &index, &HolderKey::new("ns", "c"), None);
    assert_eq!(answer.state, "pending");
    assert_eq!(
        answer.hub.as_deref(),
        Some(
            "InClusterIPPool ns/nodes is a spoke pool of the hub's GlobalInClusterIPPool shared (hub namespace spoke-east): it serves only addresses of the blocks the hub leased it"
        )
    );
    assert_eq!(answer.waiting_for_hub.as_deref(), Some(message));
    assert!(answer.waits.as_deref().is_some_and(|w| w.ends_with(NOT_KNOWN)), "{answer:?}");
    let shown = explain::text(&answer);
    assert!(shown.contains(&format!("  hub wait   {message}\n")), "{shown}");

    let served = explain::answer(&inv, &index, &HolderKey::new("ns", "a"), None);
    assert_eq!((served.state.as_str(), served.address.as_deref()), ("served", Some("10.0.0.50")));
    assert!(served.hub.is_some() && served.waiting_for_hub.is_none(), "{served:?}");
}
