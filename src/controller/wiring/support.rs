//! What every part of the wiring uses: how a reconcile is run, counted and retried, and how a
//! stream is drained.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt, future};
use kube::runtime::controller::Action;
use tracing::{Instrument, debug, warn};

use crate::metrics::ControllerLabels;

use crate::controller::context::Context;
use crate::controller::error::Error;

/// Runs one reconcile inside a span naming the object, and counts it.
pub async fn instrumented<K, F, Fut, T>(
    controller: &'static str,
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<T, Error>
where
    K: kube::Resource,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let labels = ControllerLabels { controller: controller.to_owned() };
    let name = match object.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", object.meta().name.as_deref().unwrap_or_default()),
        None => object.meta().name.clone().unwrap_or_default(),
    };
    let span = tracing::debug_span!("reconcile", controller, object = %name);
    // A suspended term's reconciles wait here rather than fail their writes.
    ctx.kube.fence.wait_open().await;
    let metrics = ctx.report.metrics.clone();
    metrics.reconciles_in_flight.get_or_create(&labels).inc();
    let started = Instant::now();
    let misconfig = ctx.report.misconfig.clone();
    let result = reconcile(object, ctx).instrument(span).await;
    // A write no retry can fix (RBAC, a webhook that cannot be called) is a misconfiguration of
    // this object until one of its reconciles succeeds.
    // Every reconcile passes here: the object's name is only written out when there is a
    // problem to say or to resolve.
    let object = || format!("{controller} {name}");
    match &result {
        Ok(_) if misconfig.has_problems() => misconfig.resolved(&object()),
        Ok(_) => {}
        Err(error) => {
            if let (Some(problem), Error::Kube { action, source }) = (error.problem(), error) {
                misconfig.report(problem, &object(), action, &crate::client::api_errors::describe(source));
            }
        }
    }
    metrics.reconciles_in_flight.get_or_create(&labels).dec();
    metrics.reconciled(controller, started.elapsed(), result.as_ref().err().map(Error::metric_label));
    result
}

/// A conflict (someone wrote first; the watch brings the new version) and a write refused by the
/// fence (the term is suspended) are expected and retried at once: debug. A misconfiguration
/// was said at ERROR by [`instrumented`]. Anything else is a WARN naming the object (the
/// reconcile span), the action and the API server's message.
pub fn error_policy<K>(_: Arc<K>, error: &Error, _: Arc<Context>) -> Action {
    Action::requeue(retry_after(error))
}

/// [`error_policy`]'s log line and delay, for a controller on ferro-ipam's own queue.
pub fn retry_after(error: &Error) -> std::time::Duration {
    match error.metric_label() {
        kind @ ("conflict" | "fenced") => debug!(%error, kind, "reconcile met an expected refusal; retrying"),
        kind if error.problem().is_some() => debug!(%error, kind, "reconcile refused; retrying"),
        kind => warn!(%error, kind, "reconcile failed; retrying"),
    }
    error.retry_after()
}

/// Polls a stream to its end, for its side effects.
pub fn drain<S: Stream + Send + 'static>(stream: S) -> impl Future<Output = ()> + Send
where
    S::Item: Send,
{
    stream.for_each(|_| future::ready(()))
}
