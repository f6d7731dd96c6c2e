//! One measured run: a fresh control plane, pools, the subject, N claims created at once, and
//! the time until every claim has its address.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::PROTECT_POOL_FINALIZER;
use ferro_ipam_e2e::objects::capi;
use ferro_ipam_e2e::{ControlPlane, peer};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;

use crate::config::{Config, PoolKind, Shape, Subject};
use crate::layout::{Layout, excluded_hit};
use crate::measure::{ProcStats, RequestCounts, quiescent};
use crate::storm::{Edits, Storm};
use crate::subject::{NAMESPACE, Running};

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub subject: Subject,
    /// Pool kind, claims, pools and pool edits a second.
    #[serde(flatten)]
    pub shape: Shape,
    pub run: usize,
    /// From the first create to the last claim with `status.addressRef`.
    pub seconds: f64,
    /// How long creating the claims took (part of `seconds`).
    pub create_seconds: f64,
    pub peak_rss_mib: f64,
    /// CPU time of the subject's process from the first create until the API went quiet.
    pub cpu_seconds: f64,
    /// The subject's API requests (the benchmark's own subtracted), by "VERB resource".
    pub requests: BTreeMap<String, f64>,
    /// Pools the subject had not protected 10 s after it was ready, touched to wake it.
    pub pools_touched: usize,
    /// The pool edits of the storm (none without one).
    pub edits: Edits,
    /// The machine's 1-minute load average before and after (other work on it shows here).
    pub load: (f64, f64),
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// A fresh control plane with the in-cluster provider's extra CRDs (every subject gets the same)
/// and the namespace of the benchmark.
pub async fn fresh_plane() -> Result<(ControlPlane, Client)> {
    let plane = tokio::task::block_in_place(|| -> Result<ControlPlane> {
        let plane = ControlPlane::start()?;
        peer::install_missing_crds(&plane)?;
        Ok(plane)
    })?;
    let client = plane.client().await;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    Ok((plane, client))
}

/// The API of the pools of `kind` in the benchmark's namespace.
fn pools_api(client: &Client, kind: PoolKind) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1alpha2", kind.kind());
    Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk))
}

/// The pools `pool-<i>` of `layout` (see layout.rs), with `concurrency` creates in flight.
pub async fn create_pools(client: &Client, layout: Layout, concurrency: usize) -> Result<()> {
    let api = pools_api(client, layout.kind);
    futures::stream::iter(0..layout.pools)
        .map(|i| {
            let api = api.clone();
            async move {
                let pool: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": layout.kind.kind(),
                    "metadata": {"name": format!("pool-{i}")},
                    "spec": layout.spec(i),
                }))?;
                api.create(&PostParams::default(), &pool).await.map(drop).map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// How long to wait for work on every pool (protecting them, a provider's start on them):
/// `base`, and 50 ms more per pool.
pub fn per_pool_timeout(base: Duration, pools: usize) -> Duration {
    base + Duration::from_millis(50) * pools as u32
}

/// Ends a spawned task when dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long the pools' protection may make no progress before the unprotected pools are
/// touched. Long enough that a provider busy with thousands of pools at its start, and failing
/// requests for a while, is not handed thousands more events.
const TOUCH_AFTER: Duration = Duration::from_secs(30);

/// Waits until every pool carries the deletion-protection finalizer: both providers add it
/// before they allocate from a pool (ferro-ipam waits for it). The pools are read from one
/// watch (a paged list, then events), not polled. When [`TOUCH_AFTER`] passes without a pool
/// getting protected, the pools still unprotected are touched (an annotation) once, so that
/// their controller sees an event; returns how many pools needed that (a provider that misses
/// pools existing at its start shows up here).
pub async fn wait_pools_protected(client: &Client, kind: PoolKind, count: usize, timeout: Duration) -> Result<usize> {
    let api = pools_api(client, kind);
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1alpha2", kind.kind()));
    let writer = reflector::store::Writer::<DynamicObject>::new(resource);
    let store = writer.as_reader();
    let stream = reflector::reflector(writer, watcher::watcher(api.clone(), watcher::Config::default()));
    let _driver = AbortOnDrop(tokio::spawn(async move {
        stream.for_each(|_| async {}).await;
    }));
    let protected = |pools: &[std::sync::Arc<DynamicObject>]| {
        pools.iter().filter(|p| p.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER)).count()
    };
    // The deadline covers the touches too: on an API server that a provider floods, they are slow.
    let waited = tokio::time::timeout(timeout, async {
        store.wait_until_ready().await.context("listing the pools")?;
        let (mut touched, mut protected_before, mut progress_at) = (0, 0, Instant::now());
        loop {
            let pools = store.state();
            let now_protected = protected(&pools);
            if pools.len() == count && now_protected == count {
                return anyhow::Ok(touched);
            }
            if now_protected != protected_before {
                (protected_before, progress_at) = (now_protected, Instant::now());
            }
            if touched == 0 && now_protected < pools.len() && progress_at.elapsed() > TOUCH_AFTER {
                let unprotected = pools.iter().filter(|p| !p.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER));
                for pool in unprotected {
                    let patch = json!({"metadata": {"annotations": {"bench.ferro-ipam.dev/touched": "true"}}});
                    api.patch(&pool.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
                    touched += 1;
                }
                eprintln!(
                    "bench:   {touched} pool(s) still unprotected after {TOUCH_AFTER:?} without progress: touched them"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    match waited {
        Ok(touched) => touched,
        Err(_) => bail!("{} of {count} pools protected after {timeout:?}", protected(&store.state())),
    }
}

/// Counts the claims of the namespace that have `status.addressRef` (all either provider
/// writes), from a watch started before the first claim.
pub async fn watch_addressed(client: &Client) -> Result<watch::Receiver<usize>> {
    let api: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().claim_resource());
    let (tx, mut rx) = watch::channel(usize::MAX);
    tokio::spawn(async move {
        let mut addressed: HashSet<String> = HashSet::new();
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                Event::Apply(claim) | Event::InitApply(claim) => {
                    if claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_some_and(|r| !r.name.is_empty()) {
                        addressed.insert(claim.name_any());
                    }
                }
                Event::Delete(claim) => {
                    addressed.remove(&claim.name_any());
                }
                Event::InitDone | Event::Init => {}
            }
            if tx.send(addressed.len()).is_err() {
                break;
            }
        }
    });
    // usize::MAX until the first event: wait for the initial listing.
    rx.wait_for(|n| *n != usize::MAX).await?;
    Ok(rx)
}

/// Creates claims `<prefix>-<k>` for k in `range`, claim k on pool `pool-<k % pools>` of `kind`,
/// with `concurrency` creates in flight.
pub async fn create_claims(
    client: &Client,
    kind: PoolKind,
    prefix: &str,
    range: std::ops::Range<usize>,
    pools: usize,
    concurrency: usize,
) -> Result<()> {
    let api: Api<IPAddressClaim> = Api::namespaced_with(client.clone(), NAMESPACE, &capi().claim_resource());
    futures::stream::iter(range)
        .map(|k| {
            let api = api.clone();
            async move {
                let claim: IPAddressClaim = serde_json::from_value(json!({
                    "apiVersion": capi().claim_resource().api_version, "kind": "IPAddressClaim",
                    "metadata": {"name": format!("{prefix}-{k}")},
                    "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind.kind(),
                                         "name": format!("pool-{}", k % pools)}},
                }))?;
                api.create(&PostParams::default(), &claim).await.map(drop).map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Every object of `api`, listed in pages of 500 (one list of 50,000 addresses is a big answer).
pub async fn list_all<K>(api: &Api<K>) -> Result<Vec<K>>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut params = ListParams::default().limit(500);
    let mut all = Vec::new();
    loop {
        let page = api.list(&params).await?;
        all.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(all),
        }
    }
}

/// An address held by two `IPAddress` objects of one pool: the run measured a broken allocation.
#[derive(Debug)]
pub struct Duplicate {
    pub address: String,
    pub pool: String,
}

impl std::fmt::Display for Duplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} handed out twice in pool {}", self.address, self.pool)
    }
}

impl std::error::Error for Duplicate {}

/// No two `IPAddress` objects of a pool hold one address ([`Duplicate`] otherwise), and there is
/// one per claim.
pub fn check_unique(addresses: &[IPAddress], expected: usize) -> Result<()> {
    let mut seen = HashSet::new();
    for a in addresses {
        if !seen.insert((a.spec.pool_ref.name.clone(), a.spec.address.clone())) {
            let (address, pool) = (a.spec.address.clone(), a.spec.pool_ref.name.clone());
            return Err(Duplicate { address, pool }.into());
        }
    }
    ensure!(addresses.len() == expected, "{} IPAddress objects for {expected} claims", addresses.len());
    Ok(())
}

/// An `IPAddress` on an address its pool's spec excludes: the run measured a broken allocation.
#[derive(Debug)]
pub struct Excluded {
    pub address: String,
    pub pool: String,
    pub entry: String,
}

impl std::fmt::Display for Excluded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} handed out in pool {}, which excludes {}", self.address, self.pool, self.entry)
    }
}

impl std::error::Error for Excluded {}

/// Each pool's excluded list (addresses or prefixes) as its spec is now.
pub async fn excluded_lists(client: &Client, kind: PoolKind) -> Result<HashMap<String, Vec<String>>> {
    let field = Layout::new(kind, 1)?.excluded_field();
    Ok(list_all(&pools_api(client, kind))
        .await?
        .into_iter()
        .map(|pool| {
            let entries = pool.data["spec"][field]
                .as_array()
                .map(|a| a.iter().filter_map(|e| e.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            (pool.name_any(), entries)
        })
        .collect())
}

/// No `IPAddress` lies on an entry of its pool's `excluded` list ([`Excluded`] otherwise).
pub fn check_excluded(kind: PoolKind, addresses: &[IPAddress], excluded: &HashMap<String, Vec<String>>) -> Result<()> {
    for a in addresses {
        let entries = excluded.get(&a.spec.pool_ref.name).map(Vec::as_slice).unwrap_or_default();
        if let Some(entry) = excluded_hit(kind, entries, &a.spec.address, a.spec.prefix) {
            let (address, pool) = (a.spec.address.clone(), a.spec.pool_ref.name.clone());
            return Err(Excluded { address, pool, entry: entry.to_owned() }.into());
        }
    }
    Ok(())
}

/// One run of `subject` in the configuration `shape`.
pub async fn allocation(config: &Config, subject: Subject, shape: Shape, run: usize) -> Result<RunResult> {
    // A configuration whose claims do not fit fails before any control plane starts.
    Layout::new(shape.kind, shape.pools)?.check_fits(shape.claims)?;
    let (plane, client) = fresh_plane().await?;
    let outcome = measure_allocation(config, &plane, &client, subject, shape, run).await;
    let Shape { kind, claims, pools, edits_per_second } = shape;
    let name = format!("{}-{}-{claims}-{pools}-{edits_per_second}-{run}", subject.name(), kind.name());
    if outcome.is_err() {
        keep_logs(config, &plane, &format!("failed-{name}"));
    } else if std::env::var("BENCH_KEEP_LOGS").is_ok_and(|v| v == "1") {
        keep_logs(config, &plane, &format!("logs-{name}"));
    }
    outcome
}

/// Copies the logs of a control plane (and of the processes run against it) into the output
/// directory, before the plane's directory goes.
pub fn keep_logs(config: &Config, plane: &ControlPlane, name: &str) {
    let target = config.out_dir.join(name);
    let _ = std::fs::create_dir_all(&target);
    for entry in std::fs::read_dir(&plane.dir).into_iter().flatten().flatten() {
        if entry.path().extension().is_some_and(|e| e == "log") {
            let _ = std::fs::copy(entry.path(), target.join(entry.file_name()));
        }
    }
    eprintln!("bench:   logs kept in {}", target.display());
}

async fn measure_allocation(
    config: &Config,
    plane: &ControlPlane,
    client: &Client,
    subject: Subject,
    shape: Shape,
    run: usize,
) -> Result<RunResult> {
    let Shape { kind, claims, pools, edits_per_second } = shape;
    let layout = Layout::new(kind, pools)?;
    layout.check_fits(claims)?;
    create_pools(client, layout, config.create_concurrency).await?;
    let mut running = match subject {
        Subject::Floor => Running::floor(config, plane, claims)?,
        _ => Running::launch(config, plane, subject)?,
    };
    tokio::task::block_in_place(|| running.wait_ready(per_pool_timeout(Duration::from_secs(120), pools)))?;
    let pools_touched = match subject {
        Subject::Floor => 0,
        _ => wait_pools_protected(client, kind, pools, per_pool_timeout(Duration::from_secs(60), pools)).await?,
    };
    let mut addressed = watch_addressed(client).await?;
    // One claim through the whole path first, so that no run pays for cold connections.
    create_claims(client, kind, "warmup", 0..1, pools, 1).await?;
    let warm = tokio::time::timeout(Duration::from_secs(120), addressed.wait_for(|n| *n >= 1)).await.is_ok();
    ensure!(warm, "{}: the warm-up claim got no address:\n{}", subject.name(), running.process().tail(20));
    let requests_before = RequestCounts::scrape(client).await?;
    let cpu_before = running.stats()?.cpu_seconds;
    let load_before = load_average();

    // The storm edits the pools from the first create until every claim has its address.
    let storm = (edits_per_second > 0).then(|| Storm::start(pools_api(client, layout.kind), layout, edits_per_second));
    let started = Instant::now();
    create_claims(client, kind, "claim", 0..claims, pools, config.create_concurrency).await?;
    let create_seconds = started.elapsed().as_secs_f64();
    let done = tokio::time::timeout(config.timeout, addressed.wait_for(|n| *n > claims)).await.is_ok();
    let seconds = started.elapsed().as_secs_f64();
    let edits = match storm {
        Some(storm) => storm.stop().await?,
        None => Edits::default(),
    };
    if !done {
        bail!(
            "{}: {} of {claims} claims addressed after {:?}:\n{}",
            subject.name(),
            *addressed.borrow(),
            config.timeout,
            running.process().tail(20)
        );
    }
    let requests_after = quiescent(client, Duration::from_secs(60)).await?;
    let stats: ProcStats = running.stats()?;
    // With BENCH_KEEP_LOGS=1, ferro-ipam's own metrics are kept beside its log.
    if let Ok(address) = std::fs::read_to_string(plane.dir.join("ferro-ipam.metrics-address"))
        && let Some(text) = ferro_ipam_e2e::process::http_get(&address, "/metrics")
    {
        let _ = std::fs::write(plane.dir.join("ferro-ipam-metrics.log"), text);
    }
    if std::env::var("BENCH_KEEP_LOGS").is_ok_and(|v| v == "1") {
        for (kind, file) in [
            ("ipaddressclaims.ipam.cluster.x-k8s.io", "claim-0.json.log"),
            ("ipaddresses.ipam.cluster.x-k8s.io", "address-0.json.log"),
        ] {
            if let Ok(json) =
                plane.kubectl_ok(&["-n", NAMESPACE, "get", kind, "claim-0", "-o", "json", "--show-managed-fields"])
            {
                let _ = std::fs::write(plane.dir.join(file), json);
            }
        }
    }
    let what = || format!("{} with {}", subject.name(), shape.describe());
    let addresses = list_all(&Api::namespaced_with(client.clone(), NAMESPACE, &capi().address_resource())).await?;
    check_unique(&addresses, claims + 1).with_context(what)?;
    check_excluded(kind, &addresses, &excluded_lists(client, kind).await?).with_context(what)?;
    running.stop();
    let requests = requests_after
        .since(&requests_before)
        .without("POST ipaddressclaims", claims as f64)
        .without(&format!("PATCH {}", kind.plural()), edits.made as f64);
    Ok(RunResult {
        subject,
        shape,
        run,
        seconds,
        create_seconds,
        peak_rss_mib: stats.peak_rss_mib,
        cpu_seconds: stats.cpu_seconds - cpu_before,
        requests: requests.0,
        pools_touched,
        edits,
        load: (load_before, load_average()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(pool: &str, ip: &str) -> IPAddress {
        serde_json::from_value(json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
            "metadata": {"name": format!("{pool}-{ip}")},
            "spec": {"claimRef": {"name": "c"}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool},
                     "address": ip, "prefix": 16},
        }))
        .unwrap()
    }

    #[test]
    fn an_address_twice_in_a_pool_is_a_duplicate_and_in_two_pools_is_not() {
        let fine = [address("pool-0", "10.0.0.2"), address("pool-1", "10.0.0.2")];
        assert!(check_unique(&fine, 2).is_ok());
        assert!(check_unique(&fine, 3).is_err());
        let twice = [address("pool-0", "10.0.0.2"), address("pool-0", "10.0.0.2")];
        let error = check_unique(&twice, 2).unwrap_err();
        assert!(error.is::<Duplicate>(), "{error:#}");
    }

    #[test]
    fn an_address_on_its_own_pools_excluded_entry_is_caught() {
        let addresses = [address("pool-0", "10.0.0.2"), address("pool-1", "10.1.255.254")];
        let excluded =
            HashMap::from([("pool-0".to_owned(), vec!["10.1.255.254".to_owned()]), ("pool-1".to_owned(), Vec::new())]);
        // 10.1.255.254 is excluded in pool-0 only: no error.
        assert!(check_excluded(PoolKind::Addresses, &addresses, &excluded).is_ok());
        let excluded = HashMap::from([("pool-1".to_owned(), vec!["10.1.255.254".to_owned()])]);
        let error = check_excluded(PoolKind::Addresses, &addresses, &excluded).unwrap_err();
        assert_eq!(error.to_string(), "10.1.255.254 handed out in pool pool-1, which excludes 10.1.255.254");
        assert!(error.is::<Excluded>());
    }
}
