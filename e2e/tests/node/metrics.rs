//! The metrics as users reach them: through the `ferro-ipam-metrics` Service's ClusterIP (routed
//! to the node, where kube-proxy sends it to a pod), over HTTPS. A ServiceAccount token bound to
//! `ferro-ipam-metrics-reader` scrapes, from a plain client and from a real Prometheus configured
//! as deploy/monitoring's ServiceMonitor asks; a token without the binding gets 403, none 401.

use std::time::Duration;

use ferro_ipam_e2e::https::{self, Trust};
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::process::wait_until;
use ferro_ipam_e2e::prometheus::{Prometheus, binaries, scrape_config};
use serde_json::Value;

use super::{SYSTEM, cluster, install_kustomize, kubectl, kubectl_json};

/// A token of a new ServiceAccount in `ns`, bound to ferro-ipam-metrics-reader when `reader`.
fn token(ns: &str, name: &str, reader: bool) -> String {
    kubectl(&["create", "serviceaccount", name, "-n", ns]);
    if reader {
        kubectl(&[
            "create",
            "clusterrolebinding",
            &format!("{ns}-{name}"),
            "--clusterrole=ferro-ipam-metrics-reader",
            "--serviceaccount",
            &format!("{ns}:{name}"),
        ]);
    }
    kubectl(&["create", "token", name, "-n", ns, "--duration", "1h"]).trim().to_owned()
}

/// GET /metrics through the Service: the status and body.
fn scrape(service: &str, token: Option<&str>) -> (u16, String) {
    https::get(service, "/metrics", token, &Trust::Anything, false)
        .unwrap_or_else(|e| panic!("GET https://{service}/metrics: {e:#}"))
}

#[tokio::test]
async fn the_metrics_service_answers_authorised_scrapers_only_and_prometheus_scrapes_it() {
    install_kustomize().unwrap_or_else(|e| panic!("{e:#}"));
    let scope = Scope::on(&cluster().plane, "node-metrics").await;
    let service = kubectl_json(&["get", "service", "-n", SYSTEM, "ferro-ipam-metrics"]);
    let ip = service["spec"]["clusterIP"].as_str().expect("a ClusterIP").to_owned();
    let port = service["spec"]["ports"][0]["port"].as_u64().expect("a port");
    let address = format!("{ip}:{port}");

    let reader = token(&scope.ns, "prometheus", true);
    let stranger = token(&scope.ns, "stranger", false);
    // The binding reaches the API server's authorizer at once, the Service's endpoints may lag:
    // wait for the first authorised answer, then ask enough times to reach both pods.
    assert!(
        wait_until(Duration::from_secs(60), || https::get(
            &address,
            "/metrics",
            Some(&reader),
            &Trust::Anything,
            false
        )
        .is_ok_and(|(status, _)| status == 200)),
        "no 200 from https://{address}/metrics with the reader's token"
    );
    for _ in 0..6 {
        let (status, body) = scrape(&address, Some(&reader));
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("ferro_ipam_build_info"), "{body}");
        assert_eq!(scrape(&address, Some(&stranger)).0, 403, "a token without the binding");
        assert_eq!(scrape(&address, None).0, 401, "no token");
    }

    // A real Prometheus, configured from the ServiceMonitor's endpoint, scrapes the Service.
    let monitor: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/monitoring/servicemonitor.yaml")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &reader).unwrap();
    let (server, _) = binaries();
    let prometheus = Prometheus::start(
        &server,
        scrape_config(&monitor["spec"]["endpoints"][0], &address, &token_file, None),
        &serde_json::json!({"groups": []}),
    )
    .unwrap_or_else(|e| panic!("{e:#}"));
    let scraped = wait_until(Duration::from_secs(60), || {
        prometheus.query("up == 1").is_ok_and(|r| !r.is_empty())
            && prometheus.query("ferro_ipam_build_info").is_ok_and(|r| !r.is_empty())
    });
    assert!(scraped, "Prometheus did not scrape {address}: {:?}\n{}", prometheus.query("up"), prometheus.log_tail(20));
}
