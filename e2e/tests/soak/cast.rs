//! The replicas of the soak (client required): each reaches the API server through a proxy of
//! its own, so that any one of them can be partitioned or slowed, and keeps every process it
//! ever ran, so that the allocation windows of the whole run can be read from their logs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use ferro_ipam_e2e::proxy::Proxy;
use tokio::sync::Mutex;

use crate::rig::{Replica, ReplicaSpec, Rig};

/// One replica's place: its proxy, the process running now, and those that ran before.
pub struct Slot {
    pub name: &'static str,
    pub proxy: Proxy,
    kubeconfig: PathBuf,
    pub current: Option<Replica>,
    pub past: Vec<Replica>,
}

pub struct Cast {
    pub rig: Arc<Rig>,
    pub slots: Vec<Mutex<Slot>>,
    /// The pid each slot runs now (0: none), readable while a fault holds the slot.
    pids: Vec<AtomicU32>,
}

impl Cast {
    /// Starts `replicas` replicas, each through a proxy of its own, and waits until they are ready.
    pub fn start(rig: Arc<Rig>, replicas: usize) -> Cast {
        let mut slots = Vec::new();
        let mut pids = Vec::new();
        for n in 0..replicas {
            let name: &'static str = Box::leak(format!("r{n}").into_boxed_str());
            let proxy = Proxy::start(rig.plane().api_address()).expect("a proxy");
            let kubeconfig = rig.plane().kubeconfig_for(&format!("{}-{name}", rig.s.ns), &proxy.server()).unwrap();
            let spec = ReplicaSpec { kubeconfig: Some(kubeconfig.clone()), ..ReplicaSpec::default() };
            let replica = rig.replica(name, spec);
            pids.push(AtomicU32::new(replica.pid()));
            slots.push(Mutex::new(Slot { name, proxy, kubeconfig, current: Some(replica), past: Vec::new() }));
        }
        Cast { rig, slots, pids }
    }

    /// The slot whose replica the Lease names now.
    pub async fn leader(&self) -> Option<usize> {
        let holder = self.rig.holder().await?;
        self.pids.iter().position(|pid| {
            let pid = pid.load(Ordering::SeqCst);
            pid != 0 && holder.ends_with(&format!("-{pid}"))
        })
    }

    /// SIGKILLs the slot's replica; it keeps the process for its log.
    pub fn kill(&self, n: usize, slot: &mut Slot) {
        if let Some(mut replica) = slot.current.take() {
            replica.provider.kill();
            slot.past.push(replica);
        }
        self.pids[n].store(0, Ordering::SeqCst);
    }

    /// Starts the slot's replica again (without waiting for it), its clock `ahead` seconds fast.
    pub fn launch(&self, n: usize, slot: &mut Slot, ahead: i64) {
        self.kill(n, slot);
        let spec =
            ReplicaSpec { kubeconfig: Some(slot.kubeconfig.clone()), clock_ahead: ahead, ..ReplicaSpec::default() };
        let replica = self.rig.launch(slot.name, spec);
        self.pids[n].store(replica.pid(), Ordering::SeqCst);
        slot.current = Some(replica);
    }

    /// SIGTERM to the slot's replica: how long it took to exit (None: killed after `limit`).
    pub fn terminate(&self, n: usize, slot: &mut Slot, limit: Duration) -> Option<Duration> {
        let exited = slot.current.as_mut().and_then(|r| tokio::task::block_in_place(|| r.terminate(limit)));
        self.kill(n, slot);
        exited
    }

    /// After the chaos: every proxy forwards at full speed, every replica runs and is thawed,
    /// on the true clock.
    pub async fn restore(&self) -> Vec<String> {
        let mut done = Vec::new();
        for (n, slot) in self.slots.iter().enumerate() {
            let mut slot = slot.lock().await;
            slot.proxy.heal();
            slot.proxy.slow(Duration::ZERO);
            let running = slot.current.as_mut().is_some_and(|r| r.provider.process.is_running());
            let skewed = slot.current.as_ref().is_some_and(|r| r.ahead.as_secs() != 0);
            if !running || skewed {
                self.launch(n, &mut slot, 0);
                done.push(format!("replica {} started again", slot.name));
            } else if let Some(replica) = &slot.current {
                replica.signal(libc::SIGCONT);
            }
        }
        done
    }

    /// Every process of every slot, past and current, for the allocation windows.
    pub async fn all_replicas<T>(&self, read: impl FnOnce(&[&Replica]) -> T) -> T {
        let mut guards = Vec::new();
        for slot in &self.slots {
            guards.push(slot.lock().await);
        }
        let all: Vec<&Replica> = guards.iter().flat_map(|s| s.past.iter().chain(s.current.as_ref())).collect();
        read(&all)
    }
}
