//! The in-cluster IPAM provider (kubernetes-sigs/cluster-api-ipam-provider-in-cluster), the
//! project ferro-ipam replaces, run as a process against the e2e control plane: the peer of the
//! migration test and the benchmark. `e2e/tools/build.sh` builds it into the tools cache, with its
//! pool CRDs.
//!
//! It runs out of cluster as its Deployment would, minus what needs a cluster: no leader
//! election, no webhook server (it needs serving certificates; the API server would call it only
//! for pool writes), no diagnostics (metrics) endpoint. Its health endpoint listens on loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::plane::{ControlPlane, Tools};
use crate::process::{Process, free_port, http_status};

/// The controllers the in-cluster provider starts: one for claims, four for pool kinds.
const CONTROLLERS: usize = 5;

/// Where the binary is: `$IN_CLUSTER_IPAM_BIN`, else the tools cache.
pub fn binary(tools: &Tools) -> PathBuf {
    std::env::var_os("IN_CLUSTER_IPAM_BIN").map(PathBuf::from).unwrap_or_else(|| tools.bin("in-cluster-ipam"))
}

/// The in-cluster provider's CRD manifests (v1.1.0, unchanged), in the tools cache.
pub fn crd_dir(tools: &Tools) -> PathBuf {
    tools.dir.join("in-cluster-crds")
}

/// The in-cluster provider's manifest of the CRD `name` (e.g. `inclusterippools.ipam.cluster.x-k8s.io`).
pub fn crd_file(tools: &Tools, name: &str) -> PathBuf {
    let (plural, group) = name.split_once('.').unwrap_or((name, ""));
    crd_dir(tools).join(format!("{group}_{plural}.yaml"))
}

/// Installs the in-cluster CRDs the control plane does not have yet. ferro-ipam's `crds/` hold
/// the two IP pool kinds (a superset of the in-cluster ones, left as they are); the in-cluster
/// provider also watches its two prefix-pool kinds and does not start without them.
pub fn install_missing_crds(plane: &ControlPlane) -> Result<()> {
    let dir = crd_dir(&plane.tools);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {} (built by e2e/tools/build.sh)", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let name = crd_name(&file)?;
        if plane.kubectl(&["get", "crd", &name])?.status.success() {
            continue;
        }
        plane.kubectl_ok(&["apply", "--server-side", "-f", &file.to_string_lossy()])?;
        plane.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", &name])?;
    }
    Ok(())
}

/// `metadata.name` of a CRD manifest (the file names follow `<group>_<plural>.yaml`).
fn crd_name(file: &Path) -> Result<String> {
    let stem = file.file_stem().and_then(|s| s.to_str()).context("a CRD file name")?;
    let (group, plural) = stem.split_once('_').with_context(|| format!("{stem} is not <group>_<plural>"))?;
    Ok(format!("{plural}.{group}"))
}

/// A running in-cluster provider, killed when dropped.
pub struct Peer {
    pub process: Process,
    /// `host:port` of its `/healthz` and `/readyz`.
    pub health: String,
    /// When the process was started.
    pub started: Instant,
}

impl Peer {
    /// Installs its missing CRDs, starts it with `args` besides kubeconfig and listen addresses
    /// (`--namespace NS` or `--watch-filter VALUE` scope it), and waits until its controllers run.
    pub fn start(plane: &ControlPlane, args: &[&str]) -> Result<Peer> {
        install_missing_crds(plane)?;
        let peer = Peer::launch(plane, &plane.kubeconfig, args)?;
        peer.wait_ready(Duration::from_secs(60))?;
        Ok(peer)
    }

    /// Starts it without installing CRDs or waiting.
    pub fn launch(plane: &ControlPlane, kubeconfig: &Path, args: &[&str]) -> Result<Peer> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let health = format!("127.0.0.1:{}", free_port());
        let mut command = Command::new(binary(&plane.tools));
        command
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args([
                "--leader-elect=false",
                "--webhook-port=0",
                "--diagnostics-address=0",
                &format!("--health-probe-bind-address={health}"),
            ])
            .args(args);
        let started = Instant::now();
        let process = Process::start("in-cluster-ipam", command, plane.dir.join(format!("in-cluster-ipam-{n}.log")))?;
        Ok(Peer { process, health, started })
    }

    /// Starts it with leader election on, as it runs in a cluster: it holds and renews its Lease
    /// `7bb7acb4.ipam.cluster.x-k8s.io` in `namespace`. It takes that namespace only from the
    /// ServiceAccount mount, so it runs in a mount namespace of its own (`unshare`, as root)
    /// with a tmpfs on `/run` that holds `secrets/kubernetes.io/serviceaccount/namespace`;
    /// nothing outside the process sees that file.
    pub fn launch_leading(plane: &ControlPlane, namespace: &str, args: &[&str]) -> Result<Peer> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let health = format!("127.0.0.1:{}", free_port());
        let dir = "/run/secrets/kubernetes.io/serviceaccount";
        let script =
            format!("mount -t tmpfs tmpfs /run && mkdir -p {dir} && printf %s \"$0\" > {dir}/namespace && exec \"$@\"");
        let mut command = Command::new("unshare");
        command
            .args(["-m", "--propagation", "private", "sh", "-c", &script, namespace])
            .arg(binary(&plane.tools))
            .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
            .args([
                "--leader-elect=true",
                "--webhook-port=0",
                "--diagnostics-address=0",
                &format!("--health-probe-bind-address={health}"),
            ])
            .args(args);
        let started = Instant::now();
        let log = plane.dir.join(format!("in-cluster-ipam-leading-{n}.log"));
        let process = Process::start("in-cluster-ipam", command, log)?;
        Ok(Peer { process, health, started })
    }

    /// Waits until `/readyz` answers and every controller has started its workers (its `/readyz`
    /// alone answers as soon as the HTTP server listens, before the caches are filled).
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.workers_started() >= CONTROLLERS && http_status(&self.health, "/readyz") == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the in-cluster provider did not become ready; its log ends with:\n{}", self.log_tail(40));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many controllers have logged that their workers started (their caches are synced).
    pub fn workers_started(&self) -> usize {
        std::fs::read_to_string(&self.process.log)
            .map(|log| log.lines().filter(|l| l.contains("Starting workers")).count())
            .unwrap_or(0)
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// SIGKILL, as in a crash.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM (its manager stops the controllers and exits) and wait.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.process.terminate(Duration::from_secs(20))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.tail(lines)
    }
}
