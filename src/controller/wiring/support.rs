//! What every part of the wiring uses: stores, lean objects, and how a reconcile is run, counted
//! and retried.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt, future};
use kube::core::{ApiResource, Object};
use kube::runtime::controller::Action;
use kube::runtime::reflector;
use tracing::{Instrument, debug, warn};

use crate::metrics::ControllerLabels;

use crate::controller::context::Context;
use crate::controller::error::Error;

/// A store of a dynamically typed resource, and its writer.
pub fn store_with<K>(resource: ApiResource) -> (reflector::Store<K>, reflector::store::Writer<K>)
where
    K: kube::Resource<DynamicType = ApiResource> + Clone + 'static,
{
    let writer = reflector::store::Writer::new(resource);
    (writer.as_reader(), writer)
}

/// The annotations ferro-ipam reads: its own, the IPAM group's and Cluster API's (`paused`).
const READ_ANNOTATIONS: [&str; 3] = ["ferro-ipam.dev/", "ipam.cluster.x-k8s.io/", "cluster.x-k8s.io/"];

/// Whether ferro-ipam reads annotations of this key.
pub fn is_read_annotation(key: &str) -> bool {
    READ_ANNOTATIONS.iter().any(|prefix| key.starts_with(prefix))
}

/// Drops what no controller reads before an object reaches a store: `managedFields` (about half
/// of a claim or address as served) and the annotations of others (`kubectl apply`'s copy of the
/// whole object, for one). Patches built from cached objects are merge patches that name the
/// fields they set, never `managedFields` or annotations, so they are unaffected.
pub fn lean<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.self_link = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|key, _| is_read_annotation(key));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// [`lean`], and the `apiVersion` and `kind` every object of a dynamically typed store repeats.
pub fn lean_object<P: Clone, U: Clone>(object: &mut Object<P, U>) {
    lean(object);
    object.types = None;
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::IPAddressClaim;

    #[test]
    fn a_lean_object_keeps_the_annotations_ferro_ipam_reads_and_nothing_else_of_the_metadata_noise() {
        let mut claim: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {
                "name": "vm-0", "namespace": "default", "uid": "u-1", "resourceVersion": "7",
                "labels": {"cluster.x-k8s.io/cluster-name": "wl"},
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"a whole\": \"object\"}",
                    "ferro-ipam.dev/requested-address": "10.0.0.9",
                    "cluster.x-k8s.io/paused": "",
                    "ipam.cluster.x-k8s.io/skip-validate-delete-webhook": "",
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            },
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
        }))
        .expect("a claim parses");
        lean_object(&mut claim);
        let kept: Vec<&str> = claim.metadata.annotations.iter().flatten().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kept,
            [
                "cluster.x-k8s.io/paused",
                "ferro-ipam.dev/requested-address",
                "ipam.cluster.x-k8s.io/skip-validate-delete-webhook"
            ]
        );
        assert!(claim.metadata.managed_fields.is_none() && claim.types.is_none());
        assert_eq!(claim.metadata.labels.as_ref().map(|l| l.len()), Some(1), "labels are read: kept");
        assert_eq!(claim.metadata.resource_version.as_deref(), Some("7"), "patches name the version they expect");

        let mut bare: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vm-1", "annotations": {"example.com/note": "x"}},
            "spec": {"poolRef": {"kind": "InClusterIPPool", "name": "p"}},
        }))
        .expect("a claim parses");
        lean_object(&mut bare);
        assert!(bare.metadata.annotations.is_none(), "nothing read is left: no map at all");
    }
}
