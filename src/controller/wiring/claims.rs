//! The claim watch and the claim controller.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::api::capi::IPAddressClaim;

use super::Term;
use super::support::{drain, error_policy, instrumented, lean_object, store_with};
use crate::controller::by_cluster::ClaimsByCluster;
use crate::controller::claim;
use crate::controller::context::Context;
use crate::controller::triggers::{self, Wake};
use crate::controller::watches::{NoExtraBackoff, WatchBackoff, watched};

/// The claim watch, and what the other parts take from it before the controller starts.
pub struct ClaimWatch {
    pub store: Store<IPAddressClaim>,
    pub resource: ApiResource,
    /// Which claims belong to which Cluster, kept from this watch.
    pub by_cluster: ClaimsByCluster,
    /// Sends a claim to be reconciled (index triggers, Cluster changes).
    pub sender: mpsc::UnboundedSender<ObjectRef<IPAddressClaim>>,
    /// Asks for every claim to be reconciled (a Cluster relisting).
    pub reconcile_all: Arc<dyn Fn() + Send + Sync>,
    receiver: mpsc::UnboundedReceiver<ObjectRef<IPAddressClaim>>,
    objects: BoxStream<'static, Result<IPAddressClaim, watcher::Error>>,
    relistings: BoxStream<'static, ()>,
}

impl ClaimWatch {
    pub fn new(term: &Term) -> ClaimWatch {
        let resource = term.versions.ipam.claim_resource();
        let api: Api<IPAddressClaim> = term.settings.scoped(&term.client, &resource);
        let (store, writer) = store_with(resource.clone());
        let by_cluster = ClaimsByCluster::default();
        let followed = by_cluster.clone();
        let events = watched(
            "IPAddressClaim",
            term.health.clone(),
            term.misconfig.clone(),
            watcher(api, term.settings.filtered()).backoff(WatchBackoff::default()),
        )
        .modify(lean_object);
        let events = reflector::reflector(writer, events).inspect(move |event| {
            if let Ok(event) = event {
                followed.apply(event);
            }
        });
        let (relisted, relistings) = triggers::relistings();
        let objects = triggers::objects(events, Wake::Applied, relisted.clone()).boxed();
        let (sender, receiver) = mpsc::unbounded_channel();
        ClaimWatch {
            store,
            resource,
            by_cluster,
            sender,
            reconcile_all: Arc::new(relisted),
            receiver,
            objects,
            relistings: relistings.boxed(),
        }
    }

    /// The claim controller, until `shutdown`.
    pub fn controller<S>(self, term: &Term, ctx: Arc<Context>, shutdown: S) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + Sync + 'static,
    {
        let controller = Controller::for_stream_with(self.objects, self.store, self.resource)
            .trigger_backoff(NoExtraBackoff)
            .reconcile_all_on(self.relistings)
            .reconcile_all_on(term.settings.resync())
            .with_config(ControllerConfig::default().concurrency(term.settings.claim_concurrency))
            .reconcile_on(UnboundedReceiverStream::new(self.receiver))
            .graceful_shutdown_on(shutdown)
            .run(|claim, ctx| instrumented("claim", claim, ctx, claim::reconcile), error_policy, ctx);
        drain(controller)
    }
}
