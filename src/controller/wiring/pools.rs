//! A pool controller per pool kind, each fed from its own watch, which also feeds the index.

use std::future::Future;
use std::sync::Arc;

use futures::{StreamExt, future};
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::index::Index;

use super::Term;
use super::readiness::FirstListing;
use super::support::{drain, error_policy, instrumented};
use crate::controller::context::Context;
use crate::controller::pool;
use crate::controller::triggers;
use crate::feed::PoolFeed;
use crate::feed::{PoolObject, SpokePools};
use crate::store::lean::lean;
use crate::store::watches::{NoExtraBackoff, WatchBackoff, watched};

/// What every pool controller of a term shares.
pub struct PoolControllers<'a, S> {
    pub term: &'a Term,
    pub index: &'a Index,
    pub ctx: Arc<Context>,
    pub spokes: &'a SpokePools,
    pub shutdown: S,
}

impl<S> PoolControllers<'_, S>
where
    S: Future<Output = ()> + Clone + Send + Sync + 'static,
{
    /// The watch of pool kind `K`, feeding the index (`listed` reports the end of its first
    /// listing), and its controller, also woken by `triggers`. When `manage` is false the pools
    /// only feed the index: their status and finalizer are left to an instance that sees every
    /// namespace.
    pub fn of_kind<K>(
        &self,
        manage: bool,
        listed: FirstListing,
        triggers: mpsc::UnboundedReceiver<ObjectRef<K>>,
    ) -> impl Future<Output = ()> + Send + use<K, S>
    where
        K: PoolObject + kube::Resource<DynamicType = ()>,
    {
        let settings = &self.term.settings;
        // The namespaced kind is watched in --namespace only; the global kind everywhere.
        let api: Api<K> = K::api(self.term.client.clone(), settings.namespace.as_deref());
        let (store, writer) = reflector::store();
        let mut feed = PoolFeed::new(self.index.clone(), self.spokes.clone(), move || listed.listed());
        let events = watched(
            &K::kind(&()),
            self.term.health.clone(),
            self.term.misconfig.clone(),
            watcher(api, settings.filtered()).backoff(WatchBackoff::default()),
        )
        .modify(lean);
        let events = reflector::reflector(writer, events).map(move |event| {
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
        let controller = Controller::for_stream(triggers::objects(events, relisted), store)
            .trigger_backoff(NoExtraBackoff)
            .reconcile_all_on(relistings)
            .reconcile_all_on(settings.resync())
            .reconcile_on(UnboundedReceiverStream::new(triggers))
            .with_config(ControllerConfig::default().concurrency(settings.pool_concurrency))
            .graceful_shutdown_on(self.shutdown.clone())
            .run(|pool, ctx| instrumented("pool", pool, ctx, pool::reconcile::<K>), error_policy, self.ctx.clone());
        future::Either::Right(drain(controller))
    }
}
