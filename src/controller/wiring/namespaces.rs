//! The Namespace watch, for the namespace selectors of global pools: the labels of every
//! Namespace (metadata only), a Namespace that appears or changes waking its claims.

use std::future::Future;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::Term;
use super::claims::ClaimWatch;
use super::readiness::FirstListing;
use super::support::drain;
use crate::store::lean::lean;
use crate::store::namespaces::NamespaceLabels;
use crate::store::watches::{WatchBackoff, watched};

/// The labels of every Namespace, and the watch that keeps them. `listed` reports the end of the
/// first listing; a later listing (after the watch failed) may have missed a relabelling, so
/// every claim is reviewed then.
pub fn watch(
    term: &Term,
    claims: &ClaimWatch,
    listed: FirstListing,
) -> (NamespaceLabels, impl Future<Output = ()> + Send + use<>) {
    let writer = reflector::store::Writer::<PartialObjectMeta<Namespace>>::default();
    let labels = NamespaceLabels::new(writer.as_reader());
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(term.client.clone());
    let events = watched(
        "Namespace",
        term.health.clone(),
        term.misconfig.clone(),
        watcher(api, term.settings.unfiltered()).backoff(WatchBackoff::default()),
    )
    .modify(lean::<PartialObjectMeta<Namespace>>);
    let triggers = claims.triggers.clone();
    let mut first_listing = true;
    let events = reflector::reflector(writer, events).map(move |event| match event {
        Ok(Event::Apply(namespace)) => triggers.trigger_namespace(&namespace.name_any()),
        Ok(Event::InitDone) if first_listing => {
            first_listing = false;
            listed.listed();
        }
        Ok(Event::InitDone) => triggers.review_all(),
        _ => {}
    });
    (labels, drain(events))
}
