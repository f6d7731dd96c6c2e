//! The argument lists that Cluster API tooling gives a provider, run exactly as given: the one
//! cluster-api-operator generates from an `IPAMProvider`'s `spec.manager`, and the one of the
//! in-cluster provider's manifest. Each must start, take its Lease and allocate, and the
//! verbosity the operator sets must reach the log.
//!
//! Both providers watch every namespace, so they run on a control plane of their own, one after
//! the other, instead of beside the scenarios of the shared one.

use std::sync::OnceLock;
use std::time::Duration;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::process::free_port;
use ferro_ipam_e2e::{ControlPlane, Provider};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::{clusterctl_defaults, deploy, find, scraper_token, yaml_documents};
use crate::PROMPTLY;

fn private_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| ControlPlane::start().unwrap_or_else(|e| panic!("starting a private control plane: {e:#}")))
}

/// cluster-api-operator's rule for each argument it sets (`setArgs` in
/// `internal/controller/component_customizer.go`, v0.29.0): replace the argument that starts
/// with `NAME=`, else append `NAME=VALUE`.
fn operator_set(args: &mut Vec<String>, name: &str, value: &str) {
    let set = format!("{name}={value}");
    match args.iter_mut().find(|a| a.starts_with(&format!("{name}="))) {
        Some(existing) => *existing = set,
        None => args.push(set),
    }
}

/// The manager container's args after cluster-api-operator v0.29.0 customised ferro-ipam's
/// Deployment for this `IPAMProvider`:
///
/// ```yaml
/// spec:
///   manager:
///     health: {healthProbeBindAddress: <health>}
///     metrics: {diagnosticsAddress: <metrics>, insecureDiagnostics: true}
///     leaderElection: {leaderElect: true, resourceNamespace: <lease namespace>, resourceName: ferro-ipam-lease,
///                      leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}
///     syncPeriod: 10m
///     verbosity: 5
///     additionalArgs: {--kube-api-qps: "50", --kube-api-burst: "100", --logging-format: json,
///                      --tls-min-version: VersionTLS13}
/// ```
///
/// `customizeManagerContainer` sets, in this order: `--health-addr` and `--diagnostics-address`
/// from their fields; `--leader-elect`, `--leader-election-id` as `NAMESPACE/NAME` and the three
/// durations as whole seconds (`%ds`); `--insecure-diagnostics=true`; `--sync-period` in seconds;
/// `--v` (when not 1); then `additionalArgs` (a Go map: any order).
fn operator_args(manifest: &[String], health: &str, metrics: &str, lease_namespace: &str) -> Vec<String> {
    let mut args = manifest.to_vec();
    for (name, value) in [
        ("--health-addr", health),
        ("--diagnostics-address", metrics),
        ("--leader-elect", "true"),
        ("--leader-election-id", &format!("{lease_namespace}/ferro-ipam-lease")),
        ("--leader-elect-lease-duration", "15s"),
        ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"),
        ("--insecure-diagnostics", "true"),
        ("--sync-period", "600s"),
        ("--v", "5"),
        ("--kube-api-qps", "50"),
        ("--kube-api-burst", "100"),
        ("--logging-format", "json"),
        ("--tls-min-version", "VersionTLS13"),
    ] {
        operator_set(&mut args, name, value);
    }
    args
}

/// The args of the Deployment of `ipam-components.yaml`, which cluster-api-operator installs
/// (clusterctl variables at their defaults), `$(POD_NAMESPACE)` expanded as the kubelet does.
fn manifest_args(namespace: &str) -> Vec<String> {
    let components = std::fs::read_to_string(deploy("clusterctl/ipam-components.yaml")).unwrap();
    let objects = yaml_documents(&clusterctl_defaults(&components).unwrap());
    let deployment = find(&objects, "Deployment", "ferro-ipam-controller");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .map(|a| a.replace("$(POD_NAMESPACE)", namespace))
        .collect()
}

async fn namespace(plane: &'static ControlPlane, name: &str) -> Scope {
    let client = plane.client().await;
    let object: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &object).await.unwrap();
    Scope { plane, client, ns: name.to_owned(), filter: None }
}

/// The provider is ready, holds `lease` in `lease_namespace` and allocates; `metrics` scrapes it.
async fn assert_serves(
    provider: &Provider,
    s: &Scope,
    lease_namespace: &str,
    lease: &str,
    metrics: impl Fn() -> Option<String>,
) {
    provider.wait_ready(Duration::from_secs(60)).unwrap();
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), lease_namespace);
    s.eventually("the provider holds its Lease", PROMPTLY, || async {
        leases.get_opt(lease).await.ok().flatten().and_then(|l| l.spec?.holder_identity).is_some()
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
    s.pool("nodes", json!({"addresses": ["10.90.0.10-10.90.0.12"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap_or_else(|e| panic!("{e:#}\n{}", provider.log_tail(30)));
    let text = metrics().expect("metrics are served");
    assert!(text.contains("ferro_ipam_leader 1"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operators_and_the_in_cluster_providers_argument_lists_start_and_serve() {
    let plane = private_plane();

    let s = namespace(plane, "operator-args").await;
    let (health, metrics) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let args = operator_args(&manifest_args("ferro-ipam-system"), &health, &metrics, &s.ns);
    eprintln!("cluster-api-operator's argument list: {args:?}");
    let mut provider = Provider::launch_exactly(plane, &args, health, metrics).unwrap();
    assert_serves(&provider, &s, &s.ns, "ferro-ipam-lease", || provider.metrics_text()).await;
    let log = provider.log_tail(5);
    assert!(log.lines().all(|l| l.starts_with('{')), "--logging-format=json writes JSON lines:\n{log}");
    // The operator's verbosity reaches the log: nothing in the components overrides its --v.
    let log = provider.log_tail(100_000);
    assert!(log.contains(r#""level":"DEBUG""#), "--v=5 logs debug lines:\n{}", provider.log_tail(20));
    assert!(provider.stop().is_some_and(|status| status.success()), "{}", provider.log_tail(20));

    // The in-cluster provider's manager runs with `--leader-elect` and nothing else: every other
    // setting, the probe and metrics addresses included, is the default, so metrics are HTTPS
    // for authorised scrapers.
    let s = namespace(plane, "in-cluster-args").await;
    let args = vec!["--leader-elect".to_owned()];
    let provider = Provider::launch_exactly(plane, &args, "127.0.0.1:9440".into(), "127.0.0.1:8443".into()).unwrap();
    let reader = scraper_token(plane, &s.ns, "prometheus", true);
    let scrape = || provider.scrape(Some(&reader)).ok().filter(|(status, _)| *status == 200).map(|(_, body)| body);
    assert_serves(&provider, &s, "default", "ferro-ipam-leader", scrape).await;
    assert_eq!(provider.scrape(None).unwrap().0, 401);
    drop(provider);
    // The plane lives in a static, never dropped: its files go now that no test needs them (a
    // failed run keeps them, logs included).
    let _ = std::fs::remove_dir_all(&plane.dir);
}
