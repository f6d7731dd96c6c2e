//! The nemesis (client required): plays the fault plan. Each fault is a task that waits for its
//! time, takes what it hits (a replica's slot, or the control plane) so that two faults never
//! fight over one process, does its harm, waits, and undoes it. Faults on different things
//! overlap freely. Every begin and end goes to the timeline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::cast::Cast;
use crate::rng::Rng;
use crate::schedule::{Fault, Kind, Target};
use crate::timeline::Timeline;

/// A replica started and stopped at once must exit within this (the fault suite's bound).
const EXIT_WITHIN: Duration = Duration::from_secs(5);

/// What the nemesis did, by kind, and what went wrong while doing it.
#[derive(Default)]
pub struct Tally {
    pub injected: BTreeMap<String, usize>,
    pub failures: Vec<String>,
}

pub struct Nemesis {
    cast: Arc<Cast>,
    plane: Mutex<()>,
    timeline: Timeline,
    began: Instant,
    ends: Instant,
    tally: std::sync::Mutex<Tally>,
}

impl Nemesis {
    /// Plays `plan` from now until `chaos` has passed; returns once every fault has ended.
    pub async fn play(cast: Arc<Cast>, plan: Vec<Fault>, chaos: Duration, rng: &mut Rng, timeline: &Timeline) -> Tally {
        let began = Instant::now();
        let nemesis = Arc::new(Nemesis {
            cast,
            plane: Mutex::new(()),
            timeline: timeline.clone(),
            began,
            ends: began + chaos,
            tally: std::sync::Mutex::new(Tally::default()),
        });
        let mut faults = JoinSet::new();
        for fault in plan {
            let (nemesis, rng) = (nemesis.clone(), rng.fork());
            faults.spawn(async move { nemesis.run(fault, rng).await });
        }
        while let Some(done) = faults.join_next().await {
            if let Err(error) = done {
                nemesis.failed(format!("a fault's task failed: {error}"));
            }
        }
        std::mem::take(&mut *nemesis.tally.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn failed(&self, what: String) {
        self.timeline.note(format!("NEMESIS FAILURE: {what}"));
        self.tally.lock().unwrap_or_else(|e| e.into_inner()).failures.push(what);
    }

    fn injected(&self, fault: &Fault, what: String) {
        self.timeline.note(format!("fault #{} begins: {what}", fault.id));
        *self
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .injected
            .entry(fault.kind.name().to_owned())
            .or_default() += 1;
    }

    /// How long the fault may last now that it starts: what is left of the chaos, at most.
    fn remaining(&self, lasts: Duration) -> Option<Duration> {
        let left = self.ends.saturating_duration_since(Instant::now());
        (!left.is_zero()).then(|| lasts.min(left))
    }

    async fn run(&self, fault: Fault, mut rng: Rng) {
        tokio::time::sleep_until((self.began + fault.at).into()).await;
        match fault.kind {
            Kind::ApiServerRestart | Kind::EtcdRestart | Kind::Compaction => self.on_plane(&fault).await,
            Kind::Kill(t) | Kind::Freeze(t) | Kind::Blackhole(t) | Kind::Refuse(t) | Kind::Slow(t, _) => {
                self.on_replica(&fault, t, &mut rng).await
            }
            Kind::Skew(_) | Kind::TermAtStartup => self.on_replica(&fault, Target::Standby, &mut rng).await,
        }
    }

    /// Which slot the fault hits: the leader's, or one of the others'.
    async fn choose(&self, target: Target, rng: &mut Rng) -> (usize, String) {
        let leader = self.cast.leader().await;
        let all = self.cast.slots.len();
        match (target, leader) {
            (Target::Leader, Some(n)) => (n, "the leader".into()),
            (Target::Standby, Some(l)) if all > 1 => {
                let others: Vec<usize> = (0..all).filter(|n| *n != l).collect();
                (*rng.pick(&others), "a stand-by".into())
            }
            _ => (rng.below(all as u64) as usize, "a replica (no leader known)".into()),
        }
    }

    async fn on_replica(&self, fault: &Fault, target: Target, rng: &mut Rng) {
        let (n, role) = self.choose(target, rng).await;
        let mut slot = self.cast.slots[n].lock().await;
        let Some(lasts) = self.remaining(fault.lasts) else {
            self.timeline
                .note(format!("fault #{} skipped: replica {} was busy until the chaos ended", fault.id, slot.name));
            return;
        };
        let name = slot.name;
        self.injected(fault, format!("{} on {role}, replica {name}, for {:.1} s", fault.kind, lasts.as_secs_f64()));
        match fault.kind {
            Kind::Kill(_) => {
                self.cast.kill(n, &mut slot);
                tokio::time::sleep(lasts).await;
                self.cast.launch(n, &mut slot, 0);
            }
            Kind::Freeze(_) => {
                let replica = slot.current.as_ref();
                replica.inspect(|r| r.signal(libc::SIGSTOP));
                tokio::time::sleep(lasts).await;
                replica.inspect(|r| r.signal(libc::SIGCONT));
            }
            Kind::Blackhole(_) | Kind::Refuse(_) => {
                if matches!(fault.kind, Kind::Blackhole(_)) {
                    slot.proxy.blackhole()
                } else {
                    slot.proxy.refuse()
                }
                tokio::time::sleep(lasts).await;
                slot.proxy.heal();
            }
            Kind::Slow(_, millis) => {
                slot.proxy.slow(Duration::from_millis(millis));
                tokio::time::sleep(lasts).await;
                slot.proxy.slow(Duration::ZERO);
            }
            Kind::Skew(ahead) => {
                self.cast.launch(n, &mut slot, ahead);
                tokio::time::sleep(lasts).await;
                self.cast.launch(n, &mut slot, 0);
            }
            Kind::TermAtStartup => {
                self.cast.launch(n, &mut slot, 0);
                tokio::time::sleep(lasts).await;
                let exited = self.cast.terminate(n, &mut slot, EXIT_WITHIN * 4);
                self.timeline.note(format!("fault #{}: replica {name} exited {exited:?} after SIGTERM", fault.id));
                if exited.is_none_or(|e| e > EXIT_WITHIN) {
                    self.failed(format!(
                        "replica {name}, SIGTERMed {:.1} s into its start-up, exited after {exited:?} (None: killed after {:?}), not within {EXIT_WITHIN:?}",
                        lasts.as_secs_f64(),
                        EXIT_WITHIN * 4
                    ));
                }
                self.cast.launch(n, &mut slot, 0);
            }
            _ => unreachable!("not a replica fault: {}", fault.kind),
        }
        self.timeline.note(format!("fault #{} ends ({} on replica {name})", fault.id, fault.kind));
    }

    async fn on_plane(&self, fault: &Fault) {
        let _plane = self.plane.lock().await;
        let Some(lasts) = self.remaining(fault.lasts) else {
            self.timeline
                .note(format!("fault #{} skipped: the control plane was busy until the chaos ended", fault.id));
            return;
        };
        let plane = self.cast.rig.plane();
        self.injected(fault, format!("{} for {:.1} s", fault.kind, lasts.as_secs_f64()));
        let outcome = match fault.kind {
            Kind::ApiServerRestart => {
                plane.kill_apiserver();
                tokio::time::sleep(lasts).await;
                tokio::task::block_in_place(|| plane.restart_apiserver()).map(|()| "ready again".to_owned())
            }
            Kind::EtcdRestart => {
                plane.kill_etcd();
                tokio::time::sleep(lasts).await;
                tokio::task::block_in_place(|| plane.restart_etcd())
                    .map(|()| "the API server is ready again".to_owned())
            }
            Kind::Compaction => plane.etcd_revision().and_then(|revision| {
                plane.compact_etcd(revision).map(|()| format!("compacted at revision {revision}"))
            }),
            _ => unreachable!("not a control-plane fault: {}", fault.kind),
        };
        match outcome {
            Ok(what) => self.timeline.note(format!("fault #{} ends ({}): {what}", fault.id, fault.kind)),
            Err(error) => self.failed(format!("fault #{} ({}): {error:#}", fault.id, fault.kind)),
        }
    }
}
