//! Running ferro-ipam as platform teams do: `deploy/` and the clusterctl release files accepted
//! by the API server, Cluster API's conventions for them (`conventions`), the argument lists of Cluster API tooling (`flags`), the provider under
//! exactly the RBAC `deploy/` grants (`rbac`), two replicas with leader election (`leader`), and a
//! real Prometheus scraping it with every query of the dashboard and the alerts (`prometheus`).

mod audit;
mod clusterctl;
mod conventions;
mod diagnostics;
mod diagnostics_flood;
mod flags;
mod helm;
mod image;
mod leader;
mod misconfig;
mod prometheus;
mod rbac;
mod single_namespace;
mod uninstall;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use ferro_ipam_e2e::ControlPlane;
use ferro_ipam_e2e::plane::repo_root;
use serde_json::Value;

/// A control plane of its own whose API server writes an audit log, as `policy` says.
pub struct Audited {
    pub plane: ControlPlane,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Audited {
    /// Starts it, with `more` kube-apiserver flags; `name` tells its directory apart.
    pub fn start(name: &str, policy: &str, more: &[&str]) -> Audited {
        let dir = tempfile::Builder::new().prefix(&format!("ferro-ipam-{name}-")).tempdir().unwrap();
        let (policy_file, log) = (dir.path().join("audit-policy.yaml"), dir.path().join("audit.log"));
        std::fs::write(&policy_file, policy).unwrap();
        let mut args = vec![
            format!("--audit-policy-file={}", policy_file.display()),
            format!("--audit-log-path={}", log.display()),
            "--audit-log-mode=blocking".to_owned(),
        ];
        args.extend(more.iter().map(|flag| flag.to_string()));
        let plane =
            ControlPlane::start_with(&args).unwrap_or_else(|e| panic!("starting the {name} control plane: {e:#}"));
        Audited { plane, log, _dir: dir }
    }
}

/// A path under `deploy/`.
pub fn deploy(path: &str) -> PathBuf {
    repo_root().join("deploy").join(path)
}

/// YAML documents (of kubectl or of a file) as JSON values; empty documents dropped.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).expect("valid YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

/// `kubectl kustomize DIR`, as text.
pub fn kustomize_text(plane: &ControlPlane, dir: &Path) -> String {
    plane.kubectl_ok(&["kustomize", &dir.to_string_lossy()]).expect("kustomize builds")
}

/// `kubectl kustomize DIR`, as objects.
pub fn kustomize(plane: &ControlPlane, dir: &Path) -> Vec<Value> {
    yaml_documents(&kustomize_text(plane, dir))
}

/// `deploy/` with the kustomize components of `deploy/<component>`, built as a user's overlay
/// would build it (in the plane's directory, named after the components).
pub fn with_components(plane: &ControlPlane, components: &[&str]) -> Vec<Value> {
    user_overlay(plane, &format!("overlay-{}", components.join("-")), |relative| {
        let components: Vec<String> = components.iter().map(|c| relative(c)).collect();
        format!("resources: [{}]\ncomponents: [{}]\n", relative(""), components.join(", "))
    })
}

/// A user's overlay of `deploy/`, built: the kustomization `body` (after apiVersion and kind)
/// written in the plane's directory `name`. `body` gets a function that turns a path under
/// `deploy/` into the relative one kustomize takes from there.
pub fn user_overlay(
    plane: &ControlPlane,
    name: &str,
    body: impl FnOnce(&dyn Fn(&str) -> String) -> String,
) -> Vec<Value> {
    let overlay = plane.dir.join(name);
    std::fs::create_dir_all(&overlay).unwrap();
    // kustomize takes only relative paths: from the overlay up to `/`, then down to deploy/.
    let up = "../".repeat(overlay.components().count() - 1);
    let relative = |dir: &str| format!("{up}{}", deploy(dir).strip_prefix("/").unwrap().display());
    let text = format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n{}", body(&relative));
    std::fs::write(overlay.join("kustomization.yaml"), text).unwrap();
    kustomize(plane, &overlay)
}

/// The object of this kind and name.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", kinds(objects)))
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects.iter().map(|o| o["kind"].as_str().unwrap_or_default().to_owned()).collect()
}

/// A token of the ServiceAccount `name` in `ns`, bound to `deploy/`'s ClusterRole
/// `ferro-ipam-metrics-reader` when `reader`, else to nothing.
pub fn scraper_token(plane: &ControlPlane, ns: &str, name: &str, reader: bool) -> String {
    plane.kubectl_ok(&["create", "serviceaccount", name, "-n", ns]).unwrap();
    if reader {
        let role = find(&kustomize(plane, &deploy("")), "ClusterRole", "ferro-ipam-metrics-reader").clone();
        let file = plane.dir.join(format!("{ns}-{name}-role.json"));
        std::fs::write(&file, role.to_string()).unwrap();
        plane.kubectl_ok(&["apply", "--server-side", "-f", &file.to_string_lossy()]).unwrap();
        let binding = format!("{ns}-{name}");
        let subject = format!("{ns}:{name}");
        plane
            .kubectl_ok(&[
                "create",
                "clusterrolebinding",
                &binding,
                "--clusterrole=ferro-ipam-metrics-reader",
                "--serviceaccount",
                &subject,
            ])
            .unwrap();
    }
    plane.kubectl_ok(&["create", "token", name, "-n", ns, "--duration", "2h"]).unwrap().trim().to_owned()
}

/// Resolves clusterctl variables as `clusterctl init` does when none is set: `${NAME:=default}`
/// becomes `default`; a variable without a default is an error.
pub fn clusterctl_defaults(text: &str) -> Result<String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').context("unterminated ${")? + start;
        let variable = &rest[start + 2..end];
        match variable.split_once(":=") {
            Some((_, default)) => out.push_str(default),
            None => bail!("clusterctl variable ${{{variable}}} has no default: `clusterctl init` would require it"),
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of `--flag=value` among container args.
pub fn arg_value(args: &[Value], flag: &str) -> Option<String> {
    args.iter().filter_map(Value::as_str).find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_owned))
}

/// The port of a bind address (":8080" or "host:8080").
fn port_of(address: &str) -> u16 {
    address.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {address:?}"))
}

/// Makes sure the install namespace exists, so that a server-side dry run can place objects in it.
fn install_namespace(plane: &ControlPlane) {
    let output = plane.kubectl(&["create", "namespace", "ferro-ipam-system"]).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() || stderr.contains("AlreadyExists"), "creating ferro-ipam-system: {stderr}");
}

/// `kubectl apply --dry-run=server` of `-k DIR` or `-f FILE`: the objects the API server would store.
fn server_dry_run(plane: &ControlPlane, how: &str, path: &Path) -> Vec<Value> {
    let out = plane
        .kubectl_ok(&["apply", "--dry-run=server", how, &path.to_string_lossy(), "-o", "json"])
        .unwrap_or_else(|e| panic!("the API server refuses {}: {e:#}", path.display()));
    let list: Value = serde_json::from_str(&out).expect("kubectl prints JSON");
    match list["kind"].as_str() {
        Some("List") => list["items"].as_array().cloned().unwrap_or_default(),
        _ => vec![list],
    }
}

fn labels_select(selector: &Value, labels: &Value) -> bool {
    selector.as_object().is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| labels[k] == *v))
}

/// The checks every install of the controller must pass (the base and the clusterctl file).
fn assert_hardened_controller(objects: &[Value]) {
    let deployment = find(objects, "Deployment", "ferro-ipam-controller");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    let pod = &spec["template"]["spec"];
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert!(labels_select(&spec["selector"]["matchLabels"], pod_labels));
    assert_eq!(pod["serviceAccountName"], "ferro-ipam-controller");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical", "scheduled and kept as Cluster API's controllers");
    let spread: Vec<(&Value, &Value)> = pod["topologySpreadConstraints"]
        .as_array()
        .expect("topologySpreadConstraints")
        .iter()
        .inspect(|c| assert!(labels_select(&c["labelSelector"]["matchLabels"], pod_labels), "{c}"))
        .map(|c| (&c["topologyKey"], &c["whenUnsatisfiable"]))
        .collect();
    assert_eq!(
        spread,
        [
            (&Value::from("kubernetes.io/hostname"), &Value::from("ScheduleAnyway")),
            (&Value::from("topology.kubernetes.io/zone"), &Value::from("ScheduleAnyway")),
        ],
        "spread over nodes and zones, never unschedulable for want of them"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    for kind in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            assert!(container["resources"][kind][resource].is_string(), "{kind}.{resource} unset");
        }
    }
    let args = container["args"].as_array().expect("args");
    assert!(args.iter().any(|a| a == "--leader-elect"), "{args:?}");
    assert_eq!(arg_value(args, "--leader-election-namespace").as_deref(), Some("$(POD_NAMESPACE)"));
    let env = container["env"].as_array().expect("env");
    let from_field =
        |name: &str| env.iter().find(|e| e["name"] == name).map(|e| e["valueFrom"]["fieldRef"]["fieldPath"].clone());
    assert_eq!(from_field("POD_NAME"), Some(Value::from("metadata.name")));
    assert_eq!(from_field("POD_NAMESPACE"), Some(Value::from("metadata.namespace")));

    // The probes and the Service reach the ports the flags open.
    let port_named = |name: &str| {
        container["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .map(|p| p["containerPort"].clone())
    };
    let health = port_of(&arg_value(args, "--health-probe-bind-address").expect("health flag"));
    let metrics = port_of(&arg_value(args, "--diagnostics-address").expect("metrics flag"));
    assert!(!args.iter().any(|a| a.as_str().is_some_and(|a| a.starts_with("--insecure-diagnostics"))), "{args:?}");
    assert_eq!(port_named("health"), Some(Value::from(health)));
    assert_eq!(port_named("metrics"), Some(Value::from(metrics)));
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "health", "{probe}");
    }
    let service = find(objects, "Service", "ferro-ipam-metrics");
    assert!(labels_select(&service["spec"]["selector"], pod_labels), "the metrics Service selects the pods");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
    let pdb = find(objects, "PodDisruptionBudget", "ferro-ipam-controller");
    assert!(labels_select(&pdb["spec"]["selector"]["matchLabels"], pod_labels), "the PDB covers the pods");
    // maxUnavailable, not minAvailable: a drain of a one-replica install is never blocked.
    assert_eq!((&pdb["spec"]["maxUnavailable"], &pdb["spec"]["minAvailable"]), (&Value::from(1), &Value::Null));

    // The bindings name the ServiceAccount the pods run as, in the install namespace.
    for (kind, name) in [("ClusterRoleBinding", "ferro-ipam-controller"), ("RoleBinding", "ferro-ipam-leader-election")]
    {
        let subject = &find(objects, kind, name)["subjects"][0];
        assert_eq!(
            (&subject["name"], &subject["namespace"]),
            (&"ferro-ipam-controller".into(), &"ferro-ipam-system".into())
        );
    }
    assert_eq!(find(objects, "Role", "ferro-ipam-leader-election")["metadata"]["namespace"], "ferro-ipam-system");

    // The binary accepts the Deployment's flags: it gets as far as reading the kubeconfig.
    let mut flags: Vec<String> =
        args.iter().filter_map(Value::as_str).map(|a| a.replace("$(POD_NAMESPACE)", "ferro-ipam-system")).collect();
    flags.extend(["--kubeconfig".into(), "/nonexistent/kubeconfig".into()]);
    let run = Command::new(ferro_ipam_e2e::provider::binary()).args(&flags).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr) + String::from_utf8_lossy(&run.stdout);
    assert!(stderr.contains("reading kubeconfig"), "ferro-ipam {flags:?} refused its flags: {stderr}");
}

#[test]
fn deploy_base_is_accepted_by_the_api_server_and_runs_hardened() {
    let plane = ControlPlane::shared();
    install_namespace(plane);
    let objects = server_dry_run(plane, "-k", &deploy(""));
    let expected: BTreeSet<String> = [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ConfigMap",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(kinds(&objects), expected, "deploy/ works without the Prometheus operator's CRDs");
    let crds: BTreeSet<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(
        crds,
        [
            "addressblocks.hub.ferro-ipam.dev",
            "globalinclusterippools.ipam.cluster.x-k8s.io",
            "globalinclusterprefixpools.ipam.cluster.x-k8s.io",
            "inclusterippools.ipam.cluster.x-k8s.io",
            "inclusterprefixpools.ipam.cluster.x-k8s.io"
        ]
        .into()
    );
    for object in objects.iter().filter(|o| o["metadata"]["namespace"].is_string()) {
        assert_eq!(object["metadata"]["namespace"], "ferro-ipam-system", "{}", object["metadata"]["name"]);
    }
    assert_hardened_controller(&objects);

    let dashboard = find(&objects, "ConfigMap", "ferro-ipam-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let file = std::fs::read_to_string(deploy("dashboard/ferro-ipam.json")).unwrap();
    assert_eq!(dashboard["data"]["ferro-ipam.json"].as_str(), Some(file.as_str()), "the ConfigMap holds the dashboard");
}

#[test]
fn with_monitoring_adds_a_service_monitor_and_alert_rules_that_fit_the_base() {
    let plane = ControlPlane::shared();
    let base = kustomize(plane, &deploy(""));
    let monitored = kustomize(plane, &deploy("with-monitoring"));
    let mut expected = kinds(&base);
    expected.extend(["ServiceMonitor".to_owned(), "PrometheusRule".to_owned(), "Secret".to_owned()]);
    assert_eq!(kinds(&monitored), expected);
    // The ServiceMonitor, the PrometheusRule, and the scraper's ServiceAccount, token and binding.
    assert_eq!(monitored.len(), base.len() + 5);

    let monitor = find(&monitored, "ServiceMonitor", "ferro-ipam");
    let service = find(&monitored, "Service", "ferro-ipam-metrics");
    assert!(labels_select(&monitor["spec"]["selector"]["matchLabels"], &service["metadata"]["labels"]));
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(endpoint["honorLabels"], true, "pool series keep their own namespace label");
    assert_eq!(endpoint["scheme"], "https");
    assert!(endpoint["bearerTokenFile"].is_null(), "not the deprecated field: {endpoint}");
    assert_eq!(endpoint["tlsConfig"], serde_json::json!({"insecureSkipVerify": true}), "self-signed by default");
    assert_scrapes_as_a_metrics_reader(&monitored, endpoint);
    let rules = find(&monitored, "PrometheusRule", "ferro-ipam");
    let alerts: BTreeSet<&str> =
        rules["spec"]["groups"][0]["rules"].as_array().unwrap().iter().filter_map(|r| r["alert"].as_str()).collect();
    for alert in ["FerroIpamPoolNearlyFull", "FerroIpamClaimsNotReady", "FerroIpamNoLeader"] {
        assert!(alerts.contains(alert), "{alert} missing from {alerts:?}");
    }
    for object in [monitor, rules] {
        assert_eq!(object["metadata"]["namespace"], "ferro-ipam-system");
    }
}

/// The endpoint sends, as a Bearer token, the key of a ServiceAccount token Secret whose account
/// is bound to `ferro-ipam-metrics-reader` and nothing else.
fn assert_scrapes_as_a_metrics_reader(objects: &[Value], endpoint: &Value) {
    let credentials = &endpoint["authorization"]["credentials"];
    assert_eq!(endpoint["authorization"]["type"], "Bearer", "{endpoint}");
    let secret = find(objects, "Secret", credentials["name"].as_str().expect("credentials from a Secret"));
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(credentials["key"], "token", "the key the token controller fills");
    let account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"].as_str().unwrap();
    find(objects, "ServiceAccount", account);
    let bound: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .filter(|o| o["subjects"].as_array().into_iter().flatten().any(|s| s["name"] == account))
        .map(|o| &o["roleRef"]["name"])
        .collect();
    assert_eq!(bound, ["ferro-ipam-metrics-reader"], "{account} may get /metrics and do nothing else");
}

#[test]
fn the_cert_manager_component_mounts_its_certificate_and_the_service_monitor_verifies_it() {
    let plane = ControlPlane::shared();
    let built = with_components(plane, &["monitoring", "cert-manager"]);
    assert_verified_scrapes(&built, "ferro-ipam-system");
    // Its own CA: a self-signed Issuer makes the CA Certificate, whose Secret a CA Issuer signs with.
    let serving = find(&built, "Certificate", "ferro-ipam-metrics");
    let ca_issuer = find(&built, "Issuer", serving["spec"]["issuerRef"]["name"].as_str().unwrap());
    let ca = find(&built, "Certificate", "ferro-ipam-metrics-ca");
    assert_eq!(ca_issuer["spec"]["ca"]["secretName"], ca["spec"]["secretName"]);
    assert_eq!(ca["spec"]["isCA"], true);
    assert!(
        find(&built, "Issuer", ca["spec"]["issuerRef"]["name"].as_str().unwrap())["spec"]["selfSigned"].is_object()
    );
    // Without the monitoring component, the certificate is still mounted and nothing else breaks.
    let alone = with_components(plane, &["cert-manager"]);
    assert!(!alone.iter().any(|o| o["kind"] == "ServiceMonitor"));
    find(&alone, "Certificate", "ferro-ipam-metrics");
}

/// The serving Certificate names the metrics Service of `namespace`; the Deployment mounts its
/// Secret at `--tls-cert-dir`; the ServiceMonitor checks the Secret's CA and the first name, and
/// skips no verification.
pub fn assert_verified_scrapes(objects: &[Value], namespace: &str) {
    let certificate = find(objects, "Certificate", "ferro-ipam-metrics");
    let secret = certificate["spec"]["secretName"].as_str().unwrap();
    let service = format!("ferro-ipam-metrics.{namespace}.svc");
    assert_eq!(certificate["spec"]["dnsNames"], serde_json::json!([service, format!("{service}.cluster.local")]));
    let pod = &find(objects, "Deployment", "ferro-ipam-controller")["spec"]["template"]["spec"];
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["secret"]["secretName"] == secret).unwrap();
    let container = &pod["containers"][0];
    let mount = container["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == volume["name"]).unwrap();
    assert_eq!(mount["readOnly"], true);
    let flag = format!("--tls-cert-dir={}", mount["mountPath"].as_str().unwrap());
    assert!(container["args"].as_array().unwrap().iter().any(|a| a == &flag), "{flag} missing: {container}");
    let endpoint = &find(objects, "ServiceMonitor", "ferro-ipam")["spec"]["endpoints"][0];
    assert_eq!(
        endpoint["tlsConfig"],
        serde_json::json!({"ca": {"secret": {"name": secret, "key": "ca.crt"}}, "serverName": service}),
        "the CA of the certificate's Secret, the Service's name, no insecureSkipVerify"
    );
    assert_scrapes_as_a_metrics_reader(objects, endpoint);
}

#[test]
fn clusterctl_components_are_current_complete_and_accepted_by_the_api_server() {
    let plane = ControlPlane::shared();
    install_namespace(plane);
    let file = deploy("clusterctl/ipam-components.yaml");
    let committed = std::fs::read_to_string(&file).unwrap();
    assert!(
        committed == kustomize_text(plane, &deploy("clusterctl")),
        "deploy/clusterctl/ipam-components.yaml is stale: run `make release-manifests`"
    );
    let rendered = clusterctl_defaults(&committed).unwrap();
    assert!(committed.contains("${FERRO_IPAM_IMAGE:="), "the image is a clusterctl variable");
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("ipam-components.yaml");
    std::fs::write(&path, &rendered).unwrap();
    let objects = server_dry_run(plane, "-f", &path);
    assert_hardened_controller(&objects);
    let base: BTreeSet<(String, String)> = kustomize(plane, &deploy(""))
        .iter()
        .map(|o| (o["kind"].as_str().unwrap().to_owned(), o["metadata"]["name"].as_str().unwrap().to_owned()))
        .collect();
    let components: BTreeSet<(String, String)> = objects
        .iter()
        .map(|o| (o["kind"].as_str().unwrap().to_owned(), o["metadata"]["name"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(components, base, "ipam-components.yaml installs what deploy/ installs");

    // metadata.yaml covers the version being released, at Cluster API's v1beta2 contract.
    let version = Command::new(ferro_ipam_e2e::provider::binary()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    let version = version.split_whitespace().last().expect("ferro-ipam --version prints a version");
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap());
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    let metadata = &yaml_documents(&std::fs::read_to_string(repo_root().join("metadata.yaml")).unwrap())[0];
    assert_eq!(metadata["kind"], "Metadata");
    assert_eq!(metadata["apiVersion"], "clusterctl.cluster.x-k8s.io/v1alpha3");
    let series = metadata["releaseSeries"].as_array().unwrap();
    assert!(
        series.iter().any(|s| s["major"] == major && s["minor"] == minor && s["contract"] == "v1beta2"),
        "metadata.yaml has no v1beta2 release series for {version}: {series:?}"
    );

    // The provider entry users add to clusterctl.yaml.
    let config = &yaml_documents(&std::fs::read_to_string(repo_root().join("docs/clusterctl.yaml")).unwrap())[0];
    let entry = &config["providers"][0];
    assert_eq!((&entry["name"], &entry["type"]), (&"ferro-ipam".into(), &"IPAMProvider".into()));
    assert!(entry["url"].as_str().unwrap().ends_with("/ipam-components.yaml"));
}

#[test]
fn clusterctl_variables_without_a_default_are_refused() {
    assert_eq!(clusterctl_defaults("image: ${IMAGE:=repo/x:v1} ok").unwrap(), "image: repo/x:v1 ok");
    assert!(clusterctl_defaults("image: ${IMAGE}").is_err());
}

#[test]
fn every_flag_of_the_binary_is_documented_in_operations_md() {
    let help = Command::new(ferro_ipam_e2e::provider::binary()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let flags: BTreeSet<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        // "--leader-elect[=<BOOL>]" and "--v <LEVEL>" name the flags --leader-elect and --v.
        .map(|w| w.split(['[', '=']).next().unwrap_or(w).trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| !matches!(*w, "--help" | "--version"))
        .collect();
    assert!(flags.len() >= 23, "{flags:?}");
    let doc = std::fs::read_to_string(repo_root().join("docs/operations.md")).unwrap();
    let missing: Vec<&&str> = flags.iter().filter(|f| !doc.contains(&format!("| `{f}` |"))).collect();
    assert!(missing.is_empty(), "flags missing from the table in docs/operations.md: {missing:?}");
}
