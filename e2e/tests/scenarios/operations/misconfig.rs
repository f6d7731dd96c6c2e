//! Every misconfiguration is said loudly, within one lease duration (15 s by default): an ERROR
//! line naming the object, the action and the API server's message, logged once per 30 s and
//! not once per retry; `ferro_ipam_misconfigured{problem}` above 0; and `/readyz` 503. Each test
//! measures the seconds from the start of the process until all three hold, and appends a row to
//! `target/misconfig-report.md` (and prints it: run with `--nocapture` to see the table).

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;

use crate::validation::{wait_pool_event, wait_pool_reason};
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::{free_port, http_status};
use ferro_ipam_e2e::proxy::Proxy;
use ferro_ipam_e2e::{ControlPlane, Provider};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The default lease duration: the bound on how long a misconfiguration may stay silent.
const LEASE_DURATION: Duration = Duration::from_secs(15);

/// The value of `ferro_ipam_misconfigured{problem="<problem>"}`, if scraped.
fn misconfigured(provider: &Provider, problem: &str) -> Option<f64> {
    let prefix = format!("ferro_ipam_misconfigured{{problem=\"{problem}\"}} ");
    provider.metrics_text()?.lines().find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
}

fn error_lines(provider: &Provider, problem: &str) -> usize {
    let needle = format!("problem={problem}");
    provider.log_tail(1_000_000).lines().filter(|l| l.contains("ERROR") && l.contains(&needle)).count()
}

/// Waits until the ERROR line (with every one of `parts`), the metric and `/readyz` 503 all say
/// `problem`; returns the seconds since `started`.
fn wait_signal(provider: &Provider, started: Instant, problem: &str, parts: &[&str]) -> f64 {
    let problem_field = format!("problem={problem}");
    let mut line: Vec<&str> = vec!["ERROR", &problem_field];
    line.extend(parts);
    let deadline = started + LEASE_DURATION;
    loop {
        let logged = provider.logged(&line);
        let metric = misconfigured(provider, problem).is_some_and(|v| v >= 1.0);
        let unready = http_status(&provider.health, "/readyz") == Some(503);
        if logged && metric && unready {
            return started.elapsed().as_secs_f64();
        }
        assert!(
            Instant::now() < deadline,
            "{problem} not signalled within {LEASE_DURATION:?} (ERROR line {logged}, metric {metric}, /readyz 503 {unready}); log:\n{}",
            provider.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Appends one row to the report and prints it.
fn report(misconfiguration: &str, log: &str, readiness: &str, metric: &str, condition: &str, seconds: f64) {
    let row = format!("| {misconfiguration} | `{log}` | {readiness} | `{metric}` | {condition} | {seconds:.1} |");
    println!("misconfig report: {row}");
    let path: PathBuf = repo_root().join("target/misconfig-report.md");
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{row}");
    }
}

/// The lease flags of a provider whose Lease lives in `namespace`.
fn leader_args<'a>(s: &'a Scope, namespace: &'a str) -> Vec<&'a str> {
    let mut args = s.provider_args();
    args.extend(["--leader-elect", "--leader-election-namespace", namespace, "--leader-elect-retry-period", "1s"]);
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_lease_namespace_is_an_error_not_ready_and_a_metric_until_it_is_created() {
    let s = Scope::new("misconfig-lease-ns").await;
    let missing = format!("{}-leases", s.ns);
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &s.plane.kubeconfig, &leader_args(&s, &missing)).unwrap();
    let seconds = wait_signal(&provider, started, "lease_namespace_missing", &["action=create", "not found", &missing]);
    report(
        "lease namespace missing",
        "ERROR problem=lease_namespace_missing object=Lease <ns>/ferro-ipam-leader action=create error=namespaces \"<ns>\" not found (404 NotFound)",
        "503",
        "ferro_ipam_misconfigured{problem=\"lease_namespace_missing\"} 1",
        "none (nothing may be written without the Lease)",
        seconds,
    );
    // Retried every second, logged once per 30 s.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(error_lines(&provider, "lease_namespace_missing"), 1, "{}", provider.log_tail(30));

    // Fixed: the namespace exists, the replica leads, serves, and the signals clear.
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": missing}})).unwrap();
    Api::<Namespace>::all(s.client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    provider.wait_ready(Duration::from_secs(20)).unwrap();
    assert_eq!(misconfigured(&provider, "lease_namespace_missing"), Some(0.0));
    assert!(provider.logged(&["resolved", "lease_namespace_missing"]), "{}", provider.log_tail(30));
    s.pool("nodes", json!({"addresses": ["10.70.0.10-10.70.0.12"], "prefix": 24})).await.unwrap();
    s.claim("c", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_allocated("c", crate::PROMPTLY).await.unwrap();
}

/// A kubeconfig for the shared plane as a user no RBAC rule names.
fn nobody(plane: &ControlPlane, user: &str) -> PathBuf {
    plane.kubeconfig_as(user, &[]).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lease_forbidden_by_rbac_is_an_error_not_ready_and_a_metric() {
    let s = Scope::new("misconfig-lease-rbac").await;
    let config = nobody(s.plane, &format!("{}-user", s.ns));
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &config, &leader_args(&s, &s.ns)).unwrap();
    let seconds = wait_signal(&provider, started, "lease_forbidden", &["action=get", "forbidden"]);
    report(
        "Lease forbidden by RBAC",
        "ERROR problem=lease_forbidden object=Lease <ns>/ferro-ipam-leader action=get error=leases.coordination.k8s.io \"ferro-ipam-leader\" is forbidden: User \"...\" cannot get ... (403 Forbidden)",
        "503",
        "ferro_ipam_misconfigured{problem=\"lease_forbidden\"} 1",
        "none (nothing may be written without the Lease)",
        seconds,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_addresses_and_pools_forbidden_by_rbac_are_an_error_not_ready_and_a_metric() {
    let s = Scope::new("misconfig-watch-rbac").await;
    let config = nobody(s.plane, &format!("{}-user", s.ns));
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &config, &s.provider_args()).unwrap();
    let seconds = wait_signal(&provider, started, "forbidden", &["action=list", "list/watch of", "forbidden"]);
    report(
        "claims, addresses, pools or Clusters forbidden (list/watch 403)",
        "ERROR problem=forbidden object=list/watch of IPAddressClaim action=list error=... is forbidden ... (403 Forbidden)",
        "503 (the leader; a stand-by does not watch)",
        "ferro_ipam_misconfigured{problem=\"forbidden\"} 5 (one per refused watch)",
        "none (the pools cannot be read)",
        seconds,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lines = error_lines(&provider, "forbidden") as f64;
    let watches = misconfigured(&provider, "forbidden").unwrap_or_default();
    assert!(lines <= watches, "one ERROR line per refused watch, not one per retry: {lines} lines, {watches} watches");
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_credentials_are_an_error_not_ready_and_a_metric() {
    let plane = ControlPlane::shared();
    let config = plane.dir.join("misconfig-bad-token.kubeconfig");
    std::fs::write(
        &config,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: bad\n  user:\n    token: not-a-token\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: bad\n\
             current-context: e2e\n",
            plane.server,
            plane.credentials.ca_cert.display()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let provider = Provider::launch(plane, &config, &["--namespace", "misconfig-unauthorized"]).unwrap();
    let seconds = wait_signal(&provider, started, "unauthorized", &["action=get", "Unauthorized"]);
    report(
        "credentials refused (401)",
        "ERROR problem=unauthorized object=API discovery of the Cluster API groups action=get error=... Unauthorized (401)",
        "503",
        "ferro_ipam_misconfigured{problem=\"unauthorized\"} 1",
        "none",
        seconds,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_api_server_at_start_is_an_error_and_not_ready_until_it_answers() {
    let s = Scope::new("misconfig-unreachable").await;
    let proxy = Proxy::start(s.plane.api_address()).unwrap();
    proxy.refuse();
    let config = s.plane.kubeconfig_for(&format!("{}-proxied", s.ns), &proxy.server()).unwrap();
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &config, &s.provider_args()).unwrap();
    let seconds = wait_signal(&provider, started, "api_unreachable", &["action=get"]);
    report(
        "API server unreachable at start",
        "ERROR problem=api_unreachable object=API discovery of the Cluster API groups action=get error=discovering API group ...: <connection error>",
        "503 until it answers",
        "ferro_ipam_misconfigured{problem=\"api_unreachable\"} 1",
        "none",
        seconds,
    );
    proxy.heal();
    provider.wait_ready(Duration::from_secs(30)).unwrap();
    assert_eq!(misconfigured(&provider, "api_unreachable"), Some(0.0));
}

#[test]
fn an_unreadable_kubeconfig_stops_the_process_with_a_message_naming_it() {
    let plane = ControlPlane::shared();
    let garbage = plane.dir.join("misconfig-garbage.kubeconfig");
    std::fs::write(&garbage, "this: is: not: a kubeconfig").unwrap();
    for config in [PathBuf::from("/nonexistent/kubeconfig"), garbage] {
        let started = Instant::now();
        let health = format!("127.0.0.1:{}", free_port());
        let output = std::process::Command::new(ferro_ipam_e2e::provider::binary())
            .args(["--kubeconfig", &config.to_string_lossy(), "--health-probe-bind-address", &health])
            .args(["--diagnostics-address", "0"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout) + String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{text}");
        assert!(text.contains("ERROR") && text.contains("kubeconfig"), "{text}");
        report(
            &format!("kubeconfig unreadable ({})", config.display()),
            "ERROR ferro-ipam cannot run: reading kubeconfig ...: <cause>",
            "the process exits 1",
            "none (the process is gone)",
            "none",
            started.elapsed().as_secs_f64(),
        );
    }
}

/// The in-cluster provider's leader Lease name (`7bb7acb4.ipam.cluster.x-k8s.io`).
const IN_CLUSTER_LEASE: &str = "7bb7acb4.ipam.cluster.x-k8s.io";

/// Writes the Lease `IN_CLUSTER_LEASE` in `ns` as held by `holder` and renewed now.
async fn renew_other_lease(s: &Scope, duration: i32, renewals: i64) {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Patch, PatchParams};
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let lease = Lease {
        metadata: kube::api::ObjectMeta { name: Some(IN_CLUSTER_LEASE.into()), ..Default::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some("in-cluster-ipam_e2e".into()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            lease_transitions: Some(i32::try_from(renewals).unwrap()),
            ..LeaseSpec::default()
        }),
    };
    leases.patch(IN_CLUSTER_LEASE, &PatchParams::apply("e2e-in-cluster").force(), &Patch::Apply(&lease)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn another_providers_renewed_lease_stops_allocation_until_it_lapses() {
    let s = Scope::new("other-provider").await;
    const DURATION: i32 = 4;
    renew_other_lease(&s, DURATION, 0).await;
    let other = format!("{}/{IN_CLUSTER_LEASE}", s.ns);
    let mut args = s.provider_args();
    args.extend(["--other-provider-lease", &other, "--leader-elect-retry-period", "1s"]);
    args.extend(["--leader-elect-renew-deadline", "2s", "--leader-elect-lease-duration", "4s"]);
    s.pool("nodes", json!({"addresses": ["10.71.0.10-10.71.0.12"], "prefix": 24})).await.unwrap();
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &s.plane.kubeconfig, &args).unwrap();
    s.claim("c", "InClusterIPPool", "nodes").await.unwrap();
    // Renewed every second for 6 s: the Lease is held all along, and nothing is allocated.
    let mut signalled = None;
    let mut last_renewal = Instant::now();
    for n in 1..=6 {
        renew_other_lease(&s, DURATION, n).await;
        last_renewal = Instant::now();
        if signalled.is_none()
            && provider.logged(&["ERROR", "problem=other_provider_active", &other])
            && misconfigured(&provider, "other_provider_active") == Some(1.0)
            && http_status(&provider.health, "/readyz") == Some(503)
        {
            signalled = Some(started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let signalled =
        signalled.unwrap_or_else(|| panic!("no signal of the other provider; log:\n{}", provider.log_tail(30)));
    assert!(s.addresses().get_opt("c").await.unwrap().is_none(), "allocated while another provider was active");
    assert_eq!(error_lines(&provider, "other_provider_active"), 1, "{}", provider.log_tail(30));
    let (status, _, message) = wait_pool_reason(&s, "nodes", "OtherProviderActive").await;
    assert_eq!(status, "False");
    assert!(message.contains(&other) && message.contains("in-cluster-ipam_e2e"), "{message}");
    let note = wait_pool_event(&s, "nodes", "OtherProviderActive").await;
    assert!(note.contains(&other), "{note}");
    report(
        "another IPAM provider's Lease held and renewed",
        "ERROR problem=other_provider_active object=Lease <ns>/7bb7acb4.ipam.cluster.x-k8s.io action=get error=held by <holder> and renewed: ...",
        "503",
        "ferro_ipam_misconfigured{problem=\"other_provider_active\"} 1",
        "pools `Ready=False`, reason `OtherProviderActive`, and a Warning Event",
        signalled,
    );
    // The other provider stops renewing: still nothing a second before its Lease lapses (on
    // ferro-ipam's clock it lapses `DURATION` after it first saw the last renewal), then served.
    let before_lapse = last_renewal + Duration::from_secs(u64::try_from(DURATION - 1).unwrap());
    if Instant::now() < before_lapse {
        tokio::time::sleep_until(tokio::time::Instant::from_std(before_lapse)).await;
        assert!(
            s.addresses().get_opt("c").await.unwrap().is_none(),
            "allocated before the other provider's Lease lapsed"
        );
    }
    s.wait_allocated("c", Duration::from_secs(30)).await.unwrap();
    let served = last_renewal.elapsed().as_secs_f64();
    assert_eq!(misconfigured(&provider, "other_provider_active"), Some(0.0));
    let (status, _, _) = wait_pool_reason(&s, "nodes", "Valid").await;
    assert_eq!(status, "True", "the pool's own condition is back once ferro-ipam serves");
    println!(
        "misconfig report: other provider's Lease (duration {DURATION} s) lapsed: claim served {served:.1} s after its last renewal"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_running_in_cluster_provider_is_refused_and_ferro_ipam_serves_once_its_lease_lapses() {
    use k8s_openapi::api::coordination::v1::Lease;
    let s = Scope::new("in-cluster-running").await;
    ferro_ipam_e2e::peer::install_missing_crds(s.plane).unwrap();
    let mut peer = ferro_ipam_e2e::Peer::launch_leading(s.plane, &s.ns, &["--namespace", &s.ns]).unwrap();
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    s.eventually("the in-cluster provider holds its Lease", Duration::from_secs(30), || async {
        leases.get_opt(IN_CLUSTER_LEASE).await.ok().flatten().and_then(|l| l.spec?.holder_identity).is_some()
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}; its log:\n{}", peer.log_tail(20)));
    let other = format!("{}/{IN_CLUSTER_LEASE}", s.ns);
    let mut args = s.provider_args();
    args.extend(["--other-provider-lease", &other]);
    s.pool("nodes", json!({"addresses": ["10.72.0.10-10.72.0.19"], "prefix": 24})).await.unwrap();
    let started = Instant::now();
    let provider = Provider::launch(s.plane, &s.plane.kubeconfig, &args).unwrap();
    let seconds = wait_signal(&provider, started, "other_provider_active", &[&other, "held by"]);
    report(
        "the in-cluster provider running (its Lease held and renewed)",
        "ERROR problem=other_provider_active object=Lease <ns>/7bb7acb4.ipam.cluster.x-k8s.io action=get error=held by <holder> and renewed: ...",
        "503",
        "ferro_ipam_misconfigured{problem=\"other_provider_active\"} 1",
        "a Warning Event `OtherProviderActive` on each pool (the in-cluster provider rewrites their status)",
        seconds,
    );
    // The in-cluster provider rewrites the status of the pools it serves, without ferro-ipam's
    // condition: the Warning Event is what stays.
    let note = wait_pool_event(&s, "nodes", "OtherProviderActive").await;
    assert!(note.contains(&other), "{note}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // No term starts (a term begins "became the leader"), so nothing is allocated.
    assert!(!provider.logged(&["became the leader"]), "ferro-ipam served while the in-cluster provider ran");
    peer.stop();
    let stopped = Instant::now();
    s.claim("after", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_allocated("after", Duration::from_secs(45)).await.unwrap();
    let served = stopped.elapsed().as_secs_f64();
    assert!(provider.logged(&["became the leader"]), "ferro-ipam served the claim: {}", provider.log_tail(20));
    assert_eq!(misconfigured(&provider, "other_provider_active"), Some(0.0));
    println!("misconfig report: in-cluster provider stopped: ferro-ipam served a claim {served:.1} s later");
    report(
        "the in-cluster provider stopped: its Lease lapses",
        "INFO resolved ... problem=other_provider_active",
        "200",
        "ferro_ipam_misconfigured{problem=\"other_provider_active\"} 0",
        "none",
        served,
    );
}

/// The in-cluster provider's webhook configurations as its release leaves them once its pod and
/// Service are gone, confined to `namespace` so that other scenarios' pools are untouched.
fn leftover_webhooks(namespace: &str) -> [serde_json::Value; 2] {
    let hook = |name: &str, path: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "clientConfig": {"service": {"name": "capi-ipam-in-cluster-webhook-service", "namespace": "capi-ipam-in-cluster-system", "path": path}},
            "rules": [{"apiGroups": ["ipam.cluster.x-k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["inclusterippools"]}],
        })
    };
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("{namespace}-in-cluster-validating")},
            "webhooks": [hook("validation.inclusterippool.ipam.cluster.x-k8s.io", "/validate-ipam-cluster-x-k8s-io-v1alpha2-inclusterippool")],
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": format!("{namespace}-in-cluster-mutating")},
            "webhooks": [hook("default.inclusterippool.ipam.cluster.x-k8s.io", "/mutate-ipam-cluster-x-k8s-io-v1alpha2-inclusterippool")],
        }),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn leftover_webhooks_that_refuse_pool_writes_are_an_error_and_a_metric_until_deleted() {
    use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
    let s = Scope::new("misconfig-webhooks").await;
    // The pool exists from before (the in-cluster provider served it); then its pod goes and its
    // webhooks stay.
    s.pool("nodes", json!({"addresses": ["10.73.0.10-10.73.0.19"], "prefix": 24})).await.unwrap();
    let [validating, mutating] = leftover_webhooks(&s.ns);
    let validating: ValidatingWebhookConfiguration = serde_json::from_value(validating).unwrap();
    let mutating: MutatingWebhookConfiguration = serde_json::from_value(mutating).unwrap();
    let validatings: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    let mutatings: Api<MutatingWebhookConfiguration> = Api::all(s.client.clone());
    validatings.create(&PostParams::default(), &validating).await.unwrap();
    mutatings.create(&PostParams::default(), &mutating).await.unwrap();
    // The API server caches webhook configurations: wait until they refuse a write.
    s.eventually("the webhooks refuse pool writes", Duration::from_secs(20), || async {
        let patch = json!({"metadata": {"labels": {"probe": "1"}}});
        let refused =
            s.pools().patch("nodes", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await;
        refused.is_err_and(|e| e.to_string().contains("failed calling webhook"))
    })
    .await
    .unwrap();

    let started = Instant::now();
    let provider = Provider::launch(s.plane, &s.plane.kubeconfig, &s.provider_args()).unwrap();
    s.claim("vm-0", "InClusterIPPool", "nodes").await.unwrap();
    let object = format!("object=pool {}/nodes", s.ns);
    let deadline = started + LEASE_DURATION;
    let seconds = loop {
        let logged = provider.logged(&["ERROR", "problem=webhook_failing", &object, "failed calling webhook"]);
        let metric = misconfigured(&provider, "webhook_failing").is_some_and(|v| v >= 1.0);
        if logged && metric {
            break started.elapsed().as_secs_f64();
        }
        assert!(
            Instant::now() < deadline,
            "webhook_failing not signalled (ERROR {logged}, metric {metric}); log:\n{}",
            provider.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Other pools can still be served: readiness stays.
    assert_eq!(http_status(&provider.health, "/readyz"), Some(200), "{}", provider.log_tail(20));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(error_lines(&provider, "webhook_failing"), 1, "one ERROR line per 30 s, not per retry");
    assert!(!provider.logged(&["WARN", "failed calling webhook"]), "said once, at ERROR: {}", provider.log_tail(20));
    report(
        "the in-cluster provider's webhooks left registered (pool writes refused)",
        "ERROR problem=webhook_failing object=pool <ns>/<pool> action=updating finalizers of InClusterIPPool <ns>/<pool> error=Internal error occurred: failed calling webhook ... (500 InternalError)",
        "200 (other pools are served)",
        "ferro_ipam_misconfigured{problem=\"webhook_failing\"} 1 (one per refused pool)",
        "none (the pool's writes are refused)",
        seconds,
    );

    // The runbook's fix: delete them. The pool is protected and the claim served.
    validatings.delete(&validating.metadata.name.clone().unwrap(), &Default::default()).await.unwrap();
    mutatings.delete(&mutating.metadata.name.clone().unwrap(), &Default::default()).await.unwrap();
    let fixed = Instant::now();
    s.wait_allocated("vm-0", Duration::from_secs(45)).await.unwrap();
    s.eventually("the metric back at 0", Duration::from_secs(10), || async {
        misconfigured(&provider, "webhook_failing") == Some(0.0)
    })
    .await
    .unwrap();
    assert!(provider.logged(&["resolved", "problem=webhook_failing"]), "{}", provider.log_tail(20));
    println!("misconfig report: webhooks deleted: claim served {:.1} s later", fixed.elapsed().as_secs_f64());
}

/// Stops the plane's processes when the test ends, and removes its directory unless the test
/// failed (its logs are for a post-mortem).
struct Halt(&'static ControlPlane);

impl Drop for Halt {
    fn drop(&mut self) {
        self.0.halt();
        if std::thread::panicking() {
            eprintln!("control plane logs: {}", self.0.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0.dir);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_crds_are_an_error_not_ready_and_a_metric_until_they_are_installed() {
    // A plane of its own: the CRDs go and come back.
    let plane = ControlPlane::start().unwrap_or_else(|e| panic!("starting a private control plane: {e:#}")).leak();
    let _halt = Halt(plane);
    let s = Scope::on(plane, "crds-missing").await;
    let pool_crds = repo_root().join("crds");
    let capi_crds = plane.tools.capi_crds().unwrap();
    let ipam_crds = ["ipaddressclaims.ipam.cluster.x-k8s.io", "ipaddresses.ipam.cluster.x-k8s.io"];
    let mut delete = vec!["delete", "--wait", "-f"];
    let pool_crds_arg = pool_crds.to_string_lossy().into_owned();
    delete.push(&pool_crds_arg);
    plane.kubectl_ok(&delete).unwrap();
    let mut delete = vec!["delete", "--wait", "crd"];
    delete.extend(ipam_crds);
    plane.kubectl_ok(&delete).unwrap();

    // Neither Cluster API's IPAM CRDs nor the pools': discovery finds no IPAddressClaim.
    let started = Instant::now();
    let provider = Provider::launch(plane, &plane.kubeconfig, &s.provider_args()).unwrap();
    let seconds = wait_signal(&provider, started, "crd_missing", &["object=API discovery of the Cluster API groups"]);
    report(
        "Cluster API's IPAM CRDs missing",
        "ERROR problem=crd_missing object=API discovery of the Cluster API groups action=get error=...",
        "503",
        "ferro_ipam_misconfigured{problem=\"crd_missing\"} 1",
        "none",
        seconds,
    );

    // Cluster API's CRDs installed, the pools' still missing: each pool watch is refused.
    let installed = Instant::now();
    plane.kubectl_ok(&["apply", "--server-side", "-f", &capi_crds.to_string_lossy()]).unwrap();
    plane.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]).unwrap();
    let seconds = wait_signal(&provider, installed, "crd_missing", &["object=list/watch of InClusterIPPool", "404"]);
    report(
        "ferro-ipam's pool CRDs missing",
        "ERROR problem=crd_missing object=list/watch of InClusterIPPool action=list error=... (404 NotFound)",
        "503 (the leader)",
        "ferro_ipam_misconfigured{problem=\"crd_missing\"}, one per pool kind",
        "none (no pool can be read)",
        // Discovery backs off up to 10 s between attempts: counted from the CRDs' install.
        seconds,
    );
    assert!(
        provider.logged(&["resolved", "object=API discovery of the Cluster API groups"]),
        "{}",
        provider.log_tail(20)
    );

    // And the pools' CRDs: everything is served.
    plane.kubectl_ok(&["apply", "--server-side", "-f", &pool_crds_arg]).unwrap();
    plane.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"]).unwrap();
    s.pool("nodes", json!({"addresses": ["10.74.0.10-10.74.0.19"], "prefix": 24})).await.unwrap();
    s.claim("vm-0", "InClusterIPPool", "nodes").await.unwrap();
    s.wait_allocated("vm-0", Duration::from_secs(60)).await.unwrap();
    s.eventually("ready, the metric at 0", Duration::from_secs(15), || async {
        misconfigured(&provider, "crd_missing") == Some(0.0) && http_status(&provider.health, "/readyz") == Some(200)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}: {}", provider.log_tail(20)));
}
