//! The probe (client required): every two seconds a claim on a pool that never runs out, timed
//! from its creation (as the API server took it) to the moment it is seen `Ready`, then deleted.
//! The longest of those times is the longest a claim waited: the unavailability the faults
//! caused. A probe the API server refused to create is tried again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferro_ipam::api::keys::IN_CLUSTER_IP_POOL;
use ferro_ipam_e2e::objects::Scope;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::timeline::Timeline;

const EVERY: Duration = Duration::from_secs(2);
const LOOK: Duration = Duration::from_millis(500);

/// One probe's wait: when it was created (seconds into the soak) and how long it waited.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub created_at: f64,
    pub waited: Duration,
}

#[derive(Default)]
pub struct Waits {
    pub served: Vec<Wait>,
    /// Probes still not Ready when the probe stopped: (created at, waited so far).
    pub unserved: Vec<Wait>,
}

impl Waits {
    pub fn longest(&self) -> Option<Wait> {
        self.served.iter().chain(&self.unserved).copied().max_by_key(|w| w.waited)
    }
}

pub struct Probe {
    pub a: Arc<Scope>,
    pub timeline: Timeline,
    pub waits: Arc<Mutex<Waits>>,
}

impl Probe {
    /// Probes until stopped, then waits for the probes in flight (each until it is served or
    /// `stop` has been set for `patience`).
    pub async fn run(self: Arc<Self>, stop: watch::Receiver<bool>, patience: Duration) {
        let mut probes = JoinSet::new();
        let mut n = 0;
        while !*stop.borrow() {
            n += 1;
            let (probe, stop) = (self.clone(), stop.clone());
            probes.spawn(async move { probe.one(n, stop, patience).await });
            tokio::time::sleep(EVERY).await;
        }
        while probes.join_next().await.is_some() {}
    }

    async fn one(&self, n: usize, mut stop: watch::Receiver<bool>, patience: Duration) {
        let name = format!("probe-{n}");
        let mut stopped_at: Option<Instant> = None;
        let mut out_of_patience = |stop: &mut watch::Receiver<bool>| {
            if *stop.borrow_and_update() {
                let at = *stopped_at.get_or_insert_with(Instant::now);
                return at.elapsed() > patience;
            }
            false
        };
        while self.a.claim(&name, IN_CLUSTER_IP_POOL, "probe").await.is_err() {
            if out_of_patience(&mut stop) {
                return;
            }
            tokio::time::sleep(LOOK).await;
        }
        let (created, created_at) = (Instant::now(), self.timeline.now());
        loop {
            let ready = self.a.claim_ready(&name).await.is_some_and(|(status, _, _)| status == "True");
            let wait = Wait { created_at, waited: created.elapsed() };
            if ready || out_of_patience(&mut stop) {
                let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
                if ready {
                    waits.served.push(wait)
                } else {
                    waits.unserved.push(wait)
                }
                break;
            }
            tokio::time::sleep(LOOK).await;
        }
        let _ = self.a.delete_claim(&name).await;
    }
}
