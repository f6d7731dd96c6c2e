//! Reads what preflight looks at from a live cluster: list calls only, nothing is written.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;

use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::api::hub::{AddressBlock, SHARED_LABEL};
use crate::api::keys::IPAM_GROUP;
use crate::api::{CapiVersion, GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use crate::client::discovery;

use super::findings::{PrefixPools, Unreadable};

/// Objects per list request.
const PAGE: u32 = 500;

/// Everything preflight analyses, as read from the cluster.
#[derive(Clone, Debug)]
pub struct Inventory {
    pub capi: CapiVersion,
    pub in_cluster_pools: Vec<InClusterIPPool>,
    pub global_pools: Vec<GlobalInClusterIPPool>,
    /// Prefix pools, when their CRDs are served at `v1alpha2` (empty otherwise).
    pub in_cluster_prefix_pools: Vec<InClusterPrefixPool>,
    pub global_prefix_pools: Vec<GlobalInClusterPrefixPool>,
    pub addresses: Vec<IPAddress>,
    pub claims: Vec<IPAddressClaim>,
    /// None when the API server serves no Cluster kind: then no claim waits for its Cluster.
    pub clusters: Option<Vec<Cluster>>,
    pub prefix_pools: PrefixPools,
    pub unreadable: Vec<Unreadable>,
    /// The labels of every Namespace, by name; listed only when a global pool has a
    /// `namespaceSelector` or an `AddressBlock` exists (empty otherwise).
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// A hub's `AddressBlock`s, in all namespaces: the blocks of its pools leased to spokes.
    /// Empty when the API server serves no `AddressBlock`.
    pub blocks: Vec<AddressBlock>,
}

#[cfg(test)]
impl Inventory {
    /// An empty cluster serving `capi`.
    pub fn empty(capi: CapiVersion) -> Self {
        Inventory {
            capi,
            in_cluster_pools: Vec::new(),
            global_pools: Vec::new(),
            in_cluster_prefix_pools: Vec::new(),
            global_prefix_pools: Vec::new(),
            addresses: Vec::new(),
            claims: Vec::new(),
            clusters: None,
            prefix_pools: PrefixPools::default(),
            unreadable: Vec::new(),
            namespaces: BTreeMap::new(),
            blocks: Vec::new(),
        }
    }
}

/// Every object of `resource`, in all namespaces, page by page.
async fn list_all(client: &Client, resource: &ApiResource) -> Result<Vec<DynamicObject>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let mut all = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        all.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(all),
        }
    }
}

/// Lists `resource` and reads each object as `K`; objects that do not read go to `unreadable`.
async fn read_all<K: DeserializeOwned>(
    client: &Client,
    resource: &ApiResource,
    unreadable: &mut Vec<Unreadable>,
) -> anyhow::Result<Vec<K>> {
    let objects = list_all(client, resource).await.map_err(|error| explain(error, resource))?;
    Ok(typed(objects, resource, unreadable))
}

/// Reads listed objects as `K`; objects that do not read go to `unreadable`.
fn typed<K: DeserializeOwned>(
    objects: Vec<DynamicObject>,
    resource: &ApiResource,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<K> {
    let mut read = Vec::with_capacity(objects.len());
    for object in objects {
        let name = match object.namespace() {
            Some(ns) => format!("{ns}/{}", object.name_any()),
            None => object.name_any(),
        };
        match serde_json::to_value(&object).and_then(serde_json::from_value::<K>) {
            Ok(typed) => read.push(typed),
            Err(error) => {
                unreadable.push(Unreadable { kind: resource.kind.clone(), object: name, error: error.to_string() })
            }
        }
    }
    read
}

/// A failed list, in words that say what to fix.
fn explain(error: kube::Error, resource: &ApiResource) -> anyhow::Error {
    let what = format!("listing {} ({}/{})", resource.plural, resource.group, resource.version);
    match &error {
        kube::Error::Api(status) if status.code == 403 => {
            let name = if resource.group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            };
            anyhow::Error::new(error)
                .context(format!("{what}: forbidden; preflight needs get/list on {name} in all namespaces"))
        }
        kube::Error::Api(status) if status.code == 404 => anyhow::Error::new(error)
            .context(format!("{what}: the API server does not serve it; install the CRD of {}", resource.kind)),
        _ => anyhow::Error::new(error).context(what),
    }
}

/// The prefix pools of the cluster: their kinds counted, and read as ferro-ipam reads them when
/// their CRD serves `v1alpha2` (each kind listed once).
struct Prefixes {
    counted: PrefixPools,
    in_cluster: Vec<InClusterPrefixPool>,
    global: Vec<GlobalInClusterPrefixPool>,
}

/// One prefix-pool kind: how many objects it has, and those objects read as `K` when it is
/// served at `v1alpha2`. None when the API server serves the kind at no version.
async fn prefix_kind<K: DeserializeOwned>(
    client: &Client,
    group: &kube::discovery::ApiGroup,
    kind: &str,
    unreadable: &mut Vec<Unreadable>,
) -> anyhow::Result<Option<(usize, Vec<K>)>> {
    // Any version that serves the kind: the group's preferred one is the claims' (v1beta2).
    let served = group.versions().find_map(|version| {
        group.versioned_resources(version).into_iter().map(|(resource, _)| resource).find(|r| r.kind == kind)
    });
    let Some(resource) = served else {
        return Ok(None);
    };
    let objects = list_all(client, &resource).await.map_err(|error| explain(error, &resource))?;
    let count = objects.len();
    let read = if resource.version == "v1alpha2" { typed(objects, &resource, unreadable) } else { Vec::new() };
    Ok(Some((count, read)))
}

async fn prefix_pools(client: &Client, unreadable: &mut Vec<Unreadable>) -> anyhow::Result<Prefixes> {
    let group = kube::discovery::group(client, IPAM_GROUP)
        .await
        .with_context(|| format!("discovering API group {IPAM_GROUP}"))?;
    let in_cluster = prefix_kind(client, &group, "InClusterPrefixPool", unreadable).await?;
    let global = prefix_kind(client, &group, "GlobalInClusterPrefixPool", unreadable).await?;
    let counted = PrefixPools {
        served: in_cluster.is_some() || global.is_some(),
        in_cluster: in_cluster.as_ref().map_or(0, |(count, _)| *count),
        global: global.as_ref().map_or(0, |(count, _)| *count),
    };
    Ok(Prefixes {
        counted,
        in_cluster: in_cluster.map(|(_, read)| read).unwrap_or_default(),
        global: global.map(|(_, read)| read).unwrap_or_default(),
    })
}

/// Reads pools, addresses, claims, Clusters, prefix pools and a hub's `AddressBlock`s, in all
/// namespaces.
pub async fn gather(client: &Client) -> anyhow::Result<Inventory> {
    let served = discovery::versions(client).await?;
    let mut unreadable = Vec::new();
    let pool = ApiResource::erase::<InClusterIPPool>(&());
    let global = ApiResource::erase::<GlobalInClusterIPPool>(&());
    let in_cluster_pools = read_all(client, &pool, &mut unreadable).await?;
    let global_pools = read_all(client, &global, &mut unreadable).await?;
    let addresses = read_all(client, &served.ipam.address_resource(), &mut unreadable).await?;
    let claims = read_all(client, &served.ipam.claim_resource(), &mut unreadable).await?;
    let clusters = match served.cluster {
        Some(version) => Some(read_all(client, &version.cluster_resource(), &mut unreadable).await?),
        None => None,
    };
    let prefixes = prefix_pools(client, &mut unreadable).await?;
    let shared = in_cluster_pools.iter().any(|p: &InClusterIPPool| p.labels().contains_key(SHARED_LABEL))
        || global_pools.iter().any(|p: &GlobalInClusterIPPool| p.labels().contains_key(SHARED_LABEL));
    let blocks = address_blocks(client, shared, &mut unreadable).await?;
    let selectors = global_pools.iter().any(|p: &GlobalInClusterIPPool| p.spec.namespace_selector.is_some())
        || prefixes.global.iter().any(|p| p.spec.namespace_selector.is_some());
    let namespaces = if selectors || !blocks.is_empty() { namespace_labels(client).await? } else { BTreeMap::new() };
    Ok(Inventory {
        capi: served.ipam,
        in_cluster_pools,
        global_pools,
        in_cluster_prefix_pools: prefixes.in_cluster,
        global_prefix_pools: prefixes.global,
        addresses,
        claims,
        clusters,
        prefix_pools: prefixes.counted,
        unreadable,
        namespaces,
        blocks,
    })
}

/// The `AddressBlock`s of every namespace. None when the API server serves no `AddressBlock`
/// (no hub CRD), and none when they may not be listed on a cluster with no pool labelled
/// shared: such a cluster is no hub, it grants no block. A hub's must be read, or the addresses
/// it leased to spokes would look free.
async fn address_blocks(
    client: &Client,
    shared: bool,
    unreadable: &mut Vec<Unreadable>,
) -> anyhow::Result<Vec<AddressBlock>> {
    let resource = ApiResource::erase::<AddressBlock>(&());
    match list_all(client, &resource).await {
        Ok(objects) => Ok(typed(objects, &resource, unreadable)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(kube::Error::Api(status)) if status.code == 403 && !shared => Ok(Vec::new()),
        Err(error) => Err(explain(error, &resource)),
    }
}

/// The labels of every Namespace, for the selectors of global pools and the spokes of blocks.
async fn namespace_labels(client: &Client) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    let resource = ApiResource::erase::<Namespace>(&());
    let objects = list_all(client, &resource).await.map_err(|error| explain(error, &resource))?;
    Ok(objects.into_iter().map(|n| (n.name_any(), n.metadata.labels.unwrap_or_default())).collect())
}
