//! The hub's `AddressBlock` watch: it feeds the index (a granted block's addresses are used in
//! the hub's pool) and drives the grant controller.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::Term;
use super::readiness::FirstListing;
use super::support::{drain, error_policy, instrumented};
use crate::api::hub::AddressBlock;
use crate::controller::context::Context;
use crate::controller::hub::grant;
use crate::feed::BlockFeed;
use crate::index::Index;
use crate::store::watches::{NoExtraBackoff, WatchBackoff, watched};

/// Blocks granted at once at most.
const GRANT_CONCURRENCY: u16 = 4;

/// The watch of every `AddressBlock` and the grant controller on it.
pub fn grant<S>(
    term: &Term,
    index: &Index,
    ctx: Arc<Context>,
    listed: FirstListing,
    shutdown: S,
) -> impl Future<Output = ()> + Send + use<S>
where
    S: Future<Output = ()> + Send + Sync + 'static,
{
    let api: Api<AddressBlock> = Api::all(term.client.clone());
    let (store, writer) = reflector::store();
    let mut feed = BlockFeed::new(index.clone(), move || listed.listed());
    let events = watched(
        "AddressBlock",
        term.health.clone(),
        term.misconfig.clone(),
        watcher(api, term.settings.unfiltered()).backoff(WatchBackoff::default()),
    );
    let events = reflector::reflector(writer, events).map(move |event| {
        if let Ok(event) = &event {
            feed.apply(event);
        }
        event
    });
    let controller = Controller::for_stream(events.applied_objects(), store)
        .trigger_backoff(NoExtraBackoff)
        .reconcile_all_on(term.settings.resync())
        .with_config(ControllerConfig::default().concurrency(GRANT_CONCURRENCY))
        .graceful_shutdown_on(shutdown)
        .run(|block, ctx| instrumented("address-block", block, ctx, grant::reconcile), error_policy, ctx);
    drain(controller)
}
