//! Misconfigurations said loudly: each one an ERROR line naming the object, the action and the
//! API server's message, repeated at most every [`REPEAT_EVERY`] while it lasts; a gauge
//! `ferro_ipam_misconfigured{problem}`; and `/readyz` 503 while it lasts, since no replica of a
//! misconfigured install can serve. Transient failures (timeouts, 5xx, conflicts) are never
//! reported here: they are retried, and say so at WARN or debug where they happen.

mod problem;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tracing::{error, info};

pub use problem::{Problem, ProblemLabels, discovery_problem, lease_problem, reconcile_problem, watch_problem};

use crate::health::Health;
use crate::sync::lock;

/// How often a lasting problem is logged again.
pub const REPEAT_EVERY: Duration = Duration::from_secs(30);

/// When a problem's ERROR line was last written.
type Seen = BTreeMap<(Problem, String), Instant>;

/// Reports misconfigurations. Cheap to clone.
#[derive(Clone)]
pub struct Misconfig {
    health: Health,
    gauge: Family<ProblemLabels, Gauge>,
    seen: Arc<Mutex<Seen>>,
}

impl Misconfig {
    pub fn new(health: Health, gauge: Family<ProblemLabels, Gauge>) -> Self {
        Misconfig { health, gauge, seen: Arc::default() }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        lock(&self.seen)
    }

    /// `action` on `object` failed with `message` because of `problem`. Logs at ERROR when the
    /// problem is new for this object or was last logged [`REPEAT_EVERY`] ago.
    pub fn report(&self, problem: Problem, object: &str, action: &str, message: &str) {
        let now = Instant::now();
        let mut seen = self.seen();
        let last = seen.get(&(problem, object.to_owned())).copied();
        if last.is_none_or(|at| now.saturating_duration_since(at) >= REPEAT_EVERY) {
            seen.insert((problem, object.to_owned()), now);
            error!(?problem, %object, %action, error = %message, "{}", problem.remedy());
        }
        self.publish(&seen);
    }

    /// Whether any problem is being reported now.
    pub fn has_problems(&self) -> bool {
        !self.seen().is_empty()
    }

    /// Every problem of `object` is gone (its request succeeded).
    pub fn resolved(&self, object: &str) {
        let mut seen = self.seen();
        if seen.is_empty() {
            return;
        }
        let before = seen.len();
        seen.retain(|(problem, o), _| {
            let gone = o == object;
            if gone {
                info!(?problem, %object, "resolved: the request now succeeds");
            }
            !gone
        });
        if seen.len() != before {
            self.publish(&seen);
        }
    }

    /// Forgets the problems of objects a leadership term watched (the term ended).
    pub fn forget(&self, objects: impl Fn(&str) -> bool) {
        let mut seen = self.seen();
        seen.retain(|(_, o), _| !objects(o));
        self.publish(&seen);
    }

    /// The gauge and readiness, from what is seen now.
    fn publish(&self, seen: &Seen) {
        for problem in Problem::ALL {
            let count = seen.keys().filter(|(p, _)| *p == problem).count();
            self.gauge.get_or_create(&ProblemLabels { problem }).set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        let why: Vec<String> = seen
            .keys()
            .filter(|(problem, _)| problem.stops_serving())
            .map(|(problem, object)| format!("{problem:?}: {object}"))
            .collect();
        self.health.set_misconfigured((!why.is_empty()).then(|| why.join("; ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reporter() -> (Misconfig, Health, Family<ProblemLabels, Gauge>) {
        let health = Health::default();
        health.set_ready(true);
        let gauge = Family::default();
        (Misconfig::new(health.clone(), gauge.clone()), health, gauge)
    }

    fn count(gauge: &Family<ProblemLabels, Gauge>, problem: Problem) -> i64 {
        gauge.get_or_create(&ProblemLabels { problem }).get()
    }

    #[test]
    fn a_problem_makes_the_replica_unready_and_counts_until_it_is_resolved() {
        let (misconfig, health, gauge) = reporter();
        assert!(health.is_ready());
        misconfig.report(Problem::lease_forbidden, "Lease ns/l", "create", "forbidden");
        misconfig.report(Problem::lease_forbidden, "Lease ns/l", "create", "forbidden");
        assert_eq!(count(&gauge, Problem::lease_forbidden), 1);
        assert!(!health.is_ready());
        misconfig.resolved("Lease ns/l");
        assert_eq!(count(&gauge, Problem::lease_forbidden), 0);
        assert!(health.is_ready());
    }

    #[test]
    fn forgetting_a_terms_objects_keeps_the_others() {
        let (misconfig, health, gauge) = reporter();
        misconfig.report(Problem::forbidden, "watch IPAddressClaim", "list", "forbidden");
        misconfig.report(Problem::lease_forbidden, "Lease ns/l", "get", "forbidden");
        misconfig.forget(|o| o.starts_with("watch "));
        assert_eq!(count(&gauge, Problem::forbidden), 0);
        assert_eq!(count(&gauge, Problem::lease_forbidden), 1);
        assert!(!health.is_ready());
    }
}
