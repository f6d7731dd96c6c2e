//! The invariants, over one look at the objects. Each finding is either fatal (it cannot be a
//! moment of catching up: two holders of one address, two addresses of one claim) or pending
//! (statuses and deletions the controllers may still be writing), which is looked at again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferro_ipam::api::capi::IPAddressClaim;
use kube::ResourceExt;

use super::counts;
use super::findings::Findings;
use super::pool_ranges;
use super::world::{Held, World, allocated_from, held, is_ready, purpose, referenced};

/// What the scenario expects besides the rules.
#[derive(Clone, Debug, Default)]
pub struct Expected {
    /// Addresses that may lie outside their pool (the scenario shrank the pool under them).
    pub out_of_range: BTreeSet<IpAddr>,
}

pub fn findings(world: &World, expected: &Expected) -> Findings {
    let (held, broken) = held(world);
    let mut found = Findings { fatal: broken, pending: Vec::new() };
    duplicates(&held, &mut found);
    for claim in &world.claims {
        one_address_per_claim(world, claim, &held, &mut found);
    }
    claims_behind_addresses(world, &held, &mut found);
    within_pools(world, &held, expected, &mut found);
    counts::check(world, &held, &mut found);
    found
}

/// No address twice in one pool, nor in two pools that share addresses (two of a namespace, or
/// a global one and any other), whatever their ranges say. Addresses made by hand may collide
/// with each other (a scenario does that on purpose), never with one ferro-ipam handed out.
fn duplicates(held: &[Held], found: &mut Findings) {
    let mut by_ip: BTreeMap<IpAddr, Vec<&Held>> = BTreeMap::new();
    for h in held {
        by_ip.entry(h.ip).or_default().push(h);
    }
    for (ip, holders) in by_ip {
        let clash = holders.iter().enumerate().any(|(i, a)| {
            holders[i + 1..].iter().any(|b| a.pool.shares_addresses_with(&b.pool) && !(a.hand_made && b.hand_made))
        });
        if clash {
            let names: Vec<String> = holders.iter().map(|h| format!("IPAddress {} in {}", h.label(), h.pool)).collect();
            found.fatal.push(format!("{ip} is held twice among pools that share addresses: {}", names.join(", ")));
        }
    }
}

/// A claim of ours is named by at most one `IPAddress` (one named after it); a Ready claim has
/// it, its `status.addressRef` names it, and it is in the pool the claim asked for.
fn one_address_per_claim(world: &World, claim: &IPAddressClaim, held: &[Held], found: &mut Findings) {
    let namespace = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    if referenced(&namespace, &claim.spec.pool_ref).is_none() {
        return;
    }
    let label = format!("{namespace}/{name}");
    let naming: Vec<&Held> =
        held.iter().filter(|h| !h.hand_made && h.namespace == namespace && h.claim_name() == name).collect();
    if naming.len() > 1 {
        let names: Vec<String> = naming.iter().map(|h| format!("{} ({})", h.label(), h.ip)).collect();
        found.fatal.push(format!("claim {label} has {} IPAddresses: {}", naming.len(), names.join(", ")));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return;
    }
    let address_ref = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).map(|r| r.name.as_str());
    let Some(address) = naming.first() else {
        if is_ready(claim) {
            found.pending.push(format!("claim {label} is Ready but no IPAddress names it"));
        } else if let Some(other) = address_ref.filter(|r| !r.is_empty()) {
            found
                .pending
                .push(format!("claim {label}: status.addressRef names {other:?}, but no IPAddress names the claim"));
        }
        return;
    };
    if address_ref != Some(address.name.as_str()) {
        found.pending.push(format!(
            "claim {label}: status.addressRef is {address_ref:?}, but its IPAddress is {:?}",
            address.name
        ));
    }
    let object = address.object;
    let same_ref =
        object.spec.pool_ref.kind == claim.spec.pool_ref.kind && object.spec.pool_ref.name == claim.spec.pool_ref.name;
    if !same_ref {
        found.pending.push(format!("IPAddress {}: its poolRef is not its claim's", address.label()));
    }
    match purpose(&claim.spec.pool_ref) {
        // A purpose claim's address names the labelled pool it came from.
        Some(label_name) => {
            let serves =
                world.pools.get(&address.pool).is_some_and(|p| p.labels.get(label_name).is_some_and(|v| v == "true"));
            if allocated_from(object).is_none() || !serves {
                found.pending.push(format!(
                    "IPAddress {} of a {label_name} claim: {} is no pool labelled {label_name}",
                    address.label(),
                    address.pool
                ));
            }
        }
        None if allocated_from(object).is_some() => {
            found.pending.push(format!("IPAddress {}: a direct claim's address names another pool", address.label()));
        }
        None => {}
    }
}

/// Every `IPAddress` of the checked namespaces (not made by hand) is named after its claim, and
/// that claim exists.
fn claims_behind_addresses(world: &World, held: &[Held], found: &mut Findings) {
    let claims: BTreeSet<(String, String)> =
        world.claims.iter().map(|c| (c.namespace().unwrap_or_default(), c.name_any())).collect();
    for h in held.iter().filter(|h| !h.hand_made && world.namespaces.contains(&h.namespace)) {
        if h.claim_name() != h.name {
            found.fatal.push(format!(
                "IPAddress {} names claim {:?}, not the claim of its name",
                h.label(),
                h.claim_name()
            ));
        } else if !claims.contains(&(h.namespace.clone(), h.name.clone())) {
            found.pending.push(format!("IPAddress {} has no claim (orphan)", h.label()));
        }
    }
}

/// Every address ferro-ipam handed out lies in the allocatable addresses of its pool (unless the
/// scenario expects it outside).
fn within_pools(world: &World, held: &[Held], expected: &Expected, found: &mut Findings) {
    for h in held.iter().filter(|h| !h.hand_made && !expected.out_of_range.contains(&h.ip)) {
        let Some(families) = world.pools.get(&h.pool).and_then(|p| pool_ranges::read(&p.spec).ok()) else {
            continue;
        };
        if !families.iter().any(|f| f.contains(h.ip)) {
            found.pending.push(format!("IPAddress {} holds {}, which {} does not hand out", h.label(), h.ip, h.pool));
        }
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
