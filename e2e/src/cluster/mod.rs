//! A real cluster on this machine: the control plane of [`crate::plane`] with
//! kube-controller-manager and kube-scheduler beside it, and one node -- kubelet, containerd with
//! runc, the CNI bridge and kube-proxy -- in a network namespace of its own. Pods run for real:
//! images imported into containerd, cgroups enforced, Services routed, garbage collected.
//!
//! One cluster runs on a machine at a time (an exclusive lock); whatever a killed run left
//! behind is removed before a new one starts, and everything is removed when the cluster is
//! dropped, or at the test process's exit for [`Cluster::shared`].

mod cleanup;
pub mod config;
pub mod network;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::certs;
use crate::plane::{ControlPlane, directory_from, repo_root, write_kubeconfig};
use crate::process::{Process, free_port, wait_until};
use config::{Layout, NODE_NAME};
use network::{HOST_ADDRESS, NODE_ADDRESS, SERVICE_CIDR};

/// The node's directory: fixed, so that a run killed before it could clean up is found by
/// the next.
pub const NODE_ROOT: &str = "/var/lib/ferro-ipam-node";

/// The binaries of e2e/tools/node/build.sh.
pub struct NodeTools {
    pub dir: PathBuf,
}

impl NodeTools {
    pub fn locate() -> Result<NodeTools> {
        if let Ok(dir) = std::env::var("FERRO_IPAM_NODE_TOOLS") {
            return Ok(NodeTools { dir: dir.into() });
        }
        Ok(NodeTools { dir: directory_from(&repo_root().join("e2e/tools/node/build.sh"))? })
    }
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }
}

/// The running cluster.
pub struct Cluster {
    pub plane: ControlPlane,
    pub node: NodeTools,
    pub layout: Layout,
    /// kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy.
    daemons: Vec<Process>,
    _lock: File,
}

impl Cluster {
    /// The cluster shared by every test of this process; started on first use, removed at exit.
    pub fn shared() -> &'static Cluster {
        static CLUSTER: OnceLock<Cluster> = OnceLock::new();
        CLUSTER.get_or_init(|| {
            let cluster = Cluster::start().unwrap_or_else(|error| panic!("starting the e2e cluster: {error:#}"));
            extern "C" fn remove_at_exit() {
                cleanup::remove_node(Path::new(NODE_ROOT));
            }
            // SAFETY: registering a plain function; statics are never dropped, so this is
            // what removes the node when the test binary exits (pass or fail).
            unsafe {
                libc::atexit(remove_at_exit);
            }
            cluster
        })
    }

    /// Starts the control plane and the node, and waits until the node is Ready.
    pub fn start() -> Result<Cluster> {
        let started = Instant::now();
        let lock = exclusive_lock()?;
        let node = NodeTools::locate()?;
        let layout = Layout { root: NODE_ROOT.into() };
        cleanup::remove_node(&layout.root);
        std::fs::create_dir_all(&layout.root)?;
        network::create().context("making the node's network namespace")?;

        let plane = ControlPlane::start_on(HOST_ADDRESS, &apiserver_flags(), |c| {
            let path = |p: &Path| p.to_string_lossy().into_owned();
            vec![
                format!("--kubelet-client-certificate={}", path(&c.admin_cert)),
                format!("--kubelet-client-key={}", path(&c.admin_key)),
                format!("--kubelet-certificate-authority={}", path(&c.ca_cert)),
            ]
        })?;
        let mut cluster = Cluster { plane, node, layout, daemons: Vec::new(), _lock: lock };
        cluster.start_controllers()?;
        cluster.start_containerd()?;
        cluster.import_image(&cluster.node.dir.join("images/pause.tar"))?;
        cluster.start_kubelet()?;
        cluster.start_kube_proxy()?;
        cluster.wait_node_ready(Duration::from_secs(120))?;
        eprintln!(
            "e2e cluster ready in {:.1}s: kubectl --kubeconfig {} (node {NODE_NAME} at {NODE_ADDRESS}, logs in {} and {})",
            started.elapsed().as_secs_f64(),
            cluster.plane.kubeconfig.display(),
            cluster.plane.dir.display(),
            cluster.layout.root.display(),
        );
        Ok(cluster)
    }

    fn daemon(&mut self, name: &str, command: Command) -> Result<()> {
        let log = self.plane.dir.join(format!("{name}.log"));
        self.daemons.push(Process::start(name, command, log)?);
        Ok(())
    }

    /// kube-controller-manager (garbage collector, namespace deletion, ReplicaSets, the
    /// ServiceAccounts and the root CA each namespace gets) and kube-scheduler.
    fn start_controllers(&mut self) -> Result<()> {
        let c = &self.plane.credentials;
        let kubeconfig = self.plane.kubeconfig.to_string_lossy().into_owned();
        let mut manager = Command::new(self.node.bin("kube-controller-manager"));
        manager.args([
            format!("--kubeconfig={kubeconfig}"),
            "--leader-elect=false".into(),
            format!("--root-ca-file={}", c.ca_cert.display()),
            format!("--service-account-private-key-file={}", c.service_account_key.display()),
            "--use-service-account-credentials=true".into(),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            // The garbage collector and namespace controller act within a second or two.
            "--concurrent-gc-syncs=5".into(),
        ]);
        self.daemon("kube-controller-manager", manager)?;
        let mut scheduler = Command::new(self.node.bin("kube-scheduler"));
        scheduler.args([
            format!("--kubeconfig={kubeconfig}"),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
        ]);
        self.daemon("kube-scheduler", scheduler)
    }

    fn start_containerd(&mut self) -> Result<()> {
        let config = config::containerd(&self.layout, &self.node.dir)?;
        let mut command = network::in_node(&self.node.bin("containerd"));
        command.arg("--config").arg(&config);
        // containerd finds its shim (containerd-shim-runc-v2) on PATH.
        let path = format!("{}:{}", self.node.dir.join("bin").display(), std::env::var("PATH").unwrap_or_default());
        command.env("PATH", path);
        self.daemon("containerd", command)?;
        let socket = self.layout.containerd_socket();
        if !wait_until(Duration::from_secs(30), || self.ctr(&["version"]).is_ok()) {
            bail!("containerd did not answer on {}:\n{}", socket.display(), self.log_tail("containerd", 30));
        }
        Ok(())
    }

    fn start_kubelet(&mut self) -> Result<()> {
        let dir = self.layout.path("kubelet");
        std::fs::create_dir_all(&dir)?;
        let c = &self.plane.credentials;
        let (cert, key) =
            certs::client_certificate(&dir, &c.ca, &format!("system:node:{NODE_NAME}"), &["system:nodes"], "client")?;
        let kubeconfig = write_kubeconfig(&dir.join("kubeconfig"), &self.plane.server, &c.ca_cert, &cert, &key)?;
        let (serving_cert, serving_key) =
            certs::serving_certificate(&dir, &c.ca, NODE_NAME, &[NODE_ADDRESS.parse()?], "serving")?;
        let config = config::kubelet(&self.layout, &c.ca_cert, (&serving_cert, &serving_key))?;
        for hierarchy in cgroup_hierarchies() {
            std::fs::create_dir_all(hierarchy.join(config::CGROUP_ROOT.trim_start_matches('/')))?;
        }
        let mut command = network::in_node(&self.node.bin("kubelet"));
        command.args([
            format!("--config={}", config.display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--root-dir={}", dir.join("root").display()),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={NODE_ADDRESS}"),
            "--v=2".into(),
        ]);
        self.daemon("kubelet", command)
    }

    fn start_kube_proxy(&mut self) -> Result<()> {
        let dir = self.layout.path("kube-proxy");
        std::fs::create_dir_all(&dir)?;
        let c = &self.plane.credentials;
        // The identity the default ClusterRoleBinding system:node-proxier names.
        let (cert, key) = certs::client_certificate(&dir, &c.ca, "system:kube-proxy", &[], "client")?;
        let kubeconfig = write_kubeconfig(&dir.join("kubeconfig"), &self.plane.server, &c.ca_cert, &cert, &key)?;
        let config = config::kube_proxy(&self.layout, &kubeconfig)?;
        let mut command = network::in_node(&self.node.bin("kube-proxy"));
        command.arg(format!("--config={}", config.display()));
        self.daemon("kube-proxy", command)
    }

    fn wait_node_ready(&self, timeout: Duration) -> Result<()> {
        let ready = wait_until(timeout, || {
            self.plane
                .kubectl(&[
                    "get",
                    "node",
                    NODE_NAME,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
                ])
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout) == "True")
        });
        if !ready {
            bail!("node {NODE_NAME} did not become Ready:\n{}", self.log_tail("kubelet", 40));
        }
        // Pods are admitted once their namespace has its ServiceAccount.
        if !wait_until(timeout, || {
            self.plane.kubectl(&["get", "serviceaccount", "default"]).is_ok_and(|o| o.status.success())
        }) {
            bail!("no default ServiceAccount:\n{}", self.log_tail("kube-controller-manager", 40));
        }
        Ok(())
    }

    /// Runs `ctr` against the node's containerd, in the namespace kubelet's images live in.
    pub fn ctr(&self, args: &[&str]) -> Result<String> {
        let output = Command::new(self.node.bin("ctr"))
            .arg("--address")
            .arg(self.layout.containerd_socket())
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()?;
        if !output.status.success() {
            bail!("ctr {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Imports an image tarball (OCI layout or docker archive) into the node, unpacked for the
    /// snapshotter kubelet's pods use.
    pub fn import_image(&self, tarball: &Path) -> Result<()> {
        let platform = match std::env::consts::ARCH {
            "aarch64" => "linux/arm64",
            _ => "linux/amd64",
        };
        self.ctr(&["images", "import", "--platform", platform, &tarball.to_string_lossy()])
            .with_context(|| format!("importing {} into the node", tarball.display()))?;
        Ok(())
    }

    /// The last lines of a daemon's log (kubelet, containerd, kube-proxy, kube-controller-manager, kube-scheduler).
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        crate::process::tail(&self.plane.dir.join(format!("{name}.log")), lines)
    }

    /// Runs kubectl against the cluster.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        self.plane.kubectl_ok(args)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for daemon in self.daemons.iter_mut().rev() {
            daemon.kill();
        }
        cleanup::remove_node(&self.layout.root);
    }
}

/// kube-apiserver's flags for a cluster: Services in [`SERVICE_CIDR`] with their endpoints
/// kept, ServiceAccount tokens mounted into pods, and kubelets authorised as nodes.
fn apiserver_flags() -> Vec<String> {
    [
        "--endpoint-reconciler-type=lease",
        &format!("--service-cluster-ip-range={SERVICE_CIDR}"),
        "--disable-admission-plugins=",
        "--enable-admission-plugins=NodeRestriction",
        "--authorization-mode=Node,RBAC",
        // kubelet by its address: the node's name resolves nowhere, and no lookup leaves the machine.
        "--kubelet-preferred-address-types=InternalIP",
    ]
    .map(str::to_owned)
    .into()
}

fn cgroup_hierarchies() -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.join("cgroup.procs").exists()).collect())
        .unwrap_or_default()
}

/// One cluster per machine: its network namespace, routes and directory have fixed names.
fn exclusive_lock() -> Result<File> {
    let file = File::create("/run/lock/ferro-ipam-node.lock").context("creating /run/lock/ferro-ipam-node.lock")?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        eprintln!("another e2e cluster runs on this machine; waiting for it to end ...");
        // SAFETY: as above, blocking.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!("locking /run/lock/ferro-ipam-node.lock: {}", std::io::Error::last_os_error());
        }
    }
    Ok(file)
}
