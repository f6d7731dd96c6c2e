//! One spoke pool's session with its hub: it watches the pool's `AddressBlock`s in the hub,
//! hands the granted ones to the index, asks for blocks when claims need room, asks again for
//! the block of any held address outside every known block (a spoke restored from a backup),
//! returns blocks nobody holds an address of, and renews the spoke's Lease in the hub.
//!
//! Nothing is returned before the index is complete: an address not listed yet is unknown,
//! not free. A block is taken out of the pool (under the pool's lock, only while empty) before
//! it is deleted in the hub, and never handed to the index again while it is being returned.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use ipnet::IpNet;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use tracing::{debug, info, warn};

use super::demand::{blocks_to_ask, may_return, room_of};
use crate::allocator::{Family, parse_entry};
use crate::api::IPPoolSpec;
use crate::api::hub::{AddressBlock, AddressBlockSpec, BlockFamily, HubSource, SPOKE_LEASE, SPOKE_POOL_LABEL};
use crate::client::Fence;
use crate::feed::{SpokePools, granted};
use crate::index::{Index, PoolKey, Room};
use crate::metrics::{HubOperation, Metrics, PoolLabels};

/// How often the session looks at its pool's room, besides every watch event.
const TICK: Duration = Duration::from_millis(200);
/// How long the session waits before it connects again after losing the hub.
const RECONNECT: Duration = Duration::from_secs(5);
/// How often the spoke's Lease in the hub is renewed, and how long it is valid.
const HEARTBEAT: Duration = Duration::from_secs(10);
const LEASE_SECONDS: i32 = 40;
/// How long a block asked for counts as on its way before the watch shows it.
const ASKED_FOR: Duration = Duration::from_secs(30);
/// How often a failed return is tried again.
const RETURN_RETRY: Duration = Duration::from_secs(5);
/// Blocks asked again for held addresses outside every block, at most per step.
const MAX_REASKS: usize = 16;

/// What a session needs.
#[derive(Clone)]
pub struct Session {
    pub key: PoolKey,
    pub source: HubSource,
    pub spokes: SpokePools,
    pub index: Index,
    pub local: Client,
    pub own_namespace: String,
    pub fence: Fence,
    pub metrics: Arc<Metrics>,
    /// This replica's identity, written as the holder of the spoke's Lease.
    pub identity: String,
}

/// How a connection to the hub ended.
enum Ended {
    /// The pool is gone and its blocks are returned.
    Done,
    /// No client of the hub could be made (the Secret or the kubeconfig in it).
    Unconfigured(String),
    /// The connection was lost.
    Lost(String),
}

/// What a session remembers between steps.
#[derive(Default)]
struct State {
    listed: bool,
    /// The last failure talking to the hub; cleared by the next success.
    failure: Option<String>,
    /// Blocks created and not seen by the watch yet, with their family and when.
    asked: HashMap<String, (Family, Instant)>,
    /// Blocks nobody held an address of since then.
    empty_since: HashMap<IpNet, Instant>,
    /// Blocks taken out of the pool to be returned, with the last attempt to delete them.
    /// Blocks taken out of the pool to be returned, by name: the UID of the object judged, and
    /// the last attempt to delete it.
    returning: HashMap<String, (String, Option<Instant>)>,
    /// Specific blocks asked for, so that each is asked once per session.
    reasked: HashSet<IpNet>,
    heartbeat: Option<Instant>,
    /// The pool was last seen being taken elsewhere by `clusterctl move`.
    moving: bool,
}

/// The label value naming a spoke pool on its blocks: a stable hash of its kind, namespace and
/// name (FNV-1a), since those can be longer than a label value may be.
pub fn pool_label(key: &PoolKey) -> String {
    let text = format!("{}/{}/{}", key.kind.as_str(), key.namespace.as_deref().unwrap_or_default(), key.name);
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// The families a spoke pool has, in its order.
fn families(spec: &IPPoolSpec) -> Vec<Family> {
    let first = spec.addresses.first().and_then(|a| parse_entry(a).ok()).map(|e| e.family());
    let second = spec
        .dual_stack
        .as_ref()
        .and_then(|d| d.addresses.first())
        .and_then(|a| parse_entry(a).ok())
        .map(|e| e.family());
    first.into_iter().chain(second).collect()
}

/// The prefix the spoke pool writes for `family`.
fn own_prefix(spec: &IPPoolSpec, family: Family) -> Option<i32> {
    crate::index::family_settings(spec, family).map(|(prefix, _)| prefix)
}

fn block_family(family: Family) -> BlockFamily {
    match family {
        Family::V4 => BlockFamily::IPv4,
        Family::V6 => BlockFamily::IPv6,
    }
}

fn family_of(block: &AddressBlock) -> Family {
    match block.spec.family {
        BlockFamily::IPv4 => Family::V4,
        BlockFamily::IPv6 => Family::V6,
    }
}

/// The specific blocks asked for again that the hub refused because someone else holds them.
fn lost_blocks(blocks: &[Arc<AddressBlock>]) -> Vec<IpNet> {
    blocks
        .iter()
        .filter(|b| granted(b).is_none())
        .filter(|b| {
            b.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| c.type_ == "Granted" && c.status == "False" && c.reason == "BlockNotFree")
            })
        })
        .filter_map(|b| b.spec.cidr.as_deref()?.parse().ok())
        .collect()
}

/// The aligned block of `size` addresses that holds `ip`.
fn block_of(ip: IpAddr, size: u32) -> Option<IpNet> {
    let bits = match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    };
    let length = u8::try_from(bits - size.trailing_zeros()).ok()?;
    IpNet::new(ip, length).ok().map(|net| net.trunc())
}

impl Session {
    /// Runs until the spoke pool is gone and its blocks are returned (or the term ends).
    pub async fn run(self) {
        loop {
            let problem = match self.serve().await {
                Ended::Done => return,
                // A pool gone whose hub was never reached: there is nothing to return.
                Ended::Unconfigured(_) if self.spokes.spec(&self.key).is_none() => return,
                Ended::Unconfigured(problem) | Ended::Lost(problem) => problem,
            };
            warn!(pool = %self.key, hub = %self.hub_name(), "{problem}; connecting again in {RECONNECT:?}");
            self.spokes.set_problem(&self.key, Some(problem));
            tokio::time::sleep(RECONNECT).await;
        }
    }

    /// Publishes whether the session reaches the hub now.
    fn reachable(&self, reachable: bool) {
        self.metrics.hub_reachable.get_or_create(&PoolLabels::of(&self.key)).set(i64::from(reachable));
    }

    fn hub_name(&self) -> String {
        let pool = &self.source.pool;
        match &pool.namespace {
            Some(ns) => format!("{} {ns}/{} (namespace {})", pool.kind, pool.name, self.source.namespace),
            None => format!("{} {} (namespace {})", pool.kind, pool.name, self.source.namespace),
        }
    }

    /// One connection to the hub, until the pool is gone and its blocks returned, or why not.
    async fn serve(&self) -> Ended {
        let started = Instant::now();
        let connected =
            super::connect::hub_client(&self.local, &self.own_namespace, &self.source, self.fence.clone()).await;
        self.metrics.hub_request(&self.key, HubOperation::connect, started.elapsed(), connected.is_ok());
        let hub = match connected {
            Ok(hub) => hub,
            Err(problem) => {
                self.reachable(false);
                return Ended::Unconfigured(problem);
            }
        };
        let api: Api<AddressBlock> = Api::namespaced(hub.clone(), &self.source.namespace);
        let selector = format!("{SPOKE_POOL_LABEL}={}", pool_label(&self.key));
        let (store, writer) = reflector::store();
        let events =
            reflector::reflector(writer, watcher::watcher(api.clone(), watcher::Config::default().labels(&selector)))
                .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut state = State::default();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        info!(pool = %self.key, hub = %self.hub_name(), "spoke pool: session with the hub started");
        loop {
            tokio::select! {
                event = events.next() => match event {
                    None => return Ended::Lost("the watch of the hub's AddressBlocks ended".to_owned()),
                    Some(Err(error)) => {
                        self.metrics.hub_request(&self.key, HubOperation::watch, Duration::ZERO, false);
                        state.failure = Some(format!("watching AddressBlocks in the hub's namespace {}: {error}", self.source.namespace));
                    }
                    Some(Ok(event)) => {
                        state.failure = None;
                        if matches!(event, Event::InitDone) {
                            state.listed = true;
                        }
                    }
                },
                _ = tick.tick() => {}
            }
            if state.listed && self.step(&api, &hub, &store, &mut state).await {
                info!(pool = %self.key, "spoke pool gone and its blocks returned: session ended");
                self.spokes.set_problem(&self.key, None);
                return Ended::Done;
            }
        }
    }

    /// One look at the pool and its blocks. True when the pool is gone and has no block left.
    async fn step(
        &self,
        api: &Api<AddressBlock>,
        hub: &Client,
        store: &Store<AddressBlock>,
        state: &mut State,
    ) -> bool {
        let blocks = store.state();
        let listed: HashSet<String> = blocks.iter().map(|b| b.name_any()).collect();
        state.returning.retain(|name, _| listed.contains(name));
        state.asked.retain(|name, (_, at)| !listed.contains(name) && at.elapsed() < ASKED_FOR);
        if let Some(leaving) = self.spokes.leaving(&self.key) {
            state.moving = leaving.moving;
        }
        let Some(spec) = self.spokes.spec(&self.key) else {
            if state.moving {
                // Its claims and addresses live on in the management cluster it moved to, whose
                // spoke pool of the same name lists these blocks as its own.
                info!(pool = %self.key, "spoke pool moved away by clusterctl move: its blocks stay with it");
                return true;
            }
            return self.farewell(api, &blocks, state).await;
        };
        let mut problems = Vec::new();
        // Each granted block the pool may use: its name, its UID and its CIDR.
        let mut usable: Vec<(String, String, IpNet)> = Vec::new();
        let mut pending: BTreeMap<Family, usize> = BTreeMap::new();
        for (family, _) in state.asked.values() {
            *pending.entry(*family).or_default() += 1;
        }
        for block in &blocks {
            let name = block.name_any();
            if block.meta().deletion_timestamp.is_some() || state.returning.contains_key(&name) {
                continue;
            }
            match granted(block) {
                Some(cidr) => {
                    let theirs = block.status.as_ref().and_then(|s| s.prefix);
                    let ours = own_prefix(&spec, family_of(block));
                    if theirs.is_some() && theirs != ours {
                        problems.push(format!(
                            "the hub's pool has prefix /{} for {cidr}, this pool /{}: make spec.prefix (and gateway) those of the hub's pool",
                            theirs.unwrap_or_default(),
                            ours.unwrap_or_default()
                        ));
                        continue;
                    }
                    usable.push((name, block.uid().unwrap_or_default(), cidr));
                }
                None => {
                    if block.spec.cidr.is_none() {
                        *pending.entry(family_of(block)).or_default() += 1;
                    }
                    let refused = block
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Granted" && c.status == "False"));
                    if let Some(refused) = refused {
                        problems.push(format!("the hub has not granted AddressBlock {name}: {}", refused.message));
                    }
                }
            }
        }
        self.spokes.set_blocks(&self.key, usable.iter().map(|(_, _, cidr)| *cidr).collect());
        self.spokes.set_lost(&self.key, lost_blocks(&blocks));
        if self.index.is_ready() {
            let (rooms, waiting) = self.index.room(&self.key);
            self.ask(api, &spec, &rooms, waiting, &pending, state).await;
            self.ask_again(api, &blocks, &usable, state).await;
            // A pool being moved keeps its blocks: the claims leaving it are not released. Nor
            // is a block taken out of the pool while the hub does not answer: it could not be
            // returned, and the pool would lose its room for nothing.
            if !state.moving && state.failure.is_none() {
                self.give_back(&usable, &rooms, state);
            }
        }
        self.delete_returning(api, state).await;
        self.heartbeat(hub, state).await;
        self.reachable(state.failure.is_none());
        problems.extend(state.failure.clone());
        let problem = (!problems.is_empty()).then(|| problems.join("; "));
        if self.spokes.set_problem(&self.key, problem.clone())
            && let Some(problem) = problem
        {
            warn!(pool = %self.key, hub = %self.hub_name(), "spoke pool: {problem}");
        }
        false
    }

    /// Asks for the blocks each family needs now.
    async fn ask(
        &self,
        api: &Api<AddressBlock>,
        spec: &IPPoolSpec,
        rooms: &[Room],
        waiting: usize,
        pending: &BTreeMap<Family, usize>,
        state: &mut State,
    ) {
        let size = self.source.block_size();
        for family in families(spec) {
            let room = room_of(rooms, family).unwrap_or(Room { family, free: 0, used: 0 });
            let wanted = blocks_to_ask(room, waiting, pending.get(&family).copied().unwrap_or_default(), size);
            for _ in 0..wanted {
                if self.create(api, family, None, state).await.is_none() {
                    return;
                }
            }
        }
    }

    /// Asks for the block of each held address outside every block the session knows: a
    /// spoke restored from a backup holds addresses of blocks it has since returned.
    async fn ask_again(
        &self,
        api: &Api<AddressBlock>,
        blocks: &[Arc<AddressBlock>],
        usable: &[(String, String, IpNet)],
        state: &mut State,
    ) {
        let size = self.source.block_size();
        let asked: HashSet<IpNet> = blocks.iter().filter_map(|b| b.spec.cidr.as_deref()?.parse().ok()).collect();
        let mut wanted: Vec<IpNet> = self
            .index
            .outside(&self.key)
            .into_iter()
            .filter_map(|ip| block_of(ip, size))
            .filter(|block| !usable.iter().any(|(_, _, u)| u.contains(&block.network())) && !asked.contains(block))
            .filter(|block| !state.reasked.contains(block))
            .collect();
        wanted.dedup();
        for block in wanted.into_iter().take(MAX_REASKS) {
            info!(pool = %self.key, %block, "spoke pool holds addresses outside its blocks: asking the hub for their block");
            state.reasked.insert(block);
            if self.create(api, Family::of(block.network()), Some(block), state).await.is_none() {
                return;
            }
        }
    }

    /// Takes the blocks that may go back out of the pool; they are deleted in the hub next.
    fn give_back(&self, usable: &[(String, String, IpNet)], rooms: &[Room], state: &mut State) {
        let size = self.source.block_size();
        let now = Instant::now();
        for (name, uid, cidr) in usable {
            if self.index.holds_in(&self.key, *cidr) {
                state.empty_since.remove(cidr);
                continue;
            }
            let since = *state.empty_since.entry(*cidr).or_insert(now);
            let family = Family::of(cidr.network());
            let room = room_of(rooms, family).unwrap_or(Room { family, free: 0, used: 0 });
            if may_return(room, now - since, size) && self.spokes.vacate(&self.key, *cidr) {
                debug!(pool = %self.key, %cidr, "returning an empty block to the hub");
                state.empty_since.remove(cidr);
                state.returning.insert(name.clone(), (uid.clone(), None));
                // One at a time, so that the next is judged by the room left.
                return;
            }
        }
    }

    /// Deletes the blocks being returned in the hub.
    async fn delete_returning(&self, api: &Api<AddressBlock>, state: &mut State) {
        let due: Vec<(String, String)> = state
            .returning
            .iter()
            .filter(|(_, (_, tried))| tried.is_none_or(|at| at.elapsed() >= RETURN_RETRY))
            .map(|(name, (uid, _))| (name.clone(), uid.clone()))
            .collect();
        for (name, uid) in due {
            state.returning.insert(name.clone(), (uid.clone(), Some(Instant::now())));
            let started = Instant::now();
            // The object judged, no other: one made since under its name is left alone (409).
            let params = DeleteParams {
                preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                ..DeleteParams::default()
            };
            let deleted = api.delete(&name, &params).await;
            let ok = match &deleted {
                Ok(_) => true,
                Err(kube::Error::Api(status)) => status.code == 404,
                Err(_) => false,
            };
            self.metrics.hub_request(&self.key, HubOperation::give_back, started.elapsed(), ok);
            match deleted {
                Ok(_) => info!(pool = %self.key, block = %name, "returned a block to the hub"),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    state.failure = Some(format!(
                        "returning AddressBlock {}/{name}: {}",
                        self.source.namespace,
                        crate::client::api_errors::describe(&error)
                    ));
                }
            }
        }
    }

    /// The pool is gone: once the index is complete and holds no address of any of its blocks,
    /// they all go back. True when none is left.
    async fn farewell(&self, api: &Api<AddressBlock>, blocks: &[Arc<AddressBlock>], state: &mut State) -> bool {
        if blocks.is_empty() {
            return true;
        }
        if !self.index.is_ready()
            || blocks.iter().filter_map(|b| granted(b)).any(|cidr| self.index.holds_in(&self.key, cidr))
        {
            return false;
        }
        for block in blocks {
            state.returning.entry(block.name_any()).or_insert((block.uid().unwrap_or_default(), None));
        }
        self.delete_returning(api, state).await;
        false
    }

    /// Creates a block in the hub; None when the hub refused (the failure is recorded).
    async fn create(
        &self,
        api: &Api<AddressBlock>,
        family: Family,
        cidr: Option<IpNet>,
        state: &mut State,
    ) -> Option<()> {
        let size = self.source.block_size();
        let prefix: String = self.key.name.chars().take(40).collect();
        let block = AddressBlock {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}-", prefix.trim_end_matches(['-', '.']))),
                labels: Some(BTreeMap::from([(SPOKE_POOL_LABEL.to_owned(), pool_label(&self.key))])),
                ..ObjectMeta::default()
            },
            spec: AddressBlockSpec {
                pool: self.source.pool.clone(),
                family: block_family(family),
                size,
                cidr: cidr.map(|c| c.to_string()),
                spoke_pool: self.key.to_string(),
            },
            status: None,
        };
        let params =
            PostParams { field_manager: Some(crate::api::keys::FIELD_MANAGER.to_owned()), ..PostParams::default() };
        let started = Instant::now();
        let created = api.create(&params, &block).await;
        self.metrics.hub_request(&self.key, HubOperation::ask, started.elapsed(), created.is_ok());
        match created {
            Ok(created) => {
                if cidr.is_none() {
                    state.asked.insert(created.name_any(), (family, Instant::now()));
                }
                Some(())
            }
            Err(error) => {
                state.failure = Some(format!(
                    "asking for a block in the hub's namespace {}: {}",
                    self.source.namespace,
                    crate::client::api_errors::describe(&error)
                ));
                None
            }
        }
    }

    /// Renews the spoke's Lease in the hub, which tells `ferro-ipam hub drain` that the spoke
    /// still answers.
    async fn heartbeat(&self, hub: &Client, state: &mut State) {
        if state.heartbeat.is_some_and(|at| at.elapsed() < HEARTBEAT) {
            return;
        }
        state.heartbeat = Some(Instant::now());
        let leases: Api<Lease> = Api::namespaced(hub.clone(), &self.source.namespace);
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        };
        let started = Instant::now();
        let result = match leases.get_opt(SPOKE_LEASE).await {
            Ok(Some(mut lease)) => {
                lease.spec = Some(spec);
                leases.replace(SPOKE_LEASE, &PostParams::default(), &lease).await.map(|_| ())
            }
            Ok(None) => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(SPOKE_LEASE.to_owned()), ..ObjectMeta::default() },
                    spec: Some(spec),
                };
                leases.create(&PostParams::default(), &lease).await.map(|_| ())
            }
            Err(error) => Err(error),
        };
        self.metrics.hub_request(&self.key, HubOperation::heartbeat, started.elapsed(), result.is_ok());
        if let Err(error) = result {
            debug!(pool = %self.key, error = %crate::client::api_errors::describe(&error), "renewing the spoke's Lease in the hub failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_label_is_a_stable_label_value_of_its_key() {
        let key = PoolKey::in_cluster("a-namespace", &"n".repeat(200));
        let label = pool_label(&key);
        assert_eq!(label.len(), 16);
        assert_eq!(label, pool_label(&key));
        assert_ne!(label, pool_label(&PoolKey::in_cluster("a-namespace", "other")));
        assert_ne!(pool_label(&PoolKey::global("p")), pool_label(&PoolKey::in_cluster("", "p")));
    }

    #[test]
    fn the_block_of_an_address_is_aligned_to_the_block_size() {
        assert_eq!(block_of("10.0.0.37".parse().unwrap(), 16), Some("10.0.0.32/28".parse().unwrap()));
        assert_eq!(block_of("fd00::1ff".parse().unwrap(), 256), Some("fd00::100/120".parse().unwrap()));
    }
}
