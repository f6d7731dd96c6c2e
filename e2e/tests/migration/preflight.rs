//! `ferro-ipam preflight`, step 1 of the runbook in either direction, run as a user runs it:
//! the real binary, the plane's kubeconfig, `-o json`.

use std::process::Command;

use anyhow::{Context as _, Result, ensure};
use ferro_ipam_e2e::ControlPlane;
use ferro_ipam_e2e::provider::binary;
use kube::api::DeleteParams;
use serde_json::Value;

use crate::fleet::Fleet;

/// What one run said: its exit status and its JSON.
pub struct Verdict {
    pub status: i32,
    pub findings: Value,
}

impl Verdict {
    /// `summary.<key>` as a number.
    pub fn count(&self, key: &str) -> u64 {
        self.findings["summary"][key].as_u64().unwrap_or(u64::MAX)
    }

    /// How many addresses preflight would adopt in the pool of `kind` named `name`.
    pub fn adopted_in(&self, kind: &str, namespace: Option<&str>, name: &str) -> usize {
        let pools = self.findings["pools"].as_array().map(Vec::as_slice).unwrap_or_default();
        pools
            .iter()
            .find(|p| p["kind"] == kind && p["name"] == name && p["namespace"].as_str() == namespace)
            .and_then(|p| p["adopted"].as_array())
            .map_or(usize::MAX, Vec::len)
    }
}

/// Runs `ferro-ipam preflight` against the plane with `--output format`: exit status and stdout.
fn run_as(plane: &ControlPlane, format: &str) -> Result<(i32, String)> {
    let output = Command::new(binary())
        .args(["preflight", "--kubeconfig"])
        .arg(&plane.kubeconfig)
        .args(["-o", format])
        .output()
        .with_context(|| format!("running {}", binary().display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let status = output.status.code().context("preflight was killed by a signal")?;
    ensure!(status != 2, "preflight could not look at the cluster: {stderr}");
    Ok((status, String::from_utf8(output.stdout)?))
}

/// Runs preflight, printing its report to the test's log, and returns its JSON verdict.
pub fn run(plane: &ControlPlane, when: &str) -> Result<Verdict> {
    let (text_status, report) = run_as(plane, "text")?;
    eprintln!("migration: preflight {when} (exit {text_status}):\n{report}");
    let (status, json) = run_as(plane, "json")?;
    ensure!(status == text_status, "the text report exits {text_status}, the JSON one {status}");
    let findings: Value = serde_json::from_str(&json).with_context(|| format!("preflight's JSON: {json}"))?;
    ensure!(findings["clean"] == (status == 0), "clean is {} but the exit status {status}", findings["clean"]);
    Ok(Verdict { status, findings })
}

/// A second `IPAddress` holding the address of `a/net-0` in the same pool: preflight reports it
/// as a duplicate naming both objects, and exits 1. The copy is deleted again.
pub async fn reports_an_injected_duplicate(plane: &ControlPlane, fleet: &Fleet) -> Result<()> {
    let a = fleet.a();
    let taken = a.addresses().get("net-0").await?.spec.address;
    a.hand_made_address("net-0-copy", "net", &taken, 24).await?;
    let verdict = run(plane, "with a duplicate injected")?;
    a.addresses().delete("net-0-copy", &DeleteParams::default()).await?;
    ensure!(verdict.status == 1, "preflight exited {} with a duplicate address", verdict.status);
    let conflicts = verdict.findings["conflicts"].as_array().cloned().unwrap_or_default();
    let objects = [Value::from(format!("{}/net-0", a.ns)), Value::from(format!("{}/net-0-copy", a.ns))];
    ensure!(
        conflicts.iter().any(|c| c["kind"] == "duplicate"
            && c["address"] == taken.as_str()
            && c["objects"].as_array().is_some_and(|o| objects.iter().all(|x| o.contains(x)))),
        "no duplicate of {taken} naming both IPAddresses among {conflicts:?}"
    );
    ensure!(verdict.count("conflicts") == 1, "one conflict, not {}", verdict.count("conflicts"));
    Ok(())
}
