//! Wiring: the watches, the index and the controllers of one leadership term. Each part is
//! built in a module of its own (the `IPAddress` watch, the claims, the Clusters, the pools,
//! the router of the index's triggers); [`Term::run`] puts them together.

mod addresses;
mod blocks;
mod claims;
mod clusters;
mod namespaces;
mod pools;
mod readiness;
mod router;
mod settings;
pub(crate) mod support;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tracing::warn;

use crate::api::{GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use crate::controller::hub::spoke::Spokes;
use crate::feed::SpokePools;
use crate::health::Health;
use crate::index::Index;
use crate::metrics::Metrics;
use crate::misconfig::Misconfig;

use super::context::{Caches, Context, Kube, Report, Writes};
use super::latency::Latency;
use super::own_writes::OwnWrites;
use super::write_throttle::WriteThrottle;
use crate::client::discovery::CapiVersions;
use crate::store::addresses::AddressCache;
use crate::store::namespaces::NamespaceLabels;
use readiness::ReadinessGate;

pub use settings::{Listing, Settings};

/// How long a claim reconcile waits at most for the watch to show the claim's own last write.
const OWN_WRITES_MAX_AGE: Duration = Duration::from_secs(30);

/// Pool status writes: each pool at most every 500 ms; when many pools are busy, 20 writes per
/// second in all, each pool waiting at most 5 s (see `pool::WriteThrottle`).
const POOL_WRITES_MIN_INTERVAL: Duration = Duration::from_millis(500);
const POOL_WRITES_MAX_INTERVAL: Duration = Duration::from_secs(5);
const POOL_WRITES_PER_SECOND: u32 = 20;

/// What the controllers of a term run with.
pub struct Term {
    pub client: Client,
    pub versions: CapiVersions,
    pub settings: Settings,
    pub health: Health,
    pub metrics: Arc<Metrics>,
    pub misconfig: Misconfig,
}

impl Term {
    /// Runs the controllers until `shutdown` resolves. Every call starts from an empty index,
    /// which is complete before the first claim is served.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send + Sync + 'static) -> anyhow::Result<()> {
        let shutdown = futures::FutureExt::shared(shutdown);
        let clock = self.settings.clock.clone();
        let (index, index_triggers) = Index::with_clock(self.settings.sticky, Arc::new(move || clock.now()));
        // The index waits for the first listing of every watch feeding it before any claim
        // allocates: the `IPAddress`es and each of the four pool kinds.
        let gate = ReadinessGate::new(&index);

        let (addresses, address_watch) = addresses::watch(self, &index, gate.listing());
        let claims = claims::ClaimWatch::new(self);
        let claims_reviewed = claims.reviewed();
        let clusters = self.versions.cluster.map(|version| clusters::ClusterWatch::new(self, version, &claims));
        // Namespace labels serve the selectors of global pools, which an instance of one
        // namespace does not serve.
        let (namespaces, namespace_watch) = match self.settings.namespace {
            None => {
                let (labels, watch) = namespaces::watch(self, &claims, gate.listing());
                (Some(labels), Some(watch))
            }
            Some(_) => (None, None),
        };
        let spokes = SpokePools::new(index.clone());
        let ctx = Arc::new(self.context(&index, addresses, &claims, clusters.as_ref(), namespaces, &spokes));
        let (routes, router) = router::route(index_triggers, claims.triggers.clone());

        let cluster_controller = match clusters {
            Some(clusters) if !self.settings.control_plane_vip_disabled => {
                future::Either::Left(future::Either::Left(clusters.controller(self, ctx.clone(), shutdown.clone())))
            }
            Some(clusters) => future::Either::Left(future::Either::Right(clusters.watch_only(shutdown.clone()))),
            None => future::Either::Right(future::ready(())),
        };
        let claim_controller = claims.controller(self, ctx.clone(), shutdown.clone());
        let pools = pools::PoolControllers {
            term: self,
            index: &index,
            ctx: ctx.clone(),
            spokes: &spokes,
            shutdown: shutdown.clone(),
        };
        // Global pools' status and protection are left to an instance that sees every namespace.
        let manage_global = self.settings.namespace.is_none();
        let in_cluster = pools.of_kind::<InClusterIPPool>(true, gate.listing(), routes.in_cluster);
        let global = pools.of_kind::<GlobalInClusterIPPool>(manage_global, gate.listing(), routes.global);
        let in_cluster_prefix = pools.of_kind::<InClusterPrefixPool>(true, gate.listing(), routes.in_cluster_prefix);
        let global_prefix =
            pools.of_kind::<GlobalInClusterPrefixPool>(manage_global, gate.listing(), routes.global_prefix);
        // A hub grants blocks of its shared pools; its index waits for the blocks granted.
        let hub = (self.versions.blocks && self.settings.namespace.is_none())
            .then(|| blocks::grant(self, &index, ctx.clone(), gate.listing(), shutdown.clone()));
        gate.close();
        let spoke_sessions = Spokes {
            spokes: spokes.clone(),
            index: index.clone(),
            local: self.client.clone(),
            own_namespace: self.settings.own_namespace.clone(),
            fence: self.settings.fence.clone(),
            metrics: self.metrics.clone(),
            identity: self.settings.instance.clone().unwrap_or_else(|| "ferro-ipam".to_owned()),
        }
        .run();

        // The controllers end on shutdown; the watches and the router end with them.
        let pools = future::join4(in_cluster, global, in_cluster_prefix, global_prefix);
        let controllers = future::join(claim_controller, pools);
        let namespace_watch = future::OptionFuture::from(namespace_watch);
        let hub = future::join(future::OptionFuture::from(hub), spoke_sessions);
        let upkeep = self.upkeep(&index, claims_reviewed, &ctx);
        let watches =
            future::join5(address_watch, cluster_controller, router, namespace_watch, future::join(upkeep, hub));
        tokio::select! {
            _ = controllers => {}
            _ = watches => warn!("a watch ended unexpectedly"),
        }
        Ok(())
    }

    /// What every reconcile of the term shares.
    fn context(
        &self,
        index: &Index,
        addresses: AddressCache,
        claims: &claims::ClaimWatch,
        clusters: Option<&clusters::ClusterWatch>,
        namespaces: Option<NamespaceLabels>,
        spokes: &SpokePools,
    ) -> Context {
        let reporter = Reporter { controller: "ferro-ipam".into(), instance: self.settings.instance.clone() };
        Context {
            kube: Kube {
                client: self.client.clone(),
                capi: self.versions.ipam,
                claim_resource: claims.resource.clone(),
                address_resource: self.versions.ipam.address_resource(),
                cluster_resource: clusters.map(|c| c.resource.clone()),
                fence: self.settings.fence.clone(),
                clock: self.settings.clock.clone(),
            },
            index: index.clone(),
            caches: Caches {
                addresses,
                claims: claims.store.clone(),
                clusters: clusters.map(|c| c.store.clone()),
                namespaces,
                spokes: spokes.clone(),
                providers: crate::client::providers::Providers::new(self.client.clone()),
            },
            report: Report {
                recorder: Recorder::new(self.client.clone(), reporter),
                metrics: self.metrics.clone(),
                misconfig: self.misconfig.clone(),
                latency: Latency::default(),
            },
            writes: Writes {
                own: OwnWrites::new(OWN_WRITES_MAX_AGE),
                pools: WriteThrottle::new(POOL_WRITES_MIN_INTERVAL, POOL_WRITES_MAX_INTERVAL, POOL_WRITES_PER_SECOND),
            },
            only_namespace: self.settings.namespace.clone(),
        }
    }

    /// Ready once the index is complete and the claim listing reviewed (a claim created then is
    /// served at once, not after the claims that existed are listed); then every 5 s the
    /// waiting-claims gauge, and expiry of remembered addresses and of the memory of our own
    /// writes.
    fn upkeep(
        &self,
        index: &Index,
        mut claims_reviewed: tokio::sync::watch::Receiver<bool>,
        ctx: &Arc<Context>,
    ) -> impl Future<Output = ()> + Send + use<> {
        let (index, ctx, health, metrics) = (index.clone(), ctx.clone(), self.health.clone(), self.metrics.clone());
        async move {
            if !serving(&index, &mut claims_reviewed).await {
                return;
            }
            health.set_ready(true);
            loop {
                metrics.claims_waiting.set(i64::try_from(index.waiting_claims()).unwrap_or(i64::MAX));
                index.expire_remembered();
                ctx.writes.own.expire();
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// Resolves once claims can be served: the index is complete and the claim listing reviewed.
/// False when the claim controller ended first (the term is ending).
async fn serving(index: &Index, claims_reviewed: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    index.wait_ready().await;
    claims_reviewed.wait_for(|reviewed| *reviewed).await.is_ok()
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn a_reviewed_claim_listing_waits_for_the_index() {
        let (index, _triggers) = Index::new(Duration::ZERO);
        let (_reviewed, mut claims_reviewed) = tokio::sync::watch::channel(true);
        let mut waiting = Box::pin(serving(&index, &mut claims_reviewed));
        assert!(waiting.as_mut().now_or_never().is_none(), "the index is not complete");
        index.set_ready();
        assert!(waiting.await);
    }

    #[tokio::test]
    async fn a_complete_index_waits_for_the_claim_review_and_a_gone_claim_controller_ends_the_wait() {
        let (index, _triggers) = Index::new(Duration::ZERO);
        index.set_ready();
        let (reviewed, mut claims_reviewed) = tokio::sync::watch::channel(false);
        let mut waiting = Box::pin(serving(&index, &mut claims_reviewed));
        assert!(waiting.as_mut().now_or_never().is_none(), "the claim listing is not reviewed");
        reviewed.send_replace(true);
        assert!(waiting.await);

        let (reviewed, mut claims_reviewed) = tokio::sync::watch::channel(false);
        drop(reviewed);
        assert!(!serving(&index, &mut claims_reviewed).await, "no review will come");
    }
}
