//! Start-up on a big cluster: `startup_addresses` claims with their `IPAddress` objects over 100
//! pools (written directly, as a provider leaves them), then each provider started on it in turn.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::collections::HashMap;

use anyhow::{Context as _, Result, bail};
use ferro_ipam::api::InClusterIPPool;
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::RELEASE_ADDRESS_FINALIZER;
use ferro_ipam_e2e::objects::capi;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::config::{Config, PoolKind, Subject};
use crate::floor::Allocated;
use crate::layout::Layout;
use crate::measure::{RequestCounts, quiescent};
use crate::run::{create_claims, create_pools, fresh_plane, wait_pools_protected};
use crate::subject::{NAMESPACE, Running};

const POOLS: usize = 100;

#[derive(Clone, Debug, Serialize)]
pub struct StartupResult {
    pub subject: Subject,
    pub addresses: usize,
    pub run: usize,
    /// Process start to ready (ferro-ipam: /readyz; in-cluster: every controller's workers started).
    pub ready_seconds: f64,
    /// Process start to a claim created once it is ready having its address.
    pub first_claim_seconds: f64,
    pub peak_rss_mib: f64,
    /// CPU time from process start until the API went quiet after the first claim.
    pub cpu_seconds: f64,
    pub requests: BTreeMap<String, f64>,
}

/// How long writing the claims, addresses and statuses that fill the cluster took.
#[derive(Clone, Debug, Serialize)]
pub struct FillResult {
    pub claims: usize,
    pub seconds: f64,
}

/// Writes `total` claims as a provider leaves them: claim `claim-<k>` on `pool-<k % 100>` with
/// its finalizer, its `IPAddress`, and a status in ferro-ipam's shape (which the in-cluster
/// provider reads too: it needs only `addressRef`).
async fn fill(client: &Client, layout: Layout, total: usize, concurrency: usize) -> Result<FillResult> {
    let pools: HashMap<String, String> = Api::<InClusterIPPool>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().claim_resource());
    let addresses: Api<IPAddress> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().address_resource());
    let started = Instant::now();
    futures::stream::iter(0..total)
        .map(|k| {
            let (claims, addresses, pools) = (&claims, &addresses, &pools);
            async move {
                let pool = k % layout.pools;
                let ip = layout.kth(pool, k / layout.pools).with_context(|| format!("pool-{pool} is full"))?;
                let address = Allocated { ip, prefix: layout.address_prefix(), gateway: layout.gateway(pool) };
                let claim: IPAddressClaim = serde_json::from_value(json!({
                    "apiVersion": capi().claim_resource().api_version, "kind": "IPAddressClaim",
                    "metadata": {"name": format!("claim-{k}"), "finalizers": [RELEASE_ADDRESS_FINALIZER]},
                    "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool",
                                         "name": format!("pool-{pool}")}},
                }))?;
                let claim = claims.create(&PostParams::default(), &claim).await?;
                crate::floor::fulfil(claims, addresses, pools, &claim, address).await
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(FillResult { claims: total, seconds: started.elapsed().as_secs_f64() })
}

pub async fn measure(config: &Config) -> Result<(FillResult, Vec<StartupResult>)> {
    let total = config.startup_sizes.last().copied().unwrap_or_default();
    let (plane, client) = fresh_plane().await?;
    let layout = Layout::new(PoolKind::Addresses, POOLS)?;
    layout.check_fits(total)?;
    create_pools(&client, layout, config.create_concurrency).await?;

    eprintln!("bench: filling the cluster with {total} claims, addresses and statuses (written directly)");
    let fill = fill(&client, layout, total, config.create_concurrency.max(100)).await?;
    eprintln!("bench:   filled in {:.0} s", fill.seconds);
    // One unmeasured start writes the pool statuses, so that every measured start finds the
    // cluster as a provider left it.
    let mut settler = Running::launch(config, &plane, Subject::FerroIpam)?;
    tokio::task::block_in_place(|| settler.wait_ready(config.timeout))?;
    wait_pools_protected(&client, PoolKind::Addresses, POOLS, Duration::from_secs(120)).await?;
    quiescent(&client, Duration::from_secs(300)).await?;
    settler.stop();

    let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().claim_resource());
    let mut results = Vec::new();
    for run in 0..config.startup_runs {
        for subject in [Subject::FerroIpam, Subject::InCluster].into_iter().filter(|s| config.subjects.contains(s)) {
            let before = RequestCounts::scrape(&client).await?;
            let probe = format!("probe-{}-{run}", subject.name());
            let started = Instant::now();
            let mut running = Running::launch(config, &plane, subject)?;
            tokio::task::block_in_place(|| running.wait_ready(config.timeout))?;
            let ready_seconds = started.elapsed().as_secs_f64();
            create_claims(&client, PoolKind::Addresses, &probe, 0..1, POOLS, 1).await?;
            let name = format!("{probe}-0");
            let served = tokio::time::timeout(config.timeout, async {
                loop {
                    let claim = claims.get(&name).await?;
                    if claim.status.and_then(|s| s.address_ref).is_some() {
                        return anyhow::Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
            let first_claim_seconds = started.elapsed().as_secs_f64();
            if !matches!(served, Ok(Ok(()))) {
                bail!("{}: the probe claim got no address:\n{}", subject.name(), running.process().tail(20));
            }
            let after = quiescent(&client, Duration::from_secs(120)).await?;
            let stats = running.stats()?;
            eprintln!(
                "bench: start-up of {} on {total} addresses, run {}: ready {ready_seconds:.1}s, first claim {first_claim_seconds:.1}s",
                subject.name(),
                run + 1
            );
            // The probe goes before the provider stops, so that the next start sees the same cluster.
            claims.delete(&name, &DeleteParams::default()).await?;
            while claims.get_opt(&name).await?.is_some() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            running.stop();
            results.push(StartupResult {
                subject,
                addresses: total,
                run,
                ready_seconds,
                first_claim_seconds,
                peak_rss_mib: stats.peak_rss_mib,
                cpu_seconds: stats.cpu_seconds,
                requests: after.since(&before).without("POST ipaddressclaims", 1.0).0,
            });
        }
    }
    drop(plane);
    Ok((fill, results))
}
