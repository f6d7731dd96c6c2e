//! The ways users install and remove ferro-ipam, on the node, from a release's files alone
//! (`make dist`'s, [`release`]): `kubectl apply -f install.yaml`, the packaged Helm chart with its
//! defaults (into the namespace the docs create and label, then with `--create-namespace` into a
//! fresh one), and `clusterctl generate provider`'s output from a local repository made of the
//! release's clusterctl files, applied; then the uninstall the docs give for Helm and kustomize.
//! Each install ends in Running pods of the release's image, by digest, that serve claims, and
//! reports how long it took from the install command to Ready pods. Each uninstall removes the
//! pods and keeps the CRDs, the pools and every address, which the next install serves again
//! unchanged.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::gotools::{Clusterctl, go_tool, run_ok};
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::wait_until;
use serde_json::{Value, json};

use super::release::release;
use super::{
    DEPLOYMENT, SYSTEM, cluster, install_kustomize, kubectl, kubectl_json, pods, remove_provider, report,
    report_readiness,
};

pub(crate) const CONTROLLER: &str = "app.kubernetes.io/component=controller";

/// helm against the cluster.
pub(crate) fn helm(args: &[&str]) -> String {
    let helm = go_tool("helm").unwrap_or_else(|e| panic!("{e:#}"));
    let kubeconfig = cluster().plane.kubeconfig.clone();
    run_ok(&helm, args, &[("KUBECONFIG", &kubeconfig)]).unwrap_or_else(|e| panic!("{e:#}"))
}

/// The CRDs the chart ships (its default `crds: true`).
pub(crate) fn chart_crds() -> Vec<String> {
    let rendered = helm(&["template", "ferro-ipam", &chart()]);
    let documents: Vec<Value> = serde_saphyr::from_multiple(&rendered).expect("helm renders YAML");
    documents
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Lets `release` in `namespace` take over the CRDs that are already there (the cluster was made
/// with them), as docs/install.md tells users whose cluster has them already.
pub(crate) fn adopt_crds(release: &str, namespace: &str) {
    for crd in chart_crds() {
        kubectl(&["label", "--overwrite", "crd", &crd, "app.kubernetes.io/managed-by=Helm"]);
        kubectl(&[
            "annotate",
            "--overwrite",
            "crd",
            &crd,
            &format!("meta.helm.sh/release-name={release}"),
            &format!("meta.helm.sh/release-namespace={namespace}"),
        ]);
    }
}

/// Waits until `namespace` runs `count` Ready controller pods and no other; reports how long
/// each took to be Ready.
fn wait_pods(step: &str, namespace: &str, count: usize) -> Vec<Value> {
    let ready = wait_until(Duration::from_secs(180), || {
        let all = pods(namespace, CONTROLLER);
        all.len() == count && all.iter().all(super::pod_ready)
    });
    let all = pods(namespace, CONTROLLER);
    assert!(
        ready,
        "{step}: {count} Ready pods expected in {namespace}, found {:?}\nkubelet:\n{}",
        all.iter().map(|p| format!("{} {}", super::pod_name(p), p["status"])).collect::<Vec<_>>(),
        cluster().log_tail("kubelet", 20)
    );
    for pod in &all {
        assert_eq!(pod["status"]["phase"], "Running");
    }
    report_readiness(step, &all);
    all
}

/// Runs `install` (a user's command with the release's files), then waits until `namespace` runs
/// two Ready controller pods of the release's image; reports the time from the command to Ready.
fn install_release(step: &str, namespace: &str, install: impl FnOnce()) {
    let started = Instant::now();
    install();
    let ready = wait_pods(step, namespace, 2);
    report(&format!("{step}: install command to Ready pods {:.1}s", started.elapsed().as_secs_f64()));
    release().assert_runs_image(step, &ready);
}

/// Waits until `namespace` runs no controller pod.
fn wait_no_pods(step: &str, namespace: &str) {
    let started = Instant::now();
    assert!(
        wait_until(Duration::from_secs(120), || pods(namespace, CONTROLLER).is_empty()),
        "{step}: the controller pods in {namespace} are still there"
    );
    report(&format!("{step}: pods gone {}s after the uninstall", started.elapsed().as_secs()));
}

/// Serves `claims` more claims from the scope's pool and returns every address, by IPAddress name.
async fn serve(scope: &Scope, step: &str, claims: &[&str]) -> BTreeMap<String, String> {
    for claim in claims {
        scope.claim(claim, "InClusterIPPool", "paths").await.unwrap();
    }
    for claim in claims {
        scope.wait_allocated(claim, Duration::from_secs(90)).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
    }
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
    scope.address_map().await.unwrap()
}

/// After an uninstall: the CRDs, the pool and every address are what they were.
async fn kept(scope: &Scope, step: &str, before: &BTreeMap<String, String>) {
    for crd in chart_crds() {
        assert!(
            cluster().kubectl_ok(&["get", "crd", &crd]).is_ok(),
            "{step}: the CRD {crd} was deleted, and every pool of its kind with it"
        );
    }
    assert!(scope.pools().get_opt("paths").await.unwrap().is_some(), "{step}: the pool is gone");
    assert_eq!(&scope.address_map().await.unwrap(), before, "{step}: the addresses changed");
}

/// The release's packaged chart.
fn chart() -> String {
    release().chart().to_string_lossy().into_owned()
}

#[tokio::test]
async fn kubectl_apply_of_the_release_install_yaml_runs_its_image_and_serves_claims() {
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-install-yaml").await;
    scope.pool("paths", json!({"addresses": ["10.33.0.10-10.33.0.40"], "prefix": 24})).await.unwrap();

    let step = "kubectl apply -f install.yaml (release)";
    let manifest = release().install_yaml();
    install_release(step, SYSTEM, || {
        kubectl(&["apply", "--server-side", "-f", &manifest.to_string_lossy()]);
    });
    let namespace = kubectl_json(&["get", "namespace", SYSTEM]);
    assert_eq!(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    serve(&scope, step, &["y0", "y1"]).await;
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn helm_install_of_the_release_chart_with_defaults_and_uninstall_keep_pools_and_addresses() {
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-helm").await;
    scope.pool("paths", json!({"addresses": ["10.30.0.10-10.30.0.40"], "prefix": 24})).await.unwrap();

    // The documented install: the namespace made and labelled first, then the chart's defaults.
    kubectl(&["create", "namespace", SYSTEM]);
    kubectl(&["label", "namespace", SYSTEM, "pod-security.kubernetes.io/enforce=restricted"]);
    adopt_crds("ferro-ipam", SYSTEM);
    install_release("helm install (release chart, defaults)", SYSTEM, || {
        helm(&["install", "ferro-ipam", &chart(), "--namespace", SYSTEM]);
    });
    let first = serve(&scope, "helm install (defaults)", &["h0", "h1", "h2"]).await;

    helm(&["uninstall", "ferro-ipam", "--namespace", SYSTEM, "--wait"]);
    wait_no_pods("helm uninstall", SYSTEM);
    kept(&scope, "helm uninstall", &first).await;
    kubectl(&["delete", "namespace", SYSTEM, "--timeout=120s"]);

    // Into a fresh namespace, made by Helm: the kept pool and addresses are served on.
    let fresh = "ferro-ipam-fresh";
    adopt_crds("ferro-ipam-fresh", fresh);
    install_release("helm install --create-namespace (release chart)", fresh, || {
        helm(&["install", "ferro-ipam-fresh", &chart(), "--namespace", fresh, "--create-namespace"]);
    });
    let second = serve(&scope, "helm install --create-namespace", &["h3"]).await;
    assert_eq!(second.len(), first.len() + 1);
    assert!(first.iter().all(|(name, ip)| second.get(name) == Some(ip)), "the reinstall changed an address");

    helm(&["uninstall", "ferro-ipam-fresh", "--namespace", fresh, "--wait"]);
    wait_no_pods("helm uninstall (fresh)", fresh);
    kept(&scope, "helm uninstall (fresh)", &second).await;
    kubectl(&["delete", "namespace", fresh, "--timeout=120s"]);
}

#[tokio::test]
async fn clusterctl_components_from_the_release_files_applied_run_and_serve_claims() {
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-clusterctl").await;
    scope.pool("paths", json!({"addresses": ["10.31.0.10-10.31.0.40"], "prefix": 24})).await.unwrap();

    let release = release();
    let clusterctl =
        Clusterctl::with_repository_of(&release.file("ipam-components.yaml"), &release.file("metadata.yaml"))
            .unwrap_or_else(|e| panic!("{e:#}"));
    let components = clusterctl.home().join("components.yaml");
    std::fs::write(&components, clusterctl.generate_provider().unwrap_or_else(|e| panic!("{e:#}"))).unwrap();
    install_release("clusterctl generate provider (release files), applied", SYSTEM, || {
        kubectl(&["apply", "--server-side", "-f", &components.to_string_lossy()]);
    });
    let deployment = kubectl_json(&["get", "deployment", "-n", SYSTEM, DEPLOYMENT]);
    assert_eq!(deployment["metadata"]["labels"]["cluster.x-k8s.io/provider"], "ipam-ferro-ipam");
    serve(&scope, "clusterctl", &["c0", "c1"]).await;
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn kubectl_delete_of_deploy_provider_removes_the_provider_and_keeps_pools() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-uninstall").await;
    scope.pool("paths", json!({"addresses": ["10.32.0.10-10.32.0.40"], "prefix": 24})).await.unwrap();
    let before = serve(&scope, "kustomize install", &["k0", "k1"]).await;

    let provider = repo_root().join("deploy/provider");
    kubectl(&["delete", "-k", &provider.to_string_lossy(), "--timeout=120s"]);
    wait_no_pods("kubectl delete -k deploy/provider", SYSTEM);
    kept(&scope, "kubectl delete -k deploy/provider", &before).await;
    assert!(
        kubectl_json(&["get", "clusterroles", "-l", "app.kubernetes.io/name=ferro-ipam"])["items"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "the provider's ClusterRoles are left behind"
    );

    let after = {
        install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
        serve(&scope, "kustomize reinstall", &["k2"]).await
    };
    assert!(before.iter().all(|(name, ip)| after.get(name) == Some(ip)), "the reinstall changed an address");
}
