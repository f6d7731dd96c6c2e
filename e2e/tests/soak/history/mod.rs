//! The history (client required) of every `IPAddress` and every `Cluster`: for each kind, one
//! list, then a watch from its resourceVersion, for the whole run. The `IPAddress`es are fed to
//! the [`Ledger`] in the order the API server sends them; the Clusters' endpoints and the VIP
//! claims' `IPAddress`es to the [`VipLedger`], which replays the two watches in one order.
//!
//! A watch that ends, breaks or fails is opened again from the last resourceVersion seen: no
//! event is lost. Only a watch refused with 410 Gone (etcd compacted past that resourceVersion)
//! makes it list again; the list is a snapshot, applied as one, and the gap it covers is stated
//! in the output: a duplicate that began and ended within it would not be seen.

pub mod ledger;
pub mod vip_rules;
pub mod vips;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferro_ipam::api::capi::{Cluster, IPAddress};
use ferro_ipam_e2e::objects::capi;
use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::timeline::Timeline;
use ledger::{Ledger, Observed};
use vip_rules::{AddressSeen, ClusterSeen};
use vips::{VipLedger, key_of, revision};

/// Between two tries while the API server is away.
const RETRY: Duration = Duration::from_millis(500);

pub struct History {
    pub ledger: Arc<Mutex<Ledger>>,
    pub vips: Arc<Mutex<VipLedger>>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Locks a ledger, poisoned or not: a panicking task must not hide the history.
fn lock<T>(ledger: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

impl History {
    /// Starts recording; returns once the first lists are in the ledgers.
    pub async fn record(client: Client, timeline: Timeline) -> History {
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let vips = Arc::new(Mutex::new(VipLedger::default()));
        let (stop, stopped) = watch::channel(false);
        let addresses = Addresses {
            api: Api::all_with(client.clone(), &capi().address_resource()),
            ledger: ledger.clone(),
            vips: vips.clone(),
        };
        let clusters = Clusters { api: Api::all_with(client, &capi().cluster_resource()), vips: vips.clone() };
        let from = relist(&addresses).await;
        let addresses = tokio::spawn(follow(addresses, from, stopped.clone(), timeline.clone()));
        let from = relist(&clusters).await;
        let clusters = tokio::spawn(follow(clusters, from, stopped, timeline));
        History { ledger, vips, stop, tasks: vec![addresses, clusters] }
    }

    /// Stops recording.
    pub async fn stop(self) -> (Arc<Mutex<Ledger>>, Arc<Mutex<VipLedger>>) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        (self.ledger, self.vips)
    }
}

/// What one watch records: its kind's API and where its events go.
trait Recorder: Send + Sync + 'static {
    type Object: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static;
    /// The kind, as the timeline names it.
    const KIND: &'static str;
    fn api(&self) -> &Api<Self::Object>;
    /// An ADDED or MODIFIED event, at resourceVersion `version`.
    fn upsert(&self, object: &Self::Object, version: &str);
    /// A DELETED event, at resourceVersion `version` (that of the deletion).
    fn delete(&self, object: &Self::Object, version: &str);
    /// A list at `version`, applied as a snapshot.
    fn relist(&self, objects: &[Self::Object], version: &str);
    /// A bookmark: nothing of the kind changed up to `version`.
    fn passed(&self, version: &str);
    /// A gap in the history, in words.
    fn gap(&self, gap: String);
}

/// The `IPAddress` watch, feeding both ledgers.
struct Addresses {
    api: Api<IPAddress>,
    ledger: Arc<Mutex<Ledger>>,
    vips: Arc<Mutex<VipLedger>>,
}

fn observed(objects: &[IPAddress]) -> Vec<Observed> {
    objects.iter().filter_map(Observed::of).collect()
}

impl Recorder for Addresses {
    type Object = IPAddress;
    const KIND: &'static str = "IPAddress";

    fn api(&self) -> &Api<IPAddress> {
        &self.api
    }

    fn upsert(&self, address: &IPAddress, version: &str) {
        if let Some(seen) = Observed::of(address) {
            lock(&self.ledger).upsert(seen, &format!("its event at resourceVersion {version}"));
        }
        lock(&self.vips).address(AddressSeen::of(address), revision(version));
    }

    fn delete(&self, address: &IPAddress, version: &str) {
        if let Some(seen) = Observed::of(address) {
            lock(&self.ledger).delete(&seen.key);
        }
        lock(&self.vips).address_gone(&key_of(address), revision(version));
    }

    fn relist(&self, objects: &[IPAddress], version: &str) {
        lock(&self.ledger).relist(observed(objects), version);
        lock(&self.vips).addresses_listed(objects.iter().filter_map(AddressSeen::of).collect(), revision(version));
    }

    fn passed(&self, version: &str) {
        lock(&self.vips).addresses_through(revision(version));
    }

    fn gap(&self, gap: String) {
        lock(&self.ledger).gaps.push(gap);
    }
}

/// The Cluster watch, feeding the VIPs' ledger.
struct Clusters {
    api: Api<Cluster>,
    vips: Arc<Mutex<VipLedger>>,
}

impl Recorder for Clusters {
    type Object = Cluster;
    const KIND: &'static str = "Cluster";

    fn api(&self) -> &Api<Cluster> {
        &self.api
    }

    fn upsert(&self, cluster: &Cluster, _version: &str) {
        let (key, seen) = ClusterSeen::of(cluster);
        lock(&self.vips).cluster(key, seen);
    }

    fn delete(&self, cluster: &Cluster, version: &str) {
        let (key, _) = ClusterSeen::of(cluster);
        lock(&self.vips).cluster_gone(&key, revision(version));
    }

    fn relist(&self, objects: &[Cluster], version: &str) {
        lock(&self.vips).clusters_listed(objects.iter().map(ClusterSeen::of).collect(), revision(version));
    }

    fn passed(&self, version: &str) {
        lock(&self.vips).clusters_through(revision(version));
    }

    fn gap(&self, gap: String) {
        lock(&self.vips).cluster_gaps.push(gap);
    }
}

/// Lists until the API server answers, applies the list as a snapshot; returns its resourceVersion.
async fn relist<R: Recorder>(recorder: &R) -> String {
    loop {
        if let Ok(list) = recorder.api().list(&ListParams::default()).await {
            let version = list.metadata.resource_version.unwrap_or_default();
            recorder.relist(&list.items, &version);
            return version;
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// How one watch ended.
enum Ended {
    /// Open it again from the last resourceVersion.
    Again,
    /// 410 Gone: that resourceVersion is compacted away; list again.
    Gone,
    Stopped,
}

async fn follow<R: Recorder>(recorder: R, mut version: String, mut stopped: watch::Receiver<bool>, timeline: Timeline) {
    loop {
        match watch_once(&recorder, &mut version, &mut stopped).await {
            Ended::Stopped => return,
            Ended::Again => tokio::time::sleep(RETRY).await,
            Ended::Gone => {
                let from = version.clone();
                version = relist(&recorder).await;
                let gap = format!(
                    "{} watch from resourceVersion {from} refused with 410 Gone; listed again at {version}: events between were not seen one by one",
                    R::KIND
                );
                timeline.note(format!("history: {gap}"));
                recorder.gap(gap);
            }
        }
    }
}

async fn watch_once<R: Recorder>(recorder: &R, version: &mut String, stopped: &mut watch::Receiver<bool>) -> Ended {
    // As long a watch as the client allows: each reopening after a compaction is a gap.
    let params = WatchParams::default().timeout(290);
    let stream = match recorder.api().watch(&params, version).await {
        Ok(stream) => stream,
        Err(kube::Error::Api(status)) if status.code == 410 => return Ended::Gone,
        Err(_) => return Ended::Again,
    };
    futures::pin_mut!(stream);
    loop {
        let event = tokio::select! {
            _ = stopped.changed() => return Ended::Stopped,
            event = stream.next() => event,
        };
        match event {
            None | Some(Err(_)) => return Ended::Again,
            Some(Ok(WatchEvent::Error(status))) if status.code == 410 => return Ended::Gone,
            Some(Ok(WatchEvent::Error(_))) => return Ended::Again,
            Some(Ok(WatchEvent::Bookmark(bookmark))) => {
                *version = bookmark.metadata.resource_version;
                recorder.passed(version);
            }
            Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                *version = object.resource_version().unwrap_or_default();
                recorder.upsert(&object, version);
            }
            Some(Ok(WatchEvent::Deleted(object))) => {
                *version = object.resource_version().unwrap_or_default();
                recorder.delete(&object, version);
            }
        }
    }
}

/// What a fresh list says that the history does not (empty when it kept up), tried a few times
/// while the last events arrive.
pub async fn compare_with_list(api_client: &Client, ledger: &Mutex<Ledger>) -> Vec<String> {
    let api: Api<IPAddress> = Api::all_with(api_client.clone(), &capi().address_resource());
    let mut differences = vec!["no list answered".to_owned()];
    for _ in 0..10 {
        if let Ok(list) = api.list(&ListParams::default()).await {
            differences = lock(ledger).differences(&observed(&list.items));
            if differences.is_empty() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    differences
}

fn list_revision<T: Clone>(list: &kube::core::ObjectList<T>) -> vip_rules::Revision {
    revision(list.metadata.resource_version.as_deref().unwrap_or_default())
}

/// Fresh lists of Clusters and `IPAddress`es against the VIPs' history, tried a few times while
/// the last events arrive: what they say that it does not (empty when it kept up). Once they
/// agree, the history is complete up to the lists, and every change left is judged.
pub async fn settle_vips(api_client: &Client, vips: &Mutex<VipLedger>) -> Vec<String> {
    let clusters: Api<Cluster> = Api::all_with(api_client.clone(), &capi().cluster_resource());
    let addresses: Api<IPAddress> = Api::all_with(api_client.clone(), &capi().address_resource());
    let mut differences = vec!["no list answered".to_owned()];
    for _ in 0..10 {
        if let (Ok(clusters), Ok(addresses)) =
            (clusters.list(&ListParams::default()).await, addresses.list(&ListParams::default()).await)
        {
            let listed: Vec<_> = clusters.items.iter().map(ClusterSeen::of).collect();
            let vip_addresses: Vec<_> = addresses.items.iter().filter_map(AddressSeen::of).collect();
            differences =
                lock(vips).settle((&listed, list_revision(&clusters)), (&vip_addresses, list_revision(&addresses)));
            if differences.is_empty() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    differences
}
