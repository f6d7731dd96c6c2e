//! Liveness once the faults stop (client required): every claim is served, or waits for a
//! reason that is true of the objects: `PoolExhausted` while its pool reports no free address
//! (counts the invariant checker then holds to the objects), `AllocationFailed` for a requested
//! address another `IPAddress` holds. A claim being deleted must be gone. A Cluster that asks
//! for a VIP has its endpoint, or a VIP claim that waits (judged as a claim); a Cluster being
//! deleted must be gone.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use ferro_ipam::api::capi::{Cluster, IPAddress, IPAddressClaim};
use ferro_ipam::api::keys::{CONTROL_PLANE_VIP_LABEL, REQUESTED_ADDRESS_ANNOTATION, VIPS_LABEL};
use ferro_ipam_e2e::objects::{Scope, capi};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// Waits until every claim of `scopes` is served or truly waiting, at the latest at `deadline`;
/// returns how long it took from `since`.
pub async fn served_or_truly_waiting(scopes: &[&Scope], since: Instant, deadline: Instant) -> Result<Duration> {
    loop {
        let problems = match look(scopes).await {
            Ok(problems) => problems,
            Err(error) => vec![format!("could not look: {error:#}")],
        };
        if problems.is_empty() {
            return Ok(since.elapsed());
        }
        if Instant::now() > deadline {
            let shown: Vec<&String> = problems.iter().take(15).collect();
            bail!(
                "{} claims neither served nor waiting for a true reason {:.1} s after the faults stopped: {shown:#?}",
                problems.len(),
                since.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Free addresses each pool reports, by `namespace/name` (global pools: by name).
async fn free_by_pool(client: &Client, scopes: &[&Scope]) -> Result<BTreeMap<String, i64>> {
    let free = |status: Option<ferro_ipam::api::IPPoolStatus>| status.and_then(|s| s.ip_addresses).map(|c| c.free);
    let mut found = BTreeMap::new();
    for s in scopes {
        for pool in s.pools().list(&ListParams::default()).await?.items {
            found.insert(format!("{}/{}", s.ns, pool.name_any()), free(pool.status).unwrap_or(-1));
        }
    }
    for pool in
        Api::<ferro_ipam::api::GlobalInClusterIPPool>::all(client.clone()).list(&ListParams::default()).await?.items
    {
        found.insert(pool.name_any(), free(pool.status).unwrap_or(-1));
    }
    Ok(found)
}

async fn look(scopes: &[&Scope]) -> Result<Vec<String>> {
    let client = &scopes[0].client;
    let free = free_by_pool(client, scopes).await?;
    let addresses: Api<IPAddress> = Api::all_with(client.clone(), &capi().address_resource());
    let addresses = addresses.list(&ListParams::default()).await?.items;
    let mut problems = Vec::new();
    for s in scopes {
        let claims = s.claims().list(&ListParams::default()).await?.items;
        problems.extend(claims.iter().filter_map(|claim| judge(&s.ns, claim, &free, &addresses)));
        let clusters: Api<Cluster> = Api::namespaced_with(client.clone(), &s.ns, &capi().cluster_resource());
        let clusters = clusters.list(&ListParams::default()).await?.items;
        problems.extend(clusters.iter().filter_map(|cluster| judge_cluster(&s.ns, cluster, &claims)));
    }
    Ok(problems)
}

/// What is wrong with one Cluster of `namespace`, if anything (no client required). A VIP claim
/// that is not served is the claims' check to judge.
fn judge_cluster(namespace: &str, cluster: &Cluster, claims: &[IPAddressClaim]) -> Option<String> {
    let label = format!("Cluster {namespace}/{}", cluster.name_any());
    if cluster.metadata.deletion_timestamp.is_some() {
        return Some(format!("{label} is being deleted, and not gone"));
    }
    let endpoint = cluster.spec.control_plane_endpoint.as_ref().and_then(|e| e.host.as_deref());
    if !cluster.labels().contains_key(CONTROL_PLANE_VIP_LABEL) || endpoint.is_some_and(|h| !h.is_empty()) {
        return None;
    }
    let vip_claim = format!("{}-control-plane-vip", cluster.name_any());
    let ready = |claim: &IPAddressClaim| {
        let conditions = claim.status.as_ref().map(|st| st.conditions.as_slice()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    };
    match claims.iter().find(|c| c.name_any() == vip_claim) {
        None => Some(format!("{label} asks for a VIP and has no VIP claim {vip_claim}")),
        Some(claim) if ready(claim) => Some(format!("{label} has no endpoint, though its VIP claim is served")),
        Some(_) => None,
    }
}

/// What is wrong with one claim of `namespace`, if anything (no client required).
fn judge(
    namespace: &str,
    claim: &IPAddressClaim,
    free: &BTreeMap<String, i64>,
    addresses: &[IPAddress],
) -> Option<String> {
    let label = format!("claim {namespace}/{}", claim.name_any());
    if claim.metadata.deletion_timestamp.is_some() {
        return Some(format!("{label} is being deleted, and not gone"));
    }
    let conditions = claim.status.as_ref().map(|st| st.conditions.as_slice()).unwrap_or_default();
    let Some(ready) = conditions.iter().find(|c| c.type_ == "Ready") else {
        return Some(format!("{label} has no Ready condition"));
    };
    if ready.status == "True" {
        return None;
    }
    let reason = ready.reason.clone().unwrap_or_default();
    let message = ready.message.clone().unwrap_or_default();
    let pool_ref = &claim.spec.pool_ref;
    let pool = match pool_ref.kind.as_str() {
        // A purpose claim of the soak asks for a VIP (by either kind, as a Cluster's VIP claim
        // does), which only the pool `vips` hands out.
        _ if pool_ref.name == VIPS_LABEL => format!("{namespace}/vips"),
        "GlobalInClusterIPPool" => pool_ref.name.clone(),
        _ => format!("{namespace}/{}", pool_ref.name),
    };
    let true_reason = match reason.as_str() {
        "PoolExhausted" => free.get(&pool) == Some(&0),
        "AllocationFailed" => claim.annotations().get(REQUESTED_ADDRESS_ANNOTATION).is_some_and(|wanted| {
            addresses.iter().any(|a| a.spec.address == *wanted && a.spec.claim_ref.name != claim.name_any())
        }),
        _ => false,
    };
    (!true_reason).then(|| {
        format!("{label} waits with reason {reason} ({message}); pool {pool} reports {:?} free", free.get(&pool))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(pool: &str, ready: (&str, &str), annotations: serde_json::Value) -> IPAddressClaim {
        serde_json::from_value(json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
            "metadata": {"name": "c", "namespace": "a", "annotations": annotations},
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool}},
            "status": {"conditions": [{"type": "Ready", "status": ready.0, "reason": ready.1, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap()
    }

    fn address(name: &str, ip: &str) -> IPAddress {
        serde_json::from_value(json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddress",
            "metadata": {"name": name, "namespace": "a"},
            "spec": {"claimRef": {"name": name}, "address": ip, "prefix": 24,
                "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "sticky"}},
        }))
        .unwrap()
    }

    #[test]
    fn exhaustion_is_a_true_reason_only_while_the_pool_reports_nothing_free() {
        let waiting = claim("churn", ("False", "PoolExhausted"), json!({}));
        let full = BTreeMap::from([("a/churn".to_owned(), 0)]);
        let roomy = BTreeMap::from([("a/churn".to_owned(), 3)]);
        assert_eq!(judge("a", &waiting, &full, &[]), None);
        assert!(judge("a", &waiting, &roomy, &[]).is_some_and(|p| p.contains("PoolExhausted")));
        let vip = claim(VIPS_LABEL, ("False", "PoolExhausted"), json!({}));
        assert_eq!(judge("a", &vip, &BTreeMap::from([("a/vips".to_owned(), 0)]), &[]), None);
        let mut clusters_vip = vip.clone();
        clusters_vip.spec.pool_ref.kind = "GlobalInClusterIPPool".into();
        assert_eq!(judge("a", &clusters_vip, &BTreeMap::from([("a/vips".to_owned(), 0)]), &[]), None);
        assert!(judge("a", &clusters_vip, &BTreeMap::from([("a/vips".to_owned(), 3)]), &[]).is_some());
    }

    fn cluster(endpoint: Option<&str>, deleting: bool) -> Cluster {
        let mut cluster: Cluster = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "wl", "namespace": "a", "labels": {CONTROL_PLANE_VIP_LABEL: "true"}},
            "spec": {"controlPlaneEndpoint": endpoint.map(|h| json!({"host": h, "port": 6443}))},
        }))
        .unwrap();
        if deleting {
            cluster.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        cluster
    }

    #[test]
    fn a_cluster_asking_for_a_vip_has_its_endpoint_or_a_waiting_claim_and_one_being_deleted_is_gone() {
        let mut vip_claim = claim(VIPS_LABEL, ("True", "Allocated"), json!({}));
        vip_claim.metadata.name = Some("wl-control-plane-vip".into());
        assert_eq!(judge_cluster("a", &cluster(Some("10.53.0.10"), false), &[]), None);
        assert!(judge_cluster("a", &cluster(None, false), &[]).is_some_and(|p| p.contains("no VIP claim")));
        assert!(judge_cluster("a", &cluster(None, false), std::slice::from_ref(&vip_claim)).is_some());
        let waiting = claim(VIPS_LABEL, ("False", "PoolExhausted"), json!({}));
        let mut waiting = waiting;
        waiting.metadata.name = Some("wl-control-plane-vip".into());
        assert_eq!(judge_cluster("a", &cluster(None, false), &[waiting]), None);
        assert!(
            judge_cluster("a", &cluster(Some("10.53.0.10"), true), &[]).is_some_and(|p| p.contains("being deleted"))
        );
    }

    #[test]
    fn a_requested_address_is_a_true_reason_only_while_another_holds_it() {
        let wanted = json!({REQUESTED_ADDRESS_ANNOTATION: "10.51.0.20"});
        let waiting = claim("sticky", ("False", "AllocationFailed"), wanted);
        assert_eq!(judge("a", &waiting, &BTreeMap::new(), &[address("other", "10.51.0.20")]), None);
        assert!(judge("a", &waiting, &BTreeMap::new(), &[address("other", "10.51.0.21")]).is_some());
        assert!(judge("a", &waiting, &BTreeMap::new(), &[address("c", "10.51.0.20")]).is_some(), "not by itself");
    }

    #[test]
    fn a_served_claim_passes_and_any_other_reason_fails() {
        assert_eq!(judge("a", &claim("churn", ("True", "Allocated"), json!({})), &BTreeMap::new(), &[]), None);
        let conflict = claim("churn", ("False", "AddressConflict"), json!({}));
        assert!(judge("a", &conflict, &BTreeMap::new(), &[]).is_some());
    }
}
