//! Memory under a real cgroup (kubelet's limits, enforced by the kernel's memory controller): a
//! pod serves 5,000 claims under the shipped limit without a restart, and a pod given too small
//! a limit is OOM-killed, restarts, and loses nothing: every address stays what it was, and once
//! the limit is back every claim that waited is served, none twice.
//!
//! It runs last (scenarios run in name order): its 5,000 claims stay, for no later scenario to
//! list, and go with the cluster. Deleting them through the namespace takes many minutes
//! (each claim's release is an API round trip or three).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use super::{DEPLOYMENT, SYSTEM, cluster, install_kustomize, kubectl, kubectl_json, pod_name, pods, report};

/// Enough to need several times the idle memory; more only lengthens `make test` (20,000 took
/// 4 to 7 minutes to create and serve on 2 cores). docs/sizing.md gives the memory per claim
/// up to 100,000, from the benchmark.
const CLAIMS: usize = 5_000;
/// What deploy/ gives the container; restored exactly, so that a later `kubectl apply
/// --server-side -k deploy/` finds its own value and no conflict.
const SHIPPED_LIMIT: &str = "512Mi";
/// Enough to start (a stand-by's working set is about 2 MiB), too little for 5,000 claims (the
/// leader's working set is about 20 MiB with them; it fitted under 32 MiB once the claim store
/// of its own landed, and this limit had to come down to still kill it).
const TOO_SMALL: &str = "12Mi";
/// deploy/'s memory request, and one that fits under [`TOO_SMALL`].
const SHIPPED_REQUEST: &str = "64Mi";
const SMALL_REQUEST: &str = "8Mi";

/// `count` claims named `<prefix>-<n>` on the `InClusterIPPool` `pool`, created 32 at a time.
pub(super) async fn create_claims(scope: &Scope, pool: &str, prefix: &str, count: usize) {
    futures::stream::iter(0..count)
        .map(|n| async move { scope.claim(&format!("{prefix}-{n}"), "InClusterIPPool", pool).await })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap_or_else(|e| panic!("creating claims: {e:#}"));
}

/// Waits until `count` claims of the namespace are Ready; fails after `timeout`.
pub(super) async fn wait_served(scope: &Scope, count: usize, timeout: Duration) {
    scope
        .eventually(&format!("{count} claims served"), timeout, || async { scope.ready_claims().await >= count })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// The working set kubelet reports for each controller container, in MiB.
fn working_sets() -> BTreeMap<String, u64> {
    let node = kubectl_json(&["get", "nodes"])["items"][0]["metadata"]["name"].as_str().unwrap().to_owned();
    let summary: Value =
        serde_json::from_str(&kubectl(&["get", "--raw", &format!("/api/v1/nodes/{node}/proxy/stats/summary")]))
            .expect("kubelet's summary is JSON");
    summary["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["podRef"]["namespace"] == SYSTEM)
        .filter_map(|p| {
            let bytes = p["containers"][0]["memory"]["workingSetBytes"].as_u64()?;
            Some((p["podRef"]["name"].as_str()?.to_owned(), bytes >> 20))
        })
        .collect()
}

fn restarts(pod: &Value) -> u64 {
    pod["status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap_or(0)
}

fn set_memory(request: &str, limit: &str) -> anyhow::Result<String> {
    cluster().kubectl_ok(&[
        "set",
        "resources",
        "-n",
        SYSTEM,
        &format!("deployment/{DEPLOYMENT}"),
        &format!("--requests=memory={request}"),
        &format!("--limits=memory={limit}"),
    ])
}

/// Puts back what the scenario changed, whether it passed or not: the shipped memory and two
/// replicas.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = set_memory(SHIPPED_REQUEST, SHIPPED_LIMIT);
        let _ = cluster().kubectl_ok(&["scale", "-n", SYSTEM, &format!("deployment/{DEPLOYMENT}"), "--replicas=2"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn thousands_of_claims_fit_the_shipped_limit_and_an_oom_kill_loses_nothing() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-memory").await;
    let _restore = Restore;
    scope.pool("big", json!({"addresses": ["10.64.0.0/17"], "prefix": 17})).await.unwrap();

    // 5,000 claims under the shipped limit. The pods may come from an earlier scenario that
    // killed a container on purpose: only restarts from here on count.
    let restarts_before: BTreeMap<String, u64> =
        pods(SYSTEM, "app.kubernetes.io/component=controller").iter().map(|p| (pod_name(p), restarts(p))).collect();
    let started = Instant::now();
    create_claims(&scope, "big", "c", CLAIMS).await;
    wait_served(&scope, CLAIMS, Duration::from_secs(600)).await;
    let served_in = started.elapsed().as_secs();
    let controllers = pods(SYSTEM, "app.kubernetes.io/component=controller");
    for pod in &controllers {
        let before = restarts_before.get(&pod_name(pod)).copied().unwrap_or(0);
        assert_eq!(restarts(pod), before, "{} restarted under the shipped limit: {}", pod_name(pod), pod["status"]);
    }
    report(&format!(
        "memory: {CLAIMS} claims served in {served_in}s under {SHIPPED_LIMIT}, no restart; working sets (MiB): {:?}",
        working_sets()
    ));
    let before = scope.address_map().await.unwrap();
    assert_eq!(before.len(), CLAIMS);

    // One replica, too small a limit, and claims waiting for it: the kernel kills it.
    super::scale_controller(0);
    set_memory(SMALL_REQUEST, TOO_SMALL).unwrap_or_else(|e| panic!("{e:#}"));
    create_claims(&scope, "big", "w", 200).await;
    super::scale_controller(1);
    let killed = Instant::now();
    let oom = scope
        .eventually("the replica OOM-killed and restarted", Duration::from_secs(240), || async {
            pods(SYSTEM, "app.kubernetes.io/component=controller").iter().any(|p| {
                let last = &p["status"]["containerStatuses"][0]["lastState"]["terminated"];
                last["reason"] == "OOMKilled" && restarts(p) >= 1
            })
        })
        .await;
    let status: Vec<Value> =
        pods(SYSTEM, "app.kubernetes.io/component=controller").iter().map(|p| p["status"].clone()).collect();
    oom.unwrap_or_else(|e| panic!("{e:#}: {status:?}"));
    report(&format!("memory: under {TOO_SMALL}, OOM-killed and restarted within {}s", killed.elapsed().as_secs()));

    // Nothing lost, nothing handed out twice, while it was being killed. Statuses and counts
    // are not looked at yet: a run killed between an IPAddress and its claim's status leaves
    // that status to a run that lives long enough, which comes once the limit is back.
    let during = scope.address_map().await.unwrap();
    for (name, ip) in &before {
        assert_eq!(during.get(name), Some(ip), "{name} lost or changed its address under the OOM kills");
    }
    ferro_ipam_e2e::invariants::Check::new(&scope.client, &[&scope.ns])
        .fatal_only()
        .run()
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // The shipped limit back: every claim that waited is served, the others untouched.
    set_memory(SHIPPED_REQUEST, SHIPPED_LIMIT).unwrap_or_else(|e| panic!("{e:#}"));
    super::scale_controller(2);
    let restored = Instant::now();
    wait_served(&scope, CLAIMS + 200, Duration::from_secs(300)).await;
    report(&format!(
        "memory: {SHIPPED_LIMIT} restored, the 200 waiting claims served in {}s",
        restored.elapsed().as_secs()
    ));
    let after = scope.address_map().await.unwrap();
    for (name, ip) in &before {
        assert_eq!(after.get(name), Some(ip), "{name} changed its address");
    }
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{e:#}"));
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
}
