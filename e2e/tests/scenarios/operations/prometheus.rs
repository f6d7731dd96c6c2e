//! A real Prometheus scrapes ferro-ipam with the ServiceMonitor's settings and evaluates the
//! PrometheusRule: the pool gauges equal the pool status, every query of the dashboard returns
//! data, and every alert expression is valid and fires when its condition holds.
//! With `FERRO_IPAM_METRICS_DUMP=DIR`, the scenario runs slower and writes the dashboard's
//! queries over its whole run to DIR (`make metrics-plot` draws docs/metrics-dashboard.png).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::Provider;
use ferro_ipam_e2e::invariants::HAND_MADE_LABEL;
use ferro_ipam_e2e::objects::Scope;
use serde_json::{Value, json};

use super::{deploy, find, kustomize, scraper_token};
use crate::PROMPTLY;
use ferro_ipam_e2e::prometheus::{Prometheus, binaries, promtool, scrape_config};

/// Alert expressions that are empty while ferro-ipam is healthy (here: while a leader runs).
const EMPTY_WHILE_HEALTHY: &[&str] = &["FerroIpamNoLeader"];

/// Grafana's variables, as "All" and a rate window that spans the scenario's activity.
fn grafana(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m").replace("$namespace", ".*").replace("$pool", ".*")
}

/// Every query of the dashboard: (panel title, legend, expression).
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queries.push((
                panel["title"].as_str().unwrap().to_owned(),
                target["legendFormat"].as_str().unwrap_or_default().to_owned(),
                target["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    queries
}

/// `label_values(SELECTOR, LABEL)` of a dashboard variable.
fn label_values_query(definition: &str) -> Option<(String, String)> {
    let inner = definition.strip_prefix("label_values(")?.strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    Some((selector.trim().to_owned(), label.trim().to_owned()))
}

/// (family, state) -> value of a pool's gauges in Prometheus.
fn gauges(prometheus: &Prometheus, selector: &str) -> BTreeMap<(String, String), f64> {
    let series = prometheus.query(&format!("ferro_ipam_pool_addresses{{{selector}}}")).unwrap_or_default();
    series
        .iter()
        .map(|s| {
            let value: f64 = s["value"][1].as_str().unwrap().parse().unwrap();
            (
                (s["metric"]["family"].as_str().unwrap().to_owned(), s["metric"]["state"].as_str().unwrap().to_owned()),
                value,
            )
        })
        .collect()
}

/// (family, state) -> value of a pool's status.
fn status_counts(status: &Value) -> BTreeMap<(String, String), f64> {
    let mut counts = BTreeMap::new();
    for family in status["families"].as_array().into_iter().flatten() {
        for (field, state) in [("total", "total"), ("used", "used"), ("free", "free"), ("outOfRange", "out_of_range")] {
            let value: f64 = family[field].as_str().unwrap().parse().unwrap();
            counts.insert((family["family"].as_str().unwrap().to_owned(), state.to_owned()), value);
        }
    }
    counts
}

async fn address_by_hand(s: &Scope, name: &str, ip: &str) {
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
        "kind": "IPAddress",
        "metadata": {"name": name, "labels": {HAND_MADE_LABEL: "true"}},
        "spec": {"claimRef": {"name": name}, "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "conflict"}, "address": ip, "prefix": 24},
    }))
    .await
    .unwrap();
}

/// Pools filling up in waves, one over 90 %, one exhausted with a claim waiting, releases, and
/// one address held twice.
async fn traffic(s: &Scope, global: &str, pause: Duration) {
    s.pool("nodes", json!({"addresses": ["10.70.0.0/27"], "prefix": 27, "gateway": "10.70.0.1"})).await.unwrap();
    s.pool("small", json!({"addresses": ["10.71.0.10-10.71.0.12"], "prefix": 24})).await.unwrap();
    s.pool("v6", json!({"addresses": ["fd00:70::/120"], "prefix": 120})).await.unwrap();
    s.pool("conflict", json!({"addresses": ["10.73.0.10-10.73.0.20"], "prefix": 24})).await.unwrap();
    s.global_pool(global, json!({"addresses": ["10.72.0.0/28"], "prefix": 28})).await.unwrap();
    address_by_hand(s, "by-hand-a", "10.73.0.11").await;
    address_by_hand(s, "by-hand-b", "10.73.0.11").await;
    // Per wave, claims on nodes, small, v6 and the global pool, spread over `pause`.
    let waves: [[usize; 4]; 4] = [[8, 1, 6, 3], [8, 1, 6, 3], [6, 1, 4, 3], [5, 1, 4, 2]];
    let pools = [
        ("InClusterIPPool", "nodes"),
        ("InClusterIPPool", "small"),
        ("InClusterIPPool", "v6"),
        ("GlobalInClusterIPPool", global),
    ];
    let mut done = [0usize; 4];
    for wave in waves {
        let step = pause / u32::try_from(wave.iter().sum::<usize>()).unwrap();
        let longest = *wave.iter().max().unwrap();
        for n in 0..longest {
            for (i, (kind, pool)) in pools.iter().enumerate() {
                if n < wave[i] {
                    let prefix = if i == 3 { "global" } else { pool };
                    s.claim(&format!("{prefix}-{}", done[i] + n), kind, pool).await.unwrap();
                    tokio::time::sleep(step).await;
                }
            }
        }
        for (i, count) in wave.iter().enumerate() {
            done[i] += count;
        }
        // Some addresses come back.
        s.delete_claim(&format!("v6-{}", done[2] - 1)).await.unwrap();
    }
    // 27 of the 29 addresses of `nodes` in use; the 4th claim of `small` waits.
    s.wait_allocated("nodes-26", PROMPTLY).await.unwrap();
    s.wait_reason("small-3", "PoolExhausted", PROMPTLY).await.unwrap();
    // A spoke pool whose hub kubeconfig Secret does not exist: it cannot reach its hub.
    let hub = json!({"kubeconfigSecret": "no-such-secret", "namespace": "spoke", "pool": {"kind": "GlobalInClusterIPPool", "name": "shared"}});
    s.pool("spoke", json!({"addresses": ["10.123.0.0/24"], "prefix": 24, "hub": hub})).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_pool_gauges_equal_to_status_and_runs_every_dashboard_and_alert_query() {
    let (server, tool) = binaries();
    let dump = std::env::var_os("FERRO_IPAM_METRICS_DUMP").map(std::path::PathBuf::from);
    let started = Instant::now();
    let s = Scope::wide("prometheus").await;
    let global = s.global_name("global");
    // As deployed: HTTPS, and Prometheus sends the token of a ServiceAccount bound to
    // ferro-ipam-metrics-reader.
    let provider = Provider::start_secure(s.plane, &s.provider_args()).unwrap();
    let token_file = s.plane.dir.join(format!("{}-prometheus.token", s.ns));
    std::fs::write(&token_file, scraper_token(s.plane, &s.ns, "prometheus", true)).unwrap();

    let plane = s.plane;
    let monitoring = kustomize(plane, &deploy("with-monitoring"));
    let endpoint = &find(&monitoring, "ServiceMonitor", "ferro-ipam")["spec"]["endpoints"][0];
    let rules = find(&monitoring, "PrometheusRule", "ferro-ipam")["spec"].clone();
    let prometheus =
        Prometheus::start(&server, scrape_config(endpoint, &provider.metrics, &token_file, None), &rules).unwrap();
    promtool(&tool, &["check", "rules", &prometheus.rules.to_string_lossy()]).unwrap();
    promtool(&tool, &["check", "config", &prometheus.config.to_string_lossy()]).unwrap();

    let pause = if dump.is_some() { Duration::from_secs(20) } else { Duration::from_secs(3) };
    traffic(&s, &global, pause).await;

    // The gauges Prometheus holds equal each pool's status; namespaced pools keep their own
    // namespace label (honorLabels), the global pool has none (the ServiceMonitor's relabeling).
    let pools: Vec<(String, String)> = ["nodes", "small", "v6", "conflict"]
        .iter()
        .map(|p| (format!(r#"kind="InClusterIPPool",namespace="{}",pool="{p}""#, s.ns), p.to_string()))
        .chain([(format!(r#"kind="GlobalInClusterIPPool",namespace="",pool="{global}""#), global.clone())])
        .collect();
    for (selector, name) in &pools {
        let deadline = Instant::now() + PROMPTLY;
        loop {
            let status = if name == &global {
                s.global_pools().get(name).await.unwrap().status
            } else {
                s.pools().get(name).await.unwrap().status
            };
            let status = status_counts(&serde_json::to_value(status).unwrap());
            let scraped = gauges(&prometheus, selector);
            if !status.is_empty() && status == scraped {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: status {status:?} but Prometheus has {scraped:?}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let nodes = gauges(&prometheus, &pools[0].0);
    assert_eq!((nodes[&("IPv4".into(), "total".into())], nodes[&("IPv4".into(), "used".into())]), (29.0, 27.0));

    // Every query of the dashboard returns data, and so do its variables.
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("dashboard/ferro-ipam.json")).unwrap()).unwrap();
    s.eventually("the waiting claim is scraped", PROMPTLY, || async {
        prometheus.query("ferro_ipam_claims_waiting > 0").is_ok_and(|r| !r.is_empty())
    })
    .await
    .unwrap();
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 15, "{} queries", queries.len());
    for (panel, legend, expr) in &queries {
        let result = prometheus.query(&grafana(expr)).unwrap_or_else(|e| panic!("{panel}: {expr}: {e:#}"));
        assert!(!result.is_empty(), "dashboard panel {panel:?} ({legend}) has no data: {expr}");
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap().iter().filter(|v| v["type"] == "query") {
        let (selector, label) = label_values_query(variable["definition"].as_str().unwrap()).expect("label_values()");
        let values = prometheus.label_values(&label, &grafana(&selector)).unwrap();
        assert!(!values.is_empty(), "dashboard variable {} has no values", variable["name"]);
    }
    assert!(prometheus.label_values("namespace", "ferro_ipam_pool_addresses").unwrap().contains(&s.ns));
    // The series Cluster API dashboards read from every controller-runtime-based provider.
    for expr in [
        r#"controller_runtime_reconcile_total{controller="claim",result="success"}"#,
        "controller_runtime_reconcile_time_seconds_bucket",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(!prometheus.query(expr).unwrap().is_empty(), "Prometheus has no {expr}");
    }

    // Every alert expression is valid; each fires on the condition this scenario set up, except
    // those meant to stay empty while the provider is healthy.
    let alerts: Vec<(String, String)> = rules["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["alert"].as_str().unwrap().to_owned(), r["expr"].as_str().unwrap().to_owned()))
        .collect();
    for (alert, expr) in &alerts {
        let result = prometheus.query(expr).unwrap_or_else(|e| panic!("{alert}: {e:#}"));
        assert_eq!(result.is_empty(), EMPTY_WHILE_HEALTHY.contains(&alert.as_str()), "{alert}: {expr} gave {result:?}");
    }
    // Prometheus itself evaluates the rules: all healthy, each pending (its `for` is longer than
    // this test) or, for those empty while healthy, inactive.
    let expected: BTreeMap<String, (String, String)> = alerts
        .iter()
        .map(|(alert, _)| {
            let state = if EMPTY_WHILE_HEALTHY.contains(&alert.as_str()) { "inactive" } else { "pending" };
            (alert.clone(), ("ok".to_owned(), state.to_owned()))
        })
        .collect();
    let deadline = Instant::now() + PROMPTLY;
    loop {
        let evaluated = prometheus.rules().unwrap();
        let states: BTreeMap<String, (String, String)> = evaluated[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let field = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                (field("name"), (field("health"), field("state")))
            })
            .collect();
        if states == expected {
            break;
        }
        assert!(Instant::now() < deadline, "rule states {states:?}, expected {expected:?}: {evaluated:#?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let nearly_full = prometheus.query(&alerts.iter().find(|a| a.0 == "FerroIpamPoolNearlyFull").unwrap().1).unwrap();
    let full: std::collections::BTreeSet<&str> =
        nearly_full.iter().filter_map(|r| r["metric"]["pool"].as_str()).collect();
    assert_eq!(full, ["nodes", "small"].into(), "the pools above 90 %: nodes (27 of 29), small (3 of 3)");

    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir).unwrap();
        let span = started.elapsed().as_secs() + 5;
        let panels: Vec<Value> = queries
            .iter()
            .map(|(panel, legend, expr)| json!({"panel": panel, "legend": legend, "expr": expr, "result": prometheus.query_range(&grafana(expr), span).unwrap()}))
            .collect();
        std::fs::write(dir.join("panels.json"), serde_json::to_string_pretty(&panels).unwrap()).unwrap();
        eprintln!("wrote the dashboard's queries over {span}s to {}", dir.display());
    }

    // No replica scraped: the no-leader alert's expression returns data.
    drop(provider);
    let no_leader = alerts.iter().find(|a| a.0 == "FerroIpamNoLeader").unwrap().1.clone();
    s.eventually("the no-leader expression fires once no replica is scraped", PROMPTLY, || async {
        prometheus.query(&no_leader).is_ok_and(|r| !r.is_empty())
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", prometheus.log_tail(20)));
}
