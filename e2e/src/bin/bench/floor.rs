//! The floor: a plain client that makes ferro-ipam's writes for every claim (finalizer patch,
//! `IPAddress` create, status patch, as `src/controller/claim/mod.rs` does) with no allocation
//! logic: the k-th claim seen of pool `pool-<i>` gets the pool's k-th address, or /64, of the
//! benchmark's layout (layout.rs), which it checks against the pools it finds at its start.
//! Once the last claim of a pool has its address, it writes the pool's status once, with the
//! counts ferro-ipam writes (`src/controller/pool/mod.rs`): a provider owes that write too.
//! It runs as a process of its own (`ferro-ipam-bench floor ...`) so that its memory and CPU are
//! measured like a provider's.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, Result, bail, ensure};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use ferro_ipam::api::{InClusterIPPool, InClusterPrefixPool};
use ferro_ipam_e2e::objects::capi;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::config::PoolKind;
use crate::layout::Layout;

/// A pool the floor serves: what its status write needs, and how many of its claims still wait
/// for their address.
struct Served {
    api: Api<DynamicObject>,
    layout: Layout,
    generation: Option<i64>,
    claims: usize,
    waiting: AtomicUsize,
}

impl Served {
    /// Counts one more of the pool's claims served; after the last, writes the pool's status.
    async fn claim_served(&self, name: &str) -> Result<()> {
        if self.waiting.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Ok(());
        }
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let status = pool_status(&self.layout, self.claims, self.generation, &now);
        self.api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await?;
        Ok(())
    }
}

/// The merge patch of a pool's status once `used` of its addresses are handed out, in the shape
/// and with the counts ferro-ipam writes (no address out of range, none reserved).
pub fn pool_status(layout: &Layout, used: usize, generation: Option<i64>, now: &str) -> Value {
    let total = layout.provider_total();
    let free = total - used as u128;
    let unit = match layout.kind {
        PoolKind::Addresses => "addresses",
        PoolKind::Prefixes => "sub-prefixes",
    };
    let (reason, message) = match free {
        0 => ("Exhausted", format!("all {total} {unit} are allocated")),
        _ => ("Valid", format!("{free} of {total} {unit} free")),
    };
    json!({"status": {
        "ipAddresses": {"total": total as i64, "used": used, "free": free as i64, "outOfRange": 0, "reserved": null},
        "families": [{"family": layout.family(), "total": total.to_string(), "used": used.to_string(),
                      "free": free.to_string(), "outOfRange": "0"}],
        "recentlyReleased": null,
        "conditions": [{"type": "Ready", "status": "True", "reason": reason, "message": message,
                        "lastTransitionTime": now, "observedGeneration": generation}],
    }})
}

/// `floor --kubeconfig PATH --namespace NS --concurrency N --claims N` (the run's claims after
/// the warm-up claim: with it, they tell the floor how many claims each pool gets).
pub async fn main(args: &[String]) -> Result<()> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .with_context(|| format!("{name} is required"))
    };
    let kubeconfig = Kubeconfig::read_from(flag("--kubeconfig")?)?;
    let client = Client::try_from(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)?;
    let namespace = flag("--namespace")?;
    let concurrency: usize = flag("--concurrency")?.parse()?;
    let run_claims: usize = flag("--claims")?.parse()?;

    // Each pool: its name, UID, generation and CIDRs.
    type Found = (String, Option<String>, Option<i64>, Vec<String>);
    let ip_pools: Vec<Found> = Api::<InClusterIPPool>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .into_iter()
        .map(|p| (p.name_any(), p.uid(), p.metadata.generation, p.spec.addresses))
        .collect();
    let prefix_pools: Vec<Found> = Api::<InClusterPrefixPool>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .into_iter()
        .map(|p| (p.name_any(), p.uid(), p.metadata.generation, p.spec.prefixes))
        .collect();
    let mut pools: HashMap<String, String> = HashMap::new();
    let mut served: HashMap<String, Served> = HashMap::new();
    let mut layouts: HashMap<&str, Layout> = HashMap::new();
    for (kind, found) in [(PoolKind::Addresses, ip_pools), (PoolKind::Prefixes, prefix_pools)] {
        if found.is_empty() {
            continue;
        }
        let layout = Layout::new(kind, found.len())?;
        let resource = match kind {
            PoolKind::Addresses => ApiResource::erase::<InClusterIPPool>(&()),
            PoolKind::Prefixes => ApiResource::erase::<InClusterPrefixPool>(&()),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        for (name, uid, generation, cidrs) in found {
            let i = layout.index(&name)?;
            ensure!(
                cidrs == [layout.cidr(i)],
                "pool {name} holds {cidrs:?}, not {} as the layout says",
                layout.cidr(i)
            );
            let claims = layout.claims_in(i, run_claims);
            let waiting = AtomicUsize::new(claims);
            served.insert(name.clone(), Served { api: api.clone(), layout, generation, claims, waiting });
            pools.insert(name, uid.unwrap_or_default());
        }
        layouts.insert(kind.kind(), layout);
    }
    let pools = Arc::new(pools);
    let served = Arc::new(served);
    let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), &namespace, &capi().claim_resource());
    let addresses: Api<IPAddress> = Api::namespaced_with(client.clone(), &namespace, &capi().address_resource());
    let slots = Arc::new(Semaphore::new(concurrency));
    let mut next: HashMap<String, usize> = HashMap::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut events = watcher::watcher(claims.clone(), watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        let claim = match event? {
            Event::InitDone => {
                println!("floor: watching claims in {namespace}");
                continue;
            }
            Event::Apply(claim) | Event::InitApply(claim) => claim,
            _ => continue,
        };
        if claim.status.as_ref().is_some_and(|s| s.address_ref.is_some()) || !seen.insert(claim.name_any()) {
            continue;
        }
        let pool = claim.spec.pool_ref.name.clone();
        let counter = next.entry(pool.clone()).or_insert(0);
        let k = *counter;
        *counter += 1;
        let Some(layout) = layouts.get(claim.spec.pool_ref.kind.as_str()) else {
            bail!("claim {} names a pool of kind {:?}, which has no pools", claim.name_any(), claim.spec.pool_ref.kind);
        };
        let index = layout.index(&pool)?;
        let Some(ip) = layout.kth(index, k) else {
            bail!("pool {pool} is full: {k} claims");
        };
        let address = Allocated { ip, prefix: layout.address_prefix(), gateway: layout.gateway(index) };
        let permit = slots.clone().acquire_owned().await?;
        let (claims, addresses, pools, served) = (claims.clone(), addresses.clone(), pools.clone(), served.clone());
        tokio::spawn(async move {
            if let Err(error) = fulfil(&claims, &addresses, &pools, &claim, address).await {
                eprintln!("floor: {}: {error:#}", claim.name_any());
            } else if let Some(pool) = served.get(&claim.spec.pool_ref.name)
                && let Err(error) = pool.claim_served(&claim.spec.pool_ref.name).await
            {
                eprintln!("floor: the status of pool {}: {error:#}", claim.spec.pool_ref.name);
            }
            drop(permit);
        });
    }
    Ok(())
}

/// What a claim gets: the address (or sub-prefix), its prefix and the pool's gateway.
#[derive(Clone, Copy, Debug)]
pub struct Allocated {
    pub ip: IpAddr,
    pub prefix: i32,
    pub gateway: IpAddr,
}

/// Writes what a provider writes for `claim`: its finalizer, its `IPAddress` holding `address`,
/// and its status.
pub async fn fulfil(
    claims: &Api<IPAddressClaim>,
    addresses: &Api<IPAddress>,
    pools: &HashMap<String, String>,
    claim: &IPAddressClaim,
    address: Allocated,
) -> Result<()> {
    let Allocated { ip, prefix, gateway } = address;
    let name = claim.name_any();
    if !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER) {
        let mut finalizers = claim.finalizers().to_vec();
        finalizers.push(RELEASE_ADDRESS_FINALIZER.to_owned());
        let finalizer_patch =
            json!({"metadata": {"resourceVersion": claim.resource_version(), "finalizers": finalizers}});
        claims.patch(&name, &PatchParams::default(), &Patch::Merge(&finalizer_patch)).await?;
    }

    let pool = &claim.spec.pool_ref.name;
    let kind = &claim.spec.pool_ref.kind;
    let address: IPAddress = serde_json::from_value(json!({
        "apiVersion": capi().address_resource().api_version,
        "kind": "IPAddress",
        "metadata": {
            "name": name,
            "finalizers": [PROTECT_ADDRESS_FINALIZER],
            "ownerReferences": [
                {"apiVersion": capi().claim_resource().api_version, "kind": "IPAddressClaim", "name": name,
                 "uid": claim.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true},
                {"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": kind, "name": pool,
                 "uid": pools.get(pool).cloned().unwrap_or_default(), "controller": false, "blockOwnerDeletion": true},
            ],
        },
        "spec": {
            "claimRef": {"name": name},
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind, "name": pool},
            "address": ip.to_string(),
            "prefix": prefix,
            "gateway": gateway.to_string(),
        },
    }))?;
    addresses.create(&PostParams::default(), &address).await?;

    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let ready = |extra: Value| {
        let mut c = json!({"type": "Ready", "status": "True", "reason": "Allocated", "message": format!("allocated {ip}"),
                           "lastTransitionTime": now});
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    };
    let status = json!({"status": {
        "addressRef": {"name": name},
        "conditions": [ready(json!({"observedGeneration": claim.metadata.generation}))],
        "deprecated": {"v1beta1": {"conditions": [ready(json!({}))]}},
    }});
    claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_status_carries_ferro_ipams_counts_and_a_ready_condition() {
        let layout = Layout::new(PoolKind::Addresses, 300).unwrap();
        let status = pool_status(&layout, 2, Some(1), "2026-12-05T10:00:00Z");
        let counts = &status["status"]["ipAddresses"];
        assert_eq!(
            (counts["total"].as_i64(), counts["used"].as_i64(), counts["free"].as_i64()),
            (Some(253), Some(2), Some(251))
        );
        assert_eq!(counts["outOfRange"], 0);
        assert!(counts.as_object().is_some_and(|c| c["reserved"].is_null()));
        let family = &status["status"]["families"][0];
        assert_eq!((family["family"].as_str(), family["free"].as_str()), (Some("IPv4"), Some("251")));
        let ready = &status["status"]["conditions"][0];
        assert_eq!(
            (ready["reason"].as_str(), ready["message"].as_str()),
            (Some("Valid"), Some("251 of 253 addresses free"))
        );
        assert_eq!(ready["observedGeneration"], 1);
    }
}
