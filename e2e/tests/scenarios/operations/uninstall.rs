//! Uninstalling ferro-ipam keeps the pools, as docs/upgrade-and-uninstall.md#uninstall says: `helm
//! uninstall` leaves the pool CRDs (the chart marks them `helm.sh/resource-policy: keep`), and
//! `kubectl delete -k deploy/provider` removes the provider without its CRDs. The pools and the
//! `IPAddress` objects outlive the provider; a reinstall, and the ferro-ipam that then runs,
//! adopt every address (same object, same address) and serve new claims beside them.
//!
//! Each test runs the documented commands on a control plane of its own: a broken uninstall
//! would delete the CRDs every other scenario of the shared plane relies on.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::{ControlPlane, Provider, invariants};
use kube::api::ListParams;
use serde_json::json;

use super::deploy;
use super::helm::helm_ok;
use crate::PROMPTLY;

const NAMESPACE: &str = "ferro-ipam-system";

/// A control plane of the test's own, without the pool CRDs it starts with: the install under
/// test brings them, as it would on a new management cluster.
fn bare_plane(cell: &'static OnceLock<ControlPlane>) -> &'static ControlPlane {
    let plane = cell
        .get_or_init(|| ControlPlane::start().unwrap_or_else(|e| panic!("starting a private control plane: {e:#}")));
    plane.kubectl_ok(&["delete", "-f", &repo_root().join("crds").to_string_lossy()]).unwrap();
    plane
}

/// The pool CRDs on the plane that are not being deleted, by name.
fn pool_crds(plane: &ControlPlane) -> Vec<String> {
    let template = r#"{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}"#;
    let listed = plane.kubectl_ok(&["get", "crd", "-o", &format!("jsonpath={template}")]).unwrap();
    let kept = listed.lines().map(str::trim).filter(|line| !line.contains(' '));
    kept.filter(|name| name.ends_with("pools.ipam.cluster.x-k8s.io")).map(str::to_owned).collect()
}

/// IPAddress name -> (address, uid), for every IPAddress of the scope's namespace.
async fn addresses(s: &Scope) -> BTreeMap<String, (String, String)> {
    let listed = s.addresses().list(&ListParams::default()).await.unwrap().items;
    listed
        .into_iter()
        .map(|a| (a.metadata.name.unwrap_or_default(), (a.spec.address, a.metadata.uid.unwrap_or_default())))
        .collect()
}

/// A namespaced and a global pool, and a ferro-ipam that serves two claims on each.
async fn pools_with_served_claims(plane: &'static ControlPlane) -> (Scope, BTreeMap<String, (String, String)>) {
    plane.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]).unwrap();
    let s = Scope::on(plane, "kept").await;
    s.pool("nodes", json!({"addresses": ["10.70.0.10-10.70.0.40"], "prefix": 24, "gateway": "10.70.0.1"}))
        .await
        .unwrap();
    s.global_pool("shared", json!({"addresses": ["10.71.0.10-10.71.0.40"], "prefix": 24})).await.unwrap();
    let provider = Provider::start(plane, &[]).unwrap();
    for (claim, kind, pool) in [
        ("a", "InClusterIPPool", "nodes"),
        ("b", "InClusterIPPool", "nodes"),
        ("c", "GlobalInClusterIPPool", "shared"),
        ("d", "GlobalInClusterIPPool", "shared"),
    ] {
        s.claim(claim, kind, pool).await.unwrap();
        s.wait_allocated(claim, PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
    }
    let before = addresses(&s).await;
    assert_eq!(before.len(), 4, "{before:?}");
    (s, before)
}

/// After the uninstall: the CRDs, the pools and every IPAddress are still there, unchanged.
async fn assert_kept(s: &Scope, before: &BTreeMap<String, (String, String)>) {
    assert_eq!(pool_crds(s.plane).len(), 4, "the uninstall deleted pool CRDs: {:?}", pool_crds(s.plane));
    let pool = s.pools().get_opt("nodes").await.unwrap().expect("the InClusterIPPool is kept");
    assert!(pool.metadata.deletion_timestamp.is_none(), "the InClusterIPPool is being deleted");
    let global = s.global_pools().get_opt("shared").await.unwrap().expect("the GlobalInClusterIPPool is kept");
    assert!(global.metadata.deletion_timestamp.is_none(), "the GlobalInClusterIPPool is being deleted");
    assert_eq!(&addresses(s).await, before, "every IPAddress is kept, the same object with the same address");
}

/// After the reinstall: a new ferro-ipam adopts every address and serves new claims beside them.
async fn assert_adopted(s: &Scope, before: &BTreeMap<String, (String, String)>) {
    let provider = Provider::start(s.plane, &[]).unwrap();
    for (claim, kind, pool) in [("e", "InClusterIPPool", "nodes"), ("f", "GlobalInClusterIPPool", "shared")] {
        s.claim(claim, kind, pool).await.unwrap();
        s.wait_allocated(claim, PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
    }
    let after = addresses(s).await;
    for (name, kept) in before {
        assert_eq!(after.get(name), Some(kept), "{name} kept its IPAddress and address");
    }
    assert_eq!(after.len(), before.len() + 2, "{after:?}");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
    s.eventually("the pools count every address", PROMPTLY, || async {
        s.pool_used("nodes").await == Some(3) && s.global_pool_used("shared").await == Some(3)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
}

/// Whether an object of the install exists (`kubectl get` answers NotFound when not).
fn exists(plane: &ControlPlane, args: &[&str]) -> bool {
    let mut all = vec!["get"];
    all.extend(args);
    let output = plane.kubectl(&all).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() || stderr.contains("NotFound"), "kubectl {all:?}: {stderr}");
    output.status.success()
}

#[tokio::test(flavor = "multi_thread")]
async fn helm_uninstall_keeps_pools_and_addresses_and_a_reinstall_adopts_them() {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    let plane = bare_plane(&PLANE);
    let kubeconfig = plane.kubeconfig.to_string_lossy().into_owned();
    let chart = deploy("chart").to_string_lossy().into_owned();
    let helm = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--kubeconfig", &kubeconfig]);
        helm_ok(&all)
    };
    // As docs/install.md installs it: the namespace made and labelled first.
    plane.kubectl_ok(&["create", "namespace", NAMESPACE]).unwrap();
    plane.kubectl_ok(&["label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted"]).unwrap();
    let install = ["install", "ferro-ipam", &chart, "--namespace", NAMESPACE];
    helm(&install);
    let (s, before) = pools_with_served_claims(plane).await;

    helm(&["uninstall", "ferro-ipam", "--namespace", NAMESPACE]);
    assert!(!exists(plane, &["deployment", "ferro-ipam-controller", "-n", NAMESPACE]), "helm uninstalled nothing");
    assert!(!exists(plane, &["clusterrole", "ferro-ipam-controller"]), "helm uninstalled nothing");
    assert_kept(&s, &before).await;

    helm(&install);
    assert!(exists(plane, &["deployment", "ferro-ipam-controller", "-n", NAMESPACE]));
    assert_adopted(&s, &before).await;
    let _ = std::fs::remove_dir_all(&plane.dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_delete_of_deploy_provider_keeps_pools_and_addresses_and_a_reapply_adopts_them() {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    let plane = bare_plane(&PLANE);
    let (base, provider) =
        (deploy("").to_string_lossy().into_owned(), deploy("provider").to_string_lossy().into_owned());
    plane.kubectl_ok(&["apply", "-k", &base]).unwrap();
    let (s, before) = pools_with_served_claims(plane).await;

    // The timeout only bounds a broken test: deleted CRDs would wait for their pools' finalizers.
    plane.kubectl_ok(&["delete", "-k", &provider, "--timeout=60s"]).unwrap();
    assert!(!exists(plane, &["deployment", "ferro-ipam-controller", "-n", NAMESPACE]), "the provider is still there");
    assert!(!exists(plane, &["clusterrole", "ferro-ipam-controller"]), "the provider's RBAC is still there");
    assert!(exists(plane, &["namespace", NAMESPACE]), "the namespace is kept: it may hold pools");
    assert_kept(&s, &before).await;

    plane.kubectl_ok(&["apply", "-k", &base]).unwrap();
    assert!(exists(plane, &["deployment", "ferro-ipam-controller", "-n", NAMESPACE]));
    assert_adopted(&s, &before).await;
    let _ = std::fs::remove_dir_all(&plane.dir);
}

#[test]
fn deploy_provider_is_deploy_without_the_crds_and_the_namespace() {
    let plane = ControlPlane::shared();
    let names = |objects: Vec<serde_json::Value>| -> std::collections::BTreeSet<(String, String)> {
        objects
            .iter()
            .map(|o| (o["kind"].as_str().unwrap().to_owned(), o["metadata"]["name"].as_str().unwrap().to_owned()))
            .collect()
    };
    let mut expected = names(super::kustomize(plane, &deploy("")));
    expected.retain(|(kind, _)| kind != "CustomResourceDefinition" && kind != "Namespace");
    assert_eq!(names(super::kustomize(plane, &deploy("provider"))), expected);
}
