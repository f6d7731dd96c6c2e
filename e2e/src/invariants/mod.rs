//! The invariant checker every scenario ends with, written from the API objects alone (it reads
//! pool specs itself and never asks ferro-ipam's allocator or index):
//! - no address twice in a pool, nor across pools that share addresses (two pools of one
//!   namespace, or a global pool and any other), whatever their ranges;
//! - at most one `IPAddress` per claim; a Ready claim has it, `status.addressRef` names it, and
//!   it is in the pool the claim asked for (a labelled one for a purpose claim);
//! - every `IPAddress` lies in the addresses its pool hands out and has its claim;
//! - pool status counts equal what the spec and the objects say.
//!
//! Duplicates fail at the first look; what controllers may still be writing (statuses, counts,
//! deletions) is looked at again for up to 30 s.

mod counts;
mod findings;
mod pool_ranges;
mod rules;
pub mod shared;
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::{GlobalInClusterIPPool, InClusterIPPool};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::contract::capi;
use findings::Findings;
use rules::Expected;
use world::{Pool, World};
/// Which pool an `IPAddress` is in, and which pools share addresses: for a checker of the
/// history of `IPAddress`es, which must hold them to the same rules.
pub use world::{PoolId, attribution};

/// Label on `IPAddress` objects a scenario makes by hand (no claim behind them).
pub const HAND_MADE_LABEL: &str = "e2e.ferro-ipam.dev/hand-made";
/// The label `--watch-filter` selects on; a wide scenario puts its namespace there.
const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

/// How long the checker waits for statuses and counts to catch up.
const SETTLE: Duration = Duration::from_secs(30);

/// Checks the invariants over `namespaces` and the global pools that belong to them (named
/// `<namespace>-...`, labelled with the namespace as watch filter, or referenced from them).
/// Fails with every violation found.
pub async fn check(client: &Client, namespaces: &[&str]) -> Result<()> {
    Check::new(client, namespaces).run().await
}

/// A check with expectations beyond the rules.
pub struct Check<'a> {
    client: &'a Client,
    namespaces: Vec<String>,
    expected: Expected,
    /// Whether statuses, counts and deletions are expected to catch up (see [`Check::fatal_only`]).
    settling: bool,
}

impl<'a> Check<'a> {
    pub fn new(client: &'a Client, namespaces: &[&str]) -> Check<'a> {
        Check {
            client,
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            expected: Expected::default(),
            settling: true,
        }
    }

    /// Looks once, for the fatal findings only (an address held twice, a claim with two): for a
    /// look while the controller is being killed over and over, when an `IPAddress` created just
    /// before a kill waits for its claim's status until a run lives long enough to write it.
    pub fn fatal_only(mut self) -> Check<'a> {
        self.settling = false;
        self
    }

    /// Lets these addresses lie outside their pool (a scenario that shrinks a pool under them).
    pub fn out_of_range(mut self, addresses: &[&str]) -> Check<'a> {
        let parsed = addresses.iter().map(|a| a.parse::<IpAddr>().expect("an IP address"));
        self.expected.out_of_range.extend(parsed);
        self
    }

    pub async fn run(self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let mut found = rules::findings(&load(self.client, &self.namespaces).await?, &self.expected);
            if !self.settling {
                found.pending.clear();
            }
            if found.is_empty() {
                return Ok(());
            }
            if !found.fatal.is_empty() || tokio::time::Instant::now() > deadline {
                bail!("invariants violated:\n  {}", listing(&found));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn listing(found: &Findings) -> String {
    found.fatal.iter().chain(&found.pending).cloned().collect::<Vec<_>>().join("\n  ")
}

/// Lists one look. All `IPAddress` objects come from one list (one consistent snapshot), so
/// that an address released in one namespace and handed out in another cannot look doubled.
async fn load(client: &Client, namespaces: &[String]) -> Result<World> {
    let mut world = World { namespaces: namespaces.iter().cloned().collect(), ..World::default() };
    for ns in namespaces {
        let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), ns, &capi().claim_resource());
        world.claims.extend(claims.list(&ListParams::default()).await.context("listing claims")?.items);
        let pools: Api<InClusterIPPool> = Api::namespaced(client.clone(), ns);
        for pool in pools.list(&ListParams::default()).await.context("listing pools")?.items {
            let id = PoolId::Namespaced { namespace: ns.clone(), name: pool.name_any() };
            world.pools.insert(id, Pool::of(&pool.metadata, pool.spec.clone(), pool.status.clone()));
        }
    }
    let addresses: Api<IPAddress> = Api::all_with(client.clone(), &capi().address_resource());
    let all = addresses.list(&ListParams::default()).await.context("listing addresses")?.items;
    let globals = Api::<GlobalInClusterIPPool>::all(client.clone()).list(&ListParams::default()).await?.items;
    let ours = global_pools_of(&world, namespaces, &all, &globals);
    for pool in globals.into_iter().filter(|p| ours.contains(&p.name_any())) {
        world.pools.insert(PoolId::Global { name: pool.name_any() }, Pool::of(&pool.metadata, pool.spec, pool.status));
    }
    world.addresses = all
        .into_iter()
        .filter(|a| {
            let in_namespace = a.namespace().is_some_and(|ns| world.namespaces.contains(&ns));
            let in_global = matches!(world::attribution(a), Ok(Some(PoolId::Global { name })) if ours.contains(&name));
            in_namespace || in_global
        })
        .collect();
    Ok(world)
}

/// The global pools that belong to the checked namespaces.
fn global_pools_of(
    world: &World,
    namespaces: &[String],
    addresses: &[IPAddress],
    globals: &[GlobalInClusterIPPool],
) -> BTreeSet<String> {
    let named = |pool: &GlobalInClusterIPPool| {
        let name = pool.name_any();
        let filter = pool.labels().get(WATCH_FILTER_LABEL);
        namespaces.iter().any(|ns| name.starts_with(&format!("{ns}-")) || filter == Some(ns))
    };
    let mut ours: BTreeSet<String> = globals.iter().filter(|p| named(p)).map(ResourceExt::name_any).collect();
    let in_namespaces = |ns: Option<String>| ns.is_some_and(|ns| world.namespaces.contains(&ns));
    let from_addresses =
        addresses.iter().filter(|a| in_namespaces(a.namespace())).filter_map(|a| world::attribution(a).ok().flatten());
    let from_claims = world.claims.iter().filter_map(|c| world::referenced("", &c.spec.pool_ref));
    for id in from_addresses.chain(from_claims) {
        if let PoolId::Global { name } = id {
            ours.insert(name);
        }
    }
    ours
}

impl Pool {
    fn of(
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        spec: ferro_ipam::api::IPPoolSpec,
        status: Option<ferro_ipam::api::IPPoolStatus>,
    ) -> Pool {
        Pool {
            labels: meta.labels.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            spec,
            status,
        }
    }
}

/// The address of every `IPAddress` of `namespaces`, by (namespace, name): a record to compare a
/// later one with (see [`changed_since`]).
pub async fn addresses(client: &Client, namespaces: &[&str]) -> Result<BTreeMap<(String, String), String>> {
    let mut found = BTreeMap::new();
    for ns in namespaces {
        let api: Api<IPAddress> = Api::namespaced_with(client.clone(), ns, &capi().address_resource());
        for address in api.list(&ListParams::default()).await?.items {
            found.insert(((*ns).to_owned(), address.name_any()), address.spec.address);
        }
    }
    Ok(found)
}

/// Every `IPAddress` of `before` that is gone or holds another address in `after`.
pub fn changed_since(
    before: &BTreeMap<(String, String), String>,
    after: &BTreeMap<(String, String), String>,
) -> Vec<String> {
    before
        .iter()
        .filter_map(|((ns, name), old)| match after.get(&(ns.clone(), name.clone())) {
            None => Some(format!("IPAddress {ns}/{name} ({old}) is gone")),
            Some(new) if new != old => Some(format!("IPAddress {ns}/{name} was renumbered from {old} to {new}")),
            Some(_) => None,
        })
        .collect()
}
