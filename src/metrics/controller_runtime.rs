//! The series controller-runtime exports for each controller, under its names and labels, so that
//! Cluster API dashboards and alerts written for controller-runtime-based providers read them.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::{Buckets, ControllerLabels};

/// Labels of controller-runtime's reconcile counter: `result` is `success` or `error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: String,
    pub result: String,
}

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const CONTROLLER_RUNTIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The series controller-runtime exports for each controller, fed by [`Metrics::reconciled`].
pub(super) struct ControllerRuntime {
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    time: Family<ControllerLabels, Histogram, Buckets>,
}

impl ControllerRuntime {
    pub(super) fn new() -> Self {
        ControllerRuntime {
            reconciles: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(Buckets(CONTROLLER_RUNTIME_BUCKETS)),
        }
    }

    /// Registers them, and `active_workers` (ferro-ipam's reconciles in flight), unprefixed.
    pub(super) fn register(&self, registry: &mut Registry, active_workers: &Family<ControllerLabels, Gauge>) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.errors.clone(),
        );
        registry.register_with_unit(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            prometheus_client::registry::Unit::Seconds,
            self.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            active_workers.clone(),
        );
    }

    pub(super) fn reconciled(&self, controller: &str, took: Duration, failed: bool) {
        let result = if failed { "error" } else { "success" };
        self.reconciles
            .get_or_create(&ResultLabels { controller: controller.to_owned(), result: result.to_owned() })
            .inc();
        let labels = ControllerLabels { controller: controller.to_owned() };
        if failed {
            self.errors.get_or_create(&labels).inc();
        }
        self.time.get_or_create(&labels).observe(took.as_secs_f64());
    }
}
