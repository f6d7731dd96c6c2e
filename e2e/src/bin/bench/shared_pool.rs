//! The shared-pool configuration, the aim of pools shared through a hub: a spoke serves N
//! claims (1,000) within [`MAX_RATIO`] times the time a local pool takes, measured side by side
//! in one run.
//!
//! A hub and a spoke (hub_pair.rs), each a control plane with its ferro-ipam. In each round, N
//! claims are created at once on a local pool of the spoke cluster, and N on a spoke pool of
//! the same size that leases blocks from the hub; the order alternates between rounds. Each
//! measurement has a namespace and a pool of its own, made just before it (a spoke pool holds
//! no block when its claims come, as on a spoke whose claims come after a quiet while), and is
//! timed from the first create until every claim is Ready. Then its claims are deleted, its
//! IPAddresses go, the pool is deleted, and for a spoke pool every block goes back to the hub,
//! before the next measurement starts. A warm-up claim on each kind of pool goes through the
//! same path first, unmeasured.
//!
//! The ratio is the median over the rounds of (spoke time / local time) of each round: the two
//! measurements of a round are minutes apart, so a busy spell of the machine weighs on both.
//! The report gives the ratio of the medians beside it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::hub::AddressBlock;
use ferro_ipam::api::keys::PROTECT_POOL_FINALIZER;
use ferro_ipam_e2e::objects::capi;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;

use crate::config::Config;
use crate::hub_pair::{HubPair, SPOKE, metrics_of, pool_spec};
use crate::measure::{RequestCounts, quiescent};
use crate::report::{median, total};
use crate::run::{AbortOnDrop, check_unique, keep_logs, list_all, load_average};

/// The aim: the spoke's time at most this many times the local pool's.
pub const MAX_RATIO: f64 = 1.5;
/// The kind of both pools on the spoke, and their name in their namespace.
const POOL_KIND: &str = "InClusterIPPool";
const POOL: &str = "pool";
/// How long a pool may take to be protected, a spoke pool's session to reach the hub.
const POOL_READY_WITHIN: Duration = Duration::from_secs(60);
/// How long the claims of a measurement may take to go, and its pool and blocks after them.
const TEAR_DOWN_WITHIN: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(100);

/// Which pool a measurement's claims name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolSide {
    /// An ordinary pool of the spoke cluster.
    Local,
    /// A pool with `spec.hub`, leasing blocks of the hub's shared pool.
    Spoke,
}

impl PoolSide {
    pub fn name(self) -> &'static str {
        match self {
            PoolSide::Local => "local",
            PoolSide::Spoke => "spoke",
        }
    }
}

impl Serialize for PoolSide {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The order of round `round` (from 0): the local pool first in even rounds, the spoke pool
/// first in odd ones.
pub fn order(round: usize) -> [PoolSide; 2] {
    match round % 2 {
        0 => [PoolSide::Local, PoolSide::Spoke],
        _ => [PoolSide::Spoke, PoolSide::Local],
    }
}

/// The AddressBlocks of a spoke measurement, as a watch of the hub saw them; times in seconds
/// after the first create.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Blocks {
    pub asked: usize,
    pub granted: usize,
    pub first_asked: Option<f64>,
    pub last_asked: Option<f64>,
    pub first_granted: Option<f64>,
    pub last_granted: Option<f64>,
    /// From a block's creation seen to its grant seen.
    pub grant_wait_median: Option<f64>,
    pub grant_wait_max: Option<f64>,
}

/// A spoke's round trips to its hub of one operation in a measurement, from the deltas of
/// `ferro_ipam_hub_request_duration_seconds` and `ferro_ipam_hub_requests_total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HubCalls {
    pub count: f64,
    pub seconds: f64,
    pub errors: f64,
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct SharedRun {
    pub pool: PoolSide,
    /// From 0.
    pub round: usize,
    /// Whether it came first in its round.
    pub first: bool,
    pub claims: usize,
    pub block_size: u32,
    /// From the first create until every claim was Ready.
    pub seconds: f64,
    /// Creating the claims (part of `seconds`).
    pub create_seconds: f64,
    /// Until the first claim was Ready, and half of them.
    pub first_ready_seconds: Option<f64>,
    pub half_ready_seconds: Option<f64>,
    /// Claims seen `Ready=False` before they were Ready, by the condition's reason (a spoke
    /// pool's claims that found no room wait with `WaitingForHub`).
    pub waited: BTreeMap<String, usize>,
    /// CPU time of each ferro-ipam from the first create until the spoke's API server was quiet.
    pub spoke_cpu_seconds: f64,
    pub hub_cpu_seconds: f64,
    /// The spoke API server's requests (the benchmark's creates subtracted), by "VERB resource".
    pub requests: BTreeMap<String, f64>,
    /// The spoke pool's blocks (none for a local pool).
    pub blocks: Blocks,
    /// The spoke's round trips to the hub, by operation.
    pub hub_calls: BTreeMap<String, HubCalls>,
    /// Mean of ferro-ipam's `allocation_latency` (a claim first seen to its IPAddress written).
    pub allocation_latency_mean: Option<f64>,
    /// The spoke's ferro-ipam's reconciles, by controller (`ferro_ipam_reconciles_total`).
    pub reconciles: BTreeMap<String, f64>,
    /// Deleting the claims until they, the pool and (spoke) its blocks were gone.
    pub teardown_seconds: f64,
    /// The machine's 1-minute load average before and after.
    pub load: (f64, f64),
}

/// Everything the configuration measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SharedPool {
    pub runs: Vec<SharedRun>,
    /// Starting both planes and ferro-ipams and setting them up, then the warm-up.
    pub setup_seconds: Option<f64>,
    pub warmup_seconds: Option<f64>,
}

/// The rounds: a hub and a spoke started for them, stopped after. `progress` is told each
/// measurement's result.
pub async fn measure(config: &Config, shared: &mut SharedPool, progress: &mut dyn FnMut(&SharedPool)) -> Result<()> {
    let began = Instant::now();
    let mut pair = HubPair::start(config).await.context("starting a hub and a spoke")?;
    shared.setup_seconds = Some(began.elapsed().as_secs_f64());
    eprintln!(
        "bench: hub at {} and spoke at {} ready in {:.1} s",
        pair.hub.server,
        pair.spoke.server,
        began.elapsed().as_secs_f64()
    );
    let outcome = rounds(config, &mut pair, shared, progress).await;
    let keep = std::env::var("BENCH_KEEP_LOGS").is_ok_and(|v| v == "1");
    if outcome.is_err() || keep {
        let prefix = if outcome.is_err() { "failed-shared-pool" } else { "logs-shared-pool" };
        for (plane, side) in [(&pair.hub, "hub"), (&pair.spoke, "spoke")] {
            if let Ok(text) = metrics_of(plane) {
                let _ = std::fs::write(plane.dir.join("ferro-ipam-metrics.log"), text);
            }
            keep_logs(config, plane, &format!("{prefix}-{side}"));
        }
    }
    pair.stop();
    outcome
}

async fn rounds(
    config: &Config,
    pair: &mut HubPair,
    shared: &mut SharedPool,
    progress: &mut dyn FnMut(&SharedPool),
) -> Result<()> {
    let began = Instant::now();
    for side in [PoolSide::Local, PoolSide::Spoke] {
        let namespace = format!("shared-warmup-{}", side.name());
        measure_one(config, pair, &namespace, side, 1, 0, false)
            .await
            .with_context(|| format!("warm-up claim on the {} pool", side.name()))?;
    }
    shared.warmup_seconds = Some(began.elapsed().as_secs_f64());
    for round in 0..config.shared_rounds {
        for (position, side) in order(round).into_iter().enumerate() {
            let namespace = format!("shared-{}-{}", round + 1, side.name());
            eprintln!(
                "bench: shared pool, round {}: {} claims on the {} pool ...",
                round + 1,
                config.shared_claims,
                side.name()
            );
            let run = measure_one(config, pair, &namespace, side, config.shared_claims, round, position == 0)
                .await
                .with_context(|| {
                    format!("{} claims on the {} pool, round {}", config.shared_claims, side.name(), round + 1)
                })?;
            eprintln!("bench:   {}", describe(&run));
            shared.runs.push(run);
            progress(shared);
        }
    }
    Ok(())
}

/// One log line of a measurement.
fn describe(run: &SharedRun) -> String {
    let mut line = format!(
        "{:.1} s ({:.1} s creating, first Ready {}, {} waited), spoke ferro-ipam {:.1} s CPU, hub {:.1} s, {:.2} requests per claim, torn down in {:.1} s",
        run.seconds,
        run.create_seconds,
        seconds(run.first_ready_seconds),
        run.waited.values().sum::<usize>(),
        run.spoke_cpu_seconds,
        run.hub_cpu_seconds,
        total(&run.requests) / run.claims as f64,
        run.teardown_seconds
    );
    if run.pool == PoolSide::Spoke {
        let b = &run.blocks;
        let _ = write!(
            line,
            "; {} blocks asked ({} granted), first asked {}, first granted {}, last granted {}, grant wait median {}",
            b.asked,
            b.granted,
            seconds(b.first_asked),
            seconds(b.first_granted),
            seconds(b.last_granted),
            seconds(b.grant_wait_median)
        );
    }
    line
}

fn seconds(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.1} s"))
}

fn pools_api(client: &Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1alpha2", POOL_KIND);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

fn claims_api(client: &Client, namespace: &str) -> Api<IPAddressClaim> {
    Api::namespaced_with(client.clone(), namespace, &capi().claim_resource())
}

fn addresses_api(client: &Client, namespace: &str) -> Api<IPAddress> {
    Api::namespaced_with(client.clone(), namespace, &capi().address_resource())
}

fn blocks_api(pair: &HubPair) -> Api<AddressBlock> {
    Api::namespaced(pair.hub_client.clone(), SPOKE)
}

/// Polls `check` every [`POLL`] until it answers true, at most `within`; `what` names it in
/// the error.
async fn poll<F, Fut>(within: Duration, what: impl Fn() -> String, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + within;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{} not within {within:?}", what());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the spoke's ferro-ipam says the spoke pool of `namespace` reaches its hub
/// (`ferro_ipam_hub_reachable` 1): its session has listed the pool's blocks in the hub.
fn reaches_hub(metrics: &str, namespace: &str) -> bool {
    let wanted = format!("namespace=\"{namespace}\"");
    metrics.lines().any(|line| {
        line.starts_with("ferro_ipam_hub_reachable{")
            && line.contains(&wanted)
            && line.contains(&format!("pool=\"{POOL}\""))
            && line.rsplit_once(' ').is_some_and(|(_, v)| v.trim() == "1")
    })
}

/// The series of `name` in Prometheus' text format: (labels as written, value).
fn series<'a>(metrics: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.rsplit_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

/// The value of label `key` in a series' labels.
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    let start = labels.find(&format!("{key}=\""))? + key.len() + 2;
    let end = labels[start..].find('"')? + start;
    Some(&labels[start..end])
}

/// The spoke's round trips to the hub so far, by operation.
fn hub_calls(metrics: &str) -> BTreeMap<String, HubCalls> {
    let mut calls: BTreeMap<String, HubCalls> = BTreeMap::new();
    for (field, suffix) in [(0, "_count"), (1, "_sum")] {
        for (labels, value) in series(metrics, &format!("ferro_ipam_hub_request_duration_seconds{suffix}")) {
            let Some(operation) = label(labels, "operation") else { continue };
            let entry = calls.entry(operation.to_owned()).or_default();
            match field {
                0 => entry.count += value,
                _ => entry.seconds += value,
            }
        }
    }
    for (labels, value) in series(metrics, "ferro_ipam_hub_requests_total") {
        if let (Some(operation), Some("error")) = (label(labels, "operation"), label(labels, "result")) {
            calls.entry(operation.to_owned()).or_default().errors += value;
        }
    }
    calls
}

/// `after - before`, per operation, without those that did not move.
fn calls_since(after: &BTreeMap<String, HubCalls>, before: &BTreeMap<String, HubCalls>) -> BTreeMap<String, HubCalls> {
    after
        .iter()
        .filter_map(|(operation, a)| {
            let b = before.get(operation).copied().unwrap_or_default();
            let delta =
                HubCalls { count: a.count - b.count, seconds: a.seconds - b.seconds, errors: a.errors - b.errors };
            (delta.count > 0.0 || delta.errors > 0.0).then(|| (operation.clone(), delta))
        })
        .collect()
}

/// `ferro_ipam_reconciles_total` by controller.
fn reconciles(metrics: &str) -> BTreeMap<String, f64> {
    let mut by: BTreeMap<String, f64> = BTreeMap::new();
    for (labels, value) in series(metrics, "ferro_ipam_reconciles_total") {
        *by.entry(label(labels, "controller").unwrap_or_default().to_owned()).or_default() += value;
    }
    by
}

/// `after - before` of each key.
fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after.iter().map(|(key, a)| (key.clone(), a - before.get(key).copied().unwrap_or(0.0))).collect()
}

/// `ferro_ipam_allocation_latency_seconds`: (sum, count).
fn allocation_latency(metrics: &str) -> (f64, f64) {
    let one = |suffix: &str| {
        series(metrics, &format!("ferro_ipam_allocation_latency_seconds{suffix}")).iter().map(|(_, v)| v).sum::<f64>()
    };
    (one("_sum"), one("_count"))
}

/// Counts a namespace's claims that are Ready with an address, from a watch started before the
/// first claim; keeps when each became Ready, and the reason of each claim seen not Ready.
struct ReadyWatch {
    count: watch::Receiver<usize>,
    times: Arc<Mutex<Vec<Instant>>>,
    waited: Arc<Mutex<HashMap<String, String>>>,
    _task: AbortOnDrop,
}

/// The reason of a claim's `Ready=False`, if it says so.
fn not_ready_reason(claim: &IPAddressClaim) -> Option<String> {
    let ready = claim.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Ready" && c.status == "False")?;
    Some(ready.reason.clone().unwrap_or_default())
}

fn is_ready(claim: &IPAddressClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.address_ref.as_ref().is_some_and(|r| !r.name.is_empty())
            && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

async fn watch_ready(client: &Client, namespace: &str) -> Result<ReadyWatch> {
    let api = claims_api(client, namespace);
    let (tx, mut count) = watch::channel(usize::MAX);
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let waited: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let (kept, kept_waits) = (times.clone(), waited.clone());
    let task = tokio::spawn(async move {
        let mut ready: HashSet<String> = HashSet::new();
        let mut listed = false;
        let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            match event {
                Event::Apply(claim) | Event::InitApply(claim) => {
                    if is_ready(&claim) && ready.insert(claim.name_any()) {
                        kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Instant::now());
                    } else if let Some(reason) = not_ready_reason(&claim) {
                        let mut waits = kept_waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        waits.entry(claim.name_any()).or_insert(reason);
                    }
                }
                Event::Delete(claim) => {
                    ready.remove(&claim.name_any());
                }
                Event::InitDone => listed = true,
                Event::Init => {}
            }
            if listed && tx.send(ready.len()).is_err() {
                break;
            }
        }
    });
    let task = AbortOnDrop(task);
    count.wait_for(|n| *n != usize::MAX).await?;
    Ok(ReadyWatch { count, times, waited, _task: task })
}

/// When each AddressBlock of the spoke's hub namespace was first seen, and seen granted.
type Seen = Arc<Mutex<HashMap<String, (Instant, Option<Instant>)>>>;

struct BlockWatch {
    seen: Seen,
    _task: AbortOnDrop,
}

async fn watch_blocks(api: Api<AddressBlock>) -> Result<BlockWatch> {
    let seen: Seen = Arc::default();
    let kept = seen.clone();
    let (listed_tx, mut listed) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut events = watcher::watcher(api, watcher::Config::default()).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let now = Instant::now();
            match event {
                Event::Apply(block) | Event::InitApply(block) => {
                    let mut seen = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    let entry = seen.entry(block.name_any()).or_insert((now, None));
                    if entry.1.is_none() && block.status.as_ref().is_some_and(|s| s.cidr.is_some()) {
                        entry.1 = Some(now);
                    }
                }
                Event::InitDone => {
                    let _ = listed_tx.send(true);
                }
                Event::Delete(_) | Event::Init => {}
            }
        }
    });
    let task = AbortOnDrop(task);
    listed.wait_for(|l| *l).await?;
    Ok(BlockWatch { seen, _task: task })
}

/// The timeline of the blocks first seen after `started`.
fn timeline(seen: &HashMap<String, (Instant, Option<Instant>)>, started: Instant) -> Blocks {
    let after = |at: Instant| at.checked_duration_since(started).map(|d| d.as_secs_f64());
    let asked: Vec<f64> = seen.values().filter_map(|(at, _)| after(*at)).collect();
    let granted: Vec<f64> =
        seen.values().filter(|(at, _)| *at >= started).filter_map(|(_, g)| g.and_then(after)).collect();
    let waits: Vec<f64> = seen
        .values()
        .filter(|(at, _)| *at >= started)
        .filter_map(|(at, granted)| granted.map(|g| g.saturating_duration_since(*at).as_secs_f64()))
        .collect();
    let min = |v: &[f64]| v.iter().copied().reduce(f64::min);
    let max = |v: &[f64]| v.iter().copied().reduce(f64::max);
    Blocks {
        asked: asked.len(),
        granted: granted.len(),
        first_asked: min(&asked),
        last_asked: max(&asked),
        first_granted: min(&granted),
        last_granted: max(&granted),
        grant_wait_median: (!waits.is_empty()).then(|| median(waits.clone())),
        grant_wait_max: max(&waits),
    }
}

/// Whether `address` (IPv4) lies in `cidr`.
fn ipv4_in(address: &str, cidr: &str) -> bool {
    let parse = |a: &str| a.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
    let Some((network, length)) = cidr.split_once('/') else { return false };
    match (parse(address), parse(network), length.parse::<u32>()) {
        (Some(a), Some(n), Ok(l)) if l <= 32 => {
            let mask = if l == 0 { 0 } else { u32::MAX << (32 - l) };
            a & mask == n & mask
        }
        _ => false,
    }
}

/// Creates `claims` claims `claim-<k>` on the pool of `namespace`, many at a time.
async fn create_claims(client: &Client, namespace: &str, claims: usize, concurrency: usize) -> Result<()> {
    let api = claims_api(client, namespace);
    futures::stream::iter(0..claims)
        .map(|k| {
            let api = api.clone();
            async move {
                let claim: IPAddressClaim = serde_json::from_value(json!({
                    "apiVersion": capi().claim_resource().api_version, "kind": "IPAddressClaim",
                    "metadata": {"name": format!("claim-{k}")},
                    "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": POOL_KIND, "name": POOL}},
                }))?;
                api.create(&PostParams::default(), &claim).await.map(drop).map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The `i`-th fastest (from 0) of `times` as seconds after `started`.
fn nth_after(times: &[Instant], i: usize, started: Instant) -> Option<f64> {
    let mut times = times.to_vec();
    times.sort();
    times.get(i).map(|t| t.saturating_duration_since(started).as_secs_f64())
}

/// One measurement in `namespace` on a fresh pool of `side`, then its tear-down.
async fn measure_one(
    config: &Config,
    pair: &mut HubPair,
    namespace: &str,
    side: PoolSide,
    claims: usize,
    round: usize,
    first: bool,
) -> Result<SharedRun> {
    let spoke = pair.spoke_client.clone();
    let blocks = blocks_api(pair);
    let left = blocks.list(&ListParams::default()).await?.items.len();
    ensure!(left == 0, "the spoke's hub namespace holds {left} AddressBlocks before the measurement");
    Api::<Namespace>::all(spoke.clone())
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": namespace}}))?)
        .await?;
    let pools = pools_api(&spoke, namespace);
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": POOL_KIND,
        "metadata": {"name": POOL},
        "spec": pool_spec(side == PoolSide::Spoke, config.shared_block_size),
    }))?;
    pools.create(&PostParams::default(), &pool).await.context("creating the pool")?;
    poll(
        POOL_READY_WITHIN,
        || format!("pool {namespace}/{POOL} protected"),
        || async {
            let pool = pools.get(POOL).await?;
            Ok(pool.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER))
        },
    )
    .await?;
    if side == PoolSide::Spoke {
        let plane = &pair.spoke;
        poll(
            POOL_READY_WITHIN,
            || format!("spoke pool {namespace}/{POOL} reaching its hub"),
            || async { Ok(metrics_of(plane).is_ok_and(|m| reaches_hub(&m, namespace))) },
        )
        .await?;
    }
    let mut ready = watch_ready(&spoke, namespace).await?;
    let block_watch = watch_blocks(blocks.clone()).await?;
    let requests_before = RequestCounts::scrape(&spoke).await?;
    let metrics_before = pair.spoke_metrics()?;
    let (hub_before, spoke_before) = pair.cpu()?;
    let load_before = load_average();

    let started = Instant::now();
    create_claims(&spoke, namespace, claims, config.create_concurrency).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let done = tokio::time::timeout(config.timeout, ready.count.wait_for(|n| *n >= claims)).await.is_ok();
    let seconds = started.elapsed().as_secs_f64();
    if !done {
        let seen = block_watch.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        bail!(
            "{} of {claims} claims Ready after {:?}; blocks: {:?}\nferro-ipam on the spoke:\n{}",
            *ready.count.borrow(),
            config.timeout,
            timeline(&seen, started),
            pair.spoke_ferro.process().tail(20)
        );
    }
    pair.check_running()?;
    let requests_after = quiescent(&spoke, Duration::from_secs(60)).await?;
    let metrics_after = pair.spoke_metrics()?;
    let (hub_after, spoke_after) = pair.cpu()?;
    let load_after = load_average();
    let times = ready.times.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let mut waited: BTreeMap<String, usize> = BTreeMap::new();
    for reason in ready.waited.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values() {
        *waited.entry(reason.clone()).or_default() += 1;
    }
    let seen = block_watch.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    drop((ready, block_watch));

    // No address twice, one per claim, and a spoke's inside the blocks granted to it.
    let addresses = list_all(&addresses_api(&spoke, namespace)).await?;
    check_unique(&addresses, claims)?;
    if side == PoolSide::Spoke {
        let granted: Vec<String> = blocks
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|b| b.status.and_then(|s| s.cidr))
            .collect();
        if let Some(outside) = addresses.iter().find(|a| !granted.iter().any(|b| ipv4_in(&a.spec.address, b))) {
            bail!("{} of claim {} lies in no block granted to the spoke", outside.spec.address, outside.name_any());
        }
    }
    let (latency_sum, latency_count) = {
        let (after, before) = (allocation_latency(&metrics_after), allocation_latency(&metrics_before));
        (after.0 - before.0, after.1 - before.1)
    };
    let mut run = SharedRun {
        pool: side,
        round,
        first,
        claims,
        block_size: config.shared_block_size,
        seconds,
        create_seconds,
        first_ready_seconds: nth_after(&times, 0, started),
        half_ready_seconds: nth_after(&times, claims.div_ceil(2).saturating_sub(1), started),
        waited,
        spoke_cpu_seconds: spoke_after.cpu_seconds - spoke_before.cpu_seconds,
        hub_cpu_seconds: hub_after.cpu_seconds - hub_before.cpu_seconds,
        requests: requests_after.since(&requests_before).without("POST ipaddressclaims", claims as f64).0,
        blocks: timeline(&seen, started),
        hub_calls: calls_since(&hub_calls(&metrics_after), &hub_calls(&metrics_before)),
        allocation_latency_mean: (latency_count > 0.0).then(|| latency_sum / latency_count),
        reconciles: delta(&reconciles(&metrics_after), &reconciles(&metrics_before)),
        teardown_seconds: 0.0,
        load: (load_before, load_after),
    };
    run.teardown_seconds = tear_down(pair, namespace, side).await.context("tearing down")?;
    // Both API servers quiet before the next measurement.
    quiescent(&pair.hub_client, Duration::from_secs(60)).await?;
    quiescent(&spoke, Duration::from_secs(60)).await?;
    Ok(run)
}

/// Deletes the claims of `namespace`, waits until they and their IPAddresses are gone, then
/// deletes the pool and waits until it is gone and, for a spoke pool, every block is back in
/// the hub. Returns how long it took.
async fn tear_down(pair: &HubPair, namespace: &str, side: PoolSide) -> Result<f64> {
    let began = Instant::now();
    let (claims, addresses) = (claims_api(&pair.spoke_client, namespace), addresses_api(&pair.spoke_client, namespace));
    claims.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    let left = || async {
        let claims = claims.list(&ListParams::default().limit(1)).await?.items.len();
        let addresses = addresses.list(&ListParams::default().limit(1)).await?.items.len();
        Ok::<_, anyhow::Error>((claims, addresses))
    };
    poll(
        TEAR_DOWN_WITHIN,
        || format!("the claims of {namespace} and their IPAddresses gone"),
        || async { Ok(left().await? == (0, 0)) },
    )
    .await?;
    let pools = pools_api(&pair.spoke_client, namespace);
    pools.delete(POOL, &DeleteParams::default()).await?;
    poll(
        TEAR_DOWN_WITHIN,
        || format!("pool {namespace}/{POOL} gone"),
        || async { Ok(pools.get_opt(POOL).await?.is_none()) },
    )
    .await?;
    if side == PoolSide::Spoke {
        let blocks = blocks_api(pair);
        poll(
            TEAR_DOWN_WITHIN,
            || "every block back in the hub".to_owned(),
            || async { Ok(blocks.list(&ListParams::default().limit(1)).await?.items.is_empty()) },
        )
        .await?;
    }
    Ok(began.elapsed().as_secs_f64())
}

/// The figures the aim is judged on.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub claims: usize,
    pub block_size: u32,
    /// Each round that measured both pools: (round, local seconds, spoke seconds).
    pub rounds: Vec<(usize, f64, f64)>,
    pub local_median: f64,
    pub spoke_median: f64,
}

impl Summary {
    /// The median over the rounds of spoke / local: the figure the aim is judged on.
    pub fn ratio(&self) -> f64 {
        median(self.rounds.iter().map(|(_, local, spoke)| spoke / local).collect())
    }

    pub fn ratio_of_medians(&self) -> f64 {
        self.spoke_median / self.local_median
    }

    pub fn met(&self) -> bool {
        self.ratio() <= MAX_RATIO
    }
}

/// The summary of the measurements, when a round measured both pools.
pub fn summary(runs: &[SharedRun]) -> Option<Summary> {
    let of = |side: PoolSide, round: usize| runs.iter().find(|r| r.pool == side && r.round == round);
    let mut rounds: Vec<usize> = runs.iter().map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let paired: Vec<(usize, f64, f64)> = rounds
        .into_iter()
        .filter_map(|round| Some((round, of(PoolSide::Local, round)?.seconds, of(PoolSide::Spoke, round)?.seconds)))
        .collect();
    let first = runs.first()?;
    (!paired.is_empty()).then(|| Summary {
        claims: first.claims,
        block_size: first.block_size,
        local_median: median(runs.iter().filter(|r| r.pool == PoolSide::Local).map(|r| r.seconds).collect()),
        spoke_median: median(runs.iter().filter(|r| r.pool == PoolSide::Spoke).map(|r| r.seconds).collect()),
        rounds: paired,
    })
}

/// Ok when the aim is met or nothing was measured; else an error with the figures.
pub fn verdict(summary: Option<&Summary>) -> Result<()> {
    match summary {
        Some(s) if !s.met() => bail!(
            "a spoke pool served {} claims in {:.2} times the local pool's time (median of {} rounds; {:.1} s against {:.1} s, medians), above the aim of {MAX_RATIO:.1}",
            s.claims,
            s.ratio(),
            s.rounds.len(),
            s.spoke_median,
            s.local_median
        ),
        _ => Ok(()),
    }
}

/// The report's section (empty when nothing was measured).
pub fn markdown(shared: &SharedPool) -> String {
    let mut out = String::new();
    let runs = &shared.runs;
    let Some(first) = runs.first() else { return out };
    let _ = writeln!(out, "\n### Shared pool: a spoke pool against a local pool ({} claims)\n", first.claims);
    let _ = writeln!(
        out,
        "On one spoke cluster, {} claims created at once on a local pool, and on a spoke pool of the same size \
         that leases blocks of {} addresses from a hub (a second control plane with its ferro-ipam), in turns, \
         the order alternating by round; each measurement on a fresh pool (a spoke pool with no block yet), \
         timed from the first create until every claim is Ready. The ratio is the median over the rounds of \
         each round's spoke time / local time; the aim is at most {MAX_RATIO:.1}, above it the benchmark exits \
         non-zero.\n",
        first.claims, first.block_size
    );
    if let Some(s) = summary(runs) {
        let _ = writeln!(
            out,
            "| claims | block size | rounds | local (median) | spoke (median) | spoke / local (median of rounds) | ratio of medians | met |"
        );
        let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---|");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} s | {:.1} s | {:.2} | {:.2} | {} |\n",
            s.claims,
            s.block_size,
            s.rounds.len(),
            s.local_median,
            s.spoke_median,
            s.ratio(),
            s.ratio_of_medians(),
            if s.met() { "yes" } else { "**NO**" }
        );
    }
    let _ = writeln!(
        out,
        "Per measurement: first and half Ready, after the first create; the claims a watch saw `Ready=False` \
         before Ready, by reason; the mean of ferro-ipam's `allocation_latency` (a claim first seen to its \
         IPAddress written); the claim controller's reconciles (`ferro_ipam_reconciles_total`); blocks asked and granted as a watch of the hub saw them (asked: created; the \
         wait: from created to granted); the spoke's round trips to the hub from `ferro_ipam_hub_request_duration_seconds` (count, mean); CPU time of each ferro-ipam; \
         requests per claim on the spoke's API server.\n"
    );
    let _ = writeln!(
        out,
        "| round | pool | time | creating | first Ready | half Ready | claims that waited | allocation latency (mean) | claim reconciles per claim | blocks asked (granted) | first block asked / granted | last block granted | grant wait (median, max) | hub round trips | spoke CPU | hub CPU | requests per claim | load |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    for r in runs {
        let b = &r.blocks;
        let (blocks, firsts, last, wait) = match r.pool {
            PoolSide::Local => ("-".to_owned(), "-".to_owned(), "-".to_owned(), "-".to_owned()),
            PoolSide::Spoke => (
                format!("{} ({})", b.asked, b.granted),
                format!("{} / {}", seconds2(b.first_asked), seconds2(b.first_granted)),
                seconds(b.last_granted),
                format!("{}, {}", seconds2(b.grant_wait_median), seconds2(b.grant_wait_max)),
            ),
        };
        let calls = match r.hub_calls.is_empty() {
            true => "-".to_owned(),
            false => r
                .hub_calls
                .iter()
                .map(|(op, c)| {
                    let errors = if c.errors > 0.0 { format!(", {:.0} failed", c.errors) } else { String::new() };
                    format!("{op} {:.0} × {:.0} ms{errors}", c.count, 1000.0 * c.seconds / c.count.max(1.0))
                })
                .collect::<Vec<_>>()
                .join("; "),
        };
        let waited = match r.waited.is_empty() {
            true => "0".to_owned(),
            false => r.waited.iter().map(|(reason, n)| format!("{n} {reason}")).collect::<Vec<_>>().join(", "),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} s | {:.1} s | {} | {} | {waited} | {} | {:.2} | {blocks} | {firsts} | {last} | {wait} | {calls} | {:.1} s | {:.1} s | {:.2} | {:.1}–{:.1} |",
            r.round + 1,
            r.pool.name(),
            r.seconds,
            r.create_seconds,
            seconds(r.first_ready_seconds),
            seconds(r.half_ready_seconds),
            seconds2(r.allocation_latency_mean),
            r.reconciles.get("claim").copied().unwrap_or(0.0) / r.claims as f64,
            r.spoke_cpu_seconds,
            r.hub_cpu_seconds,
            total(&r.requests) / r.claims as f64,
            r.load.0,
            r.load.1,
        );
    }
    requests_table(&mut out, runs);
    if let (Some(setup), Some(warmup)) = (shared.setup_seconds, shared.warmup_seconds) {
        let _ = writeln!(
            out,
            "\nStarting and setting up the hub and the spoke took {setup:.1} s, the warm-up claims {warmup:.1} s; \
             tearing a measurement down (its claims, IPAddresses, pool and blocks gone) took {} s.",
            runs.iter().map(|r| format!("{:.1}", r.teardown_seconds)).collect::<Vec<_>>().join(", ")
        );
    }
    out
}

/// Requests per claim on the spoke's API server by verb and resource, median of each pool's
/// measurements.
fn requests_table(out: &mut String, runs: &[SharedRun]) {
    let mut keys: Vec<&String> = runs.iter().flat_map(|r| r.requests.keys()).collect();
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        return;
    }
    let _ =
        writeln!(out, "\nRequests per claim on the spoke's API server (median; the benchmark's creates subtracted):\n");
    let _ = writeln!(out, "| request | local | spoke |");
    let _ = writeln!(out, "|---|---:|---:|");
    for key in keys {
        let cell = |side: PoolSide| {
            let values: Vec<f64> = runs
                .iter()
                .filter(|r| r.pool == side)
                .map(|r| r.requests.get(key).copied().unwrap_or(0.0) / r.claims as f64)
                .collect();
            if values.is_empty() { "-".to_owned() } else { format!("{:.3}", median(values)) }
        };
        let _ = writeln!(out, "| `{key}` | {} | {} |", cell(PoolSide::Local), cell(PoolSide::Spoke));
    }
}

fn seconds2(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.2} s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pool: PoolSide, round: usize, seconds: f64) -> SharedRun {
        SharedRun {
            pool,
            round,
            first: order(round)[0] == pool,
            claims: 1000,
            block_size: 16,
            seconds,
            create_seconds: 2.0,
            first_ready_seconds: Some(0.5),
            half_ready_seconds: Some(3.0),
            waited: BTreeMap::new(),
            spoke_cpu_seconds: 1.0,
            hub_cpu_seconds: 0.1,
            requests: BTreeMap::from([("POST ipaddresses".to_owned(), 1000.0)]),
            blocks: Blocks::default(),
            hub_calls: BTreeMap::new(),
            allocation_latency_mean: None,
            reconciles: BTreeMap::from([("claim".to_owned(), 2500.0)]),
            teardown_seconds: 9.0,
            load: (1.0, 1.5),
        }
    }

    #[test]
    fn the_order_alternates_by_round() {
        assert_eq!(order(0), [PoolSide::Local, PoolSide::Spoke]);
        assert_eq!(order(1), [PoolSide::Spoke, PoolSide::Local]);
        assert_eq!(order(2), order(0));
    }

    #[test]
    fn the_ratio_is_the_median_of_the_rounds_ratios_beside_the_ratio_of_medians() {
        let mut waited = run(PoolSide::Spoke, 0, 12.0);
        waited.waited.insert("WaitingForHub".to_owned(), 300);
        waited.allocation_latency_mean = Some(1.5);
        let runs = vec![
            run(PoolSide::Local, 0, 10.0),
            waited,
            run(PoolSide::Spoke, 1, 30.0),
            run(PoolSide::Local, 1, 20.0),
            run(PoolSide::Local, 2, 8.0),
            run(PoolSide::Spoke, 2, 16.0),
        ];
        let s = summary(&runs).unwrap();
        assert_eq!(s.rounds, [(0, 10.0, 12.0), (1, 20.0, 30.0), (2, 8.0, 16.0)]);
        // Ratios 1.2, 1.5, 2.0: the median 1.5, exactly the aim.
        assert_eq!(s.ratio(), 1.5);
        assert!(s.met());
        assert_eq!((s.local_median, s.spoke_median), (10.0, 16.0));
        assert_eq!(s.ratio_of_medians(), 1.6);
        assert!(verdict(Some(&s)).is_ok());
        let report = markdown(&SharedPool { runs, setup_seconds: Some(20.0), warmup_seconds: Some(3.0) });
        assert!(report.contains("| 1000 | 16 | 3 | 10.0 s | 16.0 s | 1.50 | 1.60 | yes |"), "{report}");
        assert!(report.contains("| 2 | spoke | 30.0 s | 2.0 s | 0.5 s | 3.0 s | 0 | - |"), "{report}");
        assert!(
            report.contains("| 1 | spoke | 12.0 s | 2.0 s | 0.5 s | 3.0 s | 300 WaitingForHub | 1.50 s | 2.50 |"),
            "{report}"
        );
        assert!(report.contains("| `POST ipaddresses` | 1.000 | 1.000 |"), "{report}");
    }

    #[test]
    fn a_report_of_the_shared_pool_alone_has_no_empty_tables_of_other_configurations() {
        let shared_pool = SharedPool { runs: vec![run(PoolSide::Local, 0, 10.0)], ..SharedPool::default() };
        let report = crate::report::markdown(&crate::report::Bench { shared_pool, ..Default::default() });
        assert!(report.starts_with("\n### Shared pool"), "{report}");
        assert!(!report.contains("Per subject"), "{report}");
    }

    #[test]
    fn a_spoke_above_the_aim_fails_the_verdict_and_a_round_without_its_pair_does_not_count() {
        let runs = vec![run(PoolSide::Local, 0, 10.0), run(PoolSide::Spoke, 0, 16.0), run(PoolSide::Spoke, 1, 11.0)];
        let s = summary(&runs).unwrap();
        assert_eq!(s.rounds.len(), 1);
        assert!(!s.met());
        assert!(markdown(&SharedPool { runs, ..SharedPool::default() }).contains("| 1.60 | 1.35 | **NO** |"));
        let error = verdict(Some(&s)).unwrap_err().to_string();
        assert!(error.contains("1000 claims in 1.60 times the local pool's time"), "{error}");
        assert!(summary(&[run(PoolSide::Spoke, 0, 1.0)]).is_none());
        assert!(verdict(None).is_ok());
        assert_eq!(markdown(&SharedPool::default()), "");
    }

    #[test]
    fn the_spokes_metrics_give_its_round_trips_its_reach_and_its_latency() {
        let before = "ferro_ipam_hub_request_duration_seconds_sum{operation=\"ask\"} 0.5\n\
                      ferro_ipam_hub_request_duration_seconds_count{operation=\"ask\"} 10\n\
                      ferro_ipam_allocation_latency_seconds_sum 1.0\n\
                      ferro_ipam_allocation_latency_seconds_count 4\n";
        let after = "ferro_ipam_hub_request_duration_seconds_sum{operation=\"ask\"} 2.5\n\
                     ferro_ipam_hub_request_duration_seconds_count{operation=\"ask\"} 50\n\
                     ferro_ipam_hub_request_duration_seconds_bucket{le=\"0.005\",operation=\"ask\"} 50\n\
                     ferro_ipam_hub_request_duration_seconds_sum{operation=\"connect\"} 0.01\n\
                     ferro_ipam_hub_request_duration_seconds_count{operation=\"connect\"} 1\n\
                     ferro_ipam_hub_requests_total{kind=\"InClusterIPPool\",namespace=\"n\",pool=\"pool\",operation=\"ask\",result=\"error\"} 2\n\
                     ferro_ipam_hub_reachable{kind=\"InClusterIPPool\",namespace=\"shared-1-spoke\",pool=\"pool\"} 1\n\
                     ferro_ipam_allocation_latency_seconds_sum 3.0\n\
                     ferro_ipam_allocation_latency_seconds_count 8\n";
        let calls = calls_since(&hub_calls(after), &hub_calls(before));
        assert_eq!(calls["ask"], HubCalls { count: 40.0, seconds: 2.0, errors: 2.0 });
        assert_eq!(calls["connect"].count, 1.0);
        assert!(reaches_hub(after, "shared-1-spoke"));
        assert!(!reaches_hub(after, "shared-1"));
        assert!(!reaches_hub(before, "shared-1-spoke"));
        assert_eq!(allocation_latency(after), (3.0, 8.0));
        let counts = |claim: f64| {
            format!(
                "ferro_ipam_reconciles_total{{controller=\"claim\"}} {claim}\nferro_ipam_reconciles_total{{controller=\"pool\"}} 5\n"
            )
        };
        let reconciled = delta(&reconciles(&counts(2600.0)), &reconciles(&counts(100.0)));
        assert_eq!(reconciled, BTreeMap::from([("claim".to_owned(), 2500.0), ("pool".to_owned(), 0.0)]));
    }

    #[test]
    fn a_blocks_timeline_counts_only_blocks_seen_after_the_start() {
        let started = Instant::now();
        let at = |ms: u64| started + Duration::from_millis(ms);
        let seen = HashMap::from([
            ("old".to_owned(), (started - Duration::from_secs(1), Some(started - Duration::from_millis(500)))),
            ("a".to_owned(), (at(100), Some(at(300)))),
            ("b".to_owned(), (at(200), Some(at(1200)))),
            ("c".to_owned(), (at(250), None)),
        ]);
        let t = timeline(&seen, started);
        assert_eq!((t.asked, t.granted), (3, 2));
        assert_eq!((t.first_asked, t.last_asked), (Some(0.1), Some(0.25)));
        assert_eq!((t.first_granted, t.last_granted), (Some(0.3), Some(1.2)));
        assert_eq!((t.grant_wait_median, t.grant_wait_max), (Some(0.6), Some(1.0)));
    }

    #[test]
    fn an_address_is_in_a_block_by_its_prefix() {
        assert!(ipv4_in("10.20.0.17", "10.20.0.16/28"));
        assert!(!ipv4_in("10.20.0.32", "10.20.0.16/28"));
        assert!(ipv4_in("10.20.3.4", "0.0.0.0/0"));
        assert!(!ipv4_in("fd00::1", "10.20.0.16/28"));
    }
}
