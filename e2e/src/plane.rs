//! A real control plane on loopback: etcd and kube-apiserver with fresh credentials, the CRDs
//! of ferro-ipam and of Cluster API installed, and a kubeconfig to reach it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

mod faults;

use crate::certs::{self, Credentials};
use crate::process::{Process, free_port, http_status, wait_until};

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("e2e/ lives in the repository").to_path_buf()
}

/// The built control-plane binaries and CAPI CRDs (see `e2e/tools/build.sh`).
#[derive(Clone, Debug)]
pub struct Tools {
    pub dir: PathBuf,
}

impl Tools {
    /// `$FERRO_IPAM_TOOLS`, else whatever `e2e/tools/build.sh` builds or finds in its cache.
    pub fn locate() -> Result<Tools> {
        if let Ok(dir) = std::env::var("FERRO_IPAM_TOOLS") {
            return Ok(Tools { dir: dir.into() });
        }
        let dir = directory_from(&repo_root().join("e2e/tools/build.sh"))?;
        Ok(Tools { dir })
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// Cluster API's CRDs for the contract under test (see [`crate::contract::capi`]): the
    /// current release's, built with the tools, or v1beta1's, fetched once into the cache.
    pub fn capi_crds(&self) -> Result<PathBuf> {
        match crate::contract::capi() {
            ferro_ipam::api::CapiVersion::V1Beta2 => Ok(self.dir.join("crds")),
            ferro_ipam::api::CapiVersion::V1Beta1 => {
                directory_from(&repo_root().join("e2e/tools/capi-crds-v1beta1/fetch.sh"))
            }
        }
    }
}

/// Runs a script that prepares a directory (progress on stderr) and prints it as its last line.
pub(crate) fn directory_from(script: &Path) -> Result<PathBuf> {
    let output = Command::new("bash")
        .arg(script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed", script.display());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().with_context(|| format!("{} printed no directory", script.display()))?;
    Ok(last.trim().into())
}

/// A process of the control plane, and how to start it again with the same flags (the same
/// port, the same data directory), as after a crash or an upgrade. Its log keeps every run.
struct Daemon {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    process: Option<Process>,
}

impl Daemon {
    fn start(name: &'static str, program: PathBuf, args: Vec<String>, log: PathBuf) -> Result<Daemon> {
        let mut daemon = Daemon { name, program, args, log, process: None };
        daemon.restart()?;
        Ok(daemon)
    }

    fn restart(&mut self) -> Result<()> {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        self.process = Some(Process::start(self.name, command, self.log.clone())?);
        Ok(())
    }

    fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(Process::is_running)
    }

    fn tail(&self, lines: usize) -> String {
        crate::process::tail(&self.log, lines)
    }
}

/// The prefix of a control plane's directory under the system's temporary directory.
const DIR_PREFIX: &str = "ferro-ipam-e2e-";
/// The file in that directory that names the test process owning it.
const OWNER_FILE: &str = "owner.pid";

/// Removes the directories of control planes whose test process has exited. The plane a test
/// binary shares lives in a `static`, which is never dropped, and a run that is killed drops
/// nothing: without this, every run leaves its etcd data behind (about 150 MB each).
fn sweep_orphaned_dirs(temp: &Path) {
    let Ok(entries) = std::fs::read_dir(temp) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).ok().and_then(|pid| pid.trim().parse::<u32>().ok());
        let orphaned = match owner {
            Some(pid) => !Path::new(&format!("/proc/{pid}")).exists(),
            // Directories from before the owner file: old enough that no run still uses them.
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > Duration::from_secs(24 * 3600))),
        };
        if orphaned {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A running etcd + kube-apiserver.
pub struct ControlPlane {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub tools: Tools,
    pub credentials: Credentials,
    _temp: tempfile::TempDir,
    /// etcd's client address (`127.0.0.1:port`).
    etcd_address: String,
    etcd: Mutex<Daemon>,
    apiserver: Mutex<Daemon>,
}

fn locked(daemon: &Mutex<Daemon>) -> std::sync::MutexGuard<'_, Daemon> {
    daemon.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ControlPlane {
    /// The control plane shared by every test of this process; started on first use.
    pub fn shared() -> &'static ControlPlane {
        static PLANE: OnceLock<ControlPlane> = OnceLock::new();
        PLANE.get_or_init(|| match ControlPlane::start() {
            Ok(plane) => plane,
            Err(error) => panic!("starting the e2e control plane: {error:#}"),
        })
    }

    /// Starts etcd and kube-apiserver, and installs the CRDs.
    pub fn start() -> Result<ControlPlane> {
        ControlPlane::start_with(&[])
    }

    /// Like [`ControlPlane::start`], with more kube-apiserver flags (admission plugins, audit log).
    pub fn start_with(apiserver_args: &[String]) -> Result<ControlPlane> {
        ControlPlane::start_on("127.0.0.1", apiserver_args, |_| Vec::new())
    }

    /// Like [`ControlPlane::start_with`], kube-apiserver listening on `address` instead of
    /// loopback: the e2e cluster's node reaches it from a network namespace of its own (see
    /// [`crate::cluster`]). A flag in `apiserver_args` replaces the default of its name, and
    /// `credential_args` adds flags that name the fresh credentials' files.
    pub fn start_on(
        address: &str,
        apiserver_args: &[String],
        credential_args: impl FnOnce(&Credentials) -> Vec<String>,
    ) -> Result<ControlPlane> {
        let started = Instant::now();
        let tools = Tools::locate()?;
        sweep_orphaned_dirs(&std::env::temp_dir());
        let temp = tempfile::Builder::new().prefix(DIR_PREFIX).tempdir()?;
        let dir = temp.path().to_path_buf();
        std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string())?;
        let credentials = certs::generate(&dir, &[address.parse()?])?;

        let etcd_port = free_port();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_args = [
            "--data-dir",
            &dir.join("etcd").to_string_lossy(),
            "--listen-client-urls",
            &etcd_url,
            "--advertise-client-urls",
            &etcd_url,
            "--listen-peer-urls",
            "http://127.0.0.1:0",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=8589934592",
        ]
        .map(str::to_owned);
        let mut etcd = Daemon::start("etcd", tools.bin("etcd"), etcd_args.into(), dir.join("etcd.log"))?;
        let etcd_address = format!("127.0.0.1:{etcd_port}");
        wait_healthy(&mut etcd, &etcd_address)?;

        let api_port = free_port();
        let server = format!("https://{address}:{api_port}");
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        let mut apiserver_flags = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={address}"),
            // 1.37 refuses a loopback advertise address unless the endpoint reconciler is off.
            format!("--advertise-address={address}"),
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", path(&credentials.serving_cert)),
            format!("--tls-private-key-file={}", path(&credentials.serving_key)),
            format!("--client-ca-file={}", path(&credentials.ca_cert)),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", path(&credentials.service_account_pub)),
            format!("--service-account-signing-key-file={}", path(&credentials.service_account_key)),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--allow-privileged=true".to_owned(),
            format!("--cert-dir={}", dir.join("apiserver-certs").to_string_lossy()),
            "--max-requests-inflight=2000".to_owned(),
            "--max-mutating-requests-inflight=1000".to_owned(),
        ];
        // A flag given replaces the default of the same name (list flags would append).
        let name = |flag: &String| flag.split('=').next().unwrap_or_default().to_owned();
        let given: Vec<String> = apiserver_args.iter().map(name).collect();
        apiserver_flags.retain(|flag| !given.contains(&name(flag)));
        apiserver_flags.extend_from_slice(apiserver_args);
        apiserver_flags.extend(credential_args(&credentials));
        let apiserver = Daemon::start(
            "kube-apiserver",
            tools.bin("kube-apiserver"),
            apiserver_flags,
            dir.join("kube-apiserver.log"),
        )?;

        let kubeconfig = admin_kubeconfig(&dir.join("kubeconfig"), &server, &credentials)?;
        let plane = ControlPlane {
            dir,
            kubeconfig,
            server,
            tools,
            credentials,
            _temp: temp,
            etcd_address,
            etcd: Mutex::new(etcd),
            apiserver: Mutex::new(apiserver),
        };
        plane.wait_apiserver_ready(Duration::from_secs(90))?;
        plane.install_crds()?;
        eprintln!(
            "e2e control plane ready at {} in {:.1}s (logs in {})",
            plane.server,
            started.elapsed().as_secs_f64(),
            plane.dir.display()
        );
        Ok(plane)
    }

    fn install_crds(&self) -> Result<()> {
        let ours = repo_root().join("crds");
        let capi = self.tools.capi_crds()?;
        for dir in [&ours, &capi] {
            self.kubectl_ok(&["apply", "--server-side", "-f", &dir.to_string_lossy()])?;
        }
        self.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"])?;
        // The contract under test is the newest the claims are served at: ferro-ipam's discovery
        // picks that one, so a plane serving anything newer would test the wrong contract.
        let served = self.kubectl_ok(&[
            "get",
            "crd",
            "ipaddressclaims.ipam.cluster.x-k8s.io",
            "-o",
            "jsonpath={.spec.versions[?(@.served==true)].name}",
        ])?;
        let served: Vec<String> = served.split_whitespace().map(str::to_owned).collect();
        let contract = crate::contract::capi();
        if ferro_ipam::api::CapiVersion::choose(&served) != Some(contract) {
            bail!("the control plane serves IPAddressClaim at {served:?}, not at {} as its newest", contract.as_str());
        }
        Ok(())
    }

    /// Runs kubectl against this control plane.
    pub fn kubectl(&self, args: &[&str]) -> Result<Output> {
        Ok(Command::new(self.tools.bin("kubectl")).arg("--kubeconfig").arg(&self.kubeconfig).args(args).output()?)
    }

    /// Runs kubectl and fails with its output unless it succeeds.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let output = self.kubectl(args)?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// A client with admin rights. Create one per test: a client belongs to the runtime it was made in.
    pub async fn client(&self) -> Client {
        Client::try_from(self.config().await).expect("a client")
    }

    /// A client that answers a 429, 503 or 504 as the API server sent it. kube's clients retry
    /// those by default, for minutes when the answer says `Retry-After`: an eviction that a
    /// PodDisruptionBudget refuses would come back only when the retries ran out.
    pub async fn client_without_retries(&self) -> Client {
        let mut config = self.config().await;
        config.default_retry = false;
        Client::try_from(config).expect("a client")
    }

    async fn config(&self) -> Config {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).expect("the kubeconfig parses");
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("the kubeconfig is usable")
    }

    /// The API server's log so far (for failure messages).
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        locked(&self.apiserver).tail(lines)
    }

    /// etcd's log so far.
    pub fn etcd_log_tail(&self, lines: usize) -> String {
        locked(&self.etcd).tail(lines)
    }

    /// Waits until kube-apiserver answers `/readyz` with 200.
    pub fn wait_apiserver_ready(&self, timeout: Duration) -> Result<()> {
        let ready = wait_until(timeout, || {
            self.kubectl(&["get", "--raw", "/readyz"]).map(|o| o.status.success()).unwrap_or(false)
        });
        let mut apiserver = locked(&self.apiserver);
        if !ready || !apiserver.is_running() {
            bail!("kube-apiserver did not become ready:\n{}", apiserver.tail(30));
        }
        Ok(())
    }
}

/// Waits until etcd answers `/health` with 200.
fn wait_healthy(etcd: &mut Daemon, address: &str) -> Result<()> {
    if !wait_until(Duration::from_secs(30), || http_status(address, "/health") == Some(200)) {
        bail!("etcd did not become healthy:\n{}", etcd.tail(20));
    }
    if !etcd.is_running() {
        bail!("etcd exited:\n{}", etcd.tail(20));
    }
    Ok(())
}

/// Writes a kubeconfig for `server` with the admin's client certificate.
fn admin_kubeconfig(file: &Path, server: &str, credentials: &Credentials) -> Result<PathBuf> {
    write_kubeconfig(file, server, &credentials.ca_cert, &credentials.admin_cert, &credentials.admin_key)
}

/// Writes a kubeconfig for `server`, trusting `ca`, with a client certificate and key.
pub fn write_kubeconfig(file: &Path, server: &str, ca: &Path, cert: &Path, key: &Path) -> Result<PathBuf> {
    std::fs::write(
        file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {}\n\
             users:\n- name: user\n  user:\n    client-certificate: {}\n    client-key: {}\n\
             contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: user\ncurrent-context: e2e\n",
            ca.display(),
            cert.display(),
            key.display()
        ),
    )?;
    Ok(file.to_path_buf())
}
