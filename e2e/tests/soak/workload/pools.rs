//! Pool edits every few seconds (client required): an editable pool grown, shrunk (its
//! addresses beyond the new end stay where they are, out of range), excluded from, paused and
//! unpaused. Once the chaos ends, every pool gets its widest range back, no exclusions, and no
//! pause, so that every claim can be served and every address lies in its pool again.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferro_ipam::api::keys::PAUSED_ANNOTATION;
use ferro_ipam::api::{GlobalInClusterIPPool, InClusterIPPool};
use ferro_ipam_e2e::objects::Scope;
use kube::core::ApiResource;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Counters;
use super::layout::Editable;
use crate::rng::Rng;
use crate::timeline::Timeline;

pub struct Edits {
    pub a: Arc<Scope>,
    pub b: Arc<Scope>,
    pub pools: Vec<Editable>,
    pub counters: Arc<Counters>,
    pub timeline: Timeline,
}

impl Edits {
    pub async fn run(&self, mut rng: Rng, mut stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(rng.seconds(2.0, 8.0)) => {}
            }
            let pool = rng.pick(&self.pools).clone();
            let (what, patch) = match rng.below(6) {
                0 => ("grown", json!({"spec": {"addresses": [pool.ranges.widest()]}})),
                1 => ("shrunk", json!({"spec": {"addresses": [pool.ranges.range(pool.ranges.last[0])]}})),
                2 => ("back to its first range", json!({"spec": {"addresses": [pool.ranges.base()]}})),
                3 => {
                    let excluded: Vec<String> = (0..rng.between(1, 4))
                        .map(|_| format!("{}.{}", pool.ranges.network, rng.between(pool.ranges.first.into(), 39)))
                        .collect();
                    ("excluded from", json!({"spec": {"excludedAddresses": excluded}}))
                }
                4 => ("paused", json!({"metadata": {"annotations": {PAUSED_ANNOTATION: ""}}})),
                _ => ("unpaused", json!({"metadata": {"annotations": {PAUSED_ANNOTATION: null}}})),
            };
            let outcome = self.patch(&pool, patch.clone()).await;
            self.report(&pool, what, &patch, outcome);
        }
    }

    /// Widest range, no exclusions, no pause, for every editable pool; retried until the API
    /// server takes it.
    pub async fn restore(&self) {
        for pool in &self.pools {
            let patch = json!({
                "metadata": {"annotations": {PAUSED_ANNOTATION: null}},
                "spec": {"addresses": [pool.ranges.widest()], "excludedAddresses": []},
            });
            let mut tries = 0;
            while let Err(error) = self.patch(pool, patch.clone()).await {
                tries += 1;
                if tries > 60 {
                    panic!("restoring pool {}: {error:#}", pool.name);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            self.timeline.note(format!("pool {} restored: {patch}", label(pool)));
        }
    }

    async fn patch(&self, pool: &Editable, patch: Value) -> anyhow::Result<()> {
        match &pool.namespace {
            Some(ns) => {
                let scope = if *ns == self.a.ns { &self.a } else { &self.b };
                scope.patch(&ApiResource::erase::<InClusterIPPool>(&()), true, &pool.name, patch).await
            }
            None => self.a.patch(&ApiResource::erase::<GlobalInClusterIPPool>(&()), false, &pool.name, patch).await,
        }
    }

    fn report(&self, pool: &Editable, what: &str, patch: &Value, outcome: anyhow::Result<()>) {
        match outcome {
            Ok(()) => {
                self.counters.pool_edits.fetch_add(1, Ordering::SeqCst);
                self.timeline.note(format!("pool {} {what}: {patch}", label(pool)));
            }
            Err(error) => {
                self.counters.refused.fetch_add(1, Ordering::SeqCst);
                self.timeline.note(format!("pool {} not {what} ({error:#})", label(pool)));
            }
        }
    }
}

fn label(pool: &Editable) -> String {
    match &pool.namespace {
        Some(ns) => format!("{ns}/{}", pool.name),
        None => format!("(global) {}", pool.name),
    }
}
