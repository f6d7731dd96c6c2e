//! The history of every `IPAddress` (client required): one list, then a watch from its
//! resourceVersion, for the whole run, fed to the [`Ledger`] in the order the API server sends.
//!
//! A watch that ends, breaks or fails is opened again from the last resourceVersion seen: no
//! event is lost. Only a watch refused with 410 Gone (etcd compacted past that resourceVersion)
//! makes it list again; the list is a snapshot, applied as one, and the gap it covers is stated
//! in the output: a duplicate that began and ended within it would not be seen.

pub mod ledger;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferro_ipam::api::capi::IPAddress;
use ferro_ipam_e2e::objects::capi;
use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::timeline::Timeline;
use ledger::{Ledger, Observed};

/// Between two tries while the API server is away.
const RETRY: Duration = Duration::from_millis(500);

pub struct History {
    pub ledger: Arc<Mutex<Ledger>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl History {
    /// Starts recording; returns once the first list is in the ledger.
    pub async fn record(client: Client, timeline: Timeline) -> History {
        let api: Api<IPAddress> = Api::all_with(client, &capi().address_resource());
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let (stop, stopped) = watch::channel(false);
        let version = relist(&api, &ledger).await;
        let task = tokio::spawn(follow(api, ledger.clone(), version, stopped, timeline));
        History { ledger, stop, task }
    }

    /// Stops recording.
    pub async fn stop(self) -> Arc<Mutex<Ledger>> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        self.ledger
    }
}

fn observed(objects: &[IPAddress]) -> Vec<Observed> {
    objects.iter().filter_map(Observed::of).collect()
}

/// Lists until the API server answers, applies the list as a snapshot; returns its resourceVersion.
async fn relist(api: &Api<IPAddress>, ledger: &Mutex<Ledger>) -> String {
    loop {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let version = list.metadata.resource_version.unwrap_or_default();
            ledger.lock().unwrap_or_else(|e| e.into_inner()).relist(observed(&list.items), &version);
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

async fn follow(
    api: Api<IPAddress>,
    ledger: Arc<Mutex<Ledger>>,
    mut version: String,
    mut stopped: watch::Receiver<bool>,
    timeline: Timeline,
) {
    loop {
        match watch_once(&api, &ledger, &mut version, &mut stopped).await {
            Ended::Stopped => return,
            Ended::Again => tokio::time::sleep(RETRY).await,
            Ended::Gone => {
                let from = version.clone();
                version = relist(&api, &ledger).await;
                let mut ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
                let gap = format!(
                    "watch from resourceVersion {from} refused with 410 Gone; listed again at {version}: events between were not seen one by one"
                );
                timeline.note(format!("history: {gap}"));
                ledger.gaps.push(gap);
            }
        }
    }
}

async fn watch_once(
    api: &Api<IPAddress>,
    ledger: &Mutex<Ledger>,
    version: &mut String,
    stopped: &mut watch::Receiver<bool>,
) -> Ended {
    // As long a watch as the client allows: each reopening after a compaction is a gap.
    let params = WatchParams::default().timeout(290);
    let stream = match api.watch(&params, version).await {
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
        let mut ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            None | Some(Err(_)) => return Ended::Again,
            Some(Ok(WatchEvent::Error(status))) if status.code == 410 => return Ended::Gone,
            Some(Ok(WatchEvent::Error(_))) => return Ended::Again,
            Some(Ok(WatchEvent::Bookmark(bookmark))) => *version = bookmark.metadata.resource_version,
            Some(Ok(WatchEvent::Added(address) | WatchEvent::Modified(address))) => {
                *version = address.resource_version().unwrap_or_default();
                let how = format!("its event at resourceVersion {version}");
                if let Some(seen) = Observed::of(&address) {
                    ledger.upsert(seen, &how);
                }
            }
            Some(Ok(WatchEvent::Deleted(address))) => {
                *version = address.resource_version().unwrap_or_default();
                if let Some(seen) = Observed::of(&address) {
                    ledger.delete(&seen.key);
                }
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
            differences = ledger.lock().unwrap_or_else(|e| e.into_inner()).differences(&observed(&list.items));
            if differences.is_empty() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    differences
}
