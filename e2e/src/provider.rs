//! The real `ferro-ipam` binary, run as a process against the e2e control plane.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::plane::{ControlPlane, repo_root};
use crate::process::{Process, free_port, http_get, http_status, wait_until};

/// Where the provider binary is: `$FERRO_IPAM_BIN`, else the workspace's debug build.
pub fn binary() -> PathBuf {
    std::env::var_os("FERRO_IPAM_BIN").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target/debug/ferro-ipam"))
}

/// A running provider.
pub struct Provider {
    pub process: Process,
    pub metrics: String,
    pub health: String,
}

impl Provider {
    /// Starts the provider with `args` besides kubeconfig and listen addresses, and waits until it
    /// is ready (its index is complete, or it stands by for the lease). Its metrics are plain
    /// HTTP (`--insecure-diagnostics`), for [`Provider::metrics_text`].
    pub fn start(plane: &ControlPlane, args: &[&str]) -> Result<Provider> {
        let provider = Provider::launch(plane, &plane.kubeconfig, args)?;
        provider.wait_ready(Duration::from_secs(60))?;
        Ok(provider)
    }

    /// Like [`Provider::start`], with metrics over HTTPS for authorised scrapers, as deployed
    /// ([`Provider::scrape`]).
    pub fn start_secure(plane: &ControlPlane, args: &[&str]) -> Result<Provider> {
        let provider = Provider::launch_secure(plane, &plane.kubeconfig, args)?;
        provider.wait_ready(Duration::from_secs(60))?;
        Ok(provider)
    }

    /// Starts the provider with another kubeconfig (another identity), without waiting.
    pub fn launch(plane: &ControlPlane, kubeconfig: &std::path::Path, args: &[&str]) -> Result<Provider> {
        Provider::launch_with_env(plane, kubeconfig, args, &[])
    }

    /// Like [`Provider::launch`], with more environment variables (e.g. [`crate::clock::ahead`]).
    pub fn launch_with_env(
        plane: &ControlPlane,
        kubeconfig: &std::path::Path,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Provider> {
        let mut all = vec!["--insecure-diagnostics"];
        all.extend(args);
        Provider::launch_secure_with_env(plane, kubeconfig, &all, env)
    }

    /// Like [`Provider::launch`], with metrics over HTTPS for authorised scrapers.
    pub fn launch_secure(plane: &ControlPlane, kubeconfig: &std::path::Path, args: &[&str]) -> Result<Provider> {
        Provider::launch_secure_with_env(plane, kubeconfig, args, &[])
    }

    fn launch_secure_with_env(
        plane: &ControlPlane,
        kubeconfig: &std::path::Path,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Provider> {
        let metrics = format!("127.0.0.1:{}", free_port());
        let health = format!("127.0.0.1:{}", free_port());
        let mut all: Vec<String> = vec!["--kubeconfig".into(), kubeconfig.to_string_lossy().into_owned()];
        all.extend(
            [
                "--diagnostics-address",
                &metrics,
                "--health-probe-bind-address",
                &health,
                "--log-level",
                "info,ferro_ipam=debug",
            ]
            .map(str::to_owned),
        );
        all.extend(args.iter().map(|a| a.to_string()));
        Provider::spawn(plane, &binary(), &all, health, metrics, env)
    }

    /// Starts the provider with exactly `args`, the API server's kubeconfig in `$KUBECONFIG`, its
    /// probes expected on `health` and its metrics on `metrics`; without waiting.
    pub fn launch_exactly(plane: &ControlPlane, args: &[String], health: String, metrics: String) -> Result<Provider> {
        Provider::launch_program(plane, &binary(), args, health, metrics)
    }

    /// Like [`Provider::launch_exactly`], running `program` (a binary of ferro-ipam, or a loader
    /// that `args` tell which binary to run).
    pub fn launch_program(
        plane: &ControlPlane,
        program: &std::path::Path,
        args: &[String],
        health: String,
        metrics: String,
    ) -> Result<Provider> {
        Provider::spawn(plane, program, args, health, metrics, &[])
    }

    fn spawn(
        plane: &ControlPlane,
        program: &std::path::Path,
        args: &[String],
        health: String,
        metrics: String,
        env: &[(String, String)],
    ) -> Result<Provider> {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let mut command = Command::new(program);
        command
            .args(args)
            .env("KUBECONFIG", &plane.kubeconfig)
            .env("HOSTNAME", format!("e2e-provider-{n}"))
            .envs(env.iter().map(|(k, v)| (k, v)));
        let process = Process::start("ferro-ipam", command, plane.dir.join(format!("ferro-ipam-{n}.log")))?;
        Ok(Provider { process, metrics, health })
    }

    /// Waits until `/readyz` answers 200.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        if !wait_until(timeout, || http_status(&self.health, "/readyz") == Some(200)) {
            bail!("ferro-ipam did not become ready; its log ends with:\n{}", self.process.tail(40));
        }
        Ok(())
    }

    /// The Prometheus text of `/metrics`, if it answers.
    pub fn metrics_text(&self) -> Option<String> {
        http_get(&self.metrics, "/metrics")
    }

    /// GET `/metrics` over HTTPS (any certificate accepted) with `token`: status and body.
    pub fn scrape(&self, token: Option<&str>) -> Result<(u16, String)> {
        crate::https::get(&self.metrics, "/metrics", token, &crate::https::Trust::Anything, false)
    }

    /// SIGKILL: no chance to clean up, as in a crash.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM and wait for a graceful exit.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.process.terminate(Duration::from_secs(20))
    }

    pub fn log_tail(&self, lines: usize) -> String {
        self.process.tail(lines)
    }

    /// Whether one line of its log contains every one of `parts`: what the provider says it
    /// decided, for a scenario that must know it has seen something before going on.
    pub fn logged(&self, parts: &[&str]) -> bool {
        self.process.logged(parts)
    }
}
