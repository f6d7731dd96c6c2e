//! Disruptions of the installed Deployment under a claim storm, as a cluster meets them: the
//! leader pod deleted (`kubectl delete pod`) and its container killed by the runtime, a
//! `kubectl rollout restart`, an image change, evictions checked by the PodDisruptionBudget, and a
//! `kubectl drain` of a one-replica install, which the budget lets through.
//! Every claim must be served within 30 s of its creation, and the invariant checker must stay
//! clean (no address twice, counts exact).

use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::process::wait_until;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams};
use serde_json::json;

use super::{
    DEPLOYMENT, IMAGE, SYSTEM, cluster, install_kustomize, kubectl, kubectl_json, leader_and_standby, pod_name, pods,
    report, report_readiness, scale_controller, wait_ready_pods,
};

/// The longest a claim may wait, from its creation to its address, through any disruption.
const BOUND: Duration = Duration::from_secs(30);

/// Claims created one after another for `duration`, from a task of their own.
struct Storm {
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Storm {
    fn start(scope: &Scope, pool: &str, duration: Duration) -> Storm {
        let claims = scope.claims();
        let pool = pool.to_owned();
        let task = tokio::spawn(async move {
            let mut names = Vec::new();
            let started = Instant::now();
            while started.elapsed() < duration {
                let name = format!("storm-{}", names.len());
                let claim = json!({
                    "apiVersion": ferro_ipam_e2e::objects::ipam_api_version(),
                    "kind": "IPAddressClaim",
                    "metadata": {"name": name},
                    "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool}},
                });
                let claim = serde_json::from_value(claim).expect("a claim");
                if claims.create(&Default::default(), &claim).await.is_ok() {
                    names.push(name);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            names
        });
        Storm { task }
    }

    async fn names(self) -> Vec<String> {
        self.task.await.expect("the storm task")
    }
}

/// Waits for every claim, then checks that none waited longer than [`BOUND`] from its creation
/// to its `Ready` condition (the API server's own timestamps), and runs the invariant checker.
async fn every_claim_served_within_bound(scope: &Scope, names: &[String], scenario: &str) {
    for name in names {
        scope.wait_allocated(name, Duration::from_secs(90)).await.unwrap_or_else(|e| panic!("{scenario}: {e:#}"));
    }
    let claims = kubectl_json(&["get", "ipaddressclaims.ipam.cluster.x-k8s.io", "-n", &scope.ns]);
    let mut longest = 0;
    for claim in claims["items"].as_array().expect("a list") {
        let created = super::timestamp(claim["metadata"]["creationTimestamp"].as_str().unwrap()).unwrap();
        let ready = claim["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready" && c["status"] == "True"))
            .and_then(|c| super::timestamp(c["lastTransitionTime"].as_str()?))
            .unwrap_or_else(|| panic!("{scenario}: claim {} has no Ready time", claim["metadata"]["name"]));
        longest = longest.max(ready - created);
    }
    assert!(
        longest <= BOUND.as_secs() as i64,
        "{scenario}: a claim waited {longest}s for its address (bound {BOUND:?})"
    );
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns])
        .await
        .unwrap_or_else(|e| panic!("{scenario}: {e:#}"));
    report(&format!("{scenario}: {} claims, longest wait {longest}s", names.len()));
}

async fn storm_scope(hint: &str) -> Scope {
    let scope = Scope::on(&cluster().plane, hint).await;
    scope.pool("storm", json!({"addresses": ["10.40.0.0/22"], "prefix": 22})).await.unwrap();
    scope
}

/// How often a pod's manager container has been restarted.
fn restarts(pod: &str) -> u64 {
    let pod = kubectl_json(&["get", "pod", "-n", SYSTEM, pod]);
    pod["status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap_or(0)
}

/// The containerd id of a pod's manager container.
fn container_id(pod: &str) -> String {
    let pod = kubectl_json(&["get", "pod", "-n", SYSTEM, pod]);
    let id = pod["status"]["containerStatuses"][0]["containerID"].as_str().expect("a running container");
    id.trim_start_matches("containerd://").to_owned()
}

#[tokio::test]
async fn the_stand_by_takes_over_when_the_leader_pod_is_deleted_or_its_container_killed() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    for how in ["deleted", "killed"] {
        let (leader, standby) = leader_and_standby(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e:#}"));
        let scope = storm_scope(&format!("node-takeover-{how}")).await;
        let storm = Storm::start(&scope, "storm", Duration::from_secs(20));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let restarts_before = restarts(&leader);
        let disrupted = Instant::now();
        match how {
            "deleted" => drop(kubectl(&["delete", "pod", "-n", SYSTEM, &leader, "--wait=false"])),
            _ => drop(cluster().ctr(&["tasks", "kill", "--signal", "SIGKILL", &container_id(&leader)]).unwrap()),
        }
        // A killed container is started again in its pod, under the same identity: either the
        // stand-by takes the Lease first, or the restarted leader renews its own. The Lease is
        // counted as held again once a Ready pod holds it, by one or the other.
        let held = wait_until(Duration::from_secs(45), || match super::lease_holder() {
            Some(holder) if holder != leader => true,
            Some(_) => how == "killed" && restarts(&leader) > restarts_before,
            None => false,
        });
        assert!(held, "no Ready holder of the Lease within 45 s after the leader was {how}");
        let holder = super::lease_holder().unwrap_or_default();
        let by = match holder {
            _ if holder == leader => "the restarted leader",
            _ if holder == standby => "the stand-by",
            _ => "the Deployment's new pod",
        };
        report(&format!(
            "leader {how}: Lease held by {by} {holder} {:.1}s later (stand-by was {standby})",
            disrupted.elapsed().as_secs_f64()
        ));
        let names = storm.names().await;
        every_claim_served_within_bound(&scope, &names, &format!("leader {how}")).await;
        wait_ready_pods(2, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e:#}"));
    }
}

/// Waits until every pod of `old` is gone, and returns the longest time from its deletion (as
/// the API server stamped it) to its disappearance.
fn wait_old_pods_gone(old: &[String]) -> i64 {
    let mut deleted_at = std::collections::BTreeMap::new();
    let mut longest = 0;
    let all_gone = wait_until(Duration::from_secs(180), || {
        let current = pods(SYSTEM, "app.kubernetes.io/component=controller");
        let now = chrono_now();
        for pod in &current {
            if let Some(at) = pod["metadata"]["deletionTimestamp"].as_str().and_then(super::timestamp) {
                deleted_at.insert(pod_name(pod), at);
            }
        }
        for name in old {
            if !current.iter().any(|p| pod_name(p) == *name)
                && let Some(at) = deleted_at.remove(name)
            {
                longest = longest.max(now - at);
            }
        }
        old.iter().all(|name| !current.iter().any(|p| pod_name(p) == *name))
    });
    assert!(all_gone, "old pods still present: {old:?}");
    longest
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

#[tokio::test]
async fn rollout_restart_and_an_image_change_lose_no_claim_and_old_pods_exit_within_their_grace() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let next = format!("{IMAGE}-next");
    cluster().ctr(&["images", "tag", "--force", IMAGE, &next]).unwrap();
    let deployment = format!("deployment/{DEPLOYMENT}");
    let (to_next, back) = (format!("manager={next}"), format!("manager={IMAGE}"));
    let steps: [(&str, Vec<&str>); 3] = [
        ("rollout restart", vec!["rollout", "restart", "-n", SYSTEM, &deployment]),
        ("image change", vec!["set", "image", "-n", SYSTEM, &deployment, &to_next]),
        ("image change back", vec!["set", "image", "-n", SYSTEM, &deployment, &back]),
    ];
    for (step, command) in steps {
        let old: Vec<String> = pods(SYSTEM, "app.kubernetes.io/component=controller").iter().map(pod_name).collect();
        let scope = storm_scope(&format!("node-{}", step.replace(' ', "-"))).await;
        let storm = Storm::start(&scope, "storm", Duration::from_secs(25));
        tokio::time::sleep(Duration::from_secs(3)).await;
        kubectl(&command);
        let longest_exit = tokio::task::spawn_blocking(move || wait_old_pods_gone(&old)).await.unwrap();
        assert!(longest_exit <= 30, "{step}: an old pod took {longest_exit}s to exit (grace 30s)");
        kubectl(&["rollout", "status", "-n", SYSTEM, &deployment, "--timeout=180s"]);
        let names = storm.names().await;
        every_claim_served_within_bound(&scope, &names, step).await;
        let pods = wait_ready_pods(2, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e:#}"));
        report_readiness(step, &pods);
        report(&format!("{step}: old pods gone at most {longest_exit}s after their deletion"));
    }
}

/// The controller's PodDisruptionBudget.
fn budget() -> serde_json::Value {
    kubectl_json(&["get", "pdb", "-n", SYSTEM, DEPLOYMENT])
}

/// Whether the disruption controller has counted exactly `replicas` healthy controller pods, and
/// no other, at the budget's current generation.
fn budget_counted(replicas: usize) -> bool {
    let budget = budget();
    let status = &budget["status"];
    status["observedGeneration"] == budget["metadata"]["generation"]
        && status["expectedPods"] == replicas
        && status["currentHealthy"] == replicas
        && pods(SYSTEM, "app.kubernetes.io/component=controller").len() == replicas
}

/// Makes the node schedulable again when dropped, whether the scenario passed or not.
struct Uncordon(String);

impl Drop for Uncordon {
    fn drop(&mut self) {
        let _ = cluster().kubectl_ok(&["uncordon", &self.0]);
    }
}

#[tokio::test]
async fn a_second_eviction_while_one_pod_is_down_is_refused_by_the_disruption_budget() {
    let started = Instant::now();
    let step = |what: &str| report(&format!("second eviction: {what} after {:.1}s", started.elapsed().as_secs_f64()));
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    step("installed");
    let client = cluster().plane.client_without_retries().await;
    let api: Api<Pod> = Api::namespaced(client, SYSTEM);
    let names: Vec<String> = super::ready_controller_pods().iter().map(pod_name).collect();
    assert_eq!(names.len(), 2);
    // The disruption controller must have counted both pods, and no third one, before the
    // evictions: a status computed during the previous scenario's rollout may still allow one.
    assert!(
        wait_until(Duration::from_secs(60), || budget_counted(2) && budget()["status"]["disruptionsAllowed"] == 1),
        "the PodDisruptionBudget never counted two healthy pods allowing one disruption: {}",
        budget()["status"]
    );
    step("the budget counted two pods");
    // As `kubectl drain` does: the node cordoned first, so that the evicted pod's replacement
    // cannot start and one pod stays down (on a schedulable node it is back within seconds,
    // and the budget rightly allows the next eviction).
    let node = node_name();
    let _uncordon = Uncordon(node.clone());
    kubectl(&["cordon", &node]);
    api.evict(&names[0], &EvictParams::default()).await.unwrap_or_else(|e| panic!("the first eviction: {e}"));
    match api.evict(&names[1], &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 429, "the second eviction: {status:?}");
        }
        other => panic!(
            "the second eviction, with {} down, was not refused: {other:?}; the budget: {}; the pods: {:?}",
            names[0],
            budget()["status"],
            super::pods(SYSTEM, "app.kubernetes.io/component=controller")
                .iter()
                .map(|p| format!(
                    "{} deleting={} ready={}",
                    pod_name(p),
                    !p["metadata"]["deletionTimestamp"].is_null(),
                    super::pod_ready(p)
                ))
                .collect::<Vec<_>>()
        ),
    }
    step("the second eviction refused");
    drop(_uncordon);
    replace_pending_controller_pods();
    wait_ready_pods(2, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e:#}"));
    step("two pods Ready again");
}

/// The node's name (the cluster has one).
fn node_name() -> String {
    kubectl_json(&["get", "nodes"])["items"][0]["metadata"]["name"].as_str().unwrap().to_owned()
}

/// Deletes the controller pods left Pending on the cordoned node: the scheduler retries a pod it
/// found unschedulable only after a back-off of up to five minutes; a new replacement is placed
/// at once.
fn replace_pending_controller_pods() {
    kubectl(&[
        "delete",
        "pods",
        "-n",
        SYSTEM,
        "-l",
        "app.kubernetes.io/component=controller",
        "--field-selector=status.phase=Pending",
    ]);
}

#[tokio::test]
async fn a_drain_of_a_one_replica_install_is_not_blocked_by_the_disruption_budget() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    scale_controller(1);
    assert!(
        wait_until(Duration::from_secs(90), || budget_counted(1)),
        "the PodDisruptionBudget never counted the one replica: {}",
        budget()["status"]
    );
    assert_eq!(budget()["status"]["disruptionsAllowed"], 1, "one replica, and the budget allows its eviction");
    let pod = pod_name(&pods(SYSTEM, "app.kubernetes.io/component=controller")[0]);

    // `kubectl drain` retries an eviction the budget refuses until its timeout, then fails.
    let node = node_name();
    let _uncordon = Uncordon(node.clone());
    let started = Instant::now();
    cluster()
        .kubectl_ok(&[
            "drain",
            &node,
            "--pod-selector=app.kubernetes.io/component=controller",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=60s",
        ])
        .unwrap_or_else(|e| {
            panic!("draining the node of the one replica {pod}: {e:#}; the budget: {}", budget()["status"])
        });
    report(&format!("drain at one replica: {pod} evicted, the drain done in {:.1}s", started.elapsed().as_secs_f64()));
    drop(_uncordon);
    replace_pending_controller_pods();
    scale_controller(2);
    wait_ready_pods(2, Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e:#}"));
}
