//! ferro-ipam where users run it: a release's image (`make dist`'s) as pods on a real node (kubelet,
//! containerd and runc, the CNI bridge, kube-proxy), beside kube-controller-manager and
//! kube-scheduler, installed, disrupted, garbage-collected and removed the way users do it.
//!
//! The scenarios share one cluster ([`Cluster::shared`]) and one install namespace, so they run
//! one at a time (`--test-threads 1`, as `make test-node` runs them). Each leaves the install
//! as `kubectl apply -k deploy/` makes it, or removes what it installed otherwise. How long each
//! replica took from pod creation to Ready is appended to target/node-report.txt.

mod garbage;
mod install;
mod metrics;
mod migration;
mod paths;
mod release;
mod release_upgrade;
mod rollout_vips;
mod takeover;
mod under_load;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use ferro_ipam_e2e::cluster::Cluster;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::wait_until;
use serde_json::Value;

use crate::release::release;

/// Where `deploy/` installs ferro-ipam.
pub const SYSTEM: &str = "ferro-ipam-system";
/// The Deployment `deploy/` makes.
pub const DEPLOYMENT: &str = "ferro-ipam-controller";
/// The image `deploy/` names; `make image` and `make dist` build it under this name.
pub const IMAGE: &str = concat!("ghcr.io/ferro-ipam/ferro-ipam:v", env!("CARGO_PKG_VERSION"));

/// The shared cluster, with the release's image ([`release`]) imported into its node as
/// docs/install-from-release.md tells users to.
pub fn cluster() -> &'static Cluster {
    static IMPORTED: OnceLock<()> = OnceLock::new();
    let cluster = Cluster::shared();
    IMPORTED.get_or_init(|| release().import_image(cluster));
    cluster
}

/// kubectl against the cluster; panics with its output when it fails.
pub fn kubectl(args: &[&str]) -> String {
    cluster().kubectl_ok(args).unwrap_or_else(|e| panic!("{e:#}"))
}

/// kubectl's JSON output.
pub fn kubectl_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&kubectl(&all)).expect("kubectl prints JSON")
}

/// The install's pods: (name, phase, ready, deleting).
pub fn pods(namespace: &str, selector: &str) -> Vec<Value> {
    kubectl_json(&["get", "pods", "-n", namespace, "-l", selector])["items"].as_array().cloned().unwrap_or_default()
}

pub fn pod_name(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().unwrap_or_default().to_owned()
}

pub fn pod_ready(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_null()
        && pod["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The controller's pods that are Ready and not being deleted.
pub fn ready_controller_pods() -> Vec<Value> {
    pods(SYSTEM, "app.kubernetes.io/component=controller").into_iter().filter(pod_ready).collect()
}

/// Waits until `count` controller pods are Ready (and none other is left), or fails with what
/// the pods and kubelet say.
pub fn wait_ready_pods(count: usize, timeout: Duration) -> Result<Vec<Value>> {
    let done = wait_until(timeout, || {
        let all = pods(SYSTEM, "app.kubernetes.io/component=controller");
        all.len() == count && all.iter().all(pod_ready)
    });
    let all = pods(SYSTEM, "app.kubernetes.io/component=controller");
    if !done {
        let states: Vec<String> = all.iter().map(|p| format!("{}: {}", pod_name(p), p["status"])).collect();
        bail!(
            "{count} Ready controller pods expected within {timeout:?}; found:\n{}\nkubelet:\n{}",
            states.join("\n"),
            cluster().log_tail("kubelet", 20)
        );
    }
    Ok(all)
}

/// The pod named as holder of ferro-ipam's Lease (its identity starts with the pod's name).
pub fn lease_holder() -> Option<String> {
    let leases = kubectl_json(&["get", "leases", "-n", SYSTEM]);
    let holder = leases["items"].as_array()?.iter().find_map(|l| l["spec"]["holderIdentity"].as_str())?.to_owned();
    ready_controller_pods().into_iter().map(|p| pod_name(&p)).find(|name| holder.starts_with(name.as_str()))
}

/// Seconds from a pod's creation to its Ready condition.
pub fn seconds_to_ready(pod: &Value) -> Option<i64> {
    let created = timestamp(pod["metadata"]["creationTimestamp"].as_str()?)?;
    let ready =
        pod["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready" && c["status"] == "True")?;
    Some(timestamp(ready["lastTransitionTime"].as_str()?)? - created)
}

/// An RFC 3339 UTC timestamp as Unix seconds.
fn timestamp(text: &str) -> Option<i64> {
    let output = std::process::Command::new("date").args(["-u", "-d", text, "+%s"]).output().ok()?;
    String::from_utf8_lossy(&output.stdout).trim().parse().ok()
}

/// Appends a line to target/node-report.txt (printed by `make test-node`).
pub fn report(line: &str) {
    eprintln!("node report: {line}");
    let path = repo_root().join("target/node-report.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{line}");
    }
}

/// Reports how long each of these pods took to be Ready.
pub fn report_readiness(scenario: &str, pods: &[Value]) {
    let times: BTreeMap<String, String> =
        pods.iter().map(|p| (pod_name(p), seconds_to_ready(p).map_or("?".to_owned(), |s| format!("{s}s")))).collect();
    let times: Vec<String> = times.into_iter().map(|(pod, t)| format!("{pod} {t}")).collect();
    report(&format!("{scenario}: pod creation to Ready: {}", times.join(", ")));
}

/// `kubectl apply -k deploy/` (server-side), then waits for two Ready pods. Idempotent: the
/// scenarios that need an install call it first.
pub fn install_kustomize() -> Result<Vec<Value>> {
    let deploy = repo_root().join("deploy");
    cluster().kubectl_ok(&["apply", "--server-side", "-k", &deploy.to_string_lossy()])?;
    cluster()
        .kubectl_ok(&["rollout", "status", "-n", SYSTEM, &format!("deployment/{DEPLOYMENT}"), "--timeout=180s"])
        .context("the Deployment did not roll out")?;
    wait_ready_pods(2, Duration::from_secs(120))
}

/// Scales the controller Deployment; at zero, waits until its pods are gone.
pub fn scale_controller(replicas: u32) {
    kubectl(&["scale", "-n", SYSTEM, &format!("deployment/{DEPLOYMENT}"), &format!("--replicas={replicas}")]);
    if replicas == 0 {
        kubectl(&[
            "wait",
            "--for=delete",
            "pod",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/component=controller",
            "--timeout=120s",
        ]);
    }
}

/// Removes the provider's namespace and cluster-wide RBAC, keeping the CRDs and every pool,
/// claim and address, and waits until its pods are gone.
pub fn remove_provider() -> Result<()> {
    cluster().kubectl_ok(&[
        "delete",
        "clusterrolebinding,clusterrole,namespace",
        "-l",
        "app.kubernetes.io/name=ferro-ipam",
        "--ignore-not-found",
        "--timeout=120s",
    ])?;
    Ok(())
}

/// Names of the Lease holder and the stand-by, once both are Ready and one holds the Lease.
pub fn leader_and_standby(timeout: Duration) -> Result<(String, String)> {
    let mut found = None;
    wait_until(timeout, || {
        let Some(leader) = lease_holder() else { return false };
        let standby = ready_controller_pods().into_iter().map(|p| pod_name(&p)).find(|p| *p != leader);
        found = standby.map(|s| (leader, s));
        found.is_some()
    });
    found.context("no Lease holder beside a Ready stand-by")
}
