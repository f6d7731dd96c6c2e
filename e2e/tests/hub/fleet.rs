//! The hub and its two spokes: three control planes on loopback, set up as an operator would
//! (`operator/*.sh`, plain kubectl), and a ferro-ipam on each. Started once, on first use, and
//! shared by every test of the target; the processes end with the test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use ferro_ipam_e2e::{ControlPlane, Provider};

use crate::PROVIDER_READY_WITHIN;

/// The spokes' names: each one's name in the hub's labels and its namespace there.
pub const SPOKES: [&str; 2] = ["spoke-a", "spoke-b"];
/// ferro-ipam's own namespace on every cluster (its leader-election Lease's), which holds a
/// spoke's Secret `hub-kubeconfig`.
pub const PROVIDER_NAMESPACE: &str = "ferro-ipam-system";
/// The pool on the hub, and the spoke pool of each spoke that leases from it.
pub const POOL: &str = "shared";
/// Its kind, on both sides.
pub const POOL_KIND: &str = "GlobalInClusterIPPool";

/// One management cluster.
pub struct Cluster {
    /// `hub`, `spoke-a` or `spoke-b`.
    pub name: &'static str,
    pub plane: &'static ControlPlane,
    pub provider: Provider,
    /// A spoke's namespace in the hub; `None` for the hub.
    pub hub_namespace: Option<&'static str>,
}

pub struct Fleet {
    pub hub: Cluster,
    pub spokes: Vec<Cluster>,
    /// The operator's directory: what the scripts wrote (each spoke's kubeconfig for the hub).
    pub work: PathBuf,
}

/// The fleet of this test process, started on first use. A failed start fails every test that
/// asks, with the same message, without starting again.
pub fn fleet() -> &'static Fleet {
    static FLEET: OnceLock<Result<Fleet, String>> = OnceLock::new();
    match FLEET.get_or_init(|| Fleet::start().map_err(|e| format!("{e:#}"))) {
        Ok(fleet) => fleet,
        Err(error) => panic!("starting the hub and its spokes: {error}"),
    }
}

impl Fleet {
    fn start() -> Result<Fleet> {
        let began = Instant::now();
        let mut planes = std::thread::scope(|scope| {
            let starts: Vec<_> = (0..3).map(|_| scope.spawn(ControlPlane::start)).collect();
            starts.into_iter().map(|s| s.join().expect("a plane's start does not panic")).collect::<Vec<_>>()
        })
        .into_iter()
        .map(|plane| plane.map(ControlPlane::leak))
        .collect::<Result<Vec<&'static ControlPlane>>>()?;
        let hub = planes.remove(0);
        let work = hub.dir.join("operator");
        std::fs::create_dir_all(&work)?;

        // The hub's administrator: the shared pool; per spoke, a namespace, an identity, its Role.
        operator(&work, hub, "hub-pool.sh", None)?;
        for spoke in SPOKES {
            operator(&work, hub, "hub-spoke.sh", Some(spoke))?;
        }
        // Each spoke's administrator: the kubeconfig the hub's gave them, as a Secret.
        for (spoke, plane) in SPOKES.into_iter().zip(&planes) {
            operator(&work, plane, "spoke-secret.sh", Some(spoke))?;
        }
        hub.kubectl_ok(&["create", "namespace", PROVIDER_NAMESPACE])?;

        let args = ["--leader-elect", "--leader-election-namespace", PROVIDER_NAMESPACE];
        let launch = |name: &'static str, plane: &'static ControlPlane, hub_namespace| -> Result<Cluster> {
            let provider = Provider::launch(plane, &plane.kubeconfig, &args)?;
            Ok(Cluster { name, plane, provider, hub_namespace })
        };
        let hub = launch("hub", hub, None)?;
        let spokes = SPOKES
            .into_iter()
            .zip(planes)
            .map(|(spoke, plane)| launch(spoke, plane, Some(spoke)))
            .collect::<Result<Vec<Cluster>>>()?;
        let fleet = Fleet { hub, spokes, work };
        for cluster in fleet.clusters() {
            cluster
                .provider
                .wait_ready(PROVIDER_READY_WITHIN)
                .with_context(|| format!("ferro-ipam on {}", cluster.name))?;
        }
        eprintln!("hub and spokes ready in {:.1} s:", began.elapsed().as_secs_f64());
        for cluster in fleet.clusters() {
            eprintln!(
                "  {:8} {} (plane in {}, ferro-ipam's log {})",
                cluster.name,
                cluster.plane.server,
                cluster.plane.dir.display(),
                cluster.provider.process.log.display()
            );
        }
        Ok(fleet)
    }

    /// The hub, then the spokes.
    pub fn clusters(&self) -> impl Iterator<Item = &Cluster> {
        std::iter::once(&self.hub).chain(&self.spokes)
    }

    /// The spoke named `name`.
    pub fn spoke(&self, name: &str) -> &Cluster {
        self.spokes.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no spoke {name}"))
    }

    /// Runs one of `operator/*.sh` against `cluster` (see [`operator`]).
    pub fn operator(&self, cluster: &Cluster, script: &str, spoke: Option<&str>) -> Result<String> {
        operator(&self.work, cluster.plane, script, spoke)
    }

    /// What each ferro-ipam said: its warnings and errors, then the end of its log.
    pub fn logs(&self, lines: usize) -> String {
        logs(self.clusters(), lines)
    }
}

/// What the ferro-ipam of each of `clusters` said: its warnings and errors, then the end of its log.
pub fn logs<'a>(clusters: impl Iterator<Item = &'a Cluster>, lines: usize) -> String {
    let mut out = String::new();
    for cluster in clusters {
        let log = cluster.provider.log_tail(usize::MAX);
        let notable: Vec<&str> = log
            .lines()
            .filter(|l| {
                let lower = l.to_ascii_lowercase();
                lower.contains("warn") || lower.contains("error") || lower.contains("panic")
            })
            .collect();
        out.push_str(&format!(
            "\n--- ferro-ipam on {} ({}): {} warning or error lines, the last {}:\n",
            cluster.name,
            cluster.provider.process.log.display(),
            notable.len(),
            notable.len().min(lines)
        ));
        for line in &notable[notable.len().saturating_sub(lines)..] {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!("--- the last {lines} lines of it:\n{}", cluster.provider.log_tail(lines)));
    }
    out
}

/// The scripts an operator runs, each one plain kubectl (`e2e/tests/hub/operator/`).
fn script_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hub/operator")
}

/// Runs `script` with `bash -euo pipefail` in `work`, with `KUBECONFIG` for `plane`'s admin,
/// the plane's kubectl first on `PATH` and `SPOKE` set; fails with its output unless it succeeds.
pub fn operator(work: &Path, plane: &ControlPlane, script: &str, spoke: Option<&str>) -> Result<String> {
    let kubectl_dir = plane.tools.bin("kubectl").parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!("{}:{}", kubectl_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail"])
        .arg(script_dir().join(script))
        .current_dir(work)
        .env("KUBECONFIG", &plane.kubeconfig)
        .env("PATH", path);
    if let Some(spoke) = spoke {
        command.env("SPOKE", spoke);
    }
    let output = command.output().with_context(|| format!("running {script}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("{script} (SPOKE={spoke:?}) against {} failed ({}):\n{text}", plane.server, output.status);
    }
    Ok(text)
}
