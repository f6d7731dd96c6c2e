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
