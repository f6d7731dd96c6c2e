//! `IPAddress`es made by hand in the manual pool, and later removed (client required). Each
//! round: the manual pool's claims are deleted and gone; one or two free addresses are made by
//! hand (the oldest removed beyond four); once the pool counts them (the leader has seen them),
//! a few claims are made on the pool, which must never get a hand-made address.
//!
//! No claim of the pool is pending while an address is made by hand, so that ferro-ipam is never
//! racing the workload for it: a collision would be the workload's doing, not ferro-ipam's.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ferro_ipam::api::keys::IN_CLUSTER_IP_POOL;
use ferro_ipam_e2e::objects::Scope;
use kube::api::{DeleteParams, ListParams};
use tokio::sync::watch;

use super::Counters;
use super::layout::MANUAL;
use crate::rng::Rng;
use crate::timeline::Timeline;

const POOL: &str = "manual";
const KEEP: usize = 4;
/// How long a round waits for the claims to go, or the pool to count the new addresses.
const PATIENCE: Duration = Duration::from_secs(15);

pub struct HandMade {
    pub a: Arc<Scope>,
    pub counters: Arc<Counters>,
    pub timeline: Timeline,
}

impl HandMade {
    pub async fn run(&self, mut rng: Rng, mut stop: watch::Receiver<bool>) {
        let mut made: VecDeque<String> = VecDeque::new();
        let mut claims: Vec<String> = Vec::new();
        let mut round = 0usize;
        while !*stop.borrow() {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(rng.seconds(5.0, 12.0)) => {}
            }
            round += 1;
            if !self.claims_gone(&mut claims).await {
                self.timeline
                    .note(format!("hand-made round {round}: the manual pool's claims are not gone yet; next round"));
                continue;
            }
            while made.len() >= KEEP {
                let oldest = made.pop_front().expect("not empty");
                if self.a.addresses().delete(&oldest, &DeleteParams::default()).await.is_ok() {
                    self.counters.hand_made_removed.fetch_add(1, Ordering::SeqCst);
                    self.timeline.note(format!("IPAddress {oldest} (made by hand) deleted"));
                }
            }
            for _ in 0..rng.between(1, 2) {
                let Some(ip) = self.free_address(&mut rng).await else { break };
                let name = format!("hand-{round}-{}", made.len());
                if self.a.hand_made_address(&name, POOL, &ip, 24).await.is_ok() {
                    self.counters.hand_made.fetch_add(1, Ordering::SeqCst);
                    self.timeline.note(format!("IPAddress {name} made by hand with {ip}"));
                    made.push_back(name);
                }
            }
            if !self.counted().await {
                self.timeline.note(format!("hand-made round {round}: the pool does not count them yet; no claims"));
                continue;
            }
            for n in 0..rng.between(2, 8) {
                let name = format!("m-{round}-{n}");
                if self.a.claim(&name, IN_CLUSTER_IP_POOL, POOL).await.is_ok() {
                    self.counters.created.fetch_add(1, Ordering::SeqCst);
                    claims.push(name);
                }
            }
        }
    }

    /// Deletes the round's claims and waits until they are gone.
    async fn claims_gone(&self, claims: &mut Vec<String>) -> bool {
        for name in claims.iter() {
            if self.a.delete_claim(name).await.is_ok() {
                self.counters.deleted.fetch_add(1, Ordering::SeqCst);
            }
        }
        let gone = self
            .a
            .eventually("the manual claims are gone", PATIENCE, || async {
                let left = self.a.claims().list(&ListParams::default()).await.map(|l| l.items);
                left.is_ok_and(|l| !l.iter().any(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("m-"))))
            })
            .await
            .is_ok();
        if gone {
            claims.clear();
        }
        gone
    }

    /// An address of the manual pool no `IPAddress` holds.
    async fn free_address(&self, rng: &mut Rng) -> Option<String> {
        let held: BTreeSet<String> = self.a.address_map().await.ok()?.into_values().collect();
        let (network, first, last) = MANUAL;
        let free: Vec<String> =
            (first..=last).map(|n| format!("{network}.{n}")).filter(|ip| !held.contains(ip)).collect();
        (!free.is_empty()).then(|| rng.pick(&free).clone())
    }

    /// Whether the pool's status counts every `IPAddress` it has: the leader has seen them all.
    async fn counted(&self) -> bool {
        let network = format!("{}.", MANUAL.0);
        self.a
            .eventually("the manual pool counts its addresses", PATIENCE, || async {
                let held = self.a.address_map().await.map(|m| m.values().filter(|ip| ip.starts_with(&network)).count());
                let used = self.a.pool_used(POOL).await;
                matches!((held, used), (Ok(held), Some(used)) if used as usize == held)
            })
            .await
            .is_ok()
    }
}
