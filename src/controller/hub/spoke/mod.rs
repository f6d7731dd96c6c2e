//! A spoke's side: a session with the hub for each spoke pool, started when the pool appears
//! and ended once the pool is gone and its blocks are returned.

mod connect;
pub mod demand;
mod session;

use std::collections::HashMap;

use kube::Client;
use tokio::task::JoinSet;

use crate::client::Fence;
use crate::feed::SpokePools;
use crate::index::{Index, PoolKey};

use session::Session;

/// What every session of a term shares.
pub struct Spokes {
    pub spokes: SpokePools,
    pub index: Index,
    pub local: Client,
    pub own_namespace: String,
    pub fence: Fence,
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    pub identity: String,
}

impl Spokes {
    /// Runs a session per spoke pool until dropped (the term's end aborts them all).
    pub async fn run(self) {
        let mut changes = self.spokes.changes();
        let mut sessions = JoinSet::new();
        let mut running: HashMap<PoolKey, tokio::task::AbortHandle> = HashMap::new();
        loop {
            running.retain(|_, handle| !handle.is_finished());
            for (key, source) in self.spokes.sources() {
                if running.contains_key(&key) {
                    continue;
                }
                let session = Session {
                    key: key.clone(),
                    source,
                    spokes: self.spokes.clone(),
                    index: self.index.clone(),
                    local: self.local.clone(),
                    own_namespace: self.own_namespace.clone(),
                    fence: self.fence.clone(),
                    metrics: self.metrics.clone(),
                    identity: self.identity.clone(),
                };
                running.insert(key, sessions.spawn(session.run()));
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                Some(_) = sessions.join_next() => {}
            }
        }
    }
}
