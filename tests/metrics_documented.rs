//! docs/metrics.md lists every metric `/metrics` exports, with its type, and nothing else.

use std::collections::BTreeSet;

use ferro_ipam::allocator::Family;
use ferro_ipam::index::{FamilyReport, PoolKey, PoolReport};
use ferro_ipam::metrics::{ControllerLabels, Metrics, PoolLabels};

/// Metrics with a series in every family (a family without series is not exported).
fn busy_metrics() -> Metrics {
    let metrics = Metrics::new();
    let key = PoolKey::in_cluster("ns", "nodes");
    let family = FamilyReport { family: Some(Family::V4), total: 10, used: 4, free: 6, out_of_range: 0, reserved: 0 };
    metrics.set_pool(&key, &PoolReport { families: vec![family], ..PoolReport::default() });
    for counter in [&metrics.allocations, &metrics.releases, &metrics.exhaustions] {
        counter.get_or_create(&PoolLabels::of(&key)).inc();
    }
    metrics.reconciles_in_flight.get_or_create(&ControllerLabels { controller: "claim".into() }).inc();
    metrics.reconciled("claim", std::time::Duration::from_millis(2), Some("api"));
    metrics.set_hub_blocks(&key, &[("spoke-a".to_owned(), 2)]);
    metrics.hub_request(&key, ferro_ipam::metrics::HubOperation::ask, std::time::Duration::from_millis(3), true);
    metrics.hub_reachable.get_or_create(&PoolLabels::of(&key)).set(1);
    metrics
}

/// (name as scraped, type) of every metric family the registry exports.
fn exported() -> BTreeSet<(String, String)> {
    busy_metrics()
        .encode()
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(|rest| {
            let (name, kind) = rest.split_once(' ').expect("# TYPE NAME KIND");
            // OpenMetrics names a counter family without the `_total` its samples carry.
            let scraped = if kind == "counter" { format!("{name}_total") } else { name.to_owned() };
            (scraped, kind.to_owned())
        })
        .collect()
}

/// (metric, type) of every row of the tables in docs/metrics.md whose first cell is a metric name.
fn documented() -> BTreeSet<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let kind = cells.next()?;
            name.contains('_').then(|| (name.to_owned(), kind.to_owned()))
        })
        .collect()
}

#[test]
fn every_exported_metric_is_documented_with_its_type_and_no_other() {
    let exported = exported();
    let documented = documented();
    assert!(exported.len() >= 15, "{exported:?}");
    let missing: Vec<_> = exported.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&exported).collect();
    assert!(missing.is_empty(), "exported but not in docs/metrics.md: {missing:?}");
    assert!(extra.is_empty(), "in docs/metrics.md but not exported: {extra:?}");
}

#[test]
fn the_work_queue_is_described_as_the_code_has_it() {
    // No queue length is exported: metrics.md says so and points to what is exported instead.
    let exported = exported();
    let queue: Vec<_> = exported.iter().filter(|(name, _)| name.contains("queue")).collect();
    assert!(queue.is_empty(), "a queue metric is exported now: describe it in docs/metrics.md: {queue:?}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let doc = read("docs/metrics.md");
    let paragraph =
        doc[doc.find("Work-queue depth").expect("the work-queue paragraph")..].split("\n\n").next().unwrap();
    let paragraph = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(paragraph.contains("(`workqueue_depth`) is not exported"), "{paragraph}");
    for instead in ["ferro_ipam_reconciles_in_flight", "ferro_ipam_claims_waiting"] {
        assert!(paragraph.contains(&format!("`{instead}`")), "{paragraph}");
        assert!(exported.iter().any(|(name, _)| name == instead), "{instead} is not exported");
    }
    // Claims go through ferro-ipam's own queue; pools and Clusters through kube-rs's runner.
    assert!(read("src/controller/wiring/claims.rs").contains("store::claims::{Change, ClaimStore, WorkQueue}"));
    assert!(paragraph.contains("Claims go through ferro-ipam's own work queue"), "{paragraph}");
    for runner in ["src/controller/wiring/pools.rs", "src/controller/wiring/clusters.rs"] {
        assert!(read(runner).contains("Controller::for_stream"), "{runner} no longer runs on kube-rs's controller");
    }
    assert!(paragraph.contains("pools and Clusters go through kube-rs's controller runner"), "{paragraph}");
}
