//! A `kubectl rollout restart` with control-plane VIP Clusters present. Opted-in
//! Clusters in a namespace that sorts first hold their VIPs, while enough bound claims elsewhere
//! make the new leader's `IPAddress` listing take a moment: its claim store then holds the VIP
//! claims (listed in the first page) before its address cache holds their addresses (complete
//! only at the end of the listing). The Clusters are written to all along, as Cluster API's own
//! controllers keep doing, so that the VIP controller looks at them again and again while the
//! new leader lists. No VIP claim may be deleted for it, before, during or after the restart:
//! every endpoint stays held by its own claim's `IPAddress`, no `ControlPlaneVIPReleased` Event
//! is recorded, and a Cluster that opts in afterwards gets a VIP of its own, not one still
//! written in another Cluster's endpoint.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use ferro_ipam_e2e::cluster_writes::{Cadence, ClusterWrites};
use ferro_ipam_e2e::objects::{Scope, capi, cluster_api_version};
use ferro_ipam_e2e::process::wait_until;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;

use super::under_load::{create_claims, wait_served};
use super::{DEPLOYMENT, SYSTEM, cluster, install_kustomize, kubectl, pod_name, pod_ready, pods, report};

/// The opt-in label of the control-plane VIP controller.
const OPT_IN: &str = "ferro-ipam.dev/control-plane-vip";
/// The purpose label of the pools that serve VIPs.
const VIPS: &str = "cluster-api-vips";
/// The Event the VIP controller records when it releases a VIP claim.
const RELEASED: &str = "ControlPlaneVIPReleased";
/// The controller pods' selector.
const CONTROLLERS: &str = "app.kubernetes.io/component=controller";
/// Opted-in Clusters before the restart.
const CLUSTERS: usize = 8;
/// Bound claims in another namespace: with the VIP addresses, four pages of the new leader's
/// `IPAddress` listing (500 a page).
const CLAIMS: usize = 1_500;
/// How long the VIPs are watched once the new pods are Ready and a new one holds the Lease.
const WATCHED_AFTER: Duration = Duration::from_secs(20);
/// How long the rollout may take, to both new pods Ready and the Lease taken.
const ROLLOUT: Duration = Duration::from_secs(240);

/// One Cluster's VIP as the API server has it.
#[derive(Clone, Default, PartialEq, Eq)]
struct Vip {
    /// `spec.controlPlaneEndpoint.host`.
    endpoint: Option<String>,
    claim_uid: Option<String>,
    /// The VIP claim has a deletionTimestamp.
    claim_deleting: bool,
    /// The `IPAddress` the claim's status names.
    address_uid: Option<String>,
    address: Option<String>,
}

impl Vip {
    /// Whole: an endpoint, held by a live VIP claim whose `IPAddress` records that address.
    fn whole(&self) -> bool {
        self.claim_uid.is_some()
            && !self.claim_deleting
            && self.address_uid.is_some()
            && self.endpoint.is_some()
            && self.endpoint == self.address
    }

    fn describe(&self) -> String {
        let shown = |value: &Option<String>| value.clone().unwrap_or_else(|| "none".to_owned());
        format!(
            "endpoint {}, VIP claim uid {}{}, IPAddress uid {} holding {}",
            shown(&self.endpoint),
            shown(&self.claim_uid),
            if self.claim_deleting { " (being deleted)" } else { "" },
            shown(&self.address_uid),
            shown(&self.address)
        )
    }
}

fn clusters(scope: &Scope) -> Api<DynamicObject> {
    Api::namespaced_with(scope.client.clone(), &scope.ns, &capi().cluster_resource())
}

/// Every Cluster of the namespace with its VIP, from three lists.
async fn observe(scope: &Scope) -> Result<BTreeMap<String, Vip>> {
    let all = ListParams::default();
    let claims = scope.claims().list(&all).await?.items;
    let addresses = scope.addresses().list(&all).await?.items;
    let mut vips = BTreeMap::new();
    for cluster in clusters(scope).list(&all).await?.items {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let claim_name = format!("{name}-control-plane-vip");
        let claim = claims.iter().find(|c| c.metadata.name.as_deref() == Some(claim_name.as_str()));
        let address_name = claim.and_then(|c| Some(c.status.as_ref()?.address_ref.as_ref()?.name.clone()));
        let address = addresses.iter().find(|a| a.metadata.name.is_some() && a.metadata.name == address_name);
        let host = cluster.data["spec"]["controlPlaneEndpoint"]["host"].as_str().filter(|h| !h.is_empty());
        let vip = Vip {
            endpoint: host.map(str::to_owned),
            claim_uid: claim.and_then(|c| c.metadata.uid.clone()),
            claim_deleting: claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
            address_uid: address.and_then(|a| a.metadata.uid.clone()),
            address: address.map(|a| a.spec.address.clone()),
        };
        vips.insert(name, vip);
    }
    Ok(vips)
}

/// The Clusters of the namespace a `ControlPlaneVIPReleased` Event was recorded on.
async fn released_on(scope: &Scope) -> Result<Vec<String>> {
    let events: Api<Event> = Api::namespaced(scope.client.clone(), &scope.ns);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(RELEASED))
        .filter_map(|e| e.regarding.filter(|r| r.kind.as_deref() == Some("Cluster"))?.name)
        .collect())
}

/// What is no longer as it was in `before`: a VIP claim deleted or replaced, its `IPAddress`
/// replaced or changed, an endpoint changed, a VIP released.
async fn changes(scope: &Scope, before: &BTreeMap<String, Vip>) -> Result<Vec<String>> {
    let now = observe(scope).await?;
    let mut changes: Vec<String> = before
        .iter()
        .filter_map(|(name, was)| {
            let is = now.get(name).cloned().unwrap_or_default();
            (is != *was).then(|| format!("Cluster {name}: was {}; is {}", was.describe(), is.describe()))
        })
        .collect();
    let released = released_on(scope).await?;
    changes.extend(released.into_iter().map(|c| format!("a {RELEASED} Event was recorded on Cluster {c}")));
    Ok(changes)
}

/// Fails with every change since `before`.
async fn assert_intact(scope: &Scope, before: &BTreeMap<String, Vip>, when: &str) {
    let changes = changes(scope, before).await.unwrap_or_else(|e| panic!("{when}: reading the VIPs: {e:#}"));
    assert!(changes.is_empty(), "{when}, of the {} VIPs:\n{}", before.len(), changes.join("\n"));
}

/// A `GlobalInClusterIPPool` labelled for VIPs of every provider, once Ready.
async fn vip_pool(scope: &Scope) -> String {
    let name = scope.global_name("vips");
    let labels = json!({VIPS: "true", "cluster-api-allow-all-providers": "true"});
    let spec = json!({"addresses": ["10.90.0.10-10.90.0.60"], "prefix": 24, "gateway": "10.90.0.1"});
    let pool = json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": name, "labels": labels}, "spec": spec});
    scope.create(pool).await.unwrap_or_else(|e| panic!("the VIP pool: {e:#}"));
    scope
        .eventually(&format!("pool {name} Ready"), Duration::from_secs(60), || async {
            scope.global_pool_ready(&name).await.is_some_and(|(status, _, _)| status == "True")
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    name
}

/// A Cluster that asks for a control-plane VIP (its spec may not be empty).
async fn opted_in_cluster(scope: &Scope, name: &str) {
    let cluster = json!({"apiVersion": cluster_api_version(), "kind": "Cluster",
        "metadata": {"name": name, "labels": {OPT_IN: "true"}}, "spec": {"paused": false}});
    scope.create(cluster).await.unwrap_or_else(|e| panic!("Cluster {name}: {e:#}"));
}

/// Waits until each Cluster of `names` has its endpoint from its VIP claim; returns them all.
async fn wait_vips(scope: &Scope, names: &[String]) -> BTreeMap<String, Vip> {
    let whole = |vips: &BTreeMap<String, Vip>| names.iter().all(|n| vips.get(n).is_some_and(Vip::whole));
    scope
        .eventually(&format!("{} Clusters hold their VIPs", names.len()), Duration::from_secs(120), || async {
            observe(scope).await.is_ok_and(|vips| whole(&vips))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    observe(scope).await.unwrap_or_else(|e| panic!("reading the VIPs: {e:#}"))
}

/// [`CLAIMS`] claims in the load namespace, created 32 at a time and served; returns the time.
async fn make_load(scope: &Scope) -> Duration {
    let started = Instant::now();
    scope.pool("load", json!({"addresses": ["10.91.0.0/20"], "prefix": 20})).await.unwrap();
    create_claims(scope, "load", "c", CLAIMS).await;
    wait_served(scope, CLAIMS, Duration::from_secs(300)).await;
    started.elapsed()
}

/// The Clusters are written all along, as Cluster API's controllers write theirs. Without the
/// writes, a VIP controller that judged a VIP claim whose `IPAddress` it had not listed yet as
/// "endpoint set by someone else" released VIPs in 1 run of 3 here, only when its first look at
/// the Clusters fell between the two listings; with them, in 3 of 3.
const WRITES: Cadence = Cadence { each: Duration::ZERO, round: Duration::from_millis(100) };

/// Times of the restart, from `kubectl rollout restart`.
struct Restart {
    /// To the Lease held by a new pod.
    lease: Duration,
    /// To both new pods Ready, the old ones gone, and the Lease held by a new pod.
    done: Duration,
}

/// `kubectl rollout restart`, checking the VIPs all along, until both pods are new and Ready,
/// the old ones gone, and a new one holds the Lease.
async fn restart_checking(scope: &Scope, before: &BTreeMap<String, Vip>) -> Restart {
    let old: Vec<String> = pods(SYSTEM, CONTROLLERS).iter().map(pod_name).collect();
    let started = Instant::now();
    kubectl(&["rollout", "restart", "-n", SYSTEM, &format!("deployment/{DEPLOYMENT}")]);
    let mut lease = None;
    loop {
        assert_intact(scope, before, "during the rollout restart").await;
        if lease.is_none() && super::lease_holder().is_some_and(|holder| !old.contains(&holder)) {
            lease = Some(started.elapsed());
        }
        let current = pods(SYSTEM, CONTROLLERS);
        let renewed = current.len() == 2 && current.iter().all(|p| pod_ready(p) && !old.contains(&pod_name(p)));
        if let (true, Some(lease)) = (renewed, lease) {
            return Restart { lease, done: started.elapsed() };
        }
        assert!(started.elapsed() < ROLLOUT, "no two new Ready pods with the Lease within {ROLLOUT:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Checks the VIPs twice a second for `duration`.
async fn keep_intact(scope: &Scope, before: &BTreeMap<String, Vip>, duration: Duration) {
    let started = Instant::now();
    while started.elapsed() < duration {
        assert_intact(scope, before, "after the restart").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A Cluster opting in now gets a VIP that is no other Cluster's endpoint; returns the time.
async fn a_new_cluster_gets_a_vip_of_its_own(scope: &Scope) -> Duration {
    let started = Instant::now();
    let name = "after-restart".to_owned();
    opted_in_cluster(scope, &name).await;
    let vips = wait_vips(scope, std::slice::from_ref(&name)).await;
    let took = started.elapsed();
    let new = vips[&name].endpoint.clone().unwrap_or_default();
    let holders: Vec<&str> = vips
        .iter()
        .filter(|(n, v)| **n != name && v.endpoint.as_ref() == Some(&new))
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(holders.is_empty(), "the new Cluster got {new}, already the endpoint of {}", holders.join(", "));
    took
}

/// Removes what the scenario made, pass or fail: its namespaces (the Clusters' VIP claims and the
/// load's claims go back to their pools through ferro-ipam's finalizers), then the VIP pool.
struct Cleanup {
    namespaces: Vec<String>,
    pool: String,
    /// When the first namespace deletion was asked for.
    started: Option<Instant>,
    done: bool,
}

impl Cleanup {
    /// Asks for the deletion of `namespace`, waiting for nothing. Its claims are deleted one by
    /// one first, as a user's `kubectl delete --all` does: the namespace controller deletes them
    /// by collection, one request for all, which on two busy cores outlasted the API server's
    /// 60 s request timeout with 1,500 claims and their addresses, and it retries only every
    /// couple of minutes.
    fn start(&mut self, namespace: &str) {
        self.started.get_or_insert_with(Instant::now);
        let _ = cluster().kubectl_ok(&["delete", "ipaddressclaims", "--all", "-n", namespace, "--wait=false"]);
        let _ = cluster().kubectl_ok(&["delete", "namespace", namespace, "--ignore-not-found", "--wait=false"]);
    }

    /// What holds up each namespace still there, as its deletion conditions say.
    fn remaining(&self) -> String {
        let described = self.namespaces.iter().filter_map(|ns| {
            let found = cluster().kubectl_ok(&["get", "namespace", ns, "-o", "json"]).ok()?;
            let namespace: serde_json::Value = serde_json::from_str(&found).ok()?;
            let conditions = namespace["status"]["conditions"].as_array().cloned().unwrap_or_default();
            let holding: Vec<String> = conditions
                .iter()
                .filter(|c| c["status"] == "True")
                .map(|c| format!("{}: {}", c["type"].as_str().unwrap_or("?"), c["message"].as_str().unwrap_or("")))
                .collect();
            Some(format!("{ns} ({})", holding.join("; ")))
        });
        described.collect::<Vec<_>>().join(", ")
    }

    /// Deletes all and waits until it is gone; returns the time from the first deletion.
    fn remove(&mut self) -> Result<Duration> {
        for namespace in self.namespaces.clone() {
            self.start(&namespace);
        }
        let gone = wait_until(Duration::from_secs(300), || {
            let listed = cluster().kubectl_ok(&["get", "namespaces", "-o", "name"]).unwrap_or_default();
            self.namespaces.iter().all(|ns| !listed.lines().any(|l| l == format!("namespace/{ns}")))
        });
        ensure!(gone, "namespaces still there after 300 s: {}; {}", self.remaining(), leader_warnings());
        cluster().kubectl_ok(&[
            "delete",
            "globalinclusterippool",
            &self.pool,
            "--ignore-not-found",
            "--timeout=60s",
        ])?;
        self.done = true;
        Ok(self.started.map_or(Duration::ZERO, |started| started.elapsed()))
    }
}

/// The last warnings and errors of the Lease holder's log, for a cleanup that did not finish.
fn leader_warnings() -> String {
    let Some(leader) = super::lease_holder() else {
        return "no Ready pod holds the Lease".into();
    };
    let log = cluster().kubectl_ok(&["logs", "-n", SYSTEM, &leader, "--tail=5000"]).unwrap_or_default();
    let warnings: Vec<&str> =
        log.lines().filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\"")).collect();
    let last = &warnings[warnings.len().saturating_sub(20)..];
    format!("the Lease holder {leader} logged {} warnings and errors; the last:\n{}", warnings.len(), last.join("\n"))
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.remove();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_restart_with_vip_clusters_releases_no_vip_and_hands_none_out_twice() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    // "aaa": the VIP claims and addresses come first in every listing.
    let vips = Scope::on(&cluster().plane, "aaa-vips").await;
    let load = Scope::on(&cluster().plane, "node-vip-load").await;
    let pool = vip_pool(&vips).await;
    let namespaces = vec![vips.ns.clone(), load.ns.clone()];
    let mut cleanup = Cleanup { namespaces, pool, started: None, done: false };
    let loaded_in = make_load(&load).await;
    let names: Vec<String> = (0..CLUSTERS).map(|n| format!("wl-{n}")).collect();
    for name in &names {
        opted_in_cluster(&vips, name).await;
    }
    let before = wait_vips(&vips, &names).await;
    assert_intact(&vips, &before, "before the restart").await;

    let writes = ClusterWrites::start(&vips, &names, WRITES);
    let restart = restart_checking(&vips, &before).await;
    let ready = super::wait_ready_pods(2, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
    // The load's claims are released meanwhile: the VIPs are another namespace's.
    cleanup.start(&load.ns);
    keep_intact(&vips, &before, WATCHED_AFTER).await;
    let written = writes.stop();
    let new_vip_in = a_new_cluster_gets_a_vip_of_its_own(&vips).await;
    assert_intact(&vips, &before, "after a new Cluster got its VIP").await;

    super::report_readiness("vip rollout restart", &ready);
    let removed_in = cleanup.remove().unwrap_or_else(|e| panic!("cleaning up: {e:#}"));
    report(&format!(
        "vip rollout restart: {CLAIMS} claims made and served in {:.0}s; Lease held by a new pod {:.1}s and both \
         new pods Ready {:.1}s after the restart; {CLUSTERS} VIPs intact throughout and {WATCHED_AFTER:?} after, \
         {written} writes to their Clusters meanwhile; a new Cluster's VIP in {:.1}s; cleaned up in {:.0}s",
        loaded_in.as_secs_f64(),
        restart.lease.as_secs_f64(),
        restart.done.as_secs_f64(),
        new_vip_in.as_secs_f64(),
        removed_in.as_secs_f64()
    ));
}
