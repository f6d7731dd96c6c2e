//! The `IPAddress` watch: a cache for the claim controller, and holds in the index.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::api::capi::{AddressSpec, NoStatus};
use crate::index::Index;
use crate::store::lean::{Lean, unwrap_event};

use super::Term;
use super::support::drain;
use crate::feed::AddressFeed;
use crate::store::addresses::AddressCache;
use crate::store::watches::{READ_AHEAD, WatchBackoff, read_ahead, relisting, watched};

use super::readiness::FirstListing;

/// The cache of every `IPAddress`, and the watch that fills it and the index. `listed` reports
/// the end of the first listing.
pub fn watch(
    term: &Term,
    index: &Index,
    listed: FirstListing,
) -> (AddressCache, impl Future<Output = ()> + Send + use<>) {
    let resource = term.versions.ipam.address_resource();
    let (cache, mut writer) = AddressCache::new();
    let mut feed = AddressFeed::new(index.clone(), move || listed.listed());
    let api: Api<Lean<AddressSpec, NoStatus>> = term.settings.scoped(&term.client, &resource);
    let config = term.settings.unfiltered();
    // After a failure the addresses are listed again, and claims wait until that listing is
    // complete: addresses made or deleted by hand while the watch was down are known before
    // anything is allocated (see `AddressFeed::failed`).
    let from_scratch = relisting(Arc::new(move || watcher(api.clone(), config.clone()).boxed()));
    let events = watched(
        "IPAddress",
        term.health.clone(),
        term.misconfig.clone(),
        from_scratch.backoff(WatchBackoff::default()),
    )
    .map(|event| event.map(unwrap_event));
    let events = read_ahead(events, READ_AHEAD);
    // The cache first, as kube's reflector would: a claim woken by the index finds the object.
    let watch = drain(events.map(move |event| match &event {
        Ok(event) => {
            writer.apply(event);
            feed.apply(event);
        }
        Err(_) => feed.failed(),
    }));
    (cache, watch)
}
