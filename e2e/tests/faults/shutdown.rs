//! g. SIGTERM in every state ends the process within 5 s, and a leader releases the Lease
//! (the holder is gone, or the other replica holds it, at once rather than after expiry):
//! standing by; serving in the middle of a storm; building the index (a replica whose identity
//! may not list `IPAddress`es, so its index never completes); and with the API server frozen.

use std::time::{Duration, Instant};

use ferro_ipam_e2e::process::http_status;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::PROMPTLY;
use crate::rig::{Findings, Replica, ReplicaSpec, Rig};
use crate::storm::{self, Storm};

const EXIT_WITHIN: Duration = Duration::from_secs(5);
/// A released Lease is seen at once; an unreleased one would keep its holder for the lease.
const RELEASED_WITHIN: Duration = Duration::from_secs(1);
const NO_ADDRESS_LIST: &str = "e2e-no-address-list";

/// SIGTERM, and the checks: exits within 5 s; a leader's Lease names someone else (or nobody)
/// within a second of the exit.
async fn terminate(rig: &Rig, replica: &mut Replica, state: &str, leading: bool, findings: &mut Findings) {
    let pid = format!("-{}", replica.pid());
    let exited = replica.terminate(Duration::from_secs(20));
    findings.note(format!("SIGTERM while {state}: exited after {exited:?}"));
    findings.ensure(exited.is_some_and(|e| e <= EXIT_WITHIN), || {
        format!(
            "SIGTERM while {state}: exited after {exited:?} (killed after 20 s if None), not within {EXIT_WITHIN:?}"
        )
    });
    if !leading {
        return;
    }
    let exited_at = Instant::now();
    let mut holder = rig.holder().await;
    while holder.as_deref().is_some_and(|h| h.ends_with(&pid)) && exited_at.elapsed() < RELEASED_WITHIN {
        tokio::time::sleep(Duration::from_millis(50)).await;
        holder = rig.holder().await;
    }
    findings.ensure(!holder.as_deref().is_some_and(|h| h.ends_with(&pid)), || {
        format!("SIGTERM while {state}: the Lease still names the replica {RELEASED_WITHIN:?} after it exited")
    });
}

/// RBAC for an identity that may do everything ferro-ipam does except list and watch `IPAddress`es.
async fn without_address_list(rig: &Rig) {
    let everything = ["*"];
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": NO_ADDRESS_LIST},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": everything},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": everything},
            {"apiGroups": ["ipam.cluster.x-k8s.io"], "verbs": everything, "resources": [
                "ipaddressclaims", "ipaddressclaims/status", "inclusterippools", "inclusterippools/status",
                "globalinclusterippools", "globalinclusterippools/status", "inclusterprefixpools",
                "inclusterprefixpools/status", "globalinclusterprefixpools", "globalinclusterprefixpools/status"]},
            {"apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddresses"], "verbs": ["get", "create", "update", "patch", "delete"]},
            {"apiGroups": ["cluster.x-k8s.io", "apiextensions.k8s.io"], "resources": ["clusters", "customresourcedefinitions"], "verbs": ["get", "list", "watch"]},
        ],
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": NO_ADDRESS_LIST},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NO_ADDRESS_LIST},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NO_ADDRESS_LIST}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(rig.s.client.clone()).create(&PostParams::default(), &role).await.unwrap();
    Api::<ClusterRoleBinding>::all(rig.s.client.clone()).create(&PostParams::default(), &binding).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_every_state_within_five_seconds_and_releases_the_lease() {
    let rig = Rig::own_plane("sigterm", &[]).await;
    let mut findings = Findings::new("sigterm");
    let mut a = rig.replica("a", ReplicaSpec::default());
    assert_eq!(rig.leader(&[&a], PROMPTLY).await, 0);
    let mut b = rig.replica("b", ReplicaSpec::default());
    terminate(&rig, &mut b, "standing by", false, &mut findings).await;

    without_address_list(&rig).await;
    let restricted = rig.plane().kubeconfig_as(NO_ADDRESS_LIST, &[]).unwrap();
    let mut d = rig.replica("d", ReplicaSpec { kubeconfig: Some(restricted), ..ReplicaSpec::default() });
    rig.s.pool("pool", json!({"addresses": ["10.98.0.0/22"], "prefix": 22, "gateway": "10.98.0.1"})).await.unwrap();
    let storm = Storm::start(&rig.s, "pool", "c", 300, 100);
    storm::wait_addresses(&rig.s, 50, Duration::from_secs(60)).await;
    terminate(&rig, &mut a, "serving a storm", true, &mut findings).await;
    storm.finish().await;

    // The restricted replica takes over and builds its index forever (it may not list addresses).
    rig.wait_holder(&d, Duration::from_secs(30)).await.expect("the restricted replica takes over");
    rig.s
        .eventually("the restricted replica starts its term", PROMPTLY, || async { !d.log().terms.is_empty() })
        .await
        .unwrap();
    let building = rig
        .s
        .stays("the restricted replica's index is incomplete", Duration::from_secs(2), || async {
            http_status(&d.provider.health, "/readyz") != Some(200)
        })
        .await;
    building.expect("the restricted replica never completes its index (the state under test)");
    terminate(&rig, &mut d, "building the index", true, &mut findings).await;

    let mut e = rig.replica("e", ReplicaSpec::default());
    rig.wait_holder(&e, Duration::from_secs(30)).await.expect("a last replica takes over");
    rig.plane().signal_apiserver(libc::SIGSTOP);
    terminate(&rig, &mut e, "leading with the API server frozen", false, &mut findings).await;
    rig.plane().signal_apiserver(libc::SIGCONT);
    findings.conclude(&[&a, &b, &d, &e]);
}
