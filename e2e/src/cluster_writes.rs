//! Writes to Clusters all along, as Cluster API's controllers keep writing theirs (conditions,
//! replicas): each write makes ferro-ipam look at that Cluster again, so that a test sees how it
//! judges a Cluster at every moment (a new leadership term's start above all), not only when its
//! watches list.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use crate::objects::{Scope, capi};

/// The annotation written.
const WRITTEN: &str = "e2e.ferro-ipam.dev/written";

/// How often to write.
#[derive(Clone, Copy, Debug)]
pub struct Cadence {
    /// The pause after each write.
    pub each: Duration,
    /// The pause after a round through every Cluster.
    pub round: Duration,
}

/// The writes under way; they stop when this is stopped or dropped.
pub struct ClusterWrites {
    task: tokio::task::JoinHandle<()>,
    /// Writes the API server accepted so far.
    count: Arc<AtomicU64>,
}

impl ClusterWrites {
    /// Annotates the Clusters `names` of the scope's namespace in turn, round after round. A
    /// write the API server refuses (a restart's load) is not retried: the next one follows.
    pub fn start(scope: &Scope, names: &[String], cadence: Cadence) -> ClusterWrites {
        let api: Api<DynamicObject> = Api::namespaced_with(scope.client.clone(), &scope.ns, &capi().cluster_resource());
        let names = names.to_vec();
        let count = Arc::new(AtomicU64::new(0));
        let counted = count.clone();
        let task = tokio::spawn(async move {
            loop {
                for name in &names {
                    let value = counted.load(Ordering::Relaxed).to_string();
                    let patch = json!({"metadata": {"annotations": {WRITTEN: value}}});
                    if api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.is_ok() {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(cadence.each).await;
                }
                tokio::time::sleep(cadence.round).await;
            }
        });
        ClusterWrites { task, count }
    }

    /// Stops writing; returns how many writes were accepted.
    pub fn stop(self) -> u64 {
        self.task.abort();
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for ClusterWrites {
    fn drop(&mut self) {
        self.task.abort();
    }
}
