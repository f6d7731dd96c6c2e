//! ferro-ipam beside kube-controller-manager: claims owned by a machine and collected with it
//! (background and foreground propagation), and a namespace deleted with its Cluster, pools,
//! claims and addresses all terminating at once. Nothing may be left, nothing may hang on a
//! finalizer, and a global pool's addresses must come back.

use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;
use serde_json::json;

use super::{install_kustomize, kubectl, report};

/// A stand-in for a Cluster API Machine: the owner whose deletion collects its claims. The
/// garbage collector treats every kind alike; a ConfigMap needs no CRD.
async fn machine(scope: &Scope, name: &str) -> String {
    let owner = scope
        .create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"role": "machine"}}),
        )
        .await
        .unwrap();
    owner.metadata.uid.expect("the API server sets a uid")
}

/// Claims `names` owned by the machine (controller, blockOwnerDeletion), as infrastructure
/// providers own theirs, each waited for until its address is written.
async fn owned_claims(scope: &Scope, machine: &str, uid: &str, names: &[String]) {
    let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": machine, "uid": uid,
        "controller": true, "blockOwnerDeletion": true}]);
    for name in names {
        scope.claim_with(name, "InClusterIPPool", "machines", json!({"ownerReferences": owner})).await.unwrap();
    }
    for name in names {
        scope.wait_allocated(name, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{e:#}"));
    }
}

/// Waits until the namespace holds no claim, no address, and the pool counts none used.
async fn wait_all_released(scope: &Scope, what: &str) {
    scope
        .eventually(what, Duration::from_secs(60), || async {
            let claims = scope.claims().list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(1);
            let addresses = scope.addresses().list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(1);
            claims == 0 && addresses == 0 && scope.pool_used("machines").await == Some(0)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn claims_owned_by_a_machine_are_released_when_it_is_deleted_in_the_background_or_foreground() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&super::cluster().plane, "node-gc").await;
    scope.pool("machines", json!({"addresses": ["10.20.0.10-10.20.0.40"], "prefix": 24})).await.unwrap();

    for (propagation, machine_name) in [("background", "machine-a"), ("foreground", "machine-b")] {
        let uid = machine(&scope, machine_name).await;
        let names: Vec<String> = (0..5).map(|i| format!("{machine_name}-nic-{i}")).collect();
        owned_claims(&scope, machine_name, &uid, &names).await;
        scope
            .eventually("the pool counts five addresses used", Duration::from_secs(30), || async {
                scope.pool_used("machines").await == Some(5)
            })
            .await
            .unwrap_or_else(|e| panic!("before {propagation}: {e:#}"));

        let started = Instant::now();
        kubectl(&[
            "delete",
            "configmap",
            machine_name,
            "-n",
            &scope.ns,
            &format!("--cascade={propagation}"),
            "--wait=false",
        ]);
        wait_all_released(&scope, &format!("claims of {machine_name} collected ({propagation})")).await;
        // With foreground propagation the owner itself waits for its claims: it must not hang.
        scope
            .eventually(&format!("{machine_name} gone"), Duration::from_secs(30), || async {
                kubectl(&["get", "configmap", "-n", &scope.ns, "-o", "name"])
                    .lines()
                    .all(|l| !l.ends_with(machine_name))
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        report(&format!(
            "garbage collection ({propagation}): 5 claims released in {:.1}s",
            started.elapsed().as_secs_f64()
        ));
    }
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn a_deleted_namespace_takes_its_pools_claims_and_addresses_and_frees_the_global_pool() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&super::cluster().plane, "node-nsdel").await;
    let global = scope.global_name("shared");
    scope.global_pool(&global, json!({"addresses": ["10.30.0.0/26"], "prefix": 26})).await.unwrap();
    scope.cluster("workload", false).await.unwrap();
    scope.pool("machines", json!({"addresses": ["10.31.0.10-10.31.0.40"], "prefix": 24})).await.unwrap();
    scope.pool("vips", json!({"addresses": ["10.32.0.10-10.32.0.40"], "prefix": 24})).await.unwrap();
    let cluster_label = json!({"labels": {"cluster.x-k8s.io/cluster-name": "workload"}});
    let mut names = Vec::new();
    for i in 0..50 {
        let (kind, pool) = match i % 3 {
            0 => ("InClusterIPPool", "machines".to_owned()),
            1 => ("InClusterIPPool", "vips".to_owned()),
            _ => ("GlobalInClusterIPPool", global.clone()),
        };
        let name = format!("claim-{i}");
        scope.claim_with(&name, kind, &pool, cluster_label.clone()).await.unwrap();
        names.push(name);
    }
    for name in &names {
        scope.wait_allocated(name, Duration::from_secs(90)).await.unwrap_or_else(|e| panic!("{e:#}"));
    }
    let from_global = names.iter().enumerate().filter(|(i, _)| i % 3 == 2).count() as i64;
    scope
        .eventually("the global pool counts its claims", Duration::from_secs(30), || async {
            scope.global_pool_used(&global).await == Some(from_global)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    let started = Instant::now();
    kubectl(&["delete", "namespace", &scope.ns, "--wait=false"]);
    scope
        .eventually(&format!("namespace {} gone", scope.ns), Duration::from_secs(60), || async {
            kubectl(&["get", "namespaces", "-o", "name"]).lines().all(|l| l != format!("namespace/{}", scope.ns))
        })
        .await
        .unwrap_or_else(|e| {
            let left = kubectl(&["get", "ipaddressclaims.ipam.cluster.x-k8s.io,ipaddresses.ipam.cluster.x-k8s.io,inclusterippools,clusters.cluster.x-k8s.io", "-n", &scope.ns, "-o", "yaml"]);
            panic!("{e:#}\nleft in the namespace:\n{left}")
        });
    let gone_after = started.elapsed();
    scope
        .eventually("the global pool's addresses free again", Duration::from_secs(30), || async {
            scope.global_pool_used(&global).await == Some(0)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    report(&format!(
        "namespace deletion: 50 claims, 3 pools and a Cluster gone in {:.1}s, global pool free after {:.1}s",
        gone_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
    kubectl(&["delete", "globalinclusterippool", &global]);
}
