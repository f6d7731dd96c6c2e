//! The main test: both spokes and the hub hand out addresses of one pool at once, and no address
//! is ever on two clusters; then one spoke's claims go and its blocks go back to the hub.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ferro_ipam_e2e::invariants::shared::findings;
use ferro_ipam_e2e::objects::Scope;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use crate::fleet::{Cluster, Fleet, POOL, POOL_KIND, fleet};
use crate::look::{self, Side};
use crate::report::{Report, shorten};
use crate::{
    ALL_READY_WITHIN, BLOCKS_RETURNED_WITHIN, CHECK_SETTLES_WITHIN, CLAIMS_PER_SPOKE, CREATES_IN_FLIGHT, HUB_CLAIMS,
    POLL, SPOKE_LEASE_FRESH,
};

/// The Lease a spoke renews in its hub namespace.
const SPOKE_LEASE: &str = "ferro-ipam-spoke";

/// One cluster's part: its claims' namespace and how many claims it makes.
struct Part<'a> {
    cluster: &'a Cluster,
    scope: Scope,
    claims: usize,
}

impl Part<'_> {
    fn side(&self) -> Side<'_> {
        Side { cluster: self.cluster, client: self.scope.client.clone(), claims_namespace: self.scope.ns.clone() }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thousand_claims_on_each_spoke_and_a_hundred_on_the_hub_share_one_pool_without_a_duplicate() {
    let fleet = fleet();
    let mut report = Report::new("shared");
    for spoke in &fleet.spokes {
        if let Err(error) = fleet.operator(spoke, "spoke-pool.sh", Some(spoke.name)) {
            panic!("the spoke pool on {}: {error:#}", spoke.name);
        }
    }
    let hub = fleet.hub.plane.client().await;
    let mut parts =
        vec![Part { cluster: &fleet.hub, scope: Scope::on(fleet.hub.plane, "hub-claims").await, claims: HUB_CLAIMS }];
    for spoke in &fleet.spokes {
        parts.push(Part { cluster: spoke, scope: Scope::on(spoke.plane, "workloads").await, claims: CLAIMS_PER_SPOKE });
    }

    let began = Instant::now();
    let creates = parts.iter().map(|p| create_claims(&p.scope, p.claims));
    if let Err(error) = futures::future::try_join_all(creates).await {
        panic!("creating the claims: {error:#}");
    }
    report.note(format!(
        "{} claims created on the three clusters at once in {:.1} s",
        parts.iter().map(|p| p.claims).sum::<usize>(),
        began.elapsed().as_secs_f64()
    ));

    let all_ready = match wait_all_ready(&parts, &hub, began + ALL_READY_WITHIN).await {
        Ok(()) => {
            report.note(format!("every claim Ready {:.1} s after the first create", began.elapsed().as_secs_f64()));
            true
        }
        Err(error) => {
            report.fail(format!("claims become Ready: {error:#}"));
            false
        }
    };
    note_blocks(&hub, &mut report).await;
    let sides: Vec<Side> = parts.iter().map(Part::side).collect();
    check(&sides, &hub, all_ready, "after the claims", &mut report).await;
    spoke_leases(fleet, &hub, &mut report).await;

    if all_ready {
        let (returning, staying) = (&parts[1], &parts[2]);
        blocks_returned(returning, staying, &hub, &mut report).await;
        check(&sides, &hub, true, &format!("after {}'s claims were deleted", returning.cluster.name), &mut report)
            .await;
    } else {
        report.note("the blocks' return was not tried: not every claim was Ready");
    }
    report.conclude(fleet);
}

/// Creates `count` claims `c-<n>` on the spoke pool (or the hub's pool), many at a time.
async fn create_claims(s: &Scope, count: usize) -> Result<()> {
    futures::stream::iter(0..count)
        .map(|n| async move { s.claim(&format!("c-{n}"), POOL_KIND, POOL).await })
        .buffer_unordered(CREATES_IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .map_err(|e| anyhow!("on {}: {e:#}", s.plane.server))?;
    Ok(())
}

/// Waits until every claim of every part is Ready; else says how each cluster stands.
async fn wait_all_ready(parts: &[Part<'_>], hub: &Client, deadline: Instant) -> Result<()> {
    let mut last_said = Instant::now();
    loop {
        let mut done = true;
        let mut standing = Vec::new();
        for part in parts {
            let claims = look::claims(&part.scope.client, &part.scope.ns).await?;
            let ready =
                claims.iter().filter(|c| look::condition(c, "Ready").is_some_and(|(s, _, _)| s == "True")).count();
            done &= ready == part.claims;
            standing.push(format!("{}: {}", part.cluster.name, look::standing(&claims)));
        }
        if done {
            return Ok(());
        }
        let blocks = look::blocks_by_namespace(&look::blocks(hub, None).await?);
        let blocks = format!("the hub's AddressBlocks (namespace: count, granted): {blocks:?}");
        if Instant::now() > deadline {
            return Err(anyhow!("not within {ALL_READY_WITHIN:?}:\n  {}\n  {blocks}", standing.join("\n  ")));
        }
        if last_said.elapsed() > Duration::from_secs(15) {
            eprintln!("[shared] waiting for Ready: {}; {blocks}", standing.join("; "));
            last_said = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Notes how many blocks each spoke holds.
async fn note_blocks(hub: &Client, report: &mut Report) {
    match look::blocks(hub, None).await {
        Ok(blocks) => report.note(format!(
            "the hub's AddressBlocks (namespace: count, granted): {:?}",
            look::blocks_by_namespace(&blocks)
        )),
        Err(error) => report.fail(format!("listing the hub's AddressBlocks: {error:#}")),
    }
}

/// The cross-cluster invariants. Fatal findings fail at the first look; pending ones (claims not
/// bound yet) are looked at again for a while when `settle`, else reported at once.
async fn check(sides: &[Side<'_>], hub: &Client, settle: bool, when: &str, report: &mut Report) {
    let deadline = Instant::now() + CHECK_SETTLES_WITHIN;
    loop {
        let look = match look::look(sides, hub).await {
            Ok(look) => look,
            Err(error) => return report.fail(format!("the invariants {when}: looking: {error:#}")),
        };
        let found = findings(&look);
        let addresses: usize = look.clusters.iter().map(|c| c.addresses.len()).sum();
        if found.is_empty() {
            return report.note(format!(
                "the invariants hold {when}: {addresses} addresses on {} clusters, {} AddressBlocks",
                look.clusters.len(),
                look.blocks.len()
            ));
        }
        if !found.fatal.is_empty() || !settle || Instant::now() > deadline {
            let mut listing = found.fatal.clone();
            listing.extend(found.pending.iter().cloned());
            return report.fail(format!(
                "the invariants {when} ({} fatal, {} pending findings; {addresses} addresses):\n  {}",
                found.fatal.len(),
                found.pending.len(),
                shorten(&listing.join("\n  "), 40)
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each spoke's Lease in its hub namespace, renewed lately.
async fn spoke_leases(fleet: &Fleet, hub: &Client, report: &mut Report) {
    for spoke in &fleet.spokes {
        let namespace = spoke.hub_namespace.expect("a spoke has a hub namespace");
        let leases: Api<Lease> = Api::namespaced(hub.clone(), namespace);
        let lease = match leases.get_opt(SPOKE_LEASE).await {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                report.fail(format!("{}: no Lease {namespace}/{SPOKE_LEASE} in the hub", spoke.name));
                continue;
            }
            Err(error) => {
                report.fail(format!("{}: reading Lease {namespace}/{SPOKE_LEASE}: {error}", spoke.name));
                continue;
            }
        };
        let spec = lease.spec.unwrap_or_default();
        let renewed = spec.renew_time.or(spec.acquire_time).map(|t| t.0);
        let age = renewed.map(|t| Timestamp::now().duration_since(t).as_secs_f64());
        match age {
            Some(age) if age <= SPOKE_LEASE_FRESH.as_secs_f64() => report.note(format!(
                "{}: Lease {namespace}/{SPOKE_LEASE} held by {:?}, renewed {age:.1} s ago",
                spoke.name, spec.holder_identity
            )),
            _ => report.fail(format!(
                "{}: Lease {namespace}/{SPOKE_LEASE} not renewed within {SPOKE_LEASE_FRESH:?}: renewed {renewed:?}, holder {:?}",
                spoke.name, spec.holder_identity
            )),
        }
    }
}

/// The granted blocks of a hub namespace, as (name, CIDR).
async fn granted(hub: &Client, namespace: &str) -> Result<BTreeSet<(String, String)>> {
    Ok(look::blocks(hub, Some(namespace))
        .await?
        .iter()
        .map(look::block_seen)
        .filter(|b| b.granted)
        .map(|b| (b.name, b.cidr.unwrap_or_default()))
        .collect())
}

/// Deletes every claim of `returning`; within [`BLOCKS_RETURNED_WITHIN`] its claims and
/// addresses are gone and so are its blocks in the hub, while `staying`'s blocks stay as they were.
async fn blocks_returned(returning: &Part<'_>, staying: &Part<'_>, hub: &Client, report: &mut Report) {
    let (gone_ns, kept_ns) = (returning.cluster.hub_namespace.unwrap(), staying.cluster.hub_namespace.unwrap());
    let (before, kept_before) = match (granted(hub, gone_ns).await, granted(hub, kept_ns).await) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return report.fail(format!("listing blocks before the deletion: {e:#}")),
    };
    let plane = returning.cluster.plane;
    let resource = "ipaddressclaims.ipam.cluster.x-k8s.io";
    if let Err(error) = plane.kubectl_ok(&["delete", resource, "--all", "-n", &returning.scope.ns, "--wait=false"]) {
        return report.fail(format!("deleting {}'s claims: {error:#}", returning.cluster.name));
    }
    let deleted = Instant::now();
    let addresses: Api<DynamicObject> =
        Api::namespaced_with(returning.scope.client.clone(), &returning.scope.ns, &look::addresses_resource());
    let mut left = String::new();
    let mut returned = false;
    while deleted.elapsed() < BLOCKS_RETURNED_WITHIN {
        let claims = look::claims(&returning.scope.client, &returning.scope.ns).await.map(|c| c.len());
        let held = addresses.list(&ListParams::default()).await.map(|l| l.items.len());
        let blocks = look::blocks(hub, Some(gone_ns)).await;
        match (claims, held, blocks) {
            (Ok(0), Ok(0), Ok(blocks)) if blocks.is_empty() => {
                returned = true;
                break;
            }
            (Ok(claims), Ok(held), Ok(blocks)) => {
                let shown: Vec<String> = blocks
                    .iter()
                    .take(10)
                    .map(|b| {
                        let seen = look::block_seen(b);
                        let deleting = if b.metadata.deletion_timestamp.is_some() { ", deleting" } else { "" };
                        format!("{} {:?} granted={}{deleting}", b.name_any(), seen.cidr, seen.granted)
                    })
                    .collect();
                left = format!(
                    "{claims} claims and {held} IPAddresses left on {}, {} AddressBlocks in the hub's {gone_ns}: {}",
                    returning.cluster.name,
                    blocks.len(),
                    shown.join(", ")
                );
            }
            (claims, held, blocks) => left = format!("listing: {claims:?} {held:?} {:?}", blocks.map(|b| b.len())),
        }
        tokio::time::sleep(POLL).await;
    }
    if returned {
        report.note(format!(
            "{}'s {} blocks returned {:.1} s after its claims were deleted",
            returning.cluster.name,
            before.len(),
            deleted.elapsed().as_secs_f64()
        ));
    } else {
        report.fail(format!(
            "{}'s blocks returned within {BLOCKS_RETURNED_WITHIN:?} of deleting its claims ({} granted before): {left}",
            returning.cluster.name,
            before.len()
        ));
    }
    match granted(hub, kept_ns).await {
        Ok(kept) if kept == kept_before => {
            report.note(format!("{}'s {} blocks stayed as they were", staying.cluster.name, kept.len()))
        }
        Ok(kept) => report.fail(format!(
            "{}'s blocks changed while {}'s were returned: gone {:?}, new {:?}",
            staying.cluster.name,
            returning.cluster.name,
            kept_before.difference(&kept).collect::<Vec<_>>(),
            kept.difference(&kept_before).collect::<Vec<_>>()
        )),
        Err(error) => report.fail(format!("listing {}'s blocks after: {error:#}", staying.cluster.name)),
    }
}
