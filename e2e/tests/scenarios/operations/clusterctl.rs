//! clusterctl itself (built from `sigs.k8s.io/cluster-api` through the Go module proxy by
//! `e2e/tools/go-tool.sh`): it renders ferro-ipam's components from a local provider repository
//! (`clusterctl generate provider --ipam ferro-ipam:<version>`), they apply to two API servers,
//! and `clusterctl move` takes a namespace's Cluster, pool, claims and addresses from one to the
//! other. Every address stays what it was, and no claim is served twice. `clusterctl delete` then
//! removes the provider and keeps the pool and its addresses.
//!
//! The management clusters need what `clusterctl init` would leave: clusterctl's provider
//! inventory (its CRD, from the same module, and one `Provider` per provider) and the
//! `clusterctl.cluster.x-k8s.io` label on the core CRDs. `init` itself is not run: it installs
//! cert-manager and waits for its webhook, which needs pods, and this machine runs none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use ferro_ipam_e2e::gotools::{Clusterctl, VERSION};
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::{ControlPlane, Provider, invariants};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use super::yaml_documents;
use crate::PROMPTLY;

/// Where the Go module cache holds the cluster-api module clusterctl was built from.
fn capi_module() -> PathBuf {
    let output = Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api"])
        .current_dir(repo_root().join("e2e/tools/clusterctl"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().into()
}

/// What `clusterctl init` would have left: the inventory, and the core CRDs labelled.
fn management_cluster(plane: &ControlPlane, components: &Path) {
    let inventory = capi_module().join("cmd/clusterctl/config/manifest/clusterctl-api.yaml");
    plane.kubectl_ok(&["apply", "--server-side", "-f", &inventory.to_string_lossy()]).unwrap();
    plane.kubectl_ok(&["apply", "--server-side", "-f", &components.to_string_lossy()]).unwrap();
    for crd in
        ["clusters.cluster.x-k8s.io", "ipaddressclaims.ipam.cluster.x-k8s.io", "ipaddresses.ipam.cluster.x-k8s.io"]
    {
        plane
            .kubectl_ok(&[
                "label",
                "--overwrite",
                "crd",
                crd,
                "clusterctl.cluster.x-k8s.io=",
                "cluster.x-k8s.io/provider=cluster-api",
            ])
            .unwrap();
    }
    plane.kubectl_ok(&["create", "namespace", "capi-system"]).unwrap();
    let providers = [
        ("capi-system", "cluster-api", "cluster-api", "CoreProvider", "v1.14.2"),
        ("ferro-ipam-system", "ipam-ferro-ipam", "ferro-ipam", "IPAMProvider", VERSION),
    ];
    for (namespace, name, provider, kind, version) in providers {
        let object = json!({
            "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
            "metadata": {"name": name, "namespace": namespace, "labels": {"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": name}},
            "providerName": provider, "type": kind, "version": version,
        });
        let file = plane.dir.join(format!("provider-{name}.json"));
        std::fs::write(&file, object.to_string()).unwrap();
        plane.kubectl_ok(&["apply", "--server-side", "-f", &file.to_string_lossy()]).unwrap();
    }
}

async fn scope(plane: &'static ControlPlane, ns: &str) -> Scope {
    let client = plane.client().await;
    let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &object).await.unwrap();
    Scope { plane, client, ns: ns.to_owned(), filter: None }
}

/// claim name -> (address, IPAddress name), for every IPAddress of the namespace.
async fn addresses(s: &Scope) -> BTreeMap<String, (String, String)> {
    let listed = s.addresses().list(&ListParams::default()).await.unwrap();
    listed
        .items
        .into_iter()
        .map(|a| (a.spec.claim_ref.name.clone(), (a.spec.address.clone(), a.metadata.name.clone().unwrap_or_default())))
        .collect()
}

fn plane(cell: &'static OnceLock<ControlPlane>) -> &'static ControlPlane {
    cell.get_or_init(|| ControlPlane::start().unwrap_or_else(|e| panic!("starting a private control plane: {e:#}")))
}

#[tokio::test(flavor = "multi_thread")]
async fn clusterctl_installs_ferro_ipam_and_moves_a_namespace_with_its_addresses() {
    static SOURCE: OnceLock<ControlPlane> = OnceLock::new();
    static TARGET: OnceLock<ControlPlane> = OnceLock::new();
    let (source, target) = (plane(&SOURCE), plane(&TARGET));
    let clusterctl = Clusterctl::with_local_repository().unwrap();

    // clusterctl renders the components: every object labelled for the provider, variables at
    // their defaults.
    let rendered = clusterctl.generate_provider().unwrap_or_else(|e| panic!("{e:#}"));
    let objects = yaml_documents(&rendered);
    assert!(objects.iter().any(|o| o["kind"] == "Deployment"), "{rendered}");
    for object in &objects {
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["cluster.x-k8s.io/provider"], "ipam-ferro-ipam", "{}", object["metadata"]["name"]);
        assert!(labels["clusterctl.cluster.x-k8s.io"].is_string(), "{}", object["metadata"]["name"]);
    }
    let components = clusterctl.home().join("components.yaml");
    std::fs::write(&components, &rendered).unwrap();
    management_cluster(source, &components);
    management_cluster(target, &components);

    // On the source: a Cluster that is provisioned, a pool, and claims of that Cluster served.
    let ns = "moved";
    let s = scope(source, ns).await;
    // The endpoint keeps `spec` non-empty when clusterctl unpauses the Cluster (paused: false is
    // dropped), as a provisioned Cluster's is.
    s.create(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "wl"},
        "spec": {"controlPlaneEndpoint": {"host": "10.96.0.2", "port": 6443}},
    }))
    .await
    .unwrap();
    source
        .kubectl_ok(&[
            "patch", "cluster", "wl", "-n", ns, "--subresource=status", "--type=merge", "-p",
            r#"{"status": {"initialization": {"infrastructureProvisioned": true}, "conditions": [{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#,
        ])
        .unwrap();
    let cluster_uid = source.kubectl_ok(&["get", "cluster", "wl", "-n", ns, "-o", "jsonpath={.metadata.uid}"]).unwrap();
    s.pool("nodes", json!({"addresses": ["10.96.0.10-10.96.0.30"], "prefix": 24, "gateway": "10.96.0.1"}))
        .await
        .unwrap();
    let owner = json!({
        "labels": {"cluster.x-k8s.io/cluster-name": "wl"},
        "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "wl", "uid": cluster_uid}],
    });
    let claims: Vec<String> = (0..6).map(|n| format!("c{n}")).collect();
    {
        let provider = Provider::start(source, &["--namespace", ns]).unwrap();
        for claim in &claims {
            s.claim_with(claim, "InClusterIPPool", "nodes", owner.clone()).await.unwrap();
        }
        for claim in &claims {
            s.wait_allocated(claim, PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
        }
    }
    let before = addresses(&s).await;
    assert_eq!(before.len(), claims.len(), "{before:?}");
    // Marks the source's IPAddress objects: an object ferro-ipam made anew on the target lacks it.
    source
        .kubectl_ok(&[
            "label",
            "ipaddresses.ipam.cluster.x-k8s.io",
            "--all",
            "-n",
            ns,
            "e2e.ferro-ipam.io/made-on=source",
        ])
        .unwrap();

    // The target runs ferro-ipam during the move, as a real management cluster would.
    let t = scope(target, ns).await;
    let provider = Provider::start(target, &["--namespace", ns]).unwrap();
    let source_kubeconfig = source.kubeconfig.to_string_lossy().into_owned();
    let target_kubeconfig = target.kubeconfig.to_string_lossy().into_owned();
    let moved = clusterctl
        .run(&["move", "--kubeconfig", &source_kubeconfig, "--to-kubeconfig", &target_kubeconfig, "--namespace", ns])
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("clusterctl move:\n{moved}");

    // Everything is on the target, nothing left on the source.
    for claim in &claims {
        t.wait_allocated(claim, PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(40)));
    }
    let after = addresses(&t).await;
    assert_eq!(after, before, "every claim keeps its IPAddress and address");
    invariants::check(&t.client, &[ns]).await.unwrap();
    for address in t.addresses().list(&ListParams::default()).await.unwrap().items {
        let made_on = address.metadata.labels.as_ref().and_then(|l| l.get("e2e.ferro-ipam.io/made-on")).cloned();
        assert_eq!(made_on.as_deref(), Some("source"), "{:?} was not moved but made anew", address.metadata.name);
    }
    let count = claims.len() as i64;
    t.eventually("the moved pool counts its addresses", PROMPTLY, || async {
        t.pool_used("nodes").await == Some(count)
    })
    .await
    .unwrap();
    assert!(addresses(&s).await.is_empty(), "the source keeps no IPAddress");
    assert!(s.claims().list(&ListParams::default()).await.unwrap().items.is_empty(), "the source keeps no claim");
    let log = provider.log_tail(100_000);
    assert!(!log.contains("AllocationFailed"), "the target allocated nothing anew:\n{log}");
    drop(provider);

    // `clusterctl delete` (docs/upgrade-and-uninstall.md#uninstall) removes the provider and keeps the
    // CRDs, and so the pool and every address.
    clusterctl
        .run(&["delete", "--ipam", "ferro-ipam", "--kubeconfig", &target_kubeconfig])
        .unwrap_or_else(|e| panic!("{e:#}"));
    let deployment =
        target.kubectl(&["get", "deployment", "ferro-ipam-controller", "-n", "ferro-ipam-system"]).unwrap();
    assert!(!deployment.status.success(), "clusterctl delete left the Deployment");
    let crd = target
        .kubectl_ok(&[
            "get",
            "crd",
            "inclusterippools.ipam.cluster.x-k8s.io",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .unwrap();
    assert!(crd.trim().is_empty(), "clusterctl delete deletes the pool CRD: {crd}");
    let pool = t.pools().get_opt("nodes").await.unwrap().expect("the pool is kept");
    assert!(pool.metadata.deletion_timestamp.is_none(), "the pool is being deleted");
    assert_eq!(addresses(&t).await, before, "every IPAddress is kept");
    // The planes live in statics, never dropped: their files go now that no test needs them (a
    // failed run keeps them, logs included).
    for plane in [source, target] {
        let _ = std::fs::remove_dir_all(&plane.dir);
    }
}
