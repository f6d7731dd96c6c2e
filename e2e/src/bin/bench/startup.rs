//! Start-up on a big cluster. One control plane with 100 pools is filled in steps: to each
//! start-up size in turn, claims with their `IPAddress` objects written directly, as a provider
//! leaves them. Before the fill, ferro-ipam's idle memory is read on the empty pools; at each
//! size, the list floor (paged, then unpaged), ferro-ipam and the in-cluster provider start on
//! it in turn.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use ferro_ipam::api::InClusterIPPool;
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::RELEASE_ADDRESS_FINALIZER;
use ferro_ipam_e2e::ControlPlane;
use ferro_ipam_e2e::objects::capi;
use ferro_ipam_e2e::process::Process;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;

use crate::config::{Config, PoolKind, Subject};
use crate::floor::Allocated;
use crate::layout::Layout;
use crate::list_floor::{self, Listed};
use crate::measure::{RequestCounts, quiescent};
use crate::run::{create_claims, create_pools, fresh_plane, wait_pools_protected};
use crate::subject::{NAMESPACE, Running};

const POOLS: usize = 100;

/// Who starts on the big cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Starter {
    /// The list floor with the configured page size.
    ListFloor,
    /// The list floor with one unpaged list per kind.
    ListFloorUnpaged,
    FerroIpam,
    InCluster,
}

impl Starter {
    pub const ALL: [Starter; 4] =
        [Starter::ListFloor, Starter::ListFloorUnpaged, Starter::FerroIpam, Starter::InCluster];

    pub fn name(self) -> &'static str {
        match self {
            Starter::ListFloor => "list floor",
            Starter::ListFloorUnpaged => "list floor (unpaged)",
            Starter::FerroIpam => "ferro-ipam",
            Starter::InCluster => "in-cluster",
        }
    }
}

impl Serialize for Starter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct StartupResult {
    pub subject: Starter,
    /// `IPAddress` objects (and claims) on the cluster.
    pub addresses: usize,
    pub run: usize,
    /// Process start to ready: ferro-ipam's /readyz; the in-cluster provider's controllers all
    /// started their workers; the list floor's exit after its last list.
    pub ready_seconds: f64,
    /// Process start to a claim created once it is ready having its address (providers only).
    pub first_claim_seconds: Option<f64>,
    /// VmHWM (the list floor: its own `ru_maxrss`).
    pub peak_rss_mib: f64,
    /// VmRSS once the API went quiet after the probe claim (providers only).
    pub steady_rss_mib: Option<f64>,
    /// CPU time from process start until the API went quiet after the probe claim (the list
    /// floor: until its exit).
    pub cpu_seconds: f64,
    pub requests: BTreeMap<String, f64>,
    /// The list floor's page size (0: unpaged) and what it listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listed: Option<Listed>,
}

/// How long writing one step of the fill (claims, addresses, statuses) took.
#[derive(Clone, Debug, Serialize)]
pub struct FillResult {
    /// Claims before and after the step.
    pub from: usize,
    pub claims: usize,
    pub seconds: f64,
}

/// A start-up that was not measured, and why.
#[derive(Clone, Debug, Serialize)]
pub struct StartupSkip {
    pub subject: Starter,
    pub addresses: usize,
    pub reason: String,
}

/// Everything the start-up part measured so far.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Startup {
    /// ferro-ipam's VmRSS 2 s after /readyz on the 100 pools without claims.
    pub idle_rss_mib: Option<f64>,
    pub fills: Vec<FillResult>,
    pub results: Vec<StartupResult>,
    pub skipped: Vec<StartupSkip>,
}

/// Writes claims `claim-<k>` for k in `range` as a provider leaves them: claim k on pool
/// `pool-<k % 100>` with its finalizer, its `IPAddress` (the pool's (k / 100)-th address) and a
/// status in ferro-ipam's shape (which the in-cluster provider reads too: it needs only
/// `addressRef`).
async fn fill(
    client: &Client,
    layout: Layout,
    range: std::ops::Range<usize>,
    concurrency: usize,
) -> Result<FillResult> {
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
    let (from, to) = (range.start, range.end);
    futures::stream::iter(range)
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
    Ok(FillResult { from, claims: to, seconds: started.elapsed().as_secs_f64() })
}

/// Measures start-up at every configured size, adding to `startup` as it goes and calling
/// `progress` after each step (the report is rewritten there).
pub async fn measure(config: &Config, startup: &mut Startup, progress: &mut dyn FnMut(&Startup)) -> Result<()> {
    let Some(&largest) = config.startup_sizes.last() else { return Ok(()) };
    let layout = Layout::new(PoolKind::Addresses, POOLS)?;
    layout.check_fits(largest)?;
    let (plane, client) = fresh_plane().await?;
    create_pools(&client, layout, config.create_concurrency).await?;
    let wants = |s: Subject| config.subjects.contains(&s);

    if wants(Subject::FerroIpam) {
        let mut idle = Running::launch(config, &plane, Subject::FerroIpam)?;
        tokio::task::block_in_place(|| idle.wait_ready(config.timeout))?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss = idle.stats()?.rss_mib;
        idle.stop();
        eprintln!("bench: ferro-ipam idle on {POOLS} pools without claims: {rss:.1} MiB");
        startup.idle_rss_mib = Some(rss);
        progress(startup);
    }

    let mut filled = 0;
    for &size in &config.startup_sizes {
        eprintln!(
            "bench: filling the cluster from {filled} to {size} claims, addresses and statuses (written directly)"
        );
        let step = fill(&client, layout, filled..size, config.create_concurrency.max(100)).await?;
        eprintln!("bench:   filled in {:.0} s", step.seconds);
        startup.fills.push(step);
        filled = size;
        // One unmeasured start writes the pool statuses, so that every measured start finds the
        // cluster as a provider left it.
        let mut settler = Running::launch(config, &plane, Subject::FerroIpam)?;
        tokio::task::block_in_place(|| settler.wait_ready(config.timeout))?;
        wait_pools_protected(&client, PoolKind::Addresses, POOLS, Duration::from_secs(120)).await?;
        quiescent(&client, Duration::from_secs(300)).await?;
        settler.stop();
        progress(startup);

        for run in 0..config.startup_runs {
            for starter in Starter::ALL {
                let measured = match starter {
                    Starter::ListFloor | Starter::ListFloorUnpaged if wants(Subject::Floor) => {
                        let page_size = if starter == Starter::ListFloor { config.list_page_size } else { 0 };
                        list_floor_start(&plane, &client, starter, page_size, size, run).await?
                    }
                    Starter::FerroIpam if wants(Subject::FerroIpam) => {
                        provider_start(config, &plane, &client, Subject::FerroIpam, size, run).await?
                    }
                    Starter::InCluster if wants(Subject::InCluster) => match config.skip_startup(size) {
                        Some(reason) => {
                            if run == 0 {
                                eprintln!("bench: start-up of in-cluster on {size} addresses {reason}");
                                startup.skipped.push(StartupSkip { subject: starter, addresses: size, reason });
                            }
                            continue;
                        }
                        None => provider_start(config, &plane, &client, Subject::InCluster, size, run).await?,
                    },
                    _ => continue,
                };
                startup.results.push(measured);
                progress(startup);
            }
        }
    }
    if std::env::var("BENCH_KEEP_LOGS").is_ok_and(|v| v == "1") {
        crate::run::keep_logs(config, &plane, "logs-startup");
    }
    drop(plane);
    Ok(())
}

/// One start of the list floor with `page_size` (0: unpaged), timed from process start to exit.
async fn list_floor_start(
    plane: &ControlPlane,
    client: &Client,
    starter: Starter,
    page_size: u32,
    size: usize,
    run: usize,
) -> Result<StartupResult> {
    let before = RequestCounts::scrape(client).await?;
    let log = plane.dir.join(format!("list-floor-{size}-{page_size}-{run}.log"));
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("list-floor").arg("--kubeconfig").arg(&plane.kubeconfig).args(["--page-size", &page_size.to_string()]);
    let started = Instant::now();
    let mut process = Process::start("list-floor", command, log.clone())?;
    while process.is_running() {
        ensure_within(&started, Duration::from_secs(600), &process)?;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let Some(listed) = list_floor::parse_log(&text) else {
        bail!("the list floor printed no result:\n{}", process.tail(20));
    };
    let claims = listed.objects.get("IPAddressClaim").copied().unwrap_or(0);
    let addresses = listed.objects.get("IPAddress").copied().unwrap_or(0);
    if claims < size || addresses < size {
        bail!("the list floor listed {claims} claims and {addresses} addresses on a cluster of {size}");
    }
    let after = quiescent(client, Duration::from_secs(60)).await?;
    eprintln!(
        "bench: start-up of {} on {size} addresses, run {}: {seconds:.2} s ({:.2} s listing, {} pages), {:.0} MiB",
        starter.name(),
        run + 1,
        listed.seconds,
        listed.pages,
        listed.peak_rss_mib
    );
    Ok(StartupResult {
        subject: starter,
        addresses: size,
        run,
        ready_seconds: seconds,
        first_claim_seconds: None,
        peak_rss_mib: listed.peak_rss_mib,
        steady_rss_mib: None,
        cpu_seconds: listed.cpu_seconds,
        requests: after.since(&before).0,
        page_size: Some(page_size),
        listed: Some(listed),
    })
}

fn ensure_within(started: &Instant, limit: Duration, process: &Process) -> Result<()> {
    if started.elapsed() > limit {
        bail!("{} still running after {limit:?}:\n{}", process.name, process.tail(20));
    }
    Ok(())
}

/// One start of a provider: until ready, then until a new claim has its address; its memory once
/// the API is quiet again.
async fn provider_start(
    config: &Config,
    plane: &ControlPlane,
    client: &Client,
    subject: Subject,
    size: usize,
    run: usize,
) -> Result<StartupResult> {
    let claims: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().claim_resource());
    let before = RequestCounts::scrape(client).await?;
    let probe = format!("probe-{}-{size}-{run}", subject.name());
    let started = Instant::now();
    let mut running = Running::launch(config, plane, subject)?;
    tokio::task::block_in_place(|| running.wait_ready(config.timeout))?;
    let ready_seconds = started.elapsed().as_secs_f64();
    create_claims(client, PoolKind::Addresses, &probe, 0..1, POOLS, 1).await?;
    let name = format!("{probe}-0");
    // The benchmark's own reads of the probe, subtracted from the requests.
    let mut polls = 0u32;
    let served = tokio::time::timeout(config.timeout, async {
        loop {
            polls += 1;
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
    let after = quiescent(client, Duration::from_secs(120)).await?;
    let stats = running.stats()?;
    eprintln!(
        "bench: start-up of {} on {size} addresses, run {}: ready {ready_seconds:.1} s, first claim {first_claim_seconds:.1} s, \
         {:.0} MiB peak, {:.0} MiB steady",
        subject.name(),
        run + 1,
        stats.peak_rss_mib,
        stats.rss_mib
    );
    // The probe goes before the provider stops, so that the next start sees the same cluster.
    claims.delete(&name, &DeleteParams::default()).await?;
    while claims.get_opt(&name).await?.is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop();
    Ok(StartupResult {
        subject: if subject == Subject::FerroIpam { Starter::FerroIpam } else { Starter::InCluster },
        addresses: size,
        run,
        ready_seconds,
        first_claim_seconds: Some(first_claim_seconds),
        peak_rss_mib: stats.peak_rss_mib,
        steady_rss_mib: Some(stats.rss_mib),
        cpu_seconds: stats.cpu_seconds,
        requests: after
            .since(&before)
            .without("POST ipaddressclaims", 1.0)
            .without("GET ipaddressclaims", f64::from(polls))
            .0,
        page_size: None,
        listed: None,
    })
}
