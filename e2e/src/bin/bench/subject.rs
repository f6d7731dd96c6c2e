//! Starting the subject of a run as a process against a control plane, and waiting until it
//! serves claims.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use ferro_ipam_e2e::ControlPlane;
use ferro_ipam_e2e::peer::Peer;
use ferro_ipam_e2e::process::{Process, free_port, http_status};

use crate::config::{Config, Subject};
use crate::measure::ProcStats;

/// The namespace every benchmark object lives in.
pub const NAMESPACE: &str = "bench";

/// A running subject, killed when dropped.
pub enum Running {
    Process { process: Process, health: Option<String> },
    Peer(Peer),
}

impl Running {
    /// Starts a provider the way users run it (default flags; see docs/benchmarks.md).
    pub fn launch(config: &Config, plane: &ControlPlane, subject: Subject) -> Result<Running> {
        Ok(match subject {
            Subject::FerroIpam => Running::ferro_ipam(config, plane, &[])?,
            Subject::InCluster => Running::Peer(Peer::launch(plane, &plane.kubeconfig, &[])?),
            Subject::Floor => bail!("the floor starts with Running::floor, which is told the run's claims"),
        })
    }

    /// Starts ferro-ipam with its default flags, `extra` and `BENCH_FERRO_ARGS`; the address of
    /// its `/metrics` goes to `ferro-ipam.metrics-address` in the plane's directory.
    pub fn ferro_ipam(config: &Config, plane: &ControlPlane, extra: &[&str]) -> Result<Running> {
        let health = format!("127.0.0.1:{}", free_port());
        let metrics = format!("127.0.0.1:{}", free_port());
        std::fs::write(plane.dir.join("ferro-ipam.metrics-address"), &metrics)?;
        let mut command = Command::new(&config.ferro_bin);
        command
            .arg("--kubeconfig")
            .arg(&plane.kubeconfig)
            .args(["--health-probe-bind-address", &health])
            .args(["--diagnostics-address", &metrics, "--insecure-diagnostics"])
            .args(extra)
            .args(&config.ferro_args);
        let process = Process::start("ferro-ipam", command, plane.dir.join("ferro-ipam.log"))?;
        Ok(Running::Process { process, health: Some(health) })
    }

    /// Starts the floor for a run of `claims` claims after the warm-up claim.
    pub fn floor(config: &Config, plane: &ControlPlane, claims: usize) -> Result<Running> {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("floor").arg("--kubeconfig").arg(&plane.kubeconfig).args([
            "--namespace",
            NAMESPACE,
            "--concurrency",
            &config.floor_concurrency.to_string(),
            "--claims",
            &claims.to_string(),
        ]);
        let process = Process::start("floor", command, plane.dir.join("floor.log"))?;
        Ok(Running::Process { process, health: None })
    }

    /// Whether it is ready to serve claims: ferro-ipam's `/readyz` (its index is complete); the
    /// in-cluster provider's controllers have started their workers (caches synced); the floor
    /// watches.
    pub fn is_ready(&self) -> bool {
        match self {
            Running::Process { health: Some(health), .. } => http_status(health, "/readyz") == Some(200),
            Running::Process { process, health: None } => process.tail(5).contains("floor: watching"),
            Running::Peer(peer) => peer.workers_started() >= 5 && http_status(&peer.health, "/readyz") == Some(200),
        }
    }

    /// Polls [`Running::is_ready`] every 10 ms.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !self.is_ready() {
            let process = self.process();
            if !process.is_running() {
                bail!("{} exited:\n{}", process.name, process.tail(30));
            }
            if Instant::now() > deadline {
                bail!("{} not ready within {timeout:?}:\n{}", process.name, process.tail(30));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    pub fn process(&mut self) -> &mut Process {
        match self {
            Running::Process { process, .. } => process,
            Running::Peer(peer) => &mut peer.process,
        }
    }

    pub fn stats(&mut self) -> Result<ProcStats> {
        let pid = self.process().pid().unwrap_or_default();
        ProcStats::of(pid)
    }

    pub fn stop(&mut self) {
        self.process().terminate(Duration::from_secs(10));
    }
}
