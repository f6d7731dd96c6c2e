//! The invariant checker every scenario ends with: one address per claim, no address twice in
//! a pool, no orphan addresses, and pool status counts equal to what the objects say.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Result, bail};
use ferro_ipam::allocator::FamilyPool;
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::ALLOCATED_FROM_ANNOTATION;
use ferro_ipam::api::{GlobalInClusterIPPool, IPPoolSpec, IPPoolStatus, InClusterIPPool};
use ferro_ipam::index::{PoolKey, PoolKind};
use ferro_ipam::selection::Purpose;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::objects::CAPI;

/// Label on `IPAddress` objects a scenario makes by hand (no claim behind them).
pub const HAND_MADE_LABEL: &str = "e2e.ferro-ipam.dev/hand-made";

struct World {
    claims: Vec<IPAddressClaim>,
    addresses: Vec<IPAddress>,
    pools: BTreeMap<PoolKey, (IPPoolSpec, Option<IPPoolStatus>)>,
}

async fn load(client: &Client, namespaces: &[&str]) -> Result<World> {
    let mut world = World { claims: Vec::new(), addresses: Vec::new(), pools: BTreeMap::new() };
    for ns in namespaces {
        world.claims.extend(
            Api::<IPAddressClaim>::namespaced_with(client.clone(), ns, &CAPI.claim_resource())
                .list(&ListParams::default())
                .await?
                .items,
        );
        world.addresses.extend(
            Api::<IPAddress>::namespaced_with(client.clone(), ns, &CAPI.address_resource())
                .list(&ListParams::default())
                .await?
                .items,
        );
        for pool in Api::<InClusterIPPool>::namespaced(client.clone(), ns).list(&ListParams::default()).await?.items {
            world.pools.insert(PoolKey::in_cluster(ns, &pool.name_any()), (pool.spec, pool.status));
        }
    }
    let referenced: BTreeSet<String> = world
        .addresses
        .iter()
        .filter_map(pool_of)
        .chain(world.claims.iter().filter_map(|c| PoolKey::from_reference("", &c.spec.pool_ref)))
        .filter(|key| key.kind == PoolKind::Global)
        .map(|key| key.name)
        .collect();
    for pool in Api::<GlobalInClusterIPPool>::all(client.clone()).list(&ListParams::default()).await?.items {
        if referenced.contains(&pool.name_any()) {
            world.pools.insert(PoolKey::global(&pool.name_any()), (pool.spec, pool.status));
        }
    }
    Ok(world)
}

/// The pool whose address an `IPAddress` records (a purpose claim's names it in an annotation).
fn pool_of(address: &IPAddress) -> Option<PoolKey> {
    PoolKey::of_address(&address.namespace().unwrap_or_default(), &address.spec.pool_ref, address.annotations())
}

fn violations(world: &World) -> Vec<String> {
    let mut found = Vec::new();
    let address_of = |ns: &str, name: &str| {
        world.addresses.iter().find(|a| a.namespace().as_deref() == Some(ns) && a.name_any() == name)
    };

    // One address per claim: a Ready claim has its IPAddress, naming it and its pool.
    for claim in &world.claims {
        let ns = claim.namespace().unwrap_or_default();
        let purpose = Purpose::of_reference(&claim.spec.pool_ref).is_some();
        let Some(pool) = PoolKey::from_reference(&ns, &claim.spec.pool_ref) else {
            continue;
        };
        let ready = claim
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
        if !ready || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        match address_of(&ns, &claim.name_any()) {
            None => found.push(format!("claim {ns}/{} is Ready but has no IPAddress", claim.name_any())),
            Some(address) => {
                // A purpose claim's address repeats its poolRef and names a labelled pool.
                if purpose
                    && (address.spec.pool_ref != claim.spec.pool_ref
                        || !address.annotations().contains_key(ALLOCATED_FROM_ANNOTATION))
                {
                    found.push(format!(
                        "IPAddress {ns}/{} does not repeat the purpose claim's poolRef or name its pool",
                        address.name_any()
                    ));
                }
                if !purpose && pool_of(address).as_ref() != Some(&pool) {
                    found.push(format!("IPAddress {ns}/{} is not in the claim's pool {pool}", address.name_any()));
                }
                if address.spec.claim_ref.name != claim.name_any() {
                    found.push(format!(
                        "IPAddress {ns}/{} names claim {}",
                        address.name_any(),
                        address.spec.claim_ref.name
                    ));
                }
            }
        }
    }

    // No address twice in a pool; no orphans.
    let mut holders: BTreeMap<(PoolKey, String), Vec<String>> = BTreeMap::new();
    for address in &world.addresses {
        let ns = address.namespace().unwrap_or_default();
        let Some(pool) = pool_of(address) else {
            continue;
        };
        holders.entry((pool, address.spec.address.clone())).or_default().push(format!("{ns}/{}", address.name_any()));
        let hand_made = address.labels().contains_key(HAND_MADE_LABEL);
        let has_claim = world
            .claims
            .iter()
            .any(|c| c.namespace().as_deref() == Some(ns.as_str()) && c.name_any() == address.name_any());
        if !hand_made && !has_claim {
            found.push(format!("IPAddress {ns}/{} has no claim (orphan)", address.name_any()));
        }
    }
    for ((pool, ip), names) in &holders {
        if names.len() > 1 {
            found.push(format!("{ip} is held twice in {pool}: {names:?}"));
        }
    }

    // Pool status counts equal what the objects say.
    for (key, (spec, status)) in &world.pools {
        let ips: Vec<IpAddr> = world
            .addresses
            .iter()
            .filter(|a| pool_of(a).as_ref() == Some(key))
            .filter_map(|a| a.spec.address.parse().ok())
            .collect();
        // Each family of the pool (two for a dual-stack pool), as the allocator defines it.
        let Ok(pools) = ferro_ipam::index::build_allocators(spec) else {
            continue;
        };
        let in_pool = |ip: &IpAddr| pools.iter().any(|p: &FamilyPool| p.check(*ip).is_ok());
        let in_range: BTreeSet<IpAddr> = ips.iter().copied().filter(in_pool).collect();
        let out_of_range = ips.iter().filter(|ip| !in_pool(ip)).count() as i64;
        let total = pools.iter().fold(0u128, |sum, p| sum.saturating_add(p.counts().total));
        let total = i64::try_from(total).unwrap_or(i64::MAX);
        let expected = (total, ips.len() as i64, total.saturating_sub(in_range.len() as i64), out_of_range);
        let counts = status.as_ref().and_then(|s| s.ip_addresses.as_ref());
        let actual = counts.map(|c| (c.total, c.used, c.free, c.out_of_range));
        if actual != Some(expected) {
            found.push(format!(
                "{key}: status (total, used, free, outOfRange) is {actual:?}, the objects say {expected:?}"
            ));
        }
    }
    found
}

/// Checks the invariants over `namespaces` (and the global pools their objects reference),
/// giving the controllers up to 30 s to settle. Fails with every violation found.
pub async fn check(client: &Client, namespaces: &[&str]) -> Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = violations(&load(client, namespaces).await?);
        if found.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("invariants violated:\n  {}", found.join("\n  "));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
