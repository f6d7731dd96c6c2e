//! Faults of the control plane itself, for the fault-injection suite: kube-apiserver and etcd
//! killed and started again on the same port (and etcd on the same data directory), the API
//! server frozen, etcd compacted, etcd backed up and restored, and kubeconfigs that reach the
//! API server another way (through a [`Proxy`](crate::proxy::Proxy)).
//!
//! These change the plane under every test that uses it: use them on a plane of its own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{ControlPlane, admin_kubeconfig, locked, wait_healthy, write_kubeconfig};
use crate::process::http_post_json;

/// etcd's JSON gateway answers int64 fields as strings.
fn int64(value: &Value) -> Option<i64> {
    value.as_str().and_then(|s| s.parse().ok()).or_else(|| value.as_i64())
}

impl ControlPlane {
    /// Leaks the plane, for a [`Scope`](crate::objects::Scope), which needs it for the whole
    /// test. Call [`ControlPlane::halt`] when the test ends.
    pub fn leak(self) -> &'static ControlPlane {
        Box::leak(Box::new(self))
    }

    /// Kills etcd and kube-apiserver (the plane can no longer be used).
    pub fn halt(&self) {
        for daemon in [&self.apiserver, &self.etcd] {
            if let Some(mut process) = locked(daemon).process.take() {
                process.kill();
            }
        }
    }

    /// Where kube-apiserver listens (`127.0.0.1:port`).
    pub fn api_address(&self) -> SocketAddr {
        let authority = self.server.trim_start_matches("https://");
        authority.parse().expect("the API server listens on an IP address and port")
    }

    /// SIGKILL to kube-apiserver, as a crash or a lost node would end it.
    pub fn kill_apiserver(&self) {
        if let Some(mut process) = locked(&self.apiserver).process.take() {
            process.kill();
        }
    }

    /// Starts kube-apiserver again, on the same port with the same flags, and waits until it
    /// is ready.
    pub fn restart_apiserver(&self) -> Result<()> {
        locked(&self.apiserver).restart()?;
        self.wait_apiserver_ready(Duration::from_secs(90))
    }

    /// Sends `signal` to kube-apiserver (SIGSTOP freezes it: connections stay open, nothing
    /// answers; SIGCONT thaws it).
    pub fn signal_apiserver(&self, signal: i32) {
        if let Some(process) = locked(&self.apiserver).process.as_ref() {
            process.signal(signal);
        }
    }

    /// SIGKILL to etcd. kube-apiserver keeps running and answers with errors.
    pub fn kill_etcd(&self) {
        if let Some(mut process) = locked(&self.etcd).process.take() {
            process.kill();
        }
    }

    /// Starts etcd again on the same port and data directory, and waits until it is healthy
    /// and the API server is ready again.
    pub fn restart_etcd(&self) -> Result<()> {
        {
            let mut etcd = locked(&self.etcd);
            etcd.restart()?;
            wait_healthy(&mut etcd, &self.etcd_address)?;
        }
        self.wait_apiserver_ready(Duration::from_secs(90))
    }

    /// etcd's data directory.
    fn etcd_data_dir(&self) -> PathBuf {
        self.dir.join("etcd")
    }

    /// A cold backup of etcd: etcd stopped (SIGTERM), its data directory copied to `to`, etcd
    /// started again on the same port and directory; kube-apiserver, left running, answers
    /// errors meanwhile and is ready again when this returns. (The tool cache builds no
    /// etcdctl, and `etcdutl snapshot restore` would be needed to use its snapshot.)
    pub fn snapshot_etcd(&self, to: &Path) -> Result<()> {
        {
            let mut etcd = locked(&self.etcd);
            if let Some(mut process) = etcd.process.take() {
                process.terminate(Duration::from_secs(10));
            }
            let copied = copy_dir(&self.etcd_data_dir(), to);
            etcd.restart()?;
            wait_healthy(&mut etcd, &self.etcd_address)?;
            copied?;
        }
        self.wait_apiserver_ready(Duration::from_secs(90))
    }

    /// Restores a backup made by [`ControlPlane::snapshot_etcd`], as an operator restores a
    /// control plane: kube-apiserver and etcd stopped, etcd's data directory replaced by the
    /// backup, etcd then kube-apiserver started again (same ports and flags). Everything written
    /// since the backup is gone, and the API server's revisions go back to the backup's.
    pub fn restore_etcd(&self, from: &Path) -> Result<()> {
        let mut apiserver = locked(&self.apiserver);
        if let Some(mut process) = apiserver.process.take() {
            process.terminate(Duration::from_secs(20));
        }
        {
            let mut etcd = locked(&self.etcd);
            if let Some(mut process) = etcd.process.take() {
                process.terminate(Duration::from_secs(10));
            }
            let data = self.etcd_data_dir();
            std::fs::remove_dir_all(&data).with_context(|| format!("removing {}", data.display()))?;
            copy_dir(from, &data)?;
            etcd.restart()?;
            wait_healthy(&mut etcd, &self.etcd_address)?;
        }
        apiserver.restart()?;
        drop(apiserver);
        self.wait_apiserver_ready(Duration::from_secs(90))
    }

    fn etcd_call(&self, path: &str, body: Value) -> Result<Value> {
        let (status, text) = http_post_json(&self.etcd_address, path, &body.to_string())
            .with_context(|| format!("etcd did not answer POST {path}"))?;
        if status != 200 {
            bail!("etcd answered POST {path} with {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("etcd's answer to POST {path}: {text}"))
    }

    /// etcd's current revision: every resourceVersion the API server has handed out is at
    /// most this.
    pub fn etcd_revision(&self) -> Result<i64> {
        // A range over the empty key: no data, only the header with the revision.
        let answer = self.etcd_call("/v3/kv/range", json!({"key": "AA=="}))?;
        int64(&answer["header"]["revision"]).with_context(|| format!("no revision in {answer}"))
    }

    /// Compacts etcd at `revision`: a watch from an older resourceVersion is refused with
    /// 410 Gone (when the API server serves it from etcd, i.e. runs with `--watch-cache=false`).
    pub fn compact_etcd(&self, revision: i64) -> Result<()> {
        self.etcd_call("/v3/kv/compaction", json!({"revision": revision.to_string(), "physical": true}))?;
        Ok(())
    }

    /// A kubeconfig with the admin's credentials for another server URL, e.g. a proxy's
    /// `https://127.0.0.1:port` (the serving certificate covers 127.0.0.1, so TLS still verifies).
    pub fn kubeconfig_for(&self, name: &str, server: &str) -> Result<PathBuf> {
        admin_kubeconfig(&self.dir.join(format!("{name}.kubeconfig")), server, &self.credentials)
    }

    /// A kubeconfig for this plane's API server as `user` (in `groups`), with a client
    /// certificate of its own: what that user may do is what RBAC grants it.
    pub fn kubeconfig_as(&self, user: &str, groups: &[&str]) -> Result<PathBuf> {
        let (cert, key) = crate::certs::client_certificate(&self.dir, &self.credentials.ca, user, groups, user)?;
        let file = self.dir.join(format!("{user}.kubeconfig"));
        write_kubeconfig(&file, &self.server, &self.credentials.ca_cert, &cert, &key)
    }
}

/// Copies a directory with everything in it (`cp -a`); `to` must not exist.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let output = std::process::Command::new("cp").arg("-a").arg(from).arg(to).output()?;
    if !output.status.success() {
        bail!("cp -a {} {}: {}", from.display(), to.display(), String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}
