//! Prometheus metrics: ferro-ipam's own under the `ferro_ipam_` prefix, and beside them those that
//! Cluster API dashboards and alerts read from every controller-runtime-based provider: the
//! standard `process_*` series and controller-runtime's reconcile series, with its names and
//! labels. Series are per pool or per controller, never per claim, so cardinality is bounded by
//! the number of pools.

mod controller_runtime;
mod process;

use controller_runtime::ControllerRuntime;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::index::{PoolKey, PoolReport};
use crate::misconfig::{Problem, ProblemLabels};

/// Labels of a pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    pub kind: String,
    pub namespace: String,
    pub pool: String,
}

impl PoolLabels {
    pub fn of(key: &PoolKey) -> Self {
        PoolLabels {
            kind: key.kind.as_str().to_owned(),
            namespace: key.namespace.clone().unwrap_or_default(),
            pool: key.name.clone(),
        }
    }
}

/// What a pool address gauge counts.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[expect(
    non_camel_case_types,
    reason = "EncodeLabelValue writes a variant's name as the label value, and the values are snake_case"
)]
pub enum AddressState {
    total,
    used,
    free,
    out_of_range,
}

/// Labels of a pool's address gauges.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AddressLabels {
    pub kind: String,
    pub namespace: String,
    pub pool: String,
    pub family: String,
    pub state: AddressState,
}

/// Labels of a controller's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

/// Labels of a controller's failures.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    pub error: String,
}

/// Labels of a hub pool's blocks leased to one spoke (its namespace in the hub).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SpokeLabels {
    pub kind: String,
    pub namespace: String,
    pub pool: String,
    pub spoke: String,
}

/// What a spoke asks of its hub.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[expect(
    non_camel_case_types,
    reason = "EncodeLabelValue writes a variant's name as the label value, and the values are snake_case"
)]
pub enum HubOperation {
    /// Reading the Secret and building the hub's client.
    connect,
    /// The watch of the pool's blocks.
    watch,
    /// Asking for a block.
    ask,
    /// Returning a block.
    give_back,
    /// Renewing the spoke's Lease.
    heartbeat,
}

/// Labels of a spoke pool's round trips to its hub.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HubRequestLabels {
    pub kind: String,
    pub namespace: String,
    pub pool: String,
    pub operation: HubOperation,
    pub result: String,
}

/// Labels of the latency of a spoke's round trips, per operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HubOperationLabels {
    pub operation: HubOperation,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone)]
pub struct Buckets(pub(crate) &'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

const RECONCILE_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Every metric ferro-ipam exports.
pub struct Metrics {
    registry: Registry,
    pub pool_addresses: Family<AddressLabels, Gauge<f64, AtomicU64>>,
    pub pool_conflicts: Family<PoolLabels, Gauge>,
    pub pool_overlaps: Family<PoolLabels, Gauge>,
    pub pool_unclaimed: Family<PoolLabels, Gauge>,
    pub allocations: Family<PoolLabels, Counter>,
    pub releases: Family<PoolLabels, Counter>,
    pub exhaustions: Family<PoolLabels, Counter>,
    pub allocation_latency: Histogram,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram, Buckets>,
    pub reconciles_in_flight: Family<ControllerLabels, Gauge>,
    pub claims_waiting: Gauge,
    pub leader: Gauge,
    pub misconfigured: Family<ProblemLabels, Gauge>,
    /// On a hub: blocks of a shared pool leased to each spoke.
    pub hub_blocks: Family<SpokeLabels, Gauge>,
    /// On a spoke: round trips to the hub, by operation and result (`ok` or `error`).
    pub hub_requests: Family<HubRequestLabels, Counter>,
    pub hub_request_duration: Family<HubOperationLabels, Histogram, Buckets>,
    /// On a spoke: 1 while the pool's session reaches its hub, 0 while it does not.
    pub hub_reachable: Family<PoolLabels, Gauge>,
    /// The spokes each hub pool has a `hub_blocks` series for, to drop those that went.
    hub_spokes: std::sync::Mutex<std::collections::HashMap<PoolKey, Vec<String>>>,
    controller_runtime: ControllerRuntime,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let metrics = Metrics {
            pool_addresses: Family::default(),
            pool_conflicts: Family::default(),
            pool_overlaps: Family::default(),
            pool_unclaimed: Family::default(),
            allocations: Family::default(),
            releases: Family::default(),
            exhaustions: Family::default(),
            allocation_latency: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(Buckets(RECONCILE_BUCKETS)),
            reconciles_in_flight: Family::default(),
            claims_waiting: Gauge::default(),
            leader: Gauge::default(),
            misconfigured: Family::default(),
            hub_blocks: Family::default(),
            hub_requests: Family::default(),
            hub_request_duration: Family::new_with_constructor(Buckets(RECONCILE_BUCKETS)),
            hub_reachable: Family::default(),
            hub_spokes: std::sync::Mutex::default(),
            controller_runtime: ControllerRuntime::new(),
            registry: Registry::default(),
        };
        root.register_collector(Box::new(process::ProcessCollector));
        metrics.controller_runtime.register(&mut root, &metrics.reconciles_in_flight);
        let registry = root.sub_registry_with_prefix("ferro_ipam");
        let build: Family<BuildLabels, Gauge> = Family::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").to_owned() }).set(1);
        registry.register("build_info", "Build of the running binary (always 1)", build);
        metrics.register_allocation(registry);
        metrics.register_controllers(registry);
        metrics.register_hub(registry);
        Metrics { registry: root, ..metrics }
    }

    /// What pools and claims get: addresses by state, allocations, releases, latency.
    fn register_allocation(&self, registry: &mut Registry) {
        registry.register(
            "pool_addresses",
            "Addresses of a pool and family, by state: total, used, free, out_of_range",
            self.pool_addresses.clone(),
        );
        registry.register(
            "pool_conflicts",
            "Addresses of a pool held by more than one IPAddress",
            self.pool_conflicts.clone(),
        );
        registry.register(
            "pool_overlaps",
            "Other pools sharing this pool's address space whose ranges intersect it",
            self.pool_overlaps.clone(),
        );
        registry.register(
            "pool_unclaimed_addresses",
            "IPAddress objects in the pool that no claim owns (not allocated by ferro-ipam)",
            self.pool_unclaimed.clone(),
        );
        registry.register("allocations", "Addresses allocated to claims", self.allocations.clone());
        registry.register("releases", "Addresses released by deleted claims", self.releases.clone());
        registry.register("exhaustions", "Claims that found their pool full", self.exhaustions.clone());
        registry.register_with_unit(
            "allocation_latency",
            "Time from a claim first seen to its IPAddress written",
            prometheus_client::registry::Unit::Seconds,
            self.allocation_latency.clone(),
        );
    }

    /// How the controllers fare: reconciles, errors, the queue, leadership, misconfigurations.
    fn register_controllers(&self, registry: &mut Registry) {
        registry.register("reconciles", "Reconciles run, per controller", self.reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, per controller and error kind",
            self.reconcile_errors.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "Duration of reconciles, per controller",
            prometheus_client::registry::Unit::Seconds,
            self.reconcile_duration.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles running now, per controller (the work queue being worked)",
            self.reconciles_in_flight.clone(),
        );
        registry.register(
            "claims_waiting",
            "Claims waiting for their pool (full, missing, paused or invalid)",
            self.claims_waiting.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease (or runs without leader election)",
            self.leader.clone(),
        );
        // Every problem has a series from the start: an alert can compare it with 0.
        for problem in Problem::ALL {
            self.misconfigured.get_or_create(&ProblemLabels { problem }).set(0);
        }
        registry.register(
            "misconfigured",
            "Objects that a misconfiguration of this problem makes unusable (0: none)",
            self.misconfigured.clone(),
        );
    }

    /// Pools shared through a hub: blocks per spoke on the hub, round trips on a spoke.
    fn register_hub(&self, registry: &mut Registry) {
        registry.register(
            "hub_blocks",
            "On a hub: address blocks of a shared pool leased to a spoke (by the spoke's namespace)",
            self.hub_blocks.clone(),
        );
        registry.register(
            "hub_requests",
            "On a spoke: requests to the hub, by operation and result",
            self.hub_requests.clone(),
        );
        registry.register_with_unit(
            "hub_request_duration",
            "On a spoke: duration of requests to the hub, by operation",
            prometheus_client::registry::Unit::Seconds,
            self.hub_request_duration.clone(),
        );
        registry.register(
            "hub_reachable",
            "On a spoke: 1 while a spoke pool's session reaches its hub, 0 while it does not",
            self.hub_reachable.clone(),
        );
    }

    /// Counts one round trip of a spoke pool to its hub.
    pub fn hub_request(&self, key: &PoolKey, operation: HubOperation, took: Duration, ok: bool) {
        let pool = PoolLabels::of(key);
        let labels = HubRequestLabels {
            kind: pool.kind,
            namespace: pool.namespace,
            pool: pool.pool,
            operation,
            result: if ok { "ok" } else { "error" }.to_owned(),
        };
        self.hub_requests.get_or_create(&labels).inc();
        self.hub_request_duration.get_or_create(&HubOperationLabels { operation }).observe(took.as_secs_f64());
    }

    /// Publishes a hub pool's blocks per spoke; spokes that hold none any more lose their series.
    pub fn set_hub_blocks(&self, key: &PoolKey, per_spoke: &[(String, usize)]) {
        let pool = PoolLabels::of(key);
        let labels = |spoke: &str| SpokeLabels {
            kind: pool.kind.clone(),
            namespace: pool.namespace.clone(),
            pool: pool.pool.clone(),
            spoke: spoke.to_owned(),
        };
        let mut known = crate::sync::lock(&self.hub_spokes);
        let before = known.remove(key).unwrap_or_default();
        for gone in before.iter().filter(|s| !per_spoke.iter().any(|(spoke, _)| spoke == *s)) {
            self.hub_blocks.remove(&labels(gone));
        }
        for (spoke, blocks) in per_spoke {
            self.hub_blocks.get_or_create(&labels(spoke)).set(i64::try_from(*blocks).unwrap_or(i64::MAX));
        }
        if !per_spoke.is_empty() {
            known.insert(key.clone(), per_spoke.iter().map(|(spoke, _)| spoke.clone()).collect());
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Publishes a pool's counts (exact up to f64 precision for huge IPv6 pools).
    pub fn set_pool(&self, key: &PoolKey, report: &PoolReport) {
        let pool = PoolLabels::of(key);
        for family in &report.families {
            let name = family.family.map(|f| f.to_string()).unwrap_or_default();
            for (state, value) in [
                (AddressState::total, family.total),
                (AddressState::used, family.used),
                (AddressState::free, family.free),
                (AddressState::out_of_range, family.out_of_range),
            ] {
                let labels = AddressLabels {
                    kind: pool.kind.clone(),
                    namespace: pool.namespace.clone(),
                    pool: pool.pool.clone(),
                    family: name.clone(),
                    state,
                };
                self.pool_addresses.get_or_create(&labels).set(value as f64);
            }
        }
        self.pool_conflicts.get_or_create(&pool).set(report.conflicts.len() as i64);
        self.pool_overlaps.get_or_create(&pool).set(report.overlaps.len() as i64);
        self.pool_unclaimed.get_or_create(&pool).set(report.unclaimed.len() as i64);
        self.set_hub_blocks(key, &report.blocks_by_spoke);
    }

    /// Drops every series of a deleted pool.
    pub fn forget_pool(&self, key: &PoolKey) {
        let pool = PoolLabels::of(key);
        for family in ["IPv4", "IPv6"] {
            for state in [AddressState::total, AddressState::used, AddressState::free, AddressState::out_of_range] {
                self.pool_addresses.remove(&AddressLabels {
                    kind: pool.kind.clone(),
                    namespace: pool.namespace.clone(),
                    pool: pool.pool.clone(),
                    family: family.to_owned(),
                    state,
                });
            }
        }
        self.pool_conflicts.remove(&pool);
        self.pool_overlaps.remove(&pool);
        self.pool_unclaimed.remove(&pool);
        self.allocations.remove(&pool);
        self.releases.remove(&pool);
        self.exhaustions.remove(&pool);
        self.set_hub_blocks(key, &[]);
        self.hub_reachable.remove(&pool);
    }

    /// A replica that lost the lease stops reporting what only the leader knows: its pool
    /// gauges and waiting claims would go stale, and the reconciles cancelled with its term
    /// would stay "in flight". Counters keep counting what this process did.
    pub fn stand_by(&self) {
        self.leader.set(0);
        self.pool_addresses.clear();
        self.pool_conflicts.clear();
        self.pool_overlaps.clear();
        self.pool_unclaimed.clear();
        self.hub_blocks.clear();
        crate::sync::lock(&self.hub_spokes).clear();
        self.hub_reachable.clear();
        self.claims_waiting.set(0);
        self.reconciles_in_flight.clear();
    }

    /// Counts one reconcile of `controller` that took `took`, and its error if it failed, in
    /// ferro-ipam's series and in controller-runtime's.
    pub fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>) {
        self.controller_runtime.reconciled(controller, took, error.is_some());
        let labels = ControllerLabels { controller: controller.to_owned() };
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_duration.get_or_create(&labels).observe(took.as_secs_f64());
        if let Some(error) = error {
            self.reconcile_errors
                .get_or_create(&ErrorLabels { controller: controller.to_owned(), error: error.to_owned() })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::Family as IpFamily;
    use crate::index::FamilyReport;

    /// A one-family pool with 4 of its 10 addresses used.
    fn four_of_ten_used() -> PoolReport {
        let family =
            FamilyReport { family: Some(IpFamily::V4), total: 10, used: 4, free: 6, ..FamilyReport::default() };
        PoolReport { families: vec![family], ..PoolReport::default() }
    }

    #[test]
    fn pool_counts_are_exported_per_family_and_state_and_forgotten_with_the_pool() {
        let metrics = Metrics::new();
        let key = PoolKey::in_cluster("ns", "nodes");
        let report = four_of_ten_used();
        metrics.set_pool(&key, &report);
        let text = metrics.encode();
        assert!(text.contains(r#"ferro_ipam_pool_addresses{kind="InClusterIPPool",namespace="ns",pool="nodes",family="IPv4",state="free"} 6.0"#), "{text}");
        assert!(text.contains("ferro_ipam_build_info"));
        metrics.forget_pool(&key);
        assert!(!metrics.encode().contains(r#"pool="nodes""#));
    }

    #[test]
    fn standing_by_drops_the_leaders_pool_series_and_keeps_counters() {
        let metrics = Metrics::new();
        let key = PoolKey::in_cluster("ns", "nodes");
        let report = four_of_ten_used();
        metrics.leader.set(1);
        metrics.set_pool(&key, &report);
        metrics.allocations.get_or_create(&PoolLabels::of(&key)).inc();
        metrics.reconciles_in_flight.get_or_create(&ControllerLabels { controller: "claim".into() }).inc();
        metrics.stand_by();
        let text = metrics.encode();
        for pool_series in ["pool_addresses", "pool_conflicts", "pool_overlaps", "pool_unclaimed_addresses"] {
            assert!(!text.contains(&format!("ferro_ipam_{pool_series}{{")), "{text}");
        }
        assert!(!text.contains("ferro_ipam_reconciles_in_flight{"), "{text}");
        assert!(text.contains("ferro_ipam_leader 0"), "{text}");
        assert!(
            text.contains(r#"ferro_ipam_allocations_total{kind="InClusterIPPool",namespace="ns",pool="nodes"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn reconciles_are_also_counted_under_controller_runtimes_names_and_labels() {
        let metrics = Metrics::new();
        metrics.reconciled("claim", Duration::from_millis(3), None);
        metrics.reconciled("claim", Duration::from_millis(7), Some("api"));
        metrics.reconciles_in_flight.get_or_create(&ControllerLabels { controller: "claim".into() }).inc();
        let text = metrics.encode();
        for series in [
            r#"controller_runtime_reconcile_total{controller="claim",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="claim",result="error"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="claim"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="claim"} 2"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="claim"} 1"#,
            r#"controller_runtime_active_workers{controller="claim"} 1"#,
        ] {
            assert!(text.contains(series), "{series} missing from:\n{text}");
        }
        assert!(!text.contains("ferro_ipam_controller_runtime"), "controller-runtime's names carry no prefix");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn process_series_are_exported_under_their_standard_names() {
        let text = Metrics::new().encode();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            assert!(text.lines().any(|l| l.starts_with(name)), "{name} missing from:\n{text}");
        }
    }

    #[test]
    fn reconcile_errors_carry_controller_and_kind() {
        let metrics = Metrics::new();
        metrics.reconciled("claim", Duration::from_millis(3), Some("api"));
        let text = metrics.encode();
        assert!(text.contains(r#"ferro_ipam_reconcile_errors_total{controller="claim",error="api"} 1"#), "{text}");
        assert!(text.contains(r#"ferro_ipam_reconciles_total{controller="claim"} 1"#));
    }
}
