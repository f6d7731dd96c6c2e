//! Migration as docs/migration.md tells it, with both providers as pods: the in-cluster provider
//! v1.1.0 as its own Deployment (its binary packed into an image by deploy/image/pack.sh, as
//! ferro-ipam's is), preflight as a Job from ferro-ipam's image (docs/examples/preflight-job.yaml),
//! the switch to ferro-ipam and the switch back. Every `IPAddress` keeps its UID and address
//! both ways, and each provider serves new claims with addresses nobody holds.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::wait_until;
use kube::api::ListParams;
use serde_json::{Value, json};

use super::{SYSTEM, cluster, install_kustomize, kubectl, pods, remove_provider, report};

const IN_CLUSTER_NS: &str = "capi-ipam-in-cluster-system";
const IN_CLUSTER_IMAGE: &str = "ferro-ipam.local/in-cluster-ipam:v1.1.0";

/// Packs the in-cluster provider's binary (from the tools cache) into an image and imports it.
fn import_in_cluster_image() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    std::fs::copy(ferro_ipam_e2e::peer::binary(&cluster().plane.tools), rootfs.join("manager")).unwrap();
    let tarball = dir.path().join("in-cluster.tar");
    let packed = std::process::Command::new("bash")
        .arg(repo_root().join("deploy/image/pack.sh"))
        .arg(&tarball)
        .arg(IN_CLUSTER_IMAGE)
        .arg(&rootfs)
        .args(["--entrypoint", "/manager", "--user", "65532:65532"])
        .output()
        .unwrap();
    assert!(packed.status.success(), "packing the in-cluster image: {}", String::from_utf8_lossy(&packed.stderr));
    cluster().import_image(&tarball).unwrap_or_else(|e| panic!("{e:#}"));
}

/// Applies JSON objects.
fn apply(name: &str, objects: &[Value]) {
    let file = cluster().plane.dir.join(format!("{name}.json"));
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string()).unwrap();
    kubectl(&["apply", "--server-side", "-f", &file.to_string_lossy()]);
}

/// The in-cluster provider's Deployment as its release runs it: leader election on, in a
/// namespace of its own, minus its webhooks (they need cert-manager's certificates; the runbook
/// removes them before the switch anyway).
fn start_in_cluster() {
    let rules = json!([
        {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["*"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]);
    let labels = json!({"control-plane": "controller-manager", "cluster.x-k8s.io/provider": "ipam-in-cluster"});
    apply(
        "in-cluster",
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": IN_CLUSTER_NS}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "capi-ipam-in-cluster-manager", "namespace": IN_CLUSTER_NS}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "capi-ipam-in-cluster-manager"}, "rules": rules}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "capi-ipam-in-cluster-manager"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "capi-ipam-in-cluster-manager"},
                "subjects": [{"kind": "ServiceAccount", "name": "capi-ipam-in-cluster-manager", "namespace": IN_CLUSTER_NS}]}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "capi-ipam-in-cluster-controller-manager", "namespace": IN_CLUSTER_NS, "labels": labels},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                    "metadata": {"labels": labels},
                    "spec": {"serviceAccountName": "capi-ipam-in-cluster-manager", "terminationGracePeriodSeconds": 10,
                        "containers": [{"name": "manager", "image": IN_CLUSTER_IMAGE, "imagePullPolicy": "IfNotPresent",
                            "args": ["--leader-elect", "--webhook-port=0", "--diagnostics-address=0", "--health-probe-bind-address=:8081"],
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}, "periodSeconds": 2}}]}}}}),
        ],
    );
    assert!(
        wait_until(Duration::from_secs(120), || {
            let all = pods(IN_CLUSTER_NS, "control-plane=controller-manager");
            all.len() == 1 && all.iter().all(super::pod_ready)
        }),
        "the in-cluster provider's pod is not Ready: {:?}\n{}",
        pods(IN_CLUSTER_NS, "control-plane=controller-manager").iter().map(|p| p["status"].clone()).collect::<Vec<_>>(),
        cluster().log_tail("kubelet", 20)
    );
    report_pods("in-cluster provider Deployment", IN_CLUSTER_NS, "control-plane=controller-manager");
}

fn report_pods(step: &str, namespace: &str, selector: &str) {
    super::report_readiness(step, &pods(namespace, selector));
}

/// Deletes the in-cluster Deployment and waits until its pod is gone (runbook step 2).
fn stop_in_cluster() {
    kubectl(&["delete", "deployment", "-n", IN_CLUSTER_NS, "capi-ipam-in-cluster-controller-manager", "--wait"]);
    kubectl(&[
        "wait",
        "--for=delete",
        "pod",
        "-n",
        IN_CLUSTER_NS,
        "-l",
        "control-plane=controller-manager",
        "--timeout=120s",
    ]);
}

/// `kubectl replace -f DIR` then waits for the pool CRDs (runbook step 3, both ways).
fn replace_crds(dir: &Path) {
    kubectl(&["replace", "-f", &dir.to_string_lossy()]);
    kubectl(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
}

/// Leaves the cluster as `kubectl apply -k deploy/` makes it, whether the scenario passed or
/// not: no in-cluster provider, ferro-ipam's CRDs, two replicas.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let c = cluster();
        let _ = c.kubectl_ok(&["delete", "namespace", IN_CLUSTER_NS, "--ignore-not-found", "--timeout=120s"]);
        let _ = c.kubectl_ok(&[
            "delete",
            "clusterrole,clusterrolebinding",
            "capi-ipam-in-cluster-manager",
            "--ignore-not-found",
        ]);
        let _ = c.kubectl_ok(&["replace", "-f", &repo_root().join("crds").to_string_lossy()]);
        let _ = c.kubectl_ok(&["scale", "-n", SYSTEM, "deployment/ferro-ipam-controller", "--replicas=2"]);
    }
}

/// Every `IPAddress` of the namespace: name -> (uid, address).
async fn snapshot(scope: &Scope) -> BTreeMap<String, (String, String)> {
    let listed = scope.addresses().list(&ListParams::default()).await.unwrap();
    listed
        .items
        .into_iter()
        .map(|a| {
            (a.metadata.name.clone().unwrap_or_default(), (a.metadata.uid.clone().unwrap_or_default(), a.spec.address))
        })
        .collect()
}

/// Waits until the claim names its `IPAddress` (the in-cluster provider writes no condition).
async fn wait_address_ref(scope: &Scope, name: &str) {
    scope
        .eventually(&format!("claim {name} has its addressRef"), Duration::from_secs(90), || async {
            let claim = scope.claims().get_opt(name).await.ok().flatten();
            let named = claim.and_then(|c| c.status).and_then(|s| s.address_ref).is_some_and(|r| !r.name.is_empty());
            named && scope.addresses().get_opt(name).await.ok().flatten().is_some()
        })
        .await
        .unwrap_or_else(|e| {
            let logs = cluster()
                .kubectl_ok(&["logs", "-n", IN_CLUSTER_NS, "-l", "control-plane=controller-manager", "--tail=30"])
                .unwrap_or_else(|e| format!("{e:#}"));
            panic!("{e:#}\nthe in-cluster provider's log:\n{logs}")
        });
}

/// How many `IPAddress`es the cluster holds, in every namespace: earlier scenarios leave some.
fn addresses_in_cluster() -> usize {
    let list = super::kubectl_json(&["get", "ipaddresses.ipam.cluster.x-k8s.io", "--all-namespaces"]);
    list["items"].as_array().map_or(0, Vec::len)
}

/// What preflight must say of the in-cluster provider at a step of the runbook.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Other {
    /// Still running: reported, and the Job fails (exit 1) for that alone.
    Running,
    /// Stopped and its Lease lapsed: the Job completes (exit 0).
    Gone,
}

/// Runs docs/examples/preflight-job.yaml with ferro-ipam's image: it adopts every address there
/// is and finds no conflict; it completes, or, while the in-cluster provider runs, fails for
/// that alone.
fn preflight_job(other: Other) {
    let addresses = addresses_in_cluster();
    let example = repo_root().join("docs/examples/preflight-job.yaml");
    kubectl(&["delete", "-f", &example.to_string_lossy(), "--ignore-not-found", "--wait"]);
    let started = Instant::now();
    kubectl(&["apply", "-f", &example.to_string_lossy()]);
    let ended = wait_until(Duration::from_secs(120), || job_ended().is_some());
    let log = cluster().kubectl_ok(&["logs", "-n", "ferro-ipam-preflight", "job/preflight"]).unwrap_or_default();
    assert!(ended, "the preflight Job did not end within 120 s\n{log}");
    let report: Value = serde_json::from_str(&log).unwrap_or_else(|e| panic!("preflight's JSON ({e}): {log}"));
    let expected = match other {
        Other::Running => (Some(false), false, false),
        Other::Gone => (Some(true), true, true),
    };
    let found = (job_ended(), report["clean"] == true, report["otherProvider"].is_null());
    assert_eq!(found, expected, "(completed, clean, no other provider): {report}");
    assert!(report["otherProviderUnchecked"].is_null(), "the Job could not read the Lease: {report}");
    assert_eq!(report["summary"]["adopted"], addresses as u64, "{}", report["summary"]);
    assert_eq!(report["summary"]["conflicts"], 0);
    super::report(&format!("migration: the preflight Job ended in {}s", started.elapsed().as_secs()));
    kubectl(&["delete", "-f", &example.to_string_lossy(), "--wait"]);
}

/// Whether the preflight Job completed (Some(true)) or failed (Some(false)); None while it runs.
fn job_ended() -> Option<bool> {
    let job = super::kubectl_json(&["get", "job", "-n", "ferro-ipam-preflight", "preflight"]);
    let count = |field: &str| job["status"][field].as_u64().unwrap_or(0);
    match (count("succeeded"), count("failed")) {
        (0, 0) => None,
        (succeeded, _) => Some(succeeded > 0),
    }
}

/// Waits until the in-cluster provider's Lease has lapsed, as preflight judges it: no holder,
/// or its last renewal more than its duration ago.
fn wait_in_cluster_lease_lapsed() {
    let lease =
        cluster().kubectl_ok(&["get", "lease", "-n", IN_CLUSTER_NS, "7bb7acb4.ipam.cluster.x-k8s.io", "-o", "json"]);
    let Ok(text) = lease else { return };
    let lease: Value = serde_json::from_str(&text).unwrap_or_default();
    let spec = &lease["spec"];
    let holder = spec["holderIdentity"].as_str().unwrap_or_default();
    let renewed = spec["renewTime"].as_str().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    let (Some(renewed), false) = (renewed, holder.is_empty()) else { return };
    let duration = spec["leaseDurationSeconds"].as_i64().unwrap_or(15);
    let lapses = renewed + k8s_openapi::jiff::SignedDuration::from_secs(duration + 1);
    let left = k8s_openapi::jiff::Timestamp::now().duration_until(lapses);
    if left.is_positive() {
        std::thread::sleep(Duration::try_from(left).unwrap_or_default());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn in_cluster_to_ferro_ipam_and_back_as_deployments_keeps_every_address() {
    let started = Instant::now();
    let tools = &cluster().plane.tools;
    import_in_cluster_image();
    let restore = Restore;
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));

    // The in-cluster world: its CRDs, its Deployment, claims it served.
    replace_crds(&ferro_ipam_e2e::peer::crd_dir(tools));
    start_in_cluster();
    let scope = Scope::on(&cluster().plane, "node-migration").await;
    scope
        .pool("net", json!({"addresses": ["10.50.0.10-10.50.0.200"], "prefix": 24, "gateway": "10.50.0.1"}))
        .await
        .unwrap();
    let names: Vec<String> = (0..60).map(|n| format!("m{n}")).collect();
    for name in &names {
        scope.claim(name, "InClusterIPPool", "net").await.unwrap();
    }
    for name in &names {
        wait_address_ref(&scope, name).await;
    }
    let before = snapshot(&scope).await;
    assert_eq!(before.len(), names.len());

    // The switch (runbook: preflight, stop, preflight again, replace the CRDs, install).
    preflight_job(Other::Running);
    stop_in_cluster();
    wait_in_cluster_lease_lapsed();
    preflight_job(Other::Gone);
    replace_crds(&repo_root().join("crds"));
    let switched = Instant::now();
    let installed = install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    super::report_readiness("migration: ferro-ipam installed over the in-cluster state", &installed);
    for name in &names {
        scope.wait_allocated(name, Duration::from_secs(120)).await.unwrap_or_else(|e| panic!("{e:#}"));
    }
    report(&format!(
        "migration: every claim Ready under ferro-ipam {}s after the install",
        switched.elapsed().as_secs()
    ));
    assert_eq!(snapshot(&scope).await, before, "an IPAddress changed in the switch to ferro-ipam");
    for name in ["f0", "f1"] {
        scope.claim(name, "InClusterIPPool", "net").await.unwrap();
        scope.wait_allocated(name, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{e:#}"));
    }
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{e:#}"));
    let with_ferro = snapshot(&scope).await;

    // And back (runbook: preflight, stop ferro-ipam, the in-cluster CRDs, start it).
    preflight_job(Other::Gone);
    super::scale_controller(0);
    replace_crds(&ferro_ipam_e2e::peer::crd_dir(tools));
    start_in_cluster();
    scope.claim("b0", "InClusterIPPool", "net").await.unwrap();
    wait_address_ref(&scope, "b0").await;
    let back = snapshot(&scope).await;
    for (name, held) in &with_ferro {
        assert_eq!(back.get(name), Some(held), "{name} changed in the switch back");
    }
    let fresh = &back["b0"].1;
    assert!(!with_ferro.values().any(|(_, ip)| ip == fresh), "the in-cluster provider handed out {fresh} again");
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{e:#}"));

    // Leave the cluster as `kubectl apply -k deploy/` makes it.
    drop(restore);
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    report(&format!("migration: there and back in {}s", started.elapsed().as_secs()));
}
