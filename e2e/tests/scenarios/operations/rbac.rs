//! The provider under exactly the RBAC `deploy/` grants: `kubectl apply -k deploy/` on an API
//! server that audits the provider's identity and enforces the blockOwnerDeletion permission
//! check (OwnerReferencesPermissionEnforcement, on in many production clusters), then a full
//! scenario as the ServiceAccount, with its own token. A missing permission shows up as a refused
//! request; an extra one as a rule no request needed.

use std::path::PathBuf;
use std::sync::OnceLock;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{ControlPlane, Provider, certs, invariants};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use super::audit::{Request, granted, kubeconfig, policy_for, requests_of, service_account_kubeconfig, unneeded};
use super::{Audited, deploy, find, kustomize, scraper_token, with_components};
use crate::PROMPTLY;
use crate::providers::{PROVIDER_A, install_kind};
use crate::purpose::{VIPS, labelled_pool, labels};
use crate::vip::{self, vip_pool};

const SERVICE_ACCOUNT: &str = "system:serviceaccount:ferro-ipam-system:ferro-ipam-controller";
/// The identity of the run with the finalizers rule taken out.
const WITHOUT_FINALIZERS: &str = "ferro-ipam-without-finalizers";
/// The identity of the run with `deploy/without-control-plane-vip`'s RBAC and flag.
const WITHOUT_VIP: &str = "ferro-ipam-without-control-plane-vip";

/// A control plane of its own: audited, with the owner-reference permission check.
fn audited() -> &'static Audited {
    static AUDITED: OnceLock<Audited> = OnceLock::new();
    AUDITED.get_or_init(|| {
        let policy = policy_for(&[SERVICE_ACCOUNT, WITHOUT_FINALIZERS, WITHOUT_VIP]);
        Audited::start("audit", &policy, &["--enable-admission-plugins=OwnerReferencesPermissionEnforcement"])
    })
}

/// A Scope in the new namespace `ns` of `plane`.
pub(super) async fn scope_on(plane: &'static ControlPlane, ns: &str) -> Scope {
    let client = plane.client().await;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    Scope { plane, client, ns: ns.to_owned(), filter: None }
}

async fn address_by_hand(s: &Scope, name: &str, ip: &str) {
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
        "kind": "IPAddress",
        "metadata": {"name": name},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "nodes"}, "address": ip, "prefix": 24},
    }))
    .await
    .unwrap();
}

/// A Cluster's control-plane VIP from a provider-scoped pool of `net`.10-20, global or of the
/// namespace: the provider lookup reads the infrastructure kind's CRD, the claim is created and
/// deleted, the Cluster patched.
pub(super) async fn vip_comes_and_goes(s: &Scope, net: &str, global: bool) {
    install_kind(s, PROVIDER_A, "Cluster").await;
    let range = format!("{net}.10-{net}.20");
    if global {
        vip_pool(s, "vips", &range).await;
    } else {
        labelled_pool(s, "vips", &range, labels(&[(VIPS, "true"), ("cluster.x-k8s.io/provider", PROVIDER_A)])).await;
    }
    vip::cluster(s, "vip-wl", Some("true"), json!({})).await;
    assert_eq!(vip::wait_endpoint(s, "vip-wl").await.0, format!("{net}.10"));
    vip::clusters(s).delete("vip-wl", &DeleteParams::default()).await.unwrap();
    s.eventually("the Cluster with its VIP is gone", PROMPTLY, || async {
        vip::clusters(s).get_opt("vip-wl").await.unwrap().is_none()
    })
    .await
    .unwrap();
}

/// Deletes `claims` and waits until no address is left.
pub(super) async fn release(s: &Scope, claims: &[&str]) {
    for claim in claims {
        s.delete_claim(claim).await.unwrap();
    }
    s.eventually("every address is released", PROMPTLY, || async {
        s.addresses().list(&ListParams::default()).await.unwrap().items.is_empty()
    })
    .await
    .unwrap();
}

/// Pools of all four kinds, claims (one adopting an existing IPAddress, one waiting on a full
/// pool), a Cluster, release, Events, and the pools deleted at the end.
async fn full_scenario(s: &Scope) {
    let global = s.global_name("global");
    let global_prefixes = s.global_name("global-prefixes");
    s.cluster("wl", false).await.unwrap();
    s.pool("nodes", json!({"addresses": ["10.60.0.10-10.60.0.12"], "prefix": 24, "gateway": "10.60.0.1"}))
        .await
        .unwrap();
    s.global_pool(&global, json!({"addresses": ["10.61.0.0/29"], "prefix": 29})).await.unwrap();
    address_by_hand(s, "adopted", "10.60.0.12").await;
    // The API server checks no uniqueness: a claim allocated before the provider has seen an
    // IPAddress made by someone else could get its address. Wait until the pool counts it.
    s.eventually("the provider has seen the address made by hand", PROMPTLY, || async {
        s.pool_used("nodes").await == Some(1)
    })
    .await
    .unwrap();
    for claim in ["c0", "c1"] {
        s.claim_with(claim, "InClusterIPPool", "nodes", json!({"labels": {"cluster.x-k8s.io/cluster-name": "wl"}}))
            .await
            .unwrap();
    }
    s.claim("adopted", "InClusterIPPool", "nodes").await.unwrap();
    s.claim("g0", "GlobalInClusterIPPool", &global).await.unwrap();
    s.prefix_pool("delegated", json!({"prefixes": ["fd60::/63"], "gateway": "fd60::1"})).await.unwrap();
    s.global_prefix_pool(&global_prefixes, json!({"prefixes": ["fd61::/64"]})).await.unwrap();
    s.claim("p0", "InClusterPrefixPool", "delegated").await.unwrap();
    s.claim("gp0", "GlobalInClusterPrefixPool", &global_prefixes).await.unwrap();
    for claim in ["c0", "c1", "adopted", "g0", "p0", "gp0"] {
        s.wait_allocated(claim, PROMPTLY).await.unwrap();
    }
    assert_eq!(s.addresses().get("adopted").await.unwrap().spec.address, "10.60.0.12");

    s.claim("c2", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_reason("c2", "PoolExhausted", PROMPTLY).await.unwrap();
    s.delete_claim("c0").await.unwrap();
    s.wait_allocated("c2", PROMPTLY).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
    let events = s.events_about("IPAddressClaim", "c2").await.unwrap();
    assert!(events.iter().any(|(t, reason, _)| t == "Warning" && reason == "PoolExhausted"), "{events:?}");

    vip_comes_and_goes(s, "10.110.30", true).await;
    hub_and_spoke_rights(s).await;
    release(s, &["c1", "c2", "adopted", "g0", "p0", "gp0"]).await;
    s.pools().delete("nodes", &DeleteParams::default()).await.unwrap();
    s.global_pools().delete(&global, &DeleteParams::default()).await.unwrap();
    s.prefix_pools().delete("delegated", &DeleteParams::default()).await.unwrap();
    s.global_prefix_pools().delete(&global_prefixes, &DeleteParams::default()).await.unwrap();
    s.eventually("every pool is gone", PROMPTLY, || async {
        s.pools().get_opt("nodes").await.unwrap().is_none()
            && s.global_pools().get_opt(&global).await.unwrap().is_none()
            && s.prefix_pools().get_opt("delegated").await.unwrap().is_none()
            && s.global_prefix_pools().get_opt(&global_prefixes).await.unwrap().is_none()
    })
    .await
    .unwrap();
}

/// The rights of a hub and of a spoke: a block asked for in a spoke namespace is granted from a
/// shared pool (its status patched); a spoke pool reads its hub kubeconfig Secret in the
/// provider's own namespace (missing here: the read is what needs the right).
async fn hub_and_spoke_rights(s: &Scope) {
    let shared = s.global_name("shared");
    let labels = json!({"metadata": {"labels": {ferro_ipam::api::hub::SPOKE_LABEL: "rbac"}}});
    Api::<Namespace>::all(s.client.clone())
        .patch(&s.ns, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&labels))
        .await
        .unwrap();
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": shared, "labels": {ferro_ipam::api::hub::SHARED_LABEL: "true"}},
        "spec": {"addresses": ["10.62.0.0/24"], "prefix": 24},
    }))
    .await
    .unwrap();
    s.create(json!({
        "apiVersion": "hub.ferro-ipam.dev/v1alpha1", "kind": "AddressBlock", "metadata": {"name": "b0"},
        "spec": {"pool": {"kind": "GlobalInClusterIPPool", "name": shared}, "family": "IPv4", "size": 16},
    }))
    .await
    .unwrap();
    let blocks: Api<ferro_ipam::api::hub::AddressBlock> = Api::namespaced(s.client.clone(), &s.ns);
    s.eventually("the hub grants the block", PROMPTLY, || async {
        blocks.get("b0").await.ok().and_then(|b| b.status?.cidr).is_some()
    })
    .await
    .unwrap();
    let hub = json!({"kubeconfigSecret": "no-such-secret", "namespace": "spoke-rbac", "pool": {"kind": "GlobalInClusterIPPool", "name": shared}});
    s.pool("spoke", json!({"addresses": ["10.62.0.0/24"], "prefix": 24, "hub": hub})).await.unwrap();
    s.claim("spoke-claim", "InClusterIPPool", "spoke").await.unwrap();
    s.wait_reason("spoke-claim", "WaitingForHub", PROMPTLY).await.unwrap();
    s.delete_claim("spoke-claim").await.unwrap();
    s.pools().delete("spoke", &DeleteParams::default()).await.unwrap();
    blocks.delete("b0", &DeleteParams::default()).await.unwrap();
    s.global_pools().delete(&shared, &DeleteParams::default()).await.unwrap();
}

/// A scrape, as Prometheus makes it (the provider reviews the token with the API server); then
/// the provider stopped, and the requests of `user` in the audit log, none of them refused.
pub(super) fn scrape_stop_and_audit(audited: &Audited, provider: &mut Provider, ns: &str, user: &str) -> Vec<Request> {
    let reader = scraper_token(&audited.plane, ns, "prometheus", true);
    let (status, body) = provider.scrape(Some(&reader)).unwrap();
    assert_eq!(status, 200, "{body}");
    let log = provider.log_tail(100_000);
    provider.stop();
    assert!(!log.to_lowercase().contains("forbidden"), "the provider was refused something:\n{log}");

    let requests = requests_of(&audited.log, user);
    assert!(requests.len() > 20, "the audit log holds the provider's requests ({})", requests.len());
    let refused: Vec<&Request> = requests.iter().filter(|r| r.refused()).collect();
    assert!(refused.is_empty(), "requests refused to {user}: {refused:#?}");
    requests
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_runs_a_full_scenario_with_exactly_the_rbac_deploy_grants() {
    let audited = audited();
    let plane = &audited.plane;
    plane.kubectl_ok(&["apply", "--server-side", "-k", &deploy("").to_string_lossy()]).unwrap();
    let objects = kustomize(plane, &deploy(""));
    let config = service_account_kubeconfig(plane, "ferro-ipam-system", "ferro-ipam-controller");
    let mut provider = Provider::launch_secure(
        plane,
        &config,
        &[
            "--leader-elect",
            "--leader-election-namespace",
            "ferro-ipam-system",
            "--leader-elect-lease-duration",
            "5",
            "--leader-elect-renew-margin",
            "2",
        ],
    )
    .unwrap();
    provider.wait_ready(std::time::Duration::from_secs(60)).unwrap();
    let s = scope_on(plane, "rbac-full-scenario").await;
    full_scenario(&s).await;
    let requests = scrape_stop_and_audit(audited, &mut provider, &s.ns, SERVICE_ACCOUNT);

    let mut grants = granted(&find(&objects, "ClusterRole", "ferro-ipam-controller")["rules"]);
    for role in ["ferro-ipam-leader-election", "ferro-ipam-hub-credentials"] {
        for (resource, verbs) in granted(&find(&objects, "Role", role)["rules"]) {
            grants.entry(resource).or_default().extend(verbs);
        }
    }
    let extra = unneeded(&grants, &requests);
    assert!(extra.is_empty(), "granted but never needed in a full scenario: {extra:?}\nrequests: {requests:#?}");
    for request in requests.iter().filter(|r| !r.resource.starts_with("url:")) {
        assert!(
            grants.get(&request.resource).is_some_and(|v| v.contains(&request.verb)),
            "{} {} ({}) was allowed without a rule of deploy/",
            request.verb,
            request.resource,
            request.uri
        );
    }

    without_the_finalizers_rule_addresses_cannot_be_written(audited, &objects).await;
    without_the_vip_controller_no_cluster_is_written_and_its_rights_are_not_needed(audited).await;
}

/// A kubeconfig of the client-certificate user `name`, bound to `role` (a ClusterRole, renamed
/// `name`).
async fn user_with_role(plane: &ControlPlane, name: &str, mut role: Value) -> PathBuf {
    let client = plane.client().await;
    role["metadata"] = json!({"name": name});
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(role).unwrap())
        .await
        .unwrap();
    let binding = json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
    });
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(binding).unwrap())
        .await
        .unwrap();
    let (cert, key) = certs::client_certificate(&plane.dir, &plane.credentials.ca, name, &[], name).unwrap();
    let user = format!("    client-certificate: {}\n    client-key: {}", cert.display(), key.display());
    kubeconfig(plane, name, &user)
}

/// The same RBAC minus the finalizers rules, for another identity: blockOwnerDeletion makes
/// every IPAddress create fail, and that shows up in the claim, the log and the audit log.
async fn without_the_finalizers_rule_addresses_cannot_be_written(audited: &'static Audited, objects: &[Value]) {
    let plane = &audited.plane;
    let mut role = find(objects, "ClusterRole", "ferro-ipam-controller").clone();
    let rules: Vec<Value> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["resources"].as_array().unwrap().iter().any(|x| x.as_str().unwrap().ends_with("/finalizers")))
        .cloned()
        .collect();
    assert_eq!(
        rules.len() + 2,
        role["rules"].as_array().unwrap().len(),
        "two rules hold the finalizers: the IPAM objects' and the Clusters'"
    );
    role["rules"] = Value::from(rules);
    let config = user_with_role(plane, WITHOUT_FINALIZERS, role).await;

    let s = scope_on(plane, "rbac-without-finalizers").await;
    let provider = Provider::launch(plane, &config, &["--namespace", &s.ns]).unwrap();
    provider.wait_ready(std::time::Duration::from_secs(60)).unwrap();
    s.pool("nodes", json!({"addresses": ["10.62.0.10-10.62.0.12"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "nodes").await.unwrap();
    let message = s.wait_reason("c", "AllocationFailed", PROMPTLY).await.unwrap();
    assert!(message.contains("forbidden"), "{message}");
    assert!(s.addresses().list(&ListParams::default()).await.unwrap().items.is_empty());
    // The ERROR line may reach the log a moment after the status write the claim shows.
    s.eventually("the provider's log names the refusal", PROMPTLY, || async {
        provider.log_tail(100_000).to_lowercase().contains("forbidden")
    })
    .await
    .unwrap();
    let refused: Vec<Request> =
        requests_of(&audited.log, WITHOUT_FINALIZERS).into_iter().filter(|r| r.code == 403).collect();
    assert!(
        refused.iter().any(|r| r.verb == "create" && r.resource == "ipam.cluster.x-k8s.io/ipaddresses"),
        "the audit log shows the refused IPAddress create: {refused:#?}"
    );
}

/// `deploy/without-control-plane-vip`: its flag turns the VIP controller off, and its RBAC, with
/// no Cluster patch and no claim create or delete, suffices: an opted-in Cluster is left alone,
/// claims are served, and the API server refuses nothing.
async fn without_the_vip_controller_no_cluster_is_written_and_its_rights_are_not_needed(audited: &'static Audited) {
    let plane = &audited.plane;
    let objects = with_components(plane, &["without-control-plane-vip"]);
    let role = find(&objects, "ClusterRole", "ferro-ipam-controller").clone();
    let grants = granted(&role["rules"]);
    assert_eq!(grants["cluster.x-k8s.io/clusters"], ["get", "list", "watch"].map(str::to_owned).into());
    assert!(!grants.contains_key("cluster.x-k8s.io/clusters/finalizers"), "{grants:?}");
    assert!(!grants["ipam.cluster.x-k8s.io/ipaddressclaims"].iter().any(|v| v == "create" || v == "delete"));
    let args =
        find(&objects, "Deployment", "ferro-ipam-controller")["spec"]["template"]["spec"]["containers"][0]["args"]
            .clone();
    let flag = "--control-plane-vip=false";
    assert!(args.as_array().unwrap().iter().any(|a| a == flag), "{args}");
    let config = user_with_role(plane, WITHOUT_VIP, role).await;

    let s = scope_on(plane, "rbac-without-vip").await;
    let provider = Provider::launch(plane, &config, &["--namespace", &s.ns, flag]).unwrap();
    provider.wait_ready(std::time::Duration::from_secs(60)).unwrap();
    install_kind(&s, PROVIDER_A, "Cluster").await;
    vip::cluster(&s, "opted-in", Some("true"), json!({})).await;
    s.pool("nodes", json!({"addresses": ["10.63.0.10-10.63.0.12"], "prefix": 24})).await.unwrap();
    // A claim of that Cluster is served once its Cluster is known (the pause rules read it), so
    // the Cluster watch has seen the opted-in Cluster by then.
    s.claim_with("m0", "InClusterIPPool", "nodes", json!({"labels": {"cluster.x-k8s.io/cluster-name": "opted-in"}}))
        .await
        .unwrap();
    s.wait_allocated("m0", PROMPTLY).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let cluster = vip::clusters(&s).get("opted-in").await.unwrap();
    assert!(
        cluster.data["spec"]["controlPlaneEndpoint"]["host"].as_str().unwrap_or_default().is_empty(),
        "the Cluster was given an endpoint: {}",
        cluster.data["spec"]
    );
    let claims: Vec<String> = s
        .claims()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(claims, ["m0"], "no VIP claim was made");
    let requests = requests_of(&audited.log, WITHOUT_VIP);
    assert!(requests.len() > 5, "the audit log holds the provider's requests ({})", requests.len());
    let refused: Vec<&Request> = requests.iter().filter(|r| r.refused()).collect();
    assert!(refused.is_empty(), "requests refused without the VIP rights: {refused:#?}");
    let log = provider.log_tail(100_000);
    assert!(!log.to_lowercase().contains("forbidden"), "the provider was refused something:\n{log}");
}
