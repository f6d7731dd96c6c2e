//! Upgrades from the previous release's files ([`previous_release`], `make previous-dist`) to the
//! current release's ([`release`]) by each install path users take: `kubectl apply -f
//! install.yaml`; `helm install` of the packaged chart, `helm upgrade`, then `helm rollback`; and
//! `clusterctl generate provider` of each version from a local repository holding both, applied.
//!
//! One pool and 500 bound claims are made once, under the previous release, and shared by the
//! paths: each path installs the previous release (which serves them on), then moves to the other
//! release while claims are being created. After every move: each IPAddress is the same object
//! (uid) with the same address, every claim created meanwhile is served, the CRDs are the same
//! objects and serve the schema of the release applied last, and the pods run that release's
//! image by digest. Each move's time from its command to Ready pods goes to
//! target/node-report.txt. At the end the scenario deletes its claims and pool while a provider
//! still runs to release them, then removes the provider.

mod crds;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::gotools::{Clusterctl, VERSION};
use ferro_ipam_e2e::objects::Scope;
use kube::api::ListParams;
use serde_json::json;

use super::paths::{CONTROLLER, adopt_crds, helm};
use super::release::{Release, previous_release, release};
use super::{SYSTEM, cluster, kubectl, pod_name, pod_ready, pods, remove_provider, report, report_readiness};

const POOL: &str = "upgrade";
/// The claims bound under the previous release before the first upgrade.
const CLAIMS: usize = 500;
/// How long a move may take from its command to the new pods Ready.
const ROLLOUT: Duration = Duration::from_secs(300);

/// Each IPAddress of the scope, by name: (uid, address).
type Addresses = BTreeMap<String, (String, String)>;

async fn addresses(scope: &Scope) -> Addresses {
    let list = scope.addresses().list(&ListParams::default()).await.expect("listing the IPAddresses");
    list.items
        .into_iter()
        .map(|a| (a.metadata.name.unwrap_or_default(), (a.metadata.uid.unwrap_or_default(), a.spec.address)))
        .collect()
}

/// The shared cluster with the previous release's image imported too, as users load it.
fn cluster_with_previous_image() -> &'static ferro_ipam_e2e::cluster::Cluster {
    static IMPORTED: OnceLock<()> = OnceLock::new();
    let cluster = cluster();
    IMPORTED.get_or_init(|| previous_release().import_image(cluster));
    cluster
}

/// Two pods, both Ready, both of `to`'s image, and no other (none left terminating).
fn rolled_out(namespace: &str, to: &Release) -> bool {
    let all = pods(namespace, CONTROLLER);
    let image = to.image();
    all.len() == 2 && all.iter().all(|p| pod_ready(p) && p["spec"]["containers"][0]["image"] == image.as_str())
}

/// Creates a claim (`<prefix>-<n>`) every two seconds from `started` until the install has rolled
/// out to `to`; returns the claims created.
async fn claim_until_rolled_out(scope: &Scope, step: &str, namespace: &str, to: &Release, prefix: &str) -> Vec<String> {
    let started = Instant::now();
    let mut created = Vec::new();
    loop {
        let claim = format!("{prefix}-{}", created.len());
        scope.claim(&claim, "InClusterIPPool", POOL).await.unwrap_or_else(|e| panic!("{step}: claim {claim}: {e:#}"));
        created.push(claim);
        if rolled_out(namespace, to) {
            return created;
        }
        if started.elapsed() > ROLLOUT {
            let states: Vec<String> =
                pods(namespace, CONTROLLER).iter().map(|p| format!("{}: {}", pod_name(p), p["status"])).collect();
            panic!("{step}: not rolled out to v{} within {ROLLOUT:?}:\n{}", to.version, states.join("\n"));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Runs `command`, which moves the install in `namespace` to `to`, creating claims meanwhile;
/// then checks what the module's documentation says holds after every move.
async fn move_to(scope: &Scope, step: &str, namespace: &str, to: &Release, prefix: &str, command: impl FnOnce()) {
    let before = addresses(scope).await;
    let crds_before = crds::served();
    let started = Instant::now();
    command();
    let created = claim_until_rolled_out(scope, step, namespace, to, prefix).await;
    report(&format!(
        "{step}: command to Ready pods of v{} {:.1}s, {} claims created meanwhile",
        to.version,
        started.elapsed().as_secs_f64(),
        created.len()
    ));
    let running = pods(namespace, CONTROLLER);
    report_readiness(step, &running);
    to.assert_runs_image(step, &running);
    for claim in &created {
        scope.wait_allocated(claim, Duration::from_secs(120)).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
    }
    assert_kept(step, &before, &addresses(scope).await, created.len());
    crds::assert_updated_in_place(step, &crds_before, to);
    ferro_ipam_e2e::invariants::check(&scope.client, &[&scope.ns]).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
}

/// Every IPAddress of `before` is in `after`, the same object with the same address, and `after`
/// has one more for each claim created.
fn assert_kept(step: &str, before: &Addresses, after: &Addresses, created: usize) {
    for (name, (uid, address)) in before {
        let (now_uid, now_address) =
            after.get(name).unwrap_or_else(|| panic!("{step}: the IPAddress {name} ({address}) is gone"));
        assert_eq!(now_address, address, "{step}: the IPAddress {name} changed its address");
        assert_eq!(now_uid, uid, "{step}: the IPAddress {name} was deleted and made again");
    }
    assert_eq!(after.len(), before.len() + created, "{step}: one IPAddress per claim created meanwhile expected");
}

/// Creates `count` claims and waits until every claim of the scope is bound.
async fn bind_claims(scope: &Scope, count: usize) {
    let started = Instant::now();
    for n in 0..count {
        scope
            .claim(&format!("bound-{n}"), "InClusterIPPool", POOL)
            .await
            .unwrap_or_else(|e| panic!("claim {n}: {e:#}"));
    }
    let total = scope.claims().list(&ListParams::default()).await.expect("listing the claims").items.len();
    let mut ready = 0;
    while started.elapsed() < ROLLOUT {
        ready = scope.ready_claims().await;
        if ready == total {
            report(&format!(
                "upgrade: {count} claims created and bound by v{} in {}s",
                previous_release().version,
                started.elapsed().as_secs()
            ));
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("{ready} of {total} claims bound within {ROLLOUT:?}");
}

/// A server-side apply that takes over the fields other managers wrote, as
/// docs/upgrade-and-uninstall.md tells users to upgrade: the CRDs may have been written by
/// `kubectl replace` (the migration runbook), Helm or clusterctl, and a schema that changes between
/// releases is a conflict with them.
fn apply(file: &std::path::Path) {
    kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &file.to_string_lossy()]);
}

async fn kubectl_path(scope: &Scope) {
    let (previous, current) = (previous_release(), release());
    move_to(scope, "kubectl apply -f install.yaml (previous)", SYSTEM, previous, "kubectl-install", || {
        apply(&previous.install_yaml());
    })
    .await;
    bind_claims(scope, CLAIMS).await;
    move_to(scope, "kubectl apply -f install.yaml (upgrade)", SYSTEM, current, "kubectl-upgrade", || {
        apply(&current.install_yaml());
    })
    .await;
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
}

async fn helm_path(scope: &Scope) {
    let (previous, current) = (previous_release(), release());
    kubectl(&["create", "namespace", SYSTEM]);
    kubectl(&["label", "namespace", SYSTEM, "pod-security.kubernetes.io/enforce=restricted"]);
    adopt_crds("ferro-ipam", SYSTEM);
    let chart = |of: &Release| of.chart().to_string_lossy().into_owned();
    move_to(scope, "helm install (previous chart)", SYSTEM, previous, "helm-install", || {
        helm(&["install", "ferro-ipam", &chart(previous), "--namespace", SYSTEM]);
    })
    .await;
    move_to(scope, "helm upgrade", SYSTEM, current, "helm-upgrade", || {
        helm(&["upgrade", "ferro-ipam", &chart(current), "--namespace", SYSTEM]);
    })
    .await;
    move_to(scope, "helm rollback", SYSTEM, previous, "helm-rollback", || {
        helm(&["rollback", "ferro-ipam", "--namespace", SYSTEM]);
    })
    .await;
    helm(&["uninstall", "ferro-ipam", "--namespace", SYSTEM, "--wait"]);
    kubectl(&["delete", "namespace", SYSTEM, "--timeout=120s"]);
}

/// clusterctl with a local repository holding both releases: the current one's, as
/// [`Clusterctl::with_repository_of`] lays it out, and the previous one's beside it.
fn clusterctl_with_both() -> Clusterctl {
    let (previous, current) = (previous_release(), release());
    let clusterctl =
        Clusterctl::with_repository_of(&current.file("ipam-components.yaml"), &current.file("metadata.yaml"))
            .unwrap_or_else(|e| panic!("{e:#}"));
    let beside = clusterctl.home().join(format!("repository/ipam-ferro-ipam/v{}", previous.version));
    std::fs::create_dir_all(&beside).unwrap();
    for file in ["ipam-components.yaml", "metadata.yaml"] {
        std::fs::copy(previous.file(file), beside.join(file)).unwrap();
    }
    clusterctl
}

async fn clusterctl_path(scope: &Scope) {
    let (previous, current) = (previous_release(), release());
    let clusterctl = clusterctl_with_both();
    let previous_version = format!("v{}", previous.version);
    for (step, version, to, prefix) in [
        ("clusterctl generate provider (previous), applied", previous_version.as_str(), previous, "clusterctl-install"),
        ("clusterctl generate provider (upgrade), applied", VERSION, current, "clusterctl-upgrade"),
    ] {
        let components = clusterctl.home().join(format!("components-{version}.yaml"));
        let generated = clusterctl
            .run(&["generate", "provider", "--ipam", &format!("ferro-ipam:{version}")])
            .unwrap_or_else(|e| panic!("{step}: {e:#}"));
        std::fs::write(&components, generated).unwrap();
        move_to(scope, step, SYSTEM, to, prefix, || apply(&components)).await;
    }
}

#[tokio::test]
async fn upgrades_from_the_previous_release_by_each_path_keep_every_address_and_serve_claims_meanwhile() {
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster_with_previous_image().plane, "node-upgrade").await;
    scope.pool(POOL, json!({"addresses": ["10.40.0.1-10.40.7.254"], "prefix": 21})).await.unwrap();
    kubectl_path(&scope).await;
    helm_path(&scope).await;
    clusterctl_path(&scope).await;
    // The claims and the pool go while a provider still runs to release them; later scenarios
    // find the cluster without them, and without the provider. Over 500 claims: on a loaded
    // machine their namespace took more than 300 s to go.
    kubectl(&["delete", "namespace", &scope.ns, "--timeout=600s"]);
    remove_provider().unwrap_or_else(|e| panic!("{e:#}"));
}
