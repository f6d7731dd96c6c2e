//! The Helm chart in `deploy/chart/`: it renders the manifests kustomize builds (its
//! `files/manifests.yaml` is kustomize's output, checked current), so with default values it
//! installs what `kubectl apply -k deploy/` does, and its values reach the objects. `helm lint`
//! passes and the API server accepts `helm template`'s output (server-side dry run). helm is
//! built from the Go module proxy by `e2e/tools/go-tool.sh`.

use std::path::PathBuf;
use std::process::Command;

use ferro_ipam_e2e::ControlPlane;
use serde_json::{Value, json};

use super::{
    assert_hardened_controller, assert_verified_scrapes, deploy, find, install_namespace, kinds, kustomize,
    kustomize_text, server_dry_run, with_components, yaml_documents,
};

fn helm() -> PathBuf {
    ferro_ipam_e2e::gotools::go_tool("helm").unwrap_or_else(|e| panic!("{e:#}"))
}

pub fn helm_ok(args: &[&str]) -> String {
    let output = Command::new(helm()).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "helm {}: {text}{}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    text
}

/// The e2e API server's version, for `helm template --kube-version`.
fn kube_version(plane: &ControlPlane) -> String {
    let version: Value = serde_json::from_str(&plane.kubectl_ok(&["version", "-o", "json"]).unwrap()).unwrap();
    version["serverVersion"]["gitVersion"].as_str().unwrap().to_owned()
}

/// `helm template` of the chart as release `ferro-ipam` in `namespace`, with `--set` values.
fn template_text(plane: &ControlPlane, namespace: &str, set: &[&str]) -> String {
    let chart = deploy("chart");
    let version = kube_version(plane);
    let mut args =
        vec!["template", "ferro-ipam", chart.to_str().unwrap(), "--namespace", namespace, "--kube-version", &version];
    for value in set {
        args.extend(["--set", value]);
    }
    helm_ok(&args)
}

fn template(plane: &ControlPlane, namespace: &str, set: &[&str]) -> Vec<Value> {
    yaml_documents(&template_text(plane, namespace, set))
}

/// The annotation that keeps an object on `helm uninstall`.
const KEEP: &str = "helm.sh/resource-policy";

/// An object without the labels Helm adds, and without the CRDs' keep annotation.
fn without_helm_labels(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        for helm_label in ["app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart"] {
            labels.remove(helm_label);
        }
    }
    if let Some(metadata) = object["metadata"].as_object_mut() {
        let annotations = metadata.get_mut("annotations").and_then(Value::as_object_mut);
        if annotations.is_some_and(|a| a.remove(KEEP).is_some() && a.is_empty()) {
            metadata.remove("annotations");
        }
    }
    object
}

#[test]
fn the_chart_carries_what_kustomize_builds_now() {
    let plane = ControlPlane::shared();
    let committed = std::fs::read_to_string(deploy("chart/files/manifests.yaml")).unwrap();
    assert!(
        committed == kustomize_text(plane, &deploy("with-monitoring")),
        "deploy/chart/files/manifests.yaml is stale: run `make release-manifests`"
    );
    let copied = std::fs::read_to_string(deploy("chart/files/cert-manager.yaml")).unwrap();
    assert!(
        copied == std::fs::read_to_string(deploy("cert-manager/certificate.yaml")).unwrap(),
        "deploy/chart/files/cert-manager.yaml is stale: run `make release-manifests`"
    );
    let lint = helm_ok(&["lint", "--strict", deploy("chart").to_str().unwrap()]);
    assert!(lint.contains("0 chart(s) failed"), "{lint}");
}

#[test]
fn default_values_render_what_kustomize_installs_and_the_api_server_accepts_it() {
    let plane = ControlPlane::shared();
    install_namespace(plane);
    let rendered = template(plane, "ferro-ipam-system", &[]);
    let expected: Vec<Value> = kustomize(plane, &deploy("")).into_iter().filter(|o| o["kind"] != "Namespace").collect();
    assert_eq!(kinds(&rendered), kinds(&expected));
    assert_eq!(rendered.len(), expected.len());
    for object in &expected {
        let (kind, name) = (object["kind"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap());
        let chart = find(&rendered, kind, name);
        assert_eq!(chart["metadata"]["labels"]["app.kubernetes.io/managed-by"], "Helm", "{kind} {name}");
        let kept = chart["metadata"]["annotations"][KEEP].as_str();
        assert_eq!(kept == Some("keep"), kind == "CustomResourceDefinition", "{kind} {name}: {KEEP} is {kept:?}");
        assert!(
            without_helm_labels(chart) == *object,
            "{kind} {name} differs from kustomize's:\n{chart:#}\n{object:#}"
        );
    }

    let file = plane.dir.join("helm-template.yaml");
    std::fs::write(&file, template_text(plane, "ferro-ipam-system", &[])).unwrap();
    let accepted = server_dry_run(plane, "-f", &file);
    assert_eq!(accepted.len(), expected.len());
    assert_hardened_controller(&accepted);
}

#[test]
fn values_set_image_replicas_resources_flags_metrics_and_monitoring() {
    let plane = ControlPlane::shared();
    let rendered = template(
        plane,
        "capi-ipam",
        &[
            "image.repository=registry.example.com/ferro-ipam",
            "image.tag=v9.9.9",
            "replicas=3",
            "resources.limits.memory=1Gi",
            "flags.v=4",
            "flags.sync-period=5m",
            "extraArgs[0]=--claim-concurrency=32",
            "metrics.secure=false",
            "metrics.readers[0].kind=ServiceAccount",
            "metrics.readers[0].name=kps-prometheus",
            "metrics.readers[0].namespace=monitoring",
            "monitoring.serviceMonitor=true",
            "monitoring.prometheusRule=true",
            "monitoring.labels.release=kps",
            "dashboard=false",
            "crds=false",
        ],
    );
    let deployment = find(&rendered, "Deployment", "ferro-ipam-controller");
    assert_eq!(deployment["metadata"]["namespace"], "capi-ipam");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example.com/ferro-ipam:v9.9.9");
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let tail = &args[args.len() - 4..];
    assert_eq!(tail, ["--sync-period=5m", "--v=4", "--insecure-diagnostics", "--claim-concurrency=32"], "{args:?}");

    let monitor = find(&rendered, "ServiceMonitor", "ferro-ipam");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "http");
    assert!(endpoint["authorization"].is_null() && endpoint["tlsConfig"].is_null(), "{endpoint}");
    assert!(!rendered.iter().any(|o| o["kind"] == "Secret"), "no scraper token for a plain-HTTP endpoint");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kps");
    assert_eq!(find(&rendered, "PrometheusRule", "ferro-ipam")["metadata"]["labels"]["release"], "kps");
    let readers = find(&rendered, "ClusterRoleBinding", "ferro-ipam-metrics-reader");
    assert_eq!(readers["roleRef"]["name"], "ferro-ipam-metrics-reader");
    assert_eq!(
        readers["subjects"],
        json!([{"kind": "ServiceAccount", "name": "kps-prometheus", "namespace": "monitoring"}])
    );
    let binding = find(&rendered, "ClusterRoleBinding", "ferro-ipam-controller");
    assert_eq!(binding["subjects"][0]["namespace"], "capi-ipam", "bindings follow the release's namespace");
    for (kind, name) in
        [("ConfigMap", "ferro-ipam-dashboard"), ("CustomResourceDefinition", "inclusterippools.ipam.cluster.x-k8s.io")]
    {
        assert!(!rendered.iter().any(|o| o["kind"] == kind && o["metadata"]["name"] == name), "{kind} {name} is off");
    }

    // The binary takes the rendered flags: it gets as far as reading the kubeconfig.
    let mut flags: Vec<String> = args.iter().map(|a| a.replace("$(POD_NAMESPACE)", "capi-ipam")).collect();
    flags.extend(["--kubeconfig".into(), "/nonexistent/kubeconfig".into()]);
    let run = Command::new(ferro_ipam_e2e::provider::binary()).args(&flags).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr) + String::from_utf8_lossy(&run.stdout);
    assert!(stderr.contains("reading kubeconfig"), "ferro-ipam {flags:?} refused its flags: {stderr}");
}

#[test]
fn hardening_values_set_priority_spread_and_the_network_policy_of_deploy() {
    let plane = ControlPlane::shared();
    install_namespace(plane);
    let defaults = template(plane, "ferro-ipam-system", &[]);
    assert!(!defaults.iter().any(|o| o["kind"] == "NetworkPolicy"), "the NetworkPolicy is off by default");

    let set = ["networkPolicy.enabled=true", "priorityClassName=", "topologySpreadConstraints=null", "replicas=1"];
    let rendered = template(plane, "ferro-ipam-system", &set);
    let pod = &find(&rendered, "Deployment", "ferro-ipam-controller")["spec"]["template"]["spec"];
    assert!(pod["priorityClassName"].is_null(), "an empty priorityClassName drops it: {pod}");
    assert!(pod["topologySpreadConstraints"].is_array(), "null keeps the manifest's spread");
    let pdb = find(&rendered, "PodDisruptionBudget", "ferro-ipam-controller");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "one replica may still be evicted");

    // The chart's NetworkPolicy is the kustomize component's, in the release's namespace.
    let policy = find(&rendered, "NetworkPolicy", "ferro-ipam-controller");
    let built = with_components(plane, &["network-policy"]);
    assert_eq!(without_helm_labels(policy), *find(&built, "NetworkPolicy", "ferro-ipam-controller"));
    // It lets in exactly the ports the container names for metrics and probes.
    let container = &pod["containers"][0];
    let named: Vec<&Value> = container["ports"].as_array().unwrap().iter().map(|p| &p["name"]).collect();
    let allowed: Vec<&Value> =
        policy["spec"]["ingress"][0]["ports"].as_array().unwrap().iter().map(|p| &p["port"]).collect();
    assert_eq!(allowed, named, "the policy's ports are the container's");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]), "egress to the API server stays open");

    let custom = template(plane, "ferro-ipam-system", &["priorityClassName=ipam-critical"]);
    let pod = &find(&custom, "Deployment", "ferro-ipam-controller")["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "ipam-critical");

    let file = plane.dir.join("helm-template-hardening.yaml");
    std::fs::write(&file, template_text(plane, "ferro-ipam-system", &set)).unwrap();
    let accepted = server_dry_run(plane, "-f", &file);
    assert!(accepted.iter().any(|o| o["kind"] == "NetworkPolicy"), "the API server accepts the NetworkPolicy");
}

#[test]
fn without_the_control_plane_vip_the_chart_drops_its_rights_as_the_kustomize_component_does() {
    let plane = ControlPlane::shared();
    let rendered = template(plane, "ferro-ipam-system", &["controlPlaneVIP=false"]);
    let built = with_components(plane, &["without-control-plane-vip"]);
    let role = |objects: &[Value]| find(objects, "ClusterRole", "ferro-ipam-controller")["rules"].clone();
    assert_eq!(role(&rendered), role(&built), "the chart's rules are the component's");
    let args = |objects: &[Value]| {
        find(objects, "Deployment", "ferro-ipam-controller")["spec"]["template"]["spec"]["containers"][0]["args"]
            .clone()
    };
    assert_eq!(args(&rendered), args(&built), "the chart passes the component's flag");
    let defaults = template(plane, "ferro-ipam-system", &[]);
    assert_ne!(role(&defaults), role(&built), "by default the VIP controller keeps its rights");
}

#[test]
fn cert_manager_values_render_what_the_kustomize_component_builds_in_the_release_namespace() {
    let plane = ControlPlane::shared();
    let monitored = ["monitoring.serviceMonitor=true", "monitoring.prometheusRule=true"];
    let set = [monitored.as_slice(), &["metrics.certManager.enabled=true"]].concat();
    let rendered = template(plane, "ferro-ipam-system", &set);
    let expected: Vec<Value> = with_components(plane, &["monitoring", "cert-manager"])
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .collect();
    assert_eq!(kinds(&rendered), kinds(&expected));
    assert_eq!(rendered.len(), expected.len());
    for object in &expected {
        let (kind, name) = (object["kind"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap());
        let chart = without_helm_labels(find(&rendered, kind, name));
        assert!(chart == *object, "{kind} {name} differs from kustomize's:\n{chart:#}\n{object:#}");
    }
    assert_verified_scrapes(&template(plane, "capi-ipam", &set), "capi-ipam");

    // An issuer of the user's: only the serving Certificate, issued by it.
    let own = [
        set.as_slice(),
        &["metrics.certManager.issuerRef.kind=ClusterIssuer", "metrics.certManager.issuerRef.name=corp-ca"],
    ]
    .concat();
    let rendered = template(plane, "capi-ipam", &own);
    assert!(!rendered.iter().any(|o| o["kind"] == "Issuer"), "no CA of the release's own");
    let certificates: Vec<&Value> = rendered.iter().filter(|o| o["kind"] == "Certificate").collect();
    assert_eq!(certificates.len(), 1);
    assert_eq!(certificates[0]["spec"]["issuerRef"], json!({"kind": "ClusterIssuer", "name": "corp-ca"}));
    assert_verified_scrapes(&rendered, "capi-ipam");

    // By default: self-signed, verification skipped, the scraper's token still sent.
    let defaults = template(plane, "ferro-ipam-system", &monitored);
    assert!(!defaults.iter().any(|o| o["kind"] == "Certificate"));
    let endpoint = &find(&defaults, "ServiceMonitor", "ferro-ipam")["spec"]["endpoints"][0];
    assert_eq!(endpoint["tlsConfig"], json!({"insecureSkipVerify": true}));
    assert_eq!(endpoint["authorization"]["credentials"]["name"], "ferro-ipam-metrics-scraper-token");
}

#[test]
fn namespace_create_renders_the_release_namespace_labelled_as_deploy_base_and_kept() {
    let plane = ControlPlane::shared();
    let defaults = template(plane, "capi-ipam", &[]);
    assert!(!defaults.iter().any(|o| o["kind"] == "Namespace"), "by default the namespace is left to the user");

    let rendered = template(plane, "capi-ipam", &["namespace.create=true"]);
    assert_eq!(rendered.len(), defaults.len() + 1, "the Namespace is the only object added");
    let namespace = find(&rendered, "Namespace", "capi-ipam");
    assert_eq!(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
    let base = kustomize(plane, &deploy(""));
    let labels = |o: &Value| o["metadata"]["labels"].clone();
    assert_eq!(
        labels(&without_helm_labels(namespace)),
        labels(find(&base, "Namespace", "ferro-ipam-system")),
        "the labels of deploy/base/namespace.yaml"
    );
    assert_eq!(namespace["metadata"]["annotations"][KEEP], "keep", "`helm uninstall` leaves the namespace");

    // The API server accepts it as a new namespace, label included.
    let file = plane.dir.join("helm-namespace.json");
    std::fs::write(&file, namespace.to_string()).unwrap();
    let accepted = server_dry_run(plane, "-f", &file);
    assert_eq!(accepted[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
}
