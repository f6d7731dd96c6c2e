//! How the controllers of a term are scoped and tuned, and how they reach the API.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicResourceScope};
use kube::runtime::watcher;

use crate::api::keys::WATCH_FILTER_LABEL;

use crate::controller::triggers;

/// How the controllers are scoped and tuned.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Watch namespaced objects in this namespace only.
    pub namespace: Option<String>,
    /// Only reconcile claims, pools and clusters with `cluster.x-k8s.io/watch-filter=<value>`.
    pub watch_filter: Option<String>,
    /// How many claims are reconciled at once (0: no limit).
    pub claim_concurrency: u16,
    /// How many pools of each kind are reconciled at once (0: no limit).
    pub pool_concurrency: u16,
    /// Name of this instance, for Events.
    pub instance: Option<String>,
    /// How long a deleted claim's address is remembered for a claim of the same name.
    pub sticky: Duration,
    /// The API server's clock, for grace periods, sticky addresses and condition times.
    pub clock: crate::client::ServerClock,
    /// How often every claim and pool is reconciled again without a change (zero: never).
    pub sync_period: Duration,
    /// The write fence of the client; reconciles wait for it to be open before they start.
    pub fence: crate::client::Fence,
    /// How every watch lists what exists.
    pub listing: Listing,
    /// The control-plane VIP controller does not run (`--control-plane-vip=false`).
    pub control_plane_vip_disabled: bool,
    /// The namespace ferro-ipam runs in (that of its leader-election Lease): spoke pools read
    /// the hub's kubeconfig from Secrets there.
    pub own_namespace: String,
}

/// How every watch lists what exists: at start, and again after a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Objects per page of a paged list; 0: unpaged.
    pub page_size: u32,
    /// A watch that sends the existing objects first (`sendInitialEvents`) instead of lists.
    pub streaming: bool,
}

impl Default for Listing {
    fn default() -> Self {
        // kube's and client-go's page size.
        Listing { page_size: 500, streaming: false }
    }
}

impl Listing {
    /// `config` listing this way.
    pub fn apply(self, mut config: watcher::Config) -> watcher::Config {
        config.page_size = (self.page_size > 0).then_some(self.page_size);
        if self.streaming { config.streaming_lists() } else { config }
    }
}

impl Settings {
    /// The `--sync-period` signal, or one that never comes.
    pub fn resync(&self) -> impl Stream<Item = ()> + Send + 'static {
        match self.sync_period.is_zero() {
            true => futures::stream::pending().left_stream(),
            false => triggers::every(self.sync_period).right_stream(),
        }
    }

    /// The watch configuration of objects the watch filter applies to.
    pub fn filtered(&self) -> watcher::Config {
        match &self.watch_filter {
            Some(value) => self.unfiltered().labels(&format!("{WATCH_FILTER_LABEL}={value}")),
            None => self.unfiltered(),
        }
    }

    /// The watch configuration of objects the watch filter does not apply to.
    pub fn unfiltered(&self) -> watcher::Config {
        self.listing.apply(watcher::Config::default())
    }

    /// The API of a dynamically typed resource, in `--namespace` or everywhere.
    pub fn scoped<K>(&self, client: &Client, resource: &ApiResource) -> Api<K>
    where
        K: kube::Resource<DynamicType = ApiResource, Scope = DynamicResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => Api::all_with(client.clone(), resource),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::InitialListStrategy;

    #[test]
    fn the_listing_flags_reach_every_watch_configuration() {
        let paged = Settings::default().unfiltered();
        assert_eq!((paged.page_size, paged.initial_list_strategy), (Some(500), InitialListStrategy::ListWatch));

        let settings = Settings {
            listing: Listing { page_size: 0, streaming: true },
            watch_filter: Some("team-a".into()),
            ..Settings::default()
        };
        let filtered = settings.filtered();
        assert_eq!(filtered.page_size, None, "0 lists unpaged");
        assert_eq!(filtered.initial_list_strategy, InitialListStrategy::StreamingList);
        assert_eq!(filtered.label_selector.as_deref(), Some("cluster.x-k8s.io/watch-filter=team-a"));
    }
}
