//! The Cluster watch: a store for the pause rules, its changes waking the Cluster's claims,
//! and the control-plane VIP controller, also woken by changes of its claims.

use std::future::Future;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube::core::ApiResource;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::CapiVersion;
use crate::api::capi::{Cluster, IPAddressClaim};

use super::Term;
use super::claims::ClaimWatch;
use super::support::{drain, error_policy, instrumented};
use crate::controller::cluster_vip;
use crate::controller::context::Context;
use crate::controller::triggers;
use crate::store::lean::{lean_object, store_with};
use crate::store::watches::{NoExtraBackoff, WatchBackoff, watched};

/// The Cluster watch, before its controller starts.
pub struct ClusterWatch {
    pub store: Store<Cluster>,
    pub resource: ApiResource,
    objects: BoxStream<'static, Result<Cluster, watcher::Error>>,
    relistings: BoxStream<'static, ()>,
}

impl ClusterWatch {
    pub fn new(term: &Term, version: CapiVersion, claims: &ClaimWatch) -> ClusterWatch {
        let resource = version.cluster_resource();
        let (store, writer) = store_with(resource.clone());
        let api: Api<Cluster> = term.settings.scoped(&term.client, &resource);
        let events = watched(
            "Cluster",
            term.health.clone(),
            term.misconfig.clone(),
            watcher(api, term.settings.filtered()).backoff(WatchBackoff::default()),
        )
        .modify(lean_object);
        let (clusters_relisted, relistings) = triggers::relistings();
        let all_claims = claims.triggers.clone();
        // A relisting may bring Clusters changed while the watch was down: every claim and
        // every Cluster is looked at again.
        let relisted = move || {
            clusters_relisted();
            all_claims.review_all();
        };
        let (by_cluster, triggers) = (claims.by_cluster.clone(), claims.triggers.clone());
        let objects = triggers::objects(reflector::reflector(writer, events), relisted)
            .map(move |cluster| {
                if let Ok(cluster) = &cluster {
                    let namespace = cluster.namespace().unwrap_or_default();
                    for claim in by_cluster.claims_of(&namespace, &cluster.name_any()) {
                        triggers.trigger(&namespace, &claim);
                    }
                }
                cluster
            })
            .boxed();
        ClusterWatch { store, resource, objects, relistings: relistings.boxed() }
    }

    /// The Cluster watch alone, until `shutdown`: its store kept for the pause rules, its changes
    /// waking their claims, and no Cluster written (`--control-plane-vip=false`).
    pub fn watch_only<S>(self, shutdown: S) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + Sync + 'static,
    {
        let objects = futures::stream::select(self.objects.map(|_| ()), self.relistings);
        drain(objects.take_until(shutdown))
    }

    /// The control-plane VIP controller, until `shutdown`.
    pub fn controller<S>(self, term: &Term, ctx: Arc<Context>, shutdown: S) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + Sync + 'static,
    {
        let claim_api: Api<PartialObjectMeta<IPAddressClaim>> =
            term.settings.scoped(&term.client, &ctx.kube.claim_resource);
        let selector = format!("{}={}", cluster_vip::ROLE_LABEL, cluster_vip::ROLE);
        let owners = self.resource.clone();
        let vip_claims = watched(
            "control-plane VIP IPAddressClaim",
            term.health.clone(),
            term.misconfig.clone(),
            watcher(claim_api, term.settings.unfiltered().labels(&selector)).backoff(WatchBackoff::default()),
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
        let controller = Controller::for_stream_with(self.objects, self.store, self.resource)
            .trigger_backoff(NoExtraBackoff)
            .reconcile_all_on(self.relistings)
            .reconcile_on(vip_claims)
            .graceful_shutdown_on(shutdown)
            .run(|cluster, ctx| instrumented("cluster-vip", cluster, ctx, cluster_vip::reconcile), error_policy, ctx);
        drain(controller)
    }
}
