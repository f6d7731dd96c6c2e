//! Claims created and deleted at a rate that changes every ten seconds (client required): on
//! the churn pools of both namespaces, on the global pool from both, on the pool that overlaps
//! it, "a VIP" (purpose claims), a requested address, and claims deleted and made again under
//! their old name (sticky addresses). A request the API server refuses (it is away) is counted,
//! not retried: the workload goes on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferro_ipam::api::keys::{GLOBAL_IN_CLUSTER_IP_POOL, IN_CLUSTER_IP_POOL, REQUESTED_ADDRESS_ANNOTATION, VIPS_LABEL};
use ferro_ipam_e2e::objects::Scope;
use serde_json::json;
use tokio::sync::watch;

use super::Counters;
use super::layout::STICKY;
use crate::rng::Rng;

/// The workload keeps at most this many claims of its own.
const MOST: usize = 150;

/// A claim the workload made and has not deleted.
struct Made {
    in_b: bool,
    name: String,
}

pub struct Churn {
    pub a: Arc<Scope>,
    pub b: Arc<Scope>,
    pub global: String,
    pub counters: Arc<Counters>,
}

impl Churn {
    pub async fn run(self, mut rng: Rng, mut stop: watch::Receiver<bool>) {
        let mut made: Vec<Made> = Vec::new();
        let mut sticky_gone: Vec<String> = Vec::new();
        let mut next = 0usize;
        let mut per_second = 1.0;
        let mut rate_until = tokio::time::Instant::now();
        while !*stop.borrow() {
            if tokio::time::Instant::now() >= rate_until {
                per_second = rng.between(1, 16) as f64 / 4.0;
                rate_until += Duration::from_secs(10);
            }
            let pause = Duration::from_secs_f64(1.0 / per_second);
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(pause) => {}
            }
            let create = made.len() < 20 || (made.len() < MOST && rng.percent(55));
            if create {
                next += 1;
                self.create(&mut rng, &mut made, &mut sticky_gone, next).await;
            } else {
                let gone = made.swap_remove(rng.below(made.len() as u64) as usize);
                self.delete(gone, &mut sticky_gone).await;
            }
        }
    }

    async fn create(&self, rng: &mut Rng, made: &mut Vec<Made>, sticky_gone: &mut Vec<String>, n: usize) {
        let fresh = format!("c-{n}");
        let (in_b, kind, pool, metadata, name) = match rng.below(100) {
            0..=24 => (false, IN_CLUSTER_IP_POOL, "churn".to_owned(), json!({}), fresh),
            25..=44 => (true, IN_CLUSTER_IP_POOL, "churn".to_owned(), json!({}), fresh),
            45..=54 => (false, GLOBAL_IN_CLUSTER_IP_POOL, self.global.clone(), json!({}), fresh),
            55..=64 => (true, GLOBAL_IN_CLUSTER_IP_POOL, self.global.clone(), json!({}), fresh),
            65..=74 => (true, IN_CLUSTER_IP_POOL, "edge".to_owned(), json!({}), fresh),
            75..=84 => (false, IN_CLUSTER_IP_POOL, VIPS_LABEL.to_owned(), json!({}), fresh),
            85..=92 => {
                let (network, first, last) = STICKY;
                let wanted = format!("{network}.{}", rng.between(first.into(), last.into()));
                let annotations = json!({"annotations": {REQUESTED_ADDRESS_ANNOTATION: wanted}});
                (false, IN_CLUSTER_IP_POOL, "sticky".to_owned(), annotations, format!("sticky-{n}"))
            }
            _ => match sticky_gone.pop() {
                // A claim made again under the name of one deleted: it may get its old address back.
                Some(old) => (false, IN_CLUSTER_IP_POOL, "sticky".to_owned(), json!({}), old),
                None => (false, IN_CLUSTER_IP_POOL, "sticky".to_owned(), json!({}), format!("sticky-{n}")),
            },
        };
        let scope = if in_b { &self.b } else { &self.a };
        match scope.claim_with(&name, kind, &pool, metadata).await {
            Ok(()) => {
                self.counters.created.fetch_add(1, Ordering::SeqCst);
                made.push(Made { in_b, name });
            }
            Err(_) => {
                self.counters.refused.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    async fn delete(&self, gone: Made, sticky_gone: &mut Vec<String>) {
        let scope = if gone.in_b { &self.b } else { &self.a };
        match scope.delete_claim(&gone.name).await {
            Ok(()) => {
                self.counters.deleted.fetch_add(1, Ordering::SeqCst);
                if gone.name.starts_with("sticky-") && sticky_gone.len() < 20 {
                    sticky_gone.insert(0, gone.name);
                }
            }
            Err(_) => {
                self.counters.refused.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}
