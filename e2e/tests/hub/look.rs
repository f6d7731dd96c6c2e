//! One look at the three clusters for the cross-cluster checker: the claims of the test's
//! namespaces, every `IPAddress` of the shared pool, the hub's `AddressBlock`s and its pool's
//! addresses. Read as plain JSON (`DynamicObject`), with the API's field names, so that the
//! checker judges the objects as stored, not as ferro-ipam's types would read them.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context as _, Result};
use ferro_ipam_e2e::contract::ipam_api_version;
use ferro_ipam_e2e::invariants::shared::{AddressSeen, BlockSeen, ClaimSeen, ClusterLook, SharedLook};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::fleet::{Cluster, POOL, POOL_KIND};

fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn claims_resource() -> ApiResource {
    resource(&ipam_api_version(), "IPAddressClaim", "ipaddressclaims")
}

pub fn addresses_resource() -> ApiResource {
    resource(&ipam_api_version(), "IPAddress", "ipaddresses")
}

pub fn blocks_resource() -> ApiResource {
    resource("hub.ferro-ipam.dev/v1alpha1", "AddressBlock", "addressblocks")
}

pub fn global_pools_resource() -> ApiResource {
    resource("ipam.cluster.x-k8s.io/v1alpha2", "GlobalInClusterIPPool", "globalinclusterippools")
}

/// One cluster of a look: its client and the namespace of the test's claims there.
pub struct Side<'a> {
    pub cluster: &'a Cluster,
    pub client: Client,
    pub claims_namespace: String,
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

/// The condition `type` of an object's status: (status, reason, message).
pub fn condition(object: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let conditions = object.data["status"]["conditions"].as_array()?;
    let found = conditions.iter().find(|c| c["type"] == type_)?;
    Some((
        text(&found["status"]).unwrap_or_default(),
        text(&found["reason"]).unwrap_or_default(),
        text(&found["message"]).unwrap_or_default(),
    ))
}

fn is_true(object: &DynamicObject, type_: &str) -> bool {
    condition(object, type_).is_some_and(|(status, _, _)| status == "True")
}

/// The claims of `namespace`, as stored.
pub async fn claims(client: &Client, namespace: &str) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &claims_resource());
    Ok(api.list(&ListParams::default()).await.context("listing claims")?.items)
}

/// The `AddressBlock`s of the hub: of `namespace`, or of every namespace.
pub async fn blocks(hub: &Client, namespace: Option<&str>) -> Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(hub.clone(), ns, &blocks_resource()),
        None => Api::all_with(hub.clone(), &blocks_resource()),
    };
    Ok(api.list(&ListParams::default()).await.context("listing AddressBlocks")?.items)
}

pub fn block_seen(block: &DynamicObject) -> BlockSeen {
    BlockSeen {
        namespace: block.namespace().unwrap_or_default(),
        name: block.name_any(),
        size: block.data["spec"]["size"].as_u64().and_then(|s| u32::try_from(s).ok()).unwrap_or(0),
        cidr: text(&block.data["status"]["cidr"]),
        granted: is_true(block, "Granted"),
    }
}

/// Whether an `IPAddress` is of the pool under test (a `GlobalInClusterIPPool` named `pool`).
fn of_the_pool(address: &DynamicObject, pool: &str) -> bool {
    let reference = &address.data["spec"]["poolRef"];
    reference["kind"] == POOL_KIND && reference["name"] == pool
}

async fn cluster_look(side: &Side<'_>, pool: &str) -> Result<ClusterLook> {
    let claims = claims(&side.client, &side.claims_namespace)
        .await?
        .iter()
        .map(|claim| ClaimSeen {
            namespace: claim.namespace().unwrap_or_default(),
            name: claim.name_any(),
            ready: is_true(claim, "Ready"),
            address_ref: text(&claim.data["status"]["addressRef"]["name"]).filter(|n| !n.is_empty()),
        })
        .collect();
    let api: Api<DynamicObject> = Api::all_with(side.client.clone(), &addresses_resource());
    let addresses = api
        .list(&ListParams::default())
        .await
        .context("listing IPAddresses")?
        .items
        .iter()
        .filter(|a| of_the_pool(a, pool))
        .map(|a| AddressSeen {
            namespace: a.namespace().unwrap_or_default(),
            name: a.name_any(),
            claim: text(&a.data["spec"]["claimRef"]["name"]).unwrap_or_default(),
            address: text(&a.data["spec"]["address"]).unwrap_or_default(),
        })
        .collect();
    Ok(ClusterLook {
        name: side.cluster.name.to_owned(),
        hub_namespace: side.cluster.hub_namespace.map(str::to_owned),
        claim_namespaces: BTreeSet::from([side.claims_namespace.clone()]),
        claims,
        addresses,
    })
}

/// One look at `sides` and at the hub (`hub`'s client), for the pool `shared`.
pub async fn look(sides: &[Side<'_>], hub: &Client) -> Result<SharedLook> {
    look_at(sides, hub, POOL).await
}

/// One look at `sides` and at the hub, for the `GlobalInClusterIPPool` `pool` on every side.
pub async fn look_at(sides: &[Side<'_>], hub: &Client, pool_name: &str) -> Result<SharedLook> {
    let mut clusters = Vec::new();
    for side in sides {
        let look = cluster_look(side, pool_name).await;
        clusters.push(look.with_context(|| format!("looking at {}", side.cluster.name))?);
    }
    let blocks = blocks(hub, None).await?.iter().map(block_seen).collect();
    let pools: Api<DynamicObject> = Api::all_with(hub.clone(), &global_pools_resource());
    let pool = pools.get(pool_name).await.context("the hub's pool")?;
    let hub_pool = pool.data["spec"]["addresses"].as_array().into_iter().flatten().filter_map(text).collect();
    Ok(SharedLook { clusters, blocks, hub_pool })
}

/// How a cluster's claims stand: Ready, and the others by (status, reason) with one message.
pub fn standing(claims: &[DynamicObject]) -> String {
    let mut ready = 0;
    let mut others: BTreeMap<(String, String), (usize, String)> = BTreeMap::new();
    for claim in claims {
        match condition(claim, "Ready") {
            Some((status, _, _)) if status == "True" => ready += 1,
            Some((status, reason, message)) => {
                let entry = others.entry((status, reason)).or_insert((0, message));
                entry.0 += 1;
            }
            None => others.entry(("-".into(), "no Ready condition".into())).or_insert((0, String::new())).0 += 1,
        }
    }
    let mut out = format!("{ready} of {} Ready", claims.len());
    for ((status, reason), (count, message)) in others {
        out.push_str(&format!("; {count} Ready={status} {reason}: {message}"));
    }
    out
}

/// The hub's blocks by namespace: how many, how many granted.
pub fn blocks_by_namespace(blocks: &[DynamicObject]) -> BTreeMap<String, (usize, usize)> {
    let mut by: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for block in blocks {
        let entry = by.entry(block.namespace().unwrap_or_default()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(is_true(block, "Granted"));
    }
    by
}
