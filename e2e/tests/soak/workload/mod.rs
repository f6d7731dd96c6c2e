//! The workload (client required), which never stops while the chaos lasts: claims created and
//! deleted at a changing rate, pool edits, addresses made by hand, Clusters that ask for a
//! control-plane VIP, and the probe.

mod claims;
mod clusters;
mod hand_made;
pub mod layout;
mod pools;
pub mod probe;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferro_ipam_e2e::objects::Scope;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::rng::Rng;
use crate::timeline::Timeline;
use layout::Layout;
use probe::{Probe, Waits};

/// What the workload did.
#[derive(Default)]
pub struct Counters {
    pub created: AtomicUsize,
    pub deleted: AtomicUsize,
    /// Requests the API server refused (it was away, or the name was still in use).
    pub refused: AtomicUsize,
    pub pool_edits: AtomicUsize,
    pub hand_made: AtomicUsize,
    pub hand_made_removed: AtomicUsize,
    /// Clusters asking for a VIP: made, deleted, and seen gone after their deletion.
    pub vip_clusters: AtomicUsize,
    pub vip_clusters_deleted: AtomicUsize,
    pub vip_clusters_gone: AtomicUsize,
}

impl Counters {
    pub fn summary(&self) -> String {
        let n = |c: &AtomicUsize| c.load(Ordering::SeqCst);
        format!(
            "{} claims created, {} deleted; {} pool edits; {} IPAddresses made by hand, {} of them removed; {} Clusters asking for a VIP made, {} deleted, {} seen gone; {} requests refused by the API server",
            n(&self.created),
            n(&self.deleted),
            n(&self.pool_edits),
            n(&self.hand_made),
            n(&self.hand_made_removed),
            n(&self.vip_clusters),
            n(&self.vip_clusters_deleted),
            n(&self.vip_clusters_gone),
            n(&self.refused)
        )
    }
}

/// A second handle on a scope, for a task.
fn share(s: &Scope) -> Arc<Scope> {
    Arc::new(Scope { plane: s.plane, client: s.client.clone(), ns: s.ns.clone(), filter: s.filter.clone() })
}

pub struct Workload {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    probe: tokio::task::JoinHandle<()>,
    edits: Arc<pools::Edits>,
    pub counters: Arc<Counters>,
    pub waits: Arc<Mutex<Waits>>,
}

impl Workload {
    /// Starts every part of the workload on the pools of `layout`.
    pub fn start(a: &Scope, b: &Scope, layout: Layout, rng: &mut Rng, timeline: &Timeline) -> Workload {
        let (stop, stopped) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let (a, b) = (share(a), share(b));
        let mut tasks = JoinSet::new();
        let churn =
            claims::Churn { a: a.clone(), b: b.clone(), global: layout.global.clone(), counters: counters.clone() };
        tasks.spawn(churn.run(rng.fork(), stopped.clone()));
        let edits = Arc::new(pools::Edits {
            a: a.clone(),
            b,
            pools: layout.editable,
            counters: counters.clone(),
            timeline: timeline.clone(),
        });
        let (running, edit_rng, edit_stop) = (edits.clone(), rng.fork(), stopped.clone());
        tasks.spawn(async move { running.run(edit_rng, edit_stop).await });
        let hand_made = hand_made::HandMade { a: a.clone(), counters: counters.clone(), timeline: timeline.clone() };
        let (hand_rng, hand_stop) = (rng.fork(), stopped.clone());
        tasks.spawn(async move { hand_made.run(hand_rng, hand_stop).await });
        let vip_clusters =
            Arc::new(clusters::VipClusters { a: a.clone(), counters: counters.clone(), timeline: timeline.clone() });
        tasks.spawn(vip_clusters.run(rng.fork(), stopped.clone()));
        let waits = Arc::new(Mutex::new(Waits::default()));
        let probe = Arc::new(Probe { a, timeline: timeline.clone(), waits: waits.clone() });
        let probe = tokio::spawn(probe.run(stopped, crate::SERVED_WITHIN));
        Workload { stop, tasks, probe, edits, counters, waits }
    }

    /// Stops the workload and gives every editable pool its widest range back, unpaused.
    /// Probes in flight go on until served (or out of patience): see [`Workload::finish`].
    pub async fn stop(&mut self) {
        let _ = self.stop.send(true);
        while let Some(done) = self.tasks.join_next().await {
            if let Err(error) = done {
                panic!("a task of the workload failed: {error}");
            }
        }
        self.edits.restore().await;
    }

    /// Waits for the probes in flight.
    pub async fn finish(self) -> Arc<Mutex<Waits>> {
        let _ = tokio::time::timeout(crate::SERVED_WITHIN + Duration::from_secs(30), self.probe).await;
        self.waits
    }
}
