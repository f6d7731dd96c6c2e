//! `kubectl apply -k deploy/` on a real node: two pods Running and Ready under the namespace's
//! `restricted` Pod Security, one holding the Lease and allocating, the other a Ready stand-by,
//! JSON logs through `kubectl logs`, in-cluster credentials from the mounted ServiceAccount token.

use std::time::Duration;

use ferro_ipam_e2e::objects::Scope;
use serde_json::{Value, json};

use super::{
    SYSTEM, cluster, install_kustomize, kubectl, kubectl_json, leader_and_standby, pod_name, report_readiness,
};

#[tokio::test]
async fn kustomize_install_runs_two_ready_pods_and_the_lease_holder_allocates() {
    let pods = install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    report_readiness("kustomize install", &pods);

    // Admitted under the namespace's enforced `restricted` Pod Security Standard.
    let namespace = kubectl_json(&["get", "namespace", SYSTEM]);
    assert_eq!(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    for pod in &pods {
        assert_eq!(pod["status"]["phase"], "Running", "{}", pod_name(pod));
        let context = &pod["spec"]["containers"][0]["securityContext"];
        assert_eq!(context["readOnlyRootFilesystem"], true);
        assert_eq!(pod["spec"]["securityContext"]["runAsUser"], 65532);
        // The token kubelet projected is what the provider talks to the API server with.
        let mounts = pod["spec"]["containers"][0]["volumeMounts"].as_array().cloned().unwrap_or_default();
        assert!(
            mounts.iter().any(|m| m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"),
            "no ServiceAccount token mounted in {}",
            pod_name(pod)
        );
    }
    let (leader, standby) = leader_and_standby(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    assert_ne!(leader, standby);

    // kubectl logs reaches kubelet on the node; every line is a JSON object.
    let logs = kubectl(&["logs", "-n", SYSTEM, &leader, "--tail=50"]);
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no log lines from {leader}");
    for line in &lines {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(parsed.is_object(), "not a JSON object: {line}");
    }

    // The leader serves a claim.
    let scope = Scope::on(&cluster().plane, "node-install").await;
    scope
        .pool("nodes", json!({"addresses": ["10.10.0.10-10.10.0.20"], "prefix": 24, "gateway": "10.10.0.1"}))
        .await
        .unwrap();
    scope.claim("first", "InClusterIPPool", "nodes").await.unwrap();
    let address = scope.wait_allocated("first", Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(address.spec.address, "10.10.0.10");
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{e:#}"));

    // Only the leader allocates: its log says so, and the stand-by's says nothing of this claim.
    let leader_logs = kubectl(&["logs", "-n", SYSTEM, &leader]);
    assert!(
        leader_logs.lines().any(|l| l.contains("allocated") && l.contains(&scope.ns)),
        "the leader {leader} logged no allocation in {}",
        scope.ns
    );
    let standby_logs = kubectl(&["logs", "-n", SYSTEM, &standby]);
    assert!(!standby_logs.contains(&scope.ns), "the stand-by {standby} acted on {}: {standby_logs}", scope.ns);
}
