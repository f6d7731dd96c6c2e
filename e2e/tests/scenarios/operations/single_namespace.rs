//! `deploy/single-namespace/` as its comment tells users to use it (an overlay of their own that
//! names the namespace and a name suffix): exactly its RBAC applied to an API server that audits
//! the instance's ServiceAccount and enforces the blockOwnerDeletion permission check, then the
//! provider with the Deployment's flags, as that ServiceAccount. Every request it makes stays in
//! its namespace or is one of the overlay's cluster-scoped rules, none is refused, and every rule
//! is used.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Duration;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{ControlPlane, Provider};
use kube::api::DeleteParams;
use serde_json::{Value, json};

use super::audit::{Request, granted, policy_for, service_account_kubeconfig, unneeded};
use super::rbac::{release, scrape_stop_and_audit, vip_comes_and_goes};
use super::{Audited, arg_value, find, user_overlay};
use crate::PROMPTLY;

/// The namespace the user's overlay installs the instance in, and serves.
const NS: &str = "tenant-a";
const SUFFIX: &str = "-tenant-a";
const SERVICE_ACCOUNT: &str = "system:serviceaccount:tenant-a:ferro-ipam-controller-tenant-a";
/// The overlay's rights outside the namespace.
const CLUSTER_ROLE: &str = "ferro-ipam-namespaced-controller-tenant-a";

fn audited() -> &'static Audited {
    static AUDITED: OnceLock<Audited> = OnceLock::new();
    AUDITED.get_or_init(|| {
        let owner_check = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement";
        Audited::start("audit-single-namespace", &policy_for(&[SERVICE_ACCOUNT]), &[owner_check])
    })
}

/// The overlay a user writes on top of `deploy/single-namespace/`, built.
fn tenant_overlay(plane: &ControlPlane) -> Vec<Value> {
    user_overlay(plane, "overlay-single-namespace", |relative| {
        format!("resources: [{}]\nnamespace: {NS}\nnameSuffix: {SUFFIX}\n", relative("single-namespace"))
    })
}

/// Applies the overlay's Namespace, ServiceAccount and RBAC objects, and nothing else of it.
fn apply_rbac(plane: &ControlPlane, objects: &[Value]) {
    let kinds = ["Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"];
    let items: Vec<&Value> = objects.iter().filter(|o| kinds.iter().any(|k| o["kind"] == *k)).collect();
    let file = plane.dir.join("single-namespace-rbac.json");
    std::fs::write(&file, json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()).unwrap();
    plane.kubectl_ok(&["apply", "--server-side", "-f", &file.to_string_lossy()]).unwrap();
}

/// The Deployment's flags for this process: its namespace filled in, the listen addresses left to
/// the harness.
fn deployment_flags(objects: &[Value]) -> Vec<String> {
    let name = format!("ferro-ipam-controller{SUFFIX}");
    let args = &find(objects, "Deployment", &name)["spec"]["template"]["spec"]["containers"][0]["args"];
    let args = args.as_array().expect("args");
    assert_eq!(arg_value(args, "--namespace").as_deref(), Some("$(POD_NAMESPACE)"), "{args:?}");
    assert_eq!(arg_value(args, "--leader-election-namespace").as_deref(), Some("$(POD_NAMESPACE)"), "{args:?}");
    args.iter()
        .filter_map(Value::as_str)
        .filter(|a| !a.starts_with("--diagnostics-address") && !a.starts_with("--health-probe-bind-address"))
        .map(|a| a.replace("$(POD_NAMESPACE)", NS))
        .collect()
}

/// The overlay grants cluster-wide only its ClusterRole, and the metrics reader's (bound to no
/// one); the pods' namespace keeps the restricted Pod Security label.
fn assert_rbac_is_namespaced(objects: &[Value]) {
    let cluster_roles: BTreeSet<&str> =
        objects.iter().filter(|o| o["kind"] == "ClusterRole").filter_map(|o| o["metadata"]["name"].as_str()).collect();
    let reader = format!("ferro-ipam-metrics-reader{SUFFIX}");
    assert_eq!(cluster_roles, [CLUSTER_ROLE, reader.as_str()].into());
    let bindings: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ClusterRoleBinding").collect();
    assert_eq!(bindings.len(), 1, "{bindings:#?}");
    assert_eq!(bindings[0]["roleRef"]["name"], CLUSTER_ROLE);
    for binding in objects.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Binding"))) {
        let subject = &binding["subjects"][0];
        assert_eq!(
            (subject["name"].as_str(), subject["namespace"].as_str()),
            (Some("ferro-ipam-controller-tenant-a"), Some(NS))
        );
    }
    let namespace = find(objects, "Namespace", NS);
    assert_eq!(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
}

/// Claims of the namespace's address and prefix pools, one on a global pool (refused, read
/// only), a Cluster's control-plane VIP from a provider-scoped pool of the namespace, release,
/// and the pools deleted.
async fn tenant_scenario(s: &Scope) {
    s.cluster("wl", false).await.unwrap();
    s.pool("nodes", json!({"addresses": ["10.64.0.10-10.64.0.12"], "prefix": 24})).await.unwrap();
    s.prefix_pool("delegated", json!({"prefixes": ["fd64::/63"]})).await.unwrap();
    let global = s.global_name("global");
    s.global_pool(&global, json!({"addresses": ["10.65.0.0/29"], "prefix": 29})).await.unwrap();
    s.claim_with("c0", "InClusterIPPool", "nodes", json!({"labels": {"cluster.x-k8s.io/cluster-name": "wl"}}))
        .await
        .unwrap();
    s.claim("p0", "InClusterPrefixPool", "delegated").await.unwrap();
    s.claim("g0", "GlobalInClusterIPPool", &global).await.unwrap();
    for claim in ["c0", "p0"] {
        s.wait_allocated(claim, PROMPTLY).await.unwrap();
    }
    let message = s.wait_reason("g0", "PoolNotReady", PROMPTLY).await.unwrap();
    assert!(message.contains(&format!("--namespace {NS}")), "{message}");

    vip_comes_and_goes(s, "10.110.40", false).await;
    release(s, &["c0", "p0", "g0"]).await;
    s.pools().delete("nodes", &DeleteParams::default()).await.unwrap();
    s.prefix_pools().delete("delegated", &DeleteParams::default()).await.unwrap();
    s.global_pools().delete(&global, &DeleteParams::default()).await.unwrap();
}

/// What the ClusterRole grants, each rule justified in `rbac-cluster.yaml` and docs/install.md.
const CLUSTER_SCOPED: [&str; 6] = [
    "apiextensions.k8s.io/customresourcedefinitions: {\"get\"}",
    "authentication.k8s.io/tokenreviews: {\"create\"}",
    "authorization.k8s.io/subjectaccessreviews: {\"create\"}",
    "coordination.k8s.io/leases: {\"get\"}",
    "ipam.cluster.x-k8s.io/globalinclusterippools: {\"list\", \"watch\"}",
    "ipam.cluster.x-k8s.io/globalinclusterprefixpools: {\"list\", \"watch\"}",
];

/// The other provider's Lease, the one object the ClusterRole names.
const OTHER_PROVIDER_LEASE: &str = "7bb7acb4.ipam.cluster.x-k8s.io";

/// A request that has no namespace, or another one: discovery, or one the ClusterRole grants
/// (a Lease only by its name).
fn outside_is_granted(request: &Request, cluster_grants: &BTreeMap<String, BTreeSet<String>>) -> bool {
    if let Some(url) = request.resource.strip_prefix("url:") {
        let path = url.split('?').next().unwrap_or_default();
        return path == "/api" || path == "/apis" || path == "/version" || path.starts_with("/apis/");
    }
    if request.resource == "coordination.k8s.io/leases" && request.name.as_deref() != Some(OTHER_PROVIDER_LEASE) {
        return false;
    }
    cluster_grants.get(&request.resource).is_some_and(|verbs| verbs.contains(&request.verb))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_single_namespace_install_makes_no_request_outside_its_namespace_but_its_cluster_role() {
    let audited = audited();
    let plane: &'static ControlPlane = &audited.plane;
    let objects = tenant_overlay(plane);
    assert_rbac_is_namespaced(&objects);
    apply_rbac(plane, &objects);
    let config = service_account_kubeconfig(plane, NS, &format!("ferro-ipam-controller{SUFFIX}"));
    let mut flags = deployment_flags(&objects);
    flags.extend(["--leader-elect-lease-duration", "5", "--leader-elect-renew-margin", "2"].map(str::to_owned));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut provider = Provider::launch_secure(plane, &config, &flags).unwrap();
    provider.wait_ready(Duration::from_secs(60)).unwrap();

    let s = Scope { plane, client: plane.client().await, ns: NS.to_owned(), filter: None };
    tenant_scenario(&s).await;
    let requests = scrape_stop_and_audit(audited, &mut provider, NS, SERVICE_ACCOUNT);
    let cluster_grants = granted(&find(&objects, "ClusterRole", CLUSTER_ROLE)["rules"]);
    assert_eq!(
        cluster_grants.iter().map(|(resource, verbs)| format!("{resource}: {verbs:?}")).collect::<Vec<_>>(),
        CLUSTER_SCOPED,
        "the cluster-scoped exceptions are the ones deploy/single-namespace/rbac-cluster.yaml justifies"
    );
    let outside: Vec<&Request> = requests
        .iter()
        .filter(|r| r.namespace.as_deref() != Some(NS) && !outside_is_granted(r, &cluster_grants))
        .collect();
    assert!(outside.is_empty(), "requests outside {NS} that no cluster-scoped rule lists: {outside:#?}");

    let mut grants = cluster_grants;
    for role in ["ferro-ipam-controller", "ferro-ipam-leader-election"] {
        for (resource, verbs) in granted(&find(&objects, "Role", &format!("{role}{SUFFIX}"))["rules"]) {
            grants.entry(resource).or_default().extend(verbs);
        }
    }
    let extra = unneeded(&grants, &requests);
    assert!(extra.is_empty(), "granted but never needed: {extra:?}\nrequests: {requests:#?}");
}
