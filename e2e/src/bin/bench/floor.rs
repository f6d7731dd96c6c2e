//! The floor: a plain client that makes ferro-ipam's writes for every claim (finalizer patch,
//! `IPAddress` create, status patch, as `src/controller/claim/mod.rs` does) with no allocation
//! logic (pool `pool-<i>` holds `10.<i>.0.0/16`, or as a prefix pool `fd00:<i>::/48`; the k-th
//! claim seen gets its k-th address, or /64).
//! It runs as a process of its own (`ferro-ipam-bench floor ...`) so that its memory and CPU are
//! measured like a provider's.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use ferro_ipam::api::{InClusterIPPool, InClusterPrefixPool};
use ferro_ipam_e2e::objects::capi;
use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// `floor --kubeconfig PATH --namespace NS --concurrency N`
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

    let mut pools: HashMap<String, String> = Api::<InClusterIPPool>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    for pool in Api::<InClusterPrefixPool>::namespaced(client.clone(), &namespace).list(&ListParams::default()).await? {
        pools.insert(pool.name_any(), pool.uid().unwrap_or_default());
    }
    let pools = Arc::new(pools);
    let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), &namespace, &capi().claim_resource());
    let addresses: Api<IPAddress> = Api::namespaced_with(client.clone(), &namespace, &capi().address_resource());
    let slots = Arc::new(Semaphore::new(concurrency));
    let mut next: HashMap<String, u32> = HashMap::new();
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
        let offset = *counter + 2;
        *counter += 1;
        let Some(index) = pool.strip_prefix("pool-").and_then(|i| i.parse::<u8>().ok()) else {
            bail!("claim {} names pool {pool:?}, not pool-<i>", claim.name_any());
        };
        let ip = if claim.spec.pool_ref.kind == "InClusterPrefixPool" {
            IpAddr::V6(Ipv6Addr::new(0xfd00, u16::from(index), 0, offset as u16, 0, 0, 0, 0))
        } else {
            IpAddr::V4(Ipv4Addr::new(10, index, (offset / 256) as u8, (offset % 256) as u8))
        };
        let permit = slots.clone().acquire_owned().await?;
        let (claims, addresses, pools) = (claims.clone(), addresses.clone(), pools.clone());
        tokio::spawn(async move {
            if let Err(error) = fulfil(&claims, &addresses, &pools, &claim, ip).await {
                eprintln!("floor: {}: {error:#}", claim.name_any());
            }
            drop(permit);
        });
    }
    Ok(())
}

pub async fn fulfil(
    claims: &Api<IPAddressClaim>,
    addresses: &Api<IPAddress>,
    pools: &HashMap<String, String>,
    claim: &IPAddressClaim,
    ip: IpAddr,
) -> Result<()> {
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
    let (prefix, gateway) = match ip {
        IpAddr::V4(v4) => (16, format!("10.{}.0.1", v4.octets()[1])),
        IpAddr::V6(v6) => (64, format!("fd00:{:x}::1", v6.segments()[1])),
    };
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
            "gateway": gateway,
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
