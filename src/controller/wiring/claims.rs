//! The claim watch and the claim controller, on ferro-ipam's own claim store and work queue
//! (`store::claims`).
//!
//! Every event of the watch updates the store; a created or changed claim is queued urgently.
//! At the end of a listing (the first one, or one after the watch failed) and when a Cluster
//! relisting asks for every claim, each claim is reviewed: a claim already settled (see
//! `claim::settled`) goes to the queue's paced background lane, to be verified once nothing
//! urgent waits; any other claim is queued urgently. New claims are therefore served first at
//! start-up, rather than behind a reconcile of every claim already bound.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use tokio::sync::{mpsc, watch as signal};
use tracing::Instrument;

use crate::api::capi::{ClaimSpec, ClaimStatus, IPAddressClaim};
use crate::store::lean::{Lean, unwrap_event};

use super::Term;
use super::support::{instrumented, retry_after};
use crate::controller::claim;
use crate::controller::context::Context;
use crate::store::by_cluster::ClaimsByCluster;
use crate::store::claims::{Change, ClaimStore, WorkQueue};
use crate::store::watches::{READ_AHEAD, WatchBackoff, read_ahead, watched};

/// Settled claims verified per second in the background, once no urgent work is queued.
const VERIFIED_PER_SECOND: u32 = 500;

/// The claim watch, and what the other parts take from it before the controller starts.
pub struct ClaimWatch {
    pub store: ClaimStore,
    pub resource: ApiResource,
    /// Which claims belong to which Cluster, kept from this watch.
    pub by_cluster: ClaimsByCluster,
    /// Queues claims to be reconciled (index triggers, Cluster changes).
    pub triggers: ClaimTriggers,
    /// Set once the first listing has been reviewed (see [`ClaimWatch::reviewed`]).
    reviewed: signal::Sender<bool>,
    reviews: mpsc::UnboundedReceiver<()>,
    events: BoxStream<'static, Result<Event<IPAddressClaim>, watcher::Error>>,
}

/// Queues claims of the claim controller. Cheap to clone.
#[derive(Clone)]
pub struct ClaimTriggers {
    store: ClaimStore,
    queue: Arc<WorkQueue>,
    reviews: mpsc::UnboundedSender<()>,
}

impl ClaimTriggers {
    /// Queues the claim of this namespace and name, if the store holds it.
    pub fn trigger(&self, namespace: &str, name: &str) {
        if let Some(id) = self.store.id_of(namespace, name) {
            self.queue.trigger(id);
        }
    }

    /// Queues every claim of a namespace (its labels changed: a global pool may select it now).
    pub fn trigger_namespace(&self, namespace: &str) {
        for id in self.store.ids_in(namespace) {
            self.queue.trigger(id);
        }
    }

    /// Asks for every claim to be reviewed (a Cluster relisting may have changed any of them).
    pub fn review_all(&self) {
        // The receiver is gone only while the controller shuts down.
        let _ = self.reviews.send(());
    }
}

impl ClaimWatch {
    pub fn new(term: &Term) -> ClaimWatch {
        let resource = term.versions.ipam.claim_resource();
        let api: Api<Lean<ClaimSpec, ClaimStatus>> = term.settings.scoped(&term.client, &resource);
        let store = ClaimStore::default();
        let events = watched(
            "IPAddressClaim",
            term.health.clone(),
            term.misconfig.clone(),
            watch(api, term.settings.filtered()).backoff(WatchBackoff::default()),
        )
        .map(|event| event.map(unwrap_event));
        let events = read_ahead(events, READ_AHEAD).boxed();
        let (reviews_tx, reviews) = mpsc::unbounded_channel();
        let queue = WorkQueue::new(VERIFIED_PER_SECOND);
        ClaimWatch {
            triggers: ClaimTriggers { store: store.clone(), queue, reviews: reviews_tx },
            reviewed: signal::Sender::new(false),
            store,
            resource,
            by_cluster: ClaimsByCluster::default(),
            reviews,
            events,
        }
    }

    /// True once the first listing has been reviewed: every claim that existed is queued, and a
    /// claim created from then on is served as soon as its event comes.
    pub fn reviewed(&self) -> signal::Receiver<bool> {
        self.reviewed.subscribe()
    }

    /// The claim controller, until `shutdown`; then the reconciles running are let finish.
    pub fn controller<S>(self, term: &Term, ctx: Arc<Context>, shutdown: S) -> impl Future<Output = ()> + Send + use<S>
    where
        S: Future<Output = ()> + Send + Sync + 'static,
    {
        let queue = self.triggers.queue.clone();
        let follow = Follow {
            store: self.store.clone(),
            by_cluster: self.by_cluster,
            queue: queue.clone(),
            ctx: ctx.clone(),
            reviewed: self.reviewed,
        }
        .run(self.events, self.reviews, term.settings.resync().boxed());
        let store = self.store;
        let workers = queue.run(usize::from(term.settings.claim_concurrency), shutdown, move |id| {
            reconcile_one(id, store.clone(), ctx.clone())
        });
        async move {
            tokio::select! {
                () = workers => {}
                () = follow => {}
            }
        }
    }
}

/// Reconciles the claim of `id`, if the store still holds it; the requeue it asks for.
async fn reconcile_one(id: u32, store: ClaimStore, ctx: Arc<Context>) -> Option<std::time::Duration> {
    let claim = store.object(id)?;
    match instrumented("claim", claim.clone(), ctx, claim::reconcile).await {
        Ok(action) => action.requeue_after(),
        Err(error) => {
            let meta = &claim.metadata;
            let name = format!(
                "{}/{}",
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default()
            );
            let span = tracing::debug_span!("reconcile", controller = "claim", object = %name);
            Some(async { retry_after(&error) }.instrument(span).await)
        }
    }
}

/// What follows the watch: the store, the claims by Cluster and the queue.
struct Follow {
    store: ClaimStore,
    by_cluster: ClaimsByCluster,
    queue: Arc<WorkQueue>,
    ctx: Arc<Context>,
    reviewed: signal::Sender<bool>,
}

impl Follow {
    async fn run(
        self,
        mut events: BoxStream<'static, Result<Event<IPAddressClaim>, watcher::Error>>,
        mut reviews: mpsc::UnboundedReceiver<()>,
        mut resyncs: BoxStream<'static, ()>,
    ) {
        // A review waits for the index to be complete without holding up the watch: a claim
        // listing that ends first would otherwise stop the watcher from reading further pages.
        let mut review_pending = false;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    // A failed watch was said by `watched` and is retried by the watcher.
                    Some(Err(_)) => {}
                    Some(Ok(event)) => review_pending |= self.apply(&event),
                    None => return,
                },
                Some(()) = reviews.recv() => review_pending = true,
                () = self.ctx.index.wait_ready(), if review_pending => {
                    review_pending = false;
                    self.review();
                    crate::heap::release_after_listing();
                }
                Some(()) = resyncs.next() => {
                    for id in self.store.ids() {
                        self.queue.defer(id);
                    }
                }
            }
        }
    }

    /// Applies a watch event; true at the end of a listing, when every claim is to be reviewed.
    fn apply(&self, event: &Event<IPAddressClaim>) -> bool {
        self.by_cluster.apply(event);
        match self.store.apply(event) {
            Change::Applied(id) => self.queue.trigger(id),
            Change::Listed(_) => return true,
            Change::Deleted(_) | Change::Nothing => {}
        }
        false
    }

    /// With the index complete: settled claims to the background, the others urgent. Nothing
    /// before the first claim listing has ended (a Cluster relisting may ask for a review
    /// sooner): that listing's end reviews every claim, and only then are claims served.
    fn review(&self) {
        if !self.store.is_listed() {
            return;
        }
        let started = std::time::Instant::now();
        let (mut settled, mut urgent) = (0usize, 0usize);
        for id in self.store.ids() {
            match self.store.object(id).is_some_and(|claim| claim::settled(claim, &self.ctx)) {
                true => {
                    settled += 1;
                    self.queue.defer(id);
                }
                false => {
                    urgent += 1;
                    self.queue.trigger(id);
                }
            }
        }
        let seconds = format!("{:.2}", started.elapsed().as_secs_f64());
        match self.reviewed.send_replace(true) {
            false => tracing::info!(
                settled,
                urgent,
                seconds = %seconds,
                "claims listed: serving; settled claims are verified in the background"
            ),
            true => tracing::debug!(settled, urgent, seconds = %seconds, "claims reviewed after a listing"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::{MockApi, World};
    use crate::fixtures;

    fn follow(world: &World) -> (Follow, signal::Receiver<bool>) {
        let (reviewed, serving) = signal::channel(false);
        let follow = Follow {
            store: ClaimStore::default(),
            by_cluster: ClaimsByCluster::default(),
            queue: WorkQueue::new(VERIFIED_PER_SECOND),
            ctx: world.ctx.clone(),
            reviewed,
        };
        (follow, serving)
    }

    #[tokio::test]
    async fn a_review_asked_for_before_the_claim_listing_ends_serves_nothing_and_the_listing_end_reviews() {
        let (client, _api) = MockApi::client(vec![]);
        let world = World::new(client);
        let (follow, serving) = follow(&world);

        // A Cluster relisting asks for a review while the claims are still being listed.
        assert!(!follow.apply(&Event::Init));
        assert!(!follow.apply(&Event::InitApply(fixtures::claim("c", "pool"))));
        follow.review();
        assert!(!*serving.borrow(), "claims are not served before their listing has ended");

        assert!(follow.apply(&Event::InitDone), "the end of the listing asks for a review");
        follow.review();
        assert!(*serving.borrow());
        assert_eq!(follow.store.len(), 1);
    }
}
