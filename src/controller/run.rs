//! Wiring: the watches, the index and the three controllers, for one leadership term.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tracing::Instrument;

use futures::{Stream, StreamExt, future};
use kube::api::{Api, PartialObjectMeta};
use kube::core::{ApiResource, DynamicResourceScope};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tracing::{debug, warn};

use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::api::keys::WATCH_FILTER_LABEL;
use crate::api::{GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use crate::health::Health;
use crate::index::{Index, PoolKind, Trigger};
use crate::metrics::{ControllerLabels, Metrics};

use super::claim::{self, cluster_name};
use super::cluster_vip;
use super::context::Context;
use super::discovery::Served;
use super::error::Error;
use super::feed::{AddressFeed, PoolFeed};
use super::pool::{self, PoolObject};
use super::triggers::{self, Wake};
use super::watches::{WatchBackoff, relisting, watched};

/// How long a claim reconcile waits at most for the watch to show the claim's own last write.
const OWN_WRITES_MAX_AGE: Duration = Duration::from_secs(30);

/// Pool status writes: each pool at most every 500 ms; when many pools are busy, 20 writes per
/// second in all, each pool waiting at most 5 s (see `pool::WriteThrottle`).
const POOL_WRITES_MIN_INTERVAL: Duration = Duration::from_millis(500);
const POOL_WRITES_MAX_INTERVAL: Duration = Duration::from_secs(5);
const POOL_WRITES_PER_SECOND: u32 = 20;

/// How the controllers are scoped and tuned.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Watch namespaced objects in this namespace only.
    pub namespace: Option<String>,
    /// Only reconcile claims, pools and clusters with `cluster.x-k8s.io/watch-filter=<value>`.
    pub watch_filter: Option<String>,
    /// How many claims are reconciled at once (0: no limit).
    pub claim_concurrency: u16,
    /// Name of this instance, for Events.
    pub instance: Option<String>,
    /// How long a deleted claim's address is kept for a claim of the same name.
    pub sticky: Duration,
    /// The API server's clock, for grace periods, sticky addresses and condition times.
    pub clock: crate::client::ServerClock,
    /// How often every claim and pool is reconciled again without a change (zero: never).
    pub sync_period: Duration,
    /// The write fence of the client; reconciles wait for it to be open before they start.
    pub fence: crate::client::Fence,
}

impl Settings {
    /// The `--sync-period` signal, or one that never comes.
    fn resync(&self) -> impl Stream<Item = ()> + Send + 'static {
        match self.sync_period.is_zero() {
            true => futures::stream::pending().left_stream(),
            false => triggers::every(self.sync_period).right_stream(),
        }
    }
}

impl Settings {
    fn filtered(&self) -> watcher::Config {
        match &self.watch_filter {
            Some(value) => watcher::Config::default().labels(&format!("{WATCH_FILTER_LABEL}={value}")),
            None => watcher::Config::default(),
        }
    }

    fn scoped<K>(&self, client: &Client, resource: &ApiResource) -> Api<K>
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => Api::all_with(client.clone(), resource),
        }
    }
}

/// A store of a dynamically typed resource, and its writer.
fn store_with<K>(resource: ApiResource) -> (reflector::Store<K>, reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ApiResource> + Clone + 'static,
{
    let writer = reflector::store::Writer::new(resource);
    (writer.as_reader(), writer)
}

/// Drops what no controller reads before an object reaches a store: `managedFields` is about
/// half of a stored claim or address. Patches built from cached objects name the fields they
/// set and the `resourceVersion` they expect, never `managedFields`, so they are unaffected.
fn lean<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Counts down the listings the index waits for, and marks it ready after the last.
fn readiness_gate(index: &Index, parts: usize) -> impl Fn() -> Box<dyn FnOnce() + Send> {
    let left = Arc::new(AtomicUsize::new(parts));
    let index = index.clone();
    move || {
        let left = left.clone();
        let index = index.clone();
        Box::new(move || {
            if left.fetch_sub(1, Ordering::SeqCst) == 1 {
                index.set_ready();
                debug!("index complete: claims may allocate");
            }
        })
    }
}

/// Runs one reconcile inside a span naming the object, and counts it.
async fn instrumented<K, F, Fut>(
    controller: &'static str,
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<Action, Error>
where
    K: kube::Resource,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    let labels = ControllerLabels { controller: controller.to_owned() };
    let name = match object.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", object.meta().name.as_deref().unwrap_or_default()),
        None => object.meta().name.clone().unwrap_or_default(),
    };
    let span = tracing::debug_span!("reconcile", controller, object = %name);
    // A suspended term's reconciles wait here rather than fail their writes.
    ctx.fence.wait_open().await;
    let metrics = ctx.metrics.clone();
    metrics.reconciles_in_flight.get_or_create(&labels).inc();
    let started = Instant::now();
    let result = reconcile(object, ctx).instrument(span).await;
    metrics.reconciles_in_flight.get_or_create(&labels).dec();
    metrics.reconciled(controller, started.elapsed(), result.as_ref().err().map(Error::metric_label));
    result
}

fn error_policy<K>(_: Arc<K>, error: &Error, _: Arc<Context>) -> Action {
    warn!(%error, kind = error.metric_label(), "reconcile failed; retrying");
    Action::requeue(error.retry_after())
}

fn drain<S: Stream + Send + 'static>(stream: S) -> impl Future<Output = ()> + Send
where
    S::Item: Send,
{
    stream.for_each(|_| future::ready(()))
}

/// A pool controller of one kind, fed from its own watch, which also feeds the index. When
/// `manage` is false the pools only feed the index: their status and finalizer are left to an
/// instance that sees every namespace.
#[allow(clippy::too_many_arguments)]
fn pool_controller<K>(
    manage: bool,
    client: &Client,
    settings: &Settings,
    index: &Index,
    listed: Box<dyn FnOnce() + Send>,
    triggers: mpsc::UnboundedReceiver<ObjectRef<K>>,
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> + Send
where
    K: PoolObject + kube::Resource<DynamicType = ()>,
{
    // The namespaced kind is watched in --namespace only; the global kind everywhere.
    let api: Api<K> = K::api(client.clone(), settings.namespace.as_deref());
    let (store, writer) = reflector::store();
    let mut feed = PoolFeed::new(index.clone(), listed);
    let watch =
        watched(&K::kind(&()), ctx.health.clone(), watcher(api, settings.filtered()).backoff(WatchBackoff::default()))
            .modify(lean);
    let events = reflector::reflector(writer, watch).map(move |event| {
        if let Ok(event) = &event {
            feed.apply(event);
        }
        event
    });
    if !manage {
        drop(triggers);
        return future::Either::Left(drain(events));
    }
    let (relisted, relistings) = triggers::relistings();
    let controller = Controller::for_stream(triggers::objects(events, Wake::Touched, relisted), store)
        .reconcile_all_on(relistings)
        .reconcile_all_on(settings.resync())
        .reconcile_on(UnboundedReceiverStream::new(triggers))
        .graceful_shutdown_on(shutdown)
        .run(|pool, ctx| instrumented("pool", pool, ctx, pool::reconcile::<K>), error_policy, ctx);
    future::Either::Right(drain(controller))
}

/// Runs the controllers until `shutdown` resolves. Every call starts from an empty index, which
/// is complete before the first claim is served.
pub async fn run(
    client: Client,
    served: Served,
    settings: Settings,
    health: Health,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let shutdown = futures::FutureExt::shared(shutdown);
    let clock = settings.clock.clone();
    let (index, index_triggers) = Index::with_clock(settings.sticky, Arc::new(move || clock.now()));
    // The IPAddress listing and one listing per pool kind.
    let gate = readiness_gate(&index, 5);

    let claim_resource = served.ipam.claim_resource();
    let address_resource = served.ipam.address_resource();

    // IPAddress watch -> store for the claim controller, and holds in the index.
    let (addresses, address_writer) = store_with(address_resource.clone());
    let mut address_feed = AddressFeed::new(index.clone(), gate());
    let address_api: Api<IPAddress> = settings.scoped(&client, &address_resource);
    // After a failure the addresses are listed again, and claims wait until that listing is
    // complete: addresses made or deleted by hand while the watch was down are known before
    // anything is allocated (see `AddressFeed::failed`).
    let addresses_from_scratch =
        relisting(Arc::new(move || watcher(address_api.clone(), watcher::Config::default()).boxed()));
    let address_watch = drain(
        reflector::reflector(
            address_writer,
            watched("IPAddress", health.clone(), addresses_from_scratch.backoff(WatchBackoff::default())).modify(lean),
        )
        .map(move |event| match &event {
            Ok(event) => address_feed.apply(event),
            Err(_) => address_feed.failed(),
        }),
    );

    // Cluster watch -> store for the pause rules; its changes retrigger the Cluster's claims.
    let (claim_tx, claim_rx) = mpsc::unbounded_channel::<ObjectRef<IPAddressClaim>>();
    let claim_api: Api<IPAddressClaim> = settings.scoped(&client, &claim_resource);
    let (claims, claim_writer) = store_with(claim_resource.clone());
    let claim_events = reflector::reflector(
        claim_writer,
        watched(
            "IPAddressClaim",
            health.clone(),
            watcher(claim_api, settings.filtered()).backoff(WatchBackoff::default()),
        )
        .modify(lean),
    );
    let (claims_relisted, claim_relistings) = triggers::relistings();
    let claim_watch = triggers::objects(claim_events, Wake::Applied, claims_relisted.clone());
    let claim_controller = Controller::for_stream_with(claim_watch, claims.clone(), claim_resource.clone())
        .reconcile_all_on(claim_relistings)
        .reconcile_all_on(settings.resync());
    let cluster_parts = served.cluster.map(|version| {
        let resource = version.cluster_resource();
        let (store, writer) = store_with(resource.clone());
        let api: Api<Cluster> = settings.scoped(&client, &resource);
        let claims = claims.clone();
        let tx = claim_tx.clone();
        let claim_resource = claim_resource.clone();
        let watch =
            watched("Cluster", health.clone(), watcher(api, settings.filtered()).backoff(WatchBackoff::default()));
        let (clusters_relisted, cluster_relistings) = triggers::relistings();
        let claims_relisted = claims_relisted.clone();
        // A relisting may bring Clusters changed while the watch was down: every claim and
        // every Cluster is looked at again.
        let relisted = move || {
            clusters_relisted();
            claims_relisted();
        };
        let events = reflector::reflector(writer, watch.modify(lean));
        let watch = triggers::objects(events, Wake::Touched, relisted).map(move |cluster| {
            if let Ok(cluster) = &cluster {
                let namespace = cluster.namespace();
                for claim in claims.state().iter().filter(|c| {
                    c.namespace() == namespace && cluster_name(c).as_deref() == Some(cluster.name_any().as_str())
                }) {
                    let _ = tx.send(ObjectRef::from_obj_with(claim.as_ref(), claim_resource.clone()));
                }
            }
            cluster
        });
        (store, resource, watch, cluster_relistings)
    });
    let clusters = cluster_parts.as_ref().map(|(store, _, _, _)| store.clone());

    let reporter = Reporter { controller: "ferro-ipam".into(), instance: settings.instance.clone() };
    let ctx = Arc::new(Context {
        client: client.clone(),
        index: index.clone(),
        capi: served.ipam,
        claim_resource: claim_resource.clone(),
        address_resource,
        addresses,
        claims: claims.clone(),
        clusters,
        cluster_resource: served.cluster.map(|version| version.cluster_resource()),
        providers: super::provider::Providers::new(client.clone()),
        recorder: Recorder::new(client.clone(), reporter),
        metrics: metrics.clone(),
        first_seen: Default::default(),
        only_namespace: settings.namespace.clone(),
        pool_writes: pool::WriteThrottle::new(
            POOL_WRITES_MIN_INTERVAL,
            POOL_WRITES_MAX_INTERVAL,
            POOL_WRITES_PER_SECOND,
        ),
        own_writes: super::own_writes::OwnWrites::new(OWN_WRITES_MAX_AGE),
        clock: settings.clock.clone(),
        health: health.clone(),
        fence: settings.fence.clone(),
    });

    // Cluster watch -> the control-plane VIP controller, also woken by changes of its claims.
    let cluster_watch = match cluster_parts {
        Some((store, resource, watch, relistings)) => {
            let claim_api: Api<PartialObjectMeta<IPAddressClaim>> = settings.scoped(&client, &claim_resource);
            let selector = format!("{}={}", cluster_vip::ROLE_LABEL, cluster_vip::ROLE);
            let owners = resource.clone();
            let vip_claims = watched(
                "control-plane VIP IPAddressClaim",
                health.clone(),
                watcher(claim_api, watcher::Config::default().labels(&selector)).backoff(WatchBackoff::default()),
            )
            .touched_objects()
            .filter_map(move |claim| {
                let owner = claim.ok().and_then(|claim| {
                    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                    claim
                        .metadata
                        .owner_references
                        .unwrap_or_default()
                        .into_iter()
                        .find(|o| o.kind == owners.kind)
                        .map(|o| ObjectRef::new_with(&o.name, owners.clone()).within(&namespace))
                });
                future::ready(owner)
            });
            let controller = Controller::for_stream_with(watch, store, resource)
                .reconcile_all_on(relistings)
                .reconcile_on(vip_claims)
                .graceful_shutdown_on(shutdown.clone())
                .run(
                    |cluster, ctx| instrumented("cluster-vip", cluster, ctx, cluster_vip::reconcile),
                    error_policy,
                    ctx.clone(),
                );
            future::Either::Left(drain(controller))
        }
        None => future::Either::Right(future::ready(())),
    };

    // Index triggers -> the claim and pool controllers.
    let (in_cluster_tx, in_cluster_rx) = mpsc::unbounded_channel::<ObjectRef<InClusterIPPool>>();
    let (global_tx, global_rx) = mpsc::unbounded_channel::<ObjectRef<GlobalInClusterIPPool>>();
    let (prefix_tx, prefix_rx) = mpsc::unbounded_channel::<ObjectRef<InClusterPrefixPool>>();
    let (global_prefix_tx, global_prefix_rx) = mpsc::unbounded_channel::<ObjectRef<GlobalInClusterPrefixPool>>();
    let route_claims = claim_tx.clone();
    let claim_resource = claim_resource.clone();
    let router = drain(UnboundedReceiverStream::new(index_triggers).map(move |trigger| match trigger {
        Trigger::Claim(holder) => {
            let _ =
                route_claims.send(ObjectRef::new_with(&holder.name, claim_resource.clone()).within(&holder.namespace));
        }
        Trigger::Pool(key) => match (key.kind, key.namespace) {
            (PoolKind::InCluster, Some(ns)) => {
                let _ = in_cluster_tx.send(ObjectRef::new(&key.name).within(&ns));
            }
            (PoolKind::InClusterPrefix, Some(ns)) => {
                let _ = prefix_tx.send(ObjectRef::new(&key.name).within(&ns));
            }
            (PoolKind::GlobalPrefix, _) => {
                let _ = global_prefix_tx.send(ObjectRef::new(&key.name));
            }
            _ => {
                let _ = global_tx.send(ObjectRef::new(&key.name));
            }
        },
    }));

    let claim_controller = drain(
        claim_controller
            .with_config(ControllerConfig::default().concurrency(settings.claim_concurrency))
            .reconcile_on(UnboundedReceiverStream::new(claim_rx))
            .graceful_shutdown_on(shutdown.clone())
            .run(|claim, ctx| instrumented("claim", claim, ctx, claim::reconcile), error_policy, ctx.clone()),
    );
    let in_cluster = pool_controller::<InClusterIPPool>(
        true,
        &client,
        &settings,
        &index,
        gate(),
        in_cluster_rx,
        ctx.clone(),
        shutdown.clone(),
    );
    let manage_global = settings.namespace.is_none();
    let global = pool_controller::<GlobalInClusterIPPool>(
        manage_global,
        &client,
        &settings,
        &index,
        gate(),
        global_rx,
        ctx.clone(),
        shutdown.clone(),
    );

    let prefix = pool_controller::<InClusterPrefixPool>(
        true,
        &client,
        &settings,
        &index,
        gate(),
        prefix_rx,
        ctx.clone(),
        shutdown.clone(),
    );
    let global_prefix = pool_controller::<GlobalInClusterPrefixPool>(
        manage_global,
        &client,
        &settings,
        &index,
        gate(),
        global_prefix_rx,
        ctx.clone(),
        shutdown.clone(),
    );

    let ready_index = index.clone();
    let own_writes_ctx = ctx.clone();
    let announce_ready = async move {
        ready_index.wait_ready().await;
        health.set_ready(true);
        // From now on, keep the gauge of waiting claims current.
        loop {
            metrics.claims_waiting.set(i64::try_from(ready_index.waiting_claims()).unwrap_or(i64::MAX));
            ready_index.expire_remembered();
            own_writes_ctx.own_writes.expire();
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    };

    // The controllers end on shutdown; the watches and the router end with them.
    let controllers = future::join5(claim_controller, in_cluster, global, prefix, global_prefix);
    let watches = future::join4(address_watch, cluster_watch, router, announce_ready);
    tokio::select! {
        _ = controllers => {}
        _ = watches => warn!("a watch ended unexpectedly"),
    }
    Ok(())
}
