//! What every part of the wiring uses: stores, lean objects, the index's readiness count, and
//! how a reconcile is run, counted and retried.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use futures::{Stream, StreamExt, future};
use kube::core::ApiResource;
use kube::runtime::controller::Action;
use kube::runtime::reflector;
use tracing::{Instrument, debug, warn};

use crate::index::Index;
use crate::metrics::ControllerLabels;

use super::super::context::Context;
use super::super::error::Error;

/// A store of a dynamically typed resource, and its writer.
pub fn store_with<K>(resource: ApiResource) -> (reflector::Store<K>, reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ApiResource> + Clone + 'static,
{
    let writer = reflector::store::Writer::new(resource);
    (writer.as_reader(), writer)
}

/// Drops what no controller reads before an object reaches a store: `managedFields` is about
/// half of a stored claim or address. Patches built from cached objects name the fields they
/// set and the `resourceVersion` they expect, never `managedFields`, so they are unaffected.
pub fn lean<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Counts down the listings the index waits for, and marks it ready after the last.
pub fn readiness_gate(index: &Index, parts: usize) -> impl Fn() -> Box<dyn FnOnce() + Send> {
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
pub async fn instrumented<K, F, Fut>(
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

/// A conflict (someone wrote first; the watch brings the new version) and a write refused by the
/// fence (the term is suspended) are expected and retried at once: debug. Anything else is a WARN
/// naming the object (the reconcile span), the action and the API server's message.
pub fn error_policy<K>(_: Arc<K>, error: &Error, _: Arc<Context>) -> Action {
    match error.metric_label() {
        kind @ ("conflict" | "fenced") => debug!(%error, kind, "reconcile met an expected refusal; retrying"),
        kind => warn!(%error, kind, "reconcile failed; retrying"),
    }
    Action::requeue(error.retry_after())
}

/// Polls a stream to its end, for its side effects.
pub fn drain<S: Stream + Send + 'static>(stream: S) -> impl Future<Output = ()> + Send
where
    S::Item: Send,
{
    stream.for_each(|_| future::ready(()))
}
