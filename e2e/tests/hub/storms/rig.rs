//! The fault tests' own hub and spokes, lent to one test at a time, and what every fault test
//! does around its fault: fresh pools and namespaces, storms, waiting for Ready, the
//! cross-cluster checker over the test's pool, and the leak check.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use ferro_ipam_e2e::invariants::shared::{SharedLook, findings};
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{ControlPlane, Provider};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::{Mutex, MutexGuard};

use super::storm::Storm;
use super::{BLOCKS_BACK_WITHIN, CLAIMS_GONE_WITHIN, STORM_RATE};
use crate::fleet::{self, Cluster, Fleet, POOL_KIND, PROVIDER_NAMESPACE, SPOKES};
use crate::look::{self, Side};
use crate::report::{Report, shorten};
use crate::{CHECK_SETTLES_WITHIN, POLL, PROVIDER_READY_WITHIN};

/// How every ferro-ipam of this fleet runs (as the main fleet's).
pub const PROVIDER_ARGS: [&str; 3] = ["--leader-elect", "--leader-election-namespace", PROVIDER_NAMESPACE];
/// The spoke pools' block size.
pub const BLOCK_SIZE: u32 = 16;
/// The Secret `operator/spoke-secret.sh` makes on each spoke: the hub's kubeconfig.
pub const HUB_SECRET: &str = "hub-kubeconfig";
/// The label that says a hub namespace is a spoke's.
const SPOKE_LABEL: &str = "hub.ferro-ipam.dev/spoke";
const SHARED_LABEL: &str = "hub.ferro-ipam.dev/shared";

static RIG: OnceLock<Result<Mutex<Fleet>, String>> = OnceLock::new();

/// The fault tests' hub and spokes, started on first use, for one test at a time. A ferro-ipam a
/// failed test left dead is started again first.
pub async fn lend() -> MutexGuard<'static, Fleet> {
    let rig = RIG.get_or_init(|| start().map(Mutex::new).map_err(|e| format!("{e:#}")));
    let mut fleet = match rig {
        Ok(fleet) => fleet.lock().await,
        Err(error) => panic!("starting the fault tests' hub and spokes: {error}"),
    };
    let f = &mut *fleet;
    for cluster in std::iter::once(&mut f.hub).chain(f.spokes.iter_mut()) {
        if !cluster.provider.process.is_running() {
            eprintln!("[faults] ferro-ipam on {} was not running: starting it again", cluster.name);
            if let Err(error) = relaunch(cluster).and_then(|_| cluster.provider.wait_ready(PROVIDER_READY_WITHIN)) {
                panic!("starting ferro-ipam on {} again: {error:#}", cluster.name);
            }
        }
    }
    fleet
}

/// Three planes, set up by `operator/*.sh` as the main fleet's (without its pool), and a
/// ferro-ipam on each.
fn start() -> Result<Fleet> {
    let began = Instant::now();
    let mut planes = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..3).map(|_| scope.spawn(ControlPlane::start)).collect();
        starts.into_iter().map(|s| s.join().expect("a plane's start does not panic")).collect::<Vec<_>>()
    })
    .into_iter()
    .map(|plane| plane.map(ControlPlane::leak))
    .collect::<Result<Vec<&'static ControlPlane>>>()?;
    let hub = planes.remove(0);
    let work = hub.dir.join("operator");
    std::fs::create_dir_all(&work)?;
    for spoke in SPOKES {
        fleet::operator(&work, hub, "hub-spoke.sh", Some(spoke))?;
    }
    for (spoke, plane) in SPOKES.into_iter().zip(&planes) {
        fleet::operator(&work, plane, "spoke-secret.sh", Some(spoke))?;
    }
    hub.kubectl_ok(&["create", "namespace", PROVIDER_NAMESPACE])?;
    let launch = |name: &'static str, plane: &'static ControlPlane, hub_namespace| -> Result<Cluster> {
        let provider = Provider::launch(plane, &plane.kubeconfig, &PROVIDER_ARGS)?;
        Ok(Cluster { name, plane, provider, hub_namespace })
    };
    let hub = launch("hub", hub, None)?;
    let spokes = SPOKES
        .into_iter()
        .zip(planes)
        .map(|(spoke, plane)| launch(spoke, plane, Some(spoke)))
        .collect::<Result<Vec<Cluster>>>()?;
    let fleet = Fleet { hub, spokes, work };
    for cluster in fleet.clusters() {
        cluster
            .provider
            .wait_ready(PROVIDER_READY_WITHIN)
            .with_context(|| format!("ferro-ipam on {}", cluster.name))?;
    }
    eprintln!("[faults] the fault tests' hub and spokes ready in {:.1} s:", began.elapsed().as_secs_f64());
    for cluster in fleet.clusters() {
        eprintln!(
            "[faults]   {:8} {} (plane in {}, ferro-ipam's log {})",
            cluster.name,
            cluster.plane.server,
            cluster.plane.dir.display(),
            cluster.provider.process.log.display()
        );
    }
    Ok(fleet)
}

/// Starts a new ferro-ipam on `cluster` in place of its old one (dropped: killed if still
/// running), without waiting for it. Returns the old one's log.
pub fn relaunch(cluster: &mut Cluster) -> Result<PathBuf> {
    let old = cluster.provider.process.log.clone();
    cluster.provider = Provider::launch(cluster.plane, &cluster.plane.kubeconfig, &PROVIDER_ARGS)?;
    Ok(old)
}

/// A pool of the hub shared with both spokes, and each spoke's pool of it, named alike.
pub struct TestPool {
    pub name: &'static str,
    pub cidr: &'static str,
    pub prefix: u8,
    pub gateway: &'static str,
}

impl TestPool {
    /// The hub's pool (labelled shared) and on each spoke its spoke pool, which reads the hub's
    /// kubeconfig from the Secret `secrets[i]` of ferro-ipam's namespace.
    pub async fn create(&self, fleet: &Fleet, secrets: [&str; 2]) -> Result<()> {
        let spec = json!({"addresses": [self.cidr], "prefix": self.prefix, "gateway": self.gateway});
        let labels = json!({SHARED_LABEL: "true"});
        create_pool(fleet.hub.plane, json!({"name": self.name, "labels": labels}), spec.clone()).await?;
        for (spoke, secret) in fleet.spokes.iter().zip(secrets) {
            let mut spec = spec.clone();
            spec["hub"] = json!({"kubeconfigSecret": secret, "namespace": spoke.hub_namespace,
                "pool": {"kind": POOL_KIND, "name": self.name}, "blockSize": BLOCK_SIZE});
            create_pool(spoke.plane, json!({"name": self.name}), spec).await?;
        }
        Ok(())
    }

    /// The `spec.spokePool` a spoke's blocks of this pool carry.
    pub fn spoke_pool(&self) -> String {
        format!("{POOL_KIND} {}", self.name)
    }
}

async fn create_pool(plane: &'static ControlPlane, metadata: Value, spec: Value) -> Result<()> {
    let pool =
        json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": POOL_KIND, "metadata": metadata, "spec": spec});
    let api: Api<DynamicObject> = Api::all_with(plane.client().await, &look::global_pools_resource());
    api.create(&PostParams::default(), &serde_json::from_value(pool)?)
        .await
        .with_context(|| format!("creating a pool on {}", plane.server))?;
    Ok(())
}

/// Which cluster of the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    Hub,
    Spoke(usize),
}

/// One cluster's part of a test: a fresh namespace of claims there, and how many it makes.
pub struct Part {
    pub on: On,
    pub scope: Scope,
    pub claims: usize,
}

impl Part {
    pub fn cluster<'f>(&self, fleet: &'f Fleet) -> &'f Cluster {
        match self.on {
            On::Hub => &fleet.hub,
            On::Spoke(i) => &fleet.spokes[i],
        }
    }
}

/// The hub's part, spoke-a's and spoke-b's, each in a fresh namespace `<hint>-...`, making
/// `claims[i]` claims.
pub async fn parts(fleet: &Fleet, hint: &str, claims: [usize; 3]) -> Vec<Part> {
    let mut parts = Vec::new();
    for (on, claims) in [On::Hub, On::Spoke(0), On::Spoke(1)].into_iter().zip(claims) {
        let cluster = match on {
            On::Hub => &fleet.hub,
            On::Spoke(i) => &fleet.spokes[i],
        };
        let scope = Scope::on(cluster.plane, &format!("{hint}-{}", cluster.name)).await;
        parts.push(Part { on, scope, claims });
    }
    parts
}

/// The checker's sides of `parts`.
pub fn sides<'f>(fleet: &'f Fleet, parts: &[Part]) -> Vec<Side<'f>> {
    parts
        .iter()
        .map(|p| Side {
            cluster: p.cluster(fleet),
            client: p.scope.client.clone(),
            claims_namespace: p.scope.ns.clone(),
        })
        .collect()
}

/// A storm on each part (`c-<n>`, its count of claims, at [`STORM_RATE`]).
pub fn storms(parts: &[Part], pool: &str) -> Vec<Storm> {
    parts.iter().filter(|p| p.claims > 0).map(|p| Storm::start(&p.scope, pool, "c", p.claims, STORM_RATE)).collect()
}

/// Waits for every storm; returns when the last claim was created.
pub async fn finish(storms: Vec<Storm>) -> Result<Instant> {
    let mut last = Instant::now() - Duration::from_secs(3600);
    for storm in storms {
        last = last.max(storm.finish().await?);
    }
    Ok(last)
}

/// How many `IPAddress`es the part's namespace holds (0 while its API server is away).
pub async fn addresses(s: &Scope) -> usize {
    s.addresses().list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(0)
}

/// Waits until `s` holds at least `at_least` addresses.
pub async fn wait_addresses(s: &Scope, at_least: usize, within: Duration) -> Result<usize> {
    let deadline = Instant::now() + within;
    loop {
        let now = addresses(s).await;
        if now >= at_least {
            return Ok(now);
        }
        if Instant::now() > deadline {
            return Err(anyhow!("only {now} of {at_least} addresses in {} after {within:?}", s.ns));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The claims of `s` whose Ready says `WaitingForHub`, one of their messages, and one that says
/// what keeps the pool from the hub, if any does.
pub async fn waiting_for_hub(s: &Scope) -> (usize, Option<String>, Option<String>) {
    let claims = look::claims(&s.client, &s.ns).await.unwrap_or_default();
    let waiting: Vec<String> = claims
        .iter()
        .filter_map(|c| look::condition(c, "Ready"))
        .filter(|(status, reason, _)| status == "False" && reason == "WaitingForHub")
        .map(|(_, _, message)| message)
        .collect();
    let problem = waiting.iter().find(|m| m.contains("the hub cannot serve it now")).cloned();
    (waiting.len(), waiting.into_iter().next(), problem)
}

/// The addresses of `s` by claim (an `IPAddress` is named as its claim).
pub async fn bound(s: &Scope) -> BTreeMap<String, String> {
    s.address_map().await.unwrap_or_default()
}

/// The claims bound in `before` whose address is another, or gone, in `now`.
pub fn moved(before: &BTreeMap<String, String>, now: &BTreeMap<String, String>) -> Vec<String> {
    before
        .iter()
        .filter(|(claim, address)| now.get(*claim) != Some(*address))
        .map(|(claim, address)| format!("{claim}: {address} -> {:?}", now.get(claim)))
        .collect()
}

/// Waits until every claim of every part is Ready (each part's `claims` of them), else says
/// how each cluster stands.
pub async fn wait_all_ready(fleet: &Fleet, parts: &[Part], hub: &Client, deadline: Instant, test: &str) -> Result<()> {
    let mut last_said = Instant::now();
    loop {
        let mut done = true;
        let mut standing = Vec::new();
        for part in parts {
            let claims = look::claims(&part.scope.client, &part.scope.ns).await.unwrap_or_default();
            let ready =
                claims.iter().filter(|c| look::condition(c, "Ready").is_some_and(|(s, _, _)| s == "True")).count();
            done &= ready >= part.claims;
            standing.push(format!("{}: {}", part.cluster(fleet).name, look::standing(&claims)));
        }
        if done {
            return Ok(());
        }
        let blocks = match look::blocks(hub, None).await {
            Ok(blocks) => format!("{:?}", look::blocks_by_namespace(&blocks)),
            Err(error) => format!("({error:#})"),
        };
        if Instant::now() > deadline {
            return Err(anyhow!(
                "not Ready in time:\n  {}\n  the hub's AddressBlocks (namespace: count, granted): {blocks}",
                standing.join("\n  ")
            ));
        }
        if last_said.elapsed() > Duration::from_secs(15) {
            eprintln!("[{test}] waiting for Ready: {}; blocks {blocks}", standing.join("; "));
            last_said = Instant::now();
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The hub's `AddressBlock`s of the pool `pool` (of `namespace`, or every namespace).
pub async fn pool_blocks(hub: &Client, pool: &str, namespace: Option<&str>) -> Result<Vec<DynamicObject>> {
    Ok(look::blocks(hub, namespace).await?.into_iter().filter(|b| b.data["spec"]["pool"]["name"] == pool).collect())
}

/// The granted CIDRs of the pool's blocks in `namespace`.
pub async fn granted_cidrs(hub: &Client, pool: &str, namespace: &str) -> Result<Vec<String>> {
    let blocks = pool_blocks(hub, pool, Some(namespace)).await?;
    let mut cidrs: Vec<String> =
        blocks.iter().map(look::block_seen).filter(|b| b.granted).filter_map(|b| b.cidr).collect();
    cidrs.sort_by_key(|c| cidr_span(c).map(|s| s.0));
    Ok(cidrs)
}

/// One look at the three clusters for the checker, limited to the pool `pool` (its addresses on
/// every side, its blocks in the hub).
pub async fn look_pool(fleet: &Fleet, parts: &[Part], hub: &Client, pool: &str) -> Result<SharedLook> {
    let mut look = look::look_at(&sides(fleet, parts), hub, pool).await?;
    look.blocks = pool_blocks(hub, pool, None).await?.iter().map(look::block_seen).collect();
    Ok(look)
}

/// The cross-cluster invariants over the pool. Fatal findings (an address twice, a claim bound
/// twice, overlapping blocks, an address outside its spoke's blocks) fail at the first look
/// unless `settle_fatal`; pending ones (claims not bound yet) are looked at again for
/// [`CHECK_SETTLES_WITHIN`]. True when they hold.
pub async fn check(
    fleet: &Fleet,
    parts: &[Part],
    hub: &Client,
    pool: &str,
    when: &str,
    settle_fatal: bool,
    report: &mut Report,
) -> bool {
    let deadline = Instant::now() + CHECK_SETTLES_WITHIN;
    loop {
        let look = match look_pool(fleet, parts, hub, pool).await {
            Ok(look) => look,
            Err(error) => {
                report.fail(format!("the invariants {when}: looking: {error:#}"));
                return false;
            }
        };
        let found = findings(&look);
        let addresses: usize = look.clusters.iter().map(|c| c.addresses.len()).sum();
        if found.is_empty() {
            let per: Vec<String> = look.clusters.iter().map(|c| format!("{} {}", c.name, c.addresses.len())).collect();
            report.note(format!(
                "the invariants hold {when}: {addresses} addresses ({}), {} AddressBlocks of the pool, 0 duplicates",
                per.join(", "),
                look.blocks.len()
            ));
            return true;
        }
        if (!found.fatal.is_empty() && !settle_fatal) || Instant::now() > deadline {
            let mut listing = found.fatal.clone();
            listing.extend(found.pending.iter().cloned());
            report.fail(format!(
                "the invariants {when} ({} fatal, {} pending findings; {addresses} addresses):\n  {}",
                found.fatal.len(),
                found.pending.len(),
                shorten(&listing.join("\n  "), 40)
            ));
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Nothing leaked. Every granted block of the pool is in the hub namespace of one of the
/// fleet's spokes, labelled as a spoke's, and names (`spec.spokePool`) the pool on that spoke,
/// which exists. Then every claim of `parts` is deleted; once a cluster's are gone, no granted
/// block of the pool is left in the hub within [`BLOCKS_BACK_WITHIN`].
pub async fn no_leak(fleet: &Fleet, parts: &[Part], hub: &Client, pool: &TestPool, report: &mut Report) {
    match owners_exist(fleet, hub, pool).await {
        Ok(count) => {
            report.note(format!("{count} granted blocks, each of a spoke namespace and a spoke pool that exist"))
        }
        Err(error) => report.fail(format!("a granted block without its spoke: {error:#}")),
    }
    for part in parts {
        let resource = "ipaddressclaims.ipam.cluster.x-k8s.io";
        let plane = part.cluster(fleet).plane;
        if let Err(error) = plane.kubectl_ok(&["delete", resource, "--all", "-n", &part.scope.ns, "--wait=false"]) {
            report.fail(format!("deleting the claims on {}: {error:#}", part.cluster(fleet).name));
        }
    }
    let deleted = Instant::now();
    let mut gone = false;
    let mut left = String::new();
    while deleted.elapsed() < CLAIMS_GONE_WITHIN {
        let mut counts = Vec::new();
        for part in parts {
            let claims = look::claims(&part.scope.client, &part.scope.ns).await.map(|c| c.len()).unwrap_or(usize::MAX);
            counts.push((part.cluster(fleet).name, claims, addresses(&part.scope).await));
        }
        if counts.iter().all(|(_, claims, held)| *claims == 0 && *held == 0) {
            gone = true;
            break;
        }
        left = format!("{counts:?} (cluster, claims, IPAddresses)");
        tokio::time::sleep(POLL).await;
    }
    if !gone {
        return report.fail(format!("the claims deleted are not gone within {CLAIMS_GONE_WITHIN:?}: {left}"));
    }
    let claims_gone = Instant::now();
    loop {
        let blocks = match pool_blocks(hub, pool.name, None).await {
            Ok(blocks) => blocks,
            Err(error) => return report.fail(format!("listing the blocks: {error:#}")),
        };
        let seen: Vec<_> = blocks.iter().map(look::block_seen).collect();
        let granted: Vec<String> = seen
            .iter()
            .filter(|b| b.granted)
            .map(|b| format!("{}/{} {}", b.namespace, b.name, b.cidr.as_deref().unwrap_or("")))
            .collect();
        if granted.is_empty() {
            report.note(format!(
                "claims deleted: gone after {:.1} s, every block back in the hub {:.1} s later",
                (claims_gone - deleted).as_secs_f64(),
                claims_gone.elapsed().as_secs_f64()
            ));
            let ungranted: Vec<String> = blocks
                .iter()
                .map(|b| {
                    let (status, reason, message) = look::condition(b, "Granted").unwrap_or_default();
                    format!(
                        "{}/{} spec.cidr {} Granted={status} {reason}: {message}",
                        b.metadata.namespace.as_deref().unwrap_or_default(),
                        b.metadata.name.as_deref().unwrap_or_default(),
                        b.data["spec"]["cidr"].as_str().unwrap_or("-")
                    )
                })
                .collect();
            if !ungranted.is_empty() {
                report.note(format!("AddressBlocks left ungranted (holding nothing): {}", ungranted.join("; ")));
            }
            return;
        }
        if claims_gone.elapsed() > BLOCKS_BACK_WITHIN {
            return report.fail(format!(
                "blocks not returned within {BLOCKS_BACK_WITHIN:?} of every claim being gone: {} still granted: {}",
                granted.len(),
                granted.join(", ")
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// How many granted blocks the pool has, each in a spoke's namespace naming its spoke pool.
async fn owners_exist(fleet: &Fleet, hub: &Client, pool: &TestPool) -> Result<usize> {
    let namespaces: Api<Namespace> = Api::all(hub.clone());
    let blocks = pool_blocks(hub, pool.name, None).await?;
    let mut problems = Vec::new();
    let mut granted = 0;
    for block in &blocks {
        let seen = look::block_seen(block);
        if !seen.granted {
            continue;
        }
        granted += 1;
        let who = format!("AddressBlock {}/{} ({})", seen.namespace, seen.name, seen.cidr.as_deref().unwrap_or(""));
        let Some(spoke) = fleet.spokes.iter().find(|s| s.hub_namespace == Some(seen.namespace.as_str())) else {
            problems.push(format!("{who} is in no spoke's namespace"));
            continue;
        };
        let labelled = namespaces
            .get_opt(&seen.namespace)
            .await?
            .and_then(|ns| ns.metadata.labels)
            .is_some_and(|l| l.contains_key(SPOKE_LABEL));
        if !labelled {
            problems.push(format!("{who}: namespace {} is gone or not labelled {SPOKE_LABEL}", seen.namespace));
        }
        let spoke_pool = block.data["spec"]["spokePool"].as_str().unwrap_or_default();
        if spoke_pool != pool.spoke_pool() {
            problems.push(format!("{who} names spoke pool {spoke_pool:?}, not {:?}", pool.spoke_pool()));
            continue;
        }
        let pools: Api<DynamicObject> = Api::all_with(spoke.plane.client().await, &look::global_pools_resource());
        if pools.get_opt(pool.name).await?.is_none() {
            problems.push(format!("{who}: {} has no pool {}", spoke.name, pool.name));
        }
    }
    if problems.is_empty() { Ok(granted) } else { Err(anyhow!("{}", problems.join("; "))) }
}

/// Panics with every failure, each ferro-ipam's log and the logs in `more` (a killed
/// ferro-ipam's), if any failed.
pub fn conclude(report: Report, fleet: &Fleet, more: &[(String, PathBuf)]) {
    report.conclude_with(|lines| {
        let mut out = fleet::logs(fleet.clusters(), lines);
        for (what, log) in more {
            out.push_str(&format!(
                "\n--- {what} ({}): the last {lines} lines:\n{}",
                log.display(),
                ferro_ipam_e2e::process::tail(log, lines)
            ));
        }
        out
    })
}

/// An IPv4 address as a number.
pub fn v4(ip: &str) -> Option<u32> {
    ip.trim().parse::<std::net::Ipv4Addr>().ok().map(u32::from)
}

/// An IPv4 CIDR's first and last address.
pub fn cidr_span(cidr: &str) -> Option<(u32, u32)> {
    let (ip, bits) = cidr.split_once('/')?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 32)?;
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    let first = v4(ip)? & mask;
    Some((first, first | !mask))
}

/// Whether `ip` lies in `cidr`.
pub fn in_cidr(ip: &str, cidr: &str) -> bool {
    matches!((v4(ip), cidr_span(cidr)), (Some(ip), Some((first, last))) if first <= ip && ip <= last)
}

/// Seconds since `at`, for notes.
pub fn since(at: Instant) -> String {
    format!("{:.1} s", at.elapsed().as_secs_f64())
}
