//! From an inventory to findings (pure: no API server). The index is built exactly as the
//! controller builds it at start-up: every pool and `IPAddress` goes through the same feeds,
//! then every claim through the same decisions (pause rules, adoption, allocation), against an
//! index that lives only as long as this analysis.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::watcher::Event;

use crate::api::capi::IPAddress;
use crate::api::hub::AddressBlock;
use crate::api::keys::RESERVED_NAMES;
use crate::feed::PoolObject;
use crate::feed::{AddressFeed, BlockFeed, PoolFeed, SpokePools};
use crate::index::{Index, PoolKey};
use crate::selection::Purpose;

use super::claims::{self, Decision};
use super::findings::{
    Adopted, Conflict, ConflictKind, FORMAT_VERSION, Features, Findings, NewClaim, PoolFinding, SpokeClaim, Summary,
    WaitingClaim, object_name,
};
use super::gather::Inventory;
use super::rules::PoolRules;
use super::spokes::{NOT_KNOWN, Spokes, spoke_pool_of};

/// How long the controller keeps a released claim's address for a claim of the same name, by
/// default (`--sticky-address-seconds`); it decides which address a new claim would get.
const STICKY: Duration = Duration::from_secs(600);

/// Feeds one complete listing into a pool feed, as the pool watch's first listing does. A spoke
/// pool goes through `spokes`, as the controller's: limited to the blocks of the hub it knows,
/// none here (they live in the hub).
fn feed_pools<K: PoolObject>(index: &Index, spokes: &SpokePools, pools: &[K]) {
    let mut feed = PoolFeed::new(index.clone(), spokes.clone(), || {});
    feed.apply::<K>(&Event::Init);
    for pool in pools {
        feed.apply(&Event::InitApply(pool.clone()));
    }
    feed.apply::<K>(&Event::InitDone);
}

fn feed_addresses(index: &Index, addresses: &[IPAddress]) {
    let mut feed = AddressFeed::new(index.clone(), || {});
    feed.apply(&Event::Init);
    for address in addresses {
        feed.apply(&Event::InitApply(address.clone()));
    }
    feed.apply(&Event::InitDone);
}

/// Feeds a hub's `AddressBlock`s as the block watch's first listing does: each granted block
/// keeps its addresses used in its pool.
fn feed_blocks(index: &Index, blocks: &[AddressBlock]) {
    let mut feed = BlockFeed::new(index.clone(), || {});
    feed.apply(&Event::Init);
    for block in blocks {
        feed.apply(&Event::InitApply(block.clone()));
    }
    feed.apply(&Event::InitDone);
}

/// Builds the index from the inventory's pools, blocks and addresses, as the controller does on
/// start.
pub(crate) fn build_index(inventory: &Inventory, now: Timestamp) -> Index {
    let (index, _triggers) = Index::with_clock(STICKY, Arc::new(move || now));
    let spokes = SpokePools::new(index.clone());
    feed_pools(&index, &spokes, &inventory.in_cluster_pools);
    feed_pools(&index, &spokes, &inventory.global_pools);
    feed_pools(&index, &spokes, &inventory.in_cluster_prefix_pools);
    feed_pools(&index, &spokes, &inventory.global_prefix_pools);
    feed_blocks(&index, &inventory.blocks);
    feed_addresses(&index, &inventory.addresses);
    index.set_ready();
    index
}

/// One pool's finding, before claims are looked at.
fn pool_finding<K: PoolObject + serde::Serialize>(
    pool: &K,
    index: &Index,
    rules: &PoolRules,
    spokes: &Spokes,
) -> PoolFinding {
    let key = pool.key();
    let report = index.report(&key);
    let totals = report.totals();
    let json = serde_json::to_value(pool).unwrap_or_default();
    PoolFinding {
        kind: key.kind.as_str().to_owned(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        refused: rules.refusals(key.kind, &json),
        invalid: report.invalid.clone().filter(|why| !why.is_empty()),
        paused: pool.facts().paused,
        dual_stack: pool.spec().is_dual_stack(),
        purposes: RESERVED_NAMES.iter().filter(|l| pool.labels().contains_key(**l)).map(|l| (*l).to_owned()).collect(),
        total: totals.total.to_string(),
        free: totals.free.to_string(),
        overlaps: report.overlaps.iter().map(ToString::to_string).collect(),
        hub: spokes.hub(&key).map(|hub| format!("{}: {NOT_KNOWN}", spoke_pool_of(hub))),
        adopted: Vec::new(),
    }
}

/// The `IPAddress` objects that name one of our IP pools, by the pool they hold an address of.
fn addresses_by_pool(addresses: &[IPAddress]) -> BTreeMap<PoolKey, Vec<&IPAddress>> {
    let mut by_pool: BTreeMap<PoolKey, Vec<&IPAddress>> = BTreeMap::new();
    for address in addresses {
        let namespace = address.namespace().unwrap_or_default();
        if let Some(pool) = PoolKey::of_address(&namespace, &address.spec.pool_ref, address.annotations()) {
            by_pool.entry(pool).or_default().push(address);
        }
    }
    by_pool
}

/// Conflicts the `IPAddress` objects show by themselves, before any claim is looked at.
fn address_conflicts(
    index: &Index,
    by_pool: &BTreeMap<PoolKey, Vec<&IPAddress>>,
    known_pools: &BTreeSet<PoolKey>,
    spokes: &Spokes,
) -> Vec<Conflict> {
    let mut found = Vec::new();
    for (pool, addresses) in by_pool {
        let holders_of = |ip: IpAddr| -> Vec<String> {
            addresses.iter().filter(|a| a.spec.address.parse() == Ok(ip)).map(|a| object_name(*a)).collect()
        };
        if !known_pools.contains(pool) {
            found.push(Conflict {
                kind: ConflictKind::Foreign,
                pool: Some(pool.to_string()),
                address: None,
                objects: addresses.iter().map(|a| object_name(*a)).collect(),
                message: format!(
                    "{pool} does not exist: ferro-ipam keeps these addresses but cannot tell whether they collide; \
                     create the pool again or delete the IPAddresses"
                ),
            });
            continue;
        }
        let report = index.report(pool);
        for (ip, holders) in &report.conflicts {
            found.push(Conflict {
                kind: ConflictKind::Duplicate,
                pool: Some(pool.to_string()),
                address: Some(ip.to_string()),
                objects: holders.iter().map(ToString::to_string).collect(),
                message: format!(
                    "{ip} is held by more than one IPAddress in {pool}; delete all but the one its machine uses"
                ),
            });
        }
        // A spoke pool's addresses lie outside the blocks known here (none): only those its
        // spec as written does not allow are outside it.
        for ip in report.out_of_range.iter().filter(|ip| !spokes.may_hold(pool, **ip)) {
            found.push(Conflict {
                kind: ConflictKind::OutsidePool,
                pool: Some(pool.to_string()),
                address: Some(ip.to_string()),
                objects: holders_of(*ip),
                message: format!(
                    "{ip} lies outside {pool}; it stays allocated and is never handed out again, \
                     but widen the pool or release the claim"
                ),
            });
        }
        for unparsable in addresses.iter().filter(|a| a.spec.address.parse::<IpAddr>().is_err()) {
            found.push(Conflict {
                kind: ConflictKind::OutsidePool,
                pool: Some(pool.to_string()),
                address: Some(unparsable.spec.address.clone()),
                objects: vec![object_name(*unparsable)],
                message: format!("{:?} is not an IP address; delete the IPAddress", unparsable.spec.address),
            });
        }
    }
    found.extend(claimed_twice(by_pool.values().flatten().copied()));
    found
}

/// `IPAddress` objects of one namespace naming the same claim.
fn claimed_twice<'a>(addresses: impl Iterator<Item = &'a IPAddress>) -> Vec<Conflict> {
    let mut by_claim: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for address in addresses {
        let claim = format!("{}/{}", address.namespace().unwrap_or_default(), address.spec.claim_ref.name);
        by_claim.entry(claim).or_default().push(object_name(address));
    }
    by_claim
        .into_iter()
        .filter(|(_, objects)| objects.len() > 1)
        .map(|(claim, mut objects)| {
            objects.sort();
            Conflict {
                kind: ConflictKind::ClaimedTwice,
                pool: None,
                address: None,
                message: format!(
                    "claim {claim} is named by {} IPAddresses; keep the one of its own name and delete the others",
                    objects.len()
                ),
                objects,
            }
        })
        .collect()
}

fn features(inventory: &Inventory, pools: &[PoolFinding]) -> Features {
    Features {
        dual_stack_pools: pools.iter().filter(|p| p.dual_stack).count(),
        purpose_pools: pools.iter().filter(|p| !p.purposes.is_empty()).count(),
        purpose_claims: inventory.claims.iter().filter(|c| Purpose::of_reference(&c.spec.pool_ref).is_some()).count(),
        prefix_pools: inventory.prefix_pools.clone(),
        other_addresses: inventory
            .addresses
            .iter()
            .filter(|a| {
                let namespace = a.namespace().unwrap_or_default();
                PoolKey::of_address(&namespace, &a.spec.pool_ref, a.annotations()).is_none()
            })
            .count(),
    }
}

/// The claims' decisions, sorted by what they come to.
#[derive(Default)]
struct Sorted {
    adopted: BTreeMap<PoolKey, Vec<(IpAddr, String)>>,
    refused: Vec<Conflict>,
    waiting: Vec<WaitingClaim>,
    to_allocate: Vec<NewClaim>,
    spoke_claims: Vec<SpokeClaim>,
    releasing: usize,
}

fn sort_out(decisions: Vec<Decision>) -> Sorted {
    let mut sorted = Sorted::default();
    for decision in decisions {
        match decision {
            Decision::Adopt { pool, claim, ip } => sorted.adopted.entry(pool).or_default().push((ip, claim)),
            Decision::Refuse(conflict) => sorted.refused.push(conflict),
            Decision::Wait(claim) => sorted.waiting.push(claim),
            Decision::Allocate(claim) => sorted.to_allocate.push(claim),
            Decision::FromHub(claim) => sorted.spoke_claims.push(claim),
            Decision::Release => sorted.releasing += 1,
        }
    }
    sorted
}

/// Everything preflight reports about `inventory`, with `now` as the time.
pub fn analyse(inventory: &Inventory, now: Timestamp) -> Findings {
    let index = build_index(inventory, now);
    let rules = PoolRules::new();
    let spokes = Spokes::of(inventory);
    let pools: Vec<(PoolKey, PoolFinding)> = inventory
        .in_cluster_pools
        .iter()
        .map(|p| (p.key(), pool_finding(p, &index, &rules, &spokes)))
        .chain(inventory.global_pools.iter().map(|p| (p.key(), pool_finding(p, &index, &rules, &spokes))))
        .chain(inventory.in_cluster_prefix_pools.iter().map(|p| (p.key(), pool_finding(p, &index, &rules, &spokes))))
        .chain(inventory.global_prefix_pools.iter().map(|p| (p.key(), pool_finding(p, &index, &rules, &spokes))))
        .collect();
    let known_pools: BTreeSet<PoolKey> = pools.iter().map(|(key, _)| key.clone()).collect();
    let mut conflicts = address_conflicts(&index, &addresses_by_pool(&inventory.addresses), &known_pools, &spokes);
    conflicts.extend(super::reservations::contradicted(&index, &known_pools, &inventory.claims));
    let outcome = claims::decide(&index, inventory);
    let mut sorted = sort_out(outcome.decisions);
    // A claim refused an address that two IPAddresses hold: that duplicate is reported already.
    let duplicates: BTreeSet<(Option<String>, Option<String>)> = conflicts
        .iter()
        .filter(|c| c.kind == ConflictKind::Duplicate)
        .map(|c| (c.pool.clone(), c.address.clone()))
        .collect();
    conflicts.extend(
        std::mem::take(&mut sorted.refused)
            .into_iter()
            .filter(|c| !duplicates.contains(&(c.pool.clone(), c.address.clone()))),
    );
    conflicts.sort_by(|a, b| (a.kind, &a.pool, &a.address).cmp(&(b.kind, &b.pool, &b.address)));
    let pools: Vec<PoolFinding> = pools
        .into_iter()
        .map(|(key, mut pool)| {
            let mut held = sorted.adopted.remove(&key).unwrap_or_default();
            held.sort();
            pool.adopted = held.into_iter().map(|(ip, claim)| Adopted { claim, address: ip.to_string() }).collect();
            pool
        })
        .collect();
    assemble(inventory, pools, conflicts, sorted, outcome.unclaimed)
}

/// The findings, with their counts and verdict.
fn assemble(
    inventory: &Inventory,
    pools: Vec<PoolFinding>,
    conflicts: Vec<Conflict>,
    sorted: Sorted,
    unclaimed: Vec<String>,
) -> Findings {
    let features = features(inventory, &pools);
    let summary = Summary {
        pools: pools.len(),
        invalid_pools: pools.iter().filter(|p| !p.refused.is_empty() || p.invalid.is_some()).count(),
        addresses: inventory.addresses.len().saturating_sub(features.other_addresses),
        adopted: pools.iter().map(|p| p.adopted.len()).sum(),
        conflicts: conflicts.len(),
        waiting: sorted.waiting.len(),
        to_allocate: sorted.to_allocate.len(),
        spoke_claims: sorted.spoke_claims.len(),
        releasing: sorted.releasing,
        unclaimed: unclaimed.len(),
        unreadable: inventory.unreadable.len(),
    };
    let mut findings = Findings {
        format_version: FORMAT_VERSION,
        clean: false,
        capi_version: inventory.capi.as_str().to_owned(),
        summary,
        pools,
        conflicts,
        waiting: sorted.waiting,
        to_allocate: sorted.to_allocate,
        spoke_claims: sorted.spoke_claims,
        unclaimed,
        unreadable: inventory.unreadable.clone(),
        features,
        // Read from the cluster by `run`, not from the inventory.
        other_provider: None,
        other_provider_unchecked: None,
    };
    findings.clean = findings.problems() == 0;
    findings
}
