//! Liveness and readiness.
//!
//! - `/readyz` answers 200 once this replica is useful: a leader whose index is complete and
//!   whose claim listing is reviewed (see `controller::wiring`), or a replica standing by
//!   while another holds the lease (after discovery has answered, and after its first attempt
//!   at the lease found it held: until then it may be about to lead), unless the install is misconfigured (see
//!   [`crate::misconfig`]): then 503, with the problems in the body.
//! - `/healthz` answers 500 when a part of the process has been stuck longer than a bound, so
//!   that the kubelet restarts it: the lease loop finished no attempt for that long, or a watch
//!   has failed without a break for that long.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::sync::lock;

/// How long a part may be stuck before `/healthz` fails.
pub const DEFAULT_STUCK_AFTER: Duration = Duration::from_secs(120);

/// What `/healthz` knows of each part.
#[derive(Debug, Default)]
struct Parts {
    /// When the lease loop last finished an attempt; None without leader election.
    lease: Option<Instant>,
    /// Per watch: since when it has failed without a success in between.
    failing: HashMap<String, Instant>,
}

/// Shared readiness and liveness. Cheap to clone.
#[derive(Clone)]
pub struct Health {
    ready: Arc<AtomicBool>,
    /// The misconfigurations that keep any replica from serving, if any.
    misconfigured: Arc<Mutex<Option<String>>>,
    parts: Arc<Mutex<Parts>>,
    stuck_after: Duration,
}

impl Default for Health {
    fn default() -> Self {
        Health::new(DEFAULT_STUCK_AFTER)
    }
}

impl Health {
    pub fn new(stuck_after: Duration) -> Self {
        Health { ready: Arc::default(), misconfigured: Arc::default(), parts: Arc::default(), stuck_after }
    }

    fn parts(&self) -> std::sync::MutexGuard<'_, Parts> {
        lock(&self.parts)
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    #[cfg(test)]
    pub fn is_ready(&self) -> bool {
        self.not_ready_because().is_none()
    }

    /// Sets (or clears) the misconfigurations that make this replica unready.
    pub fn set_misconfigured(&self, why: Option<String>) {
        *lock(&self.misconfigured) = why;
    }

    /// Why `/readyz` fails, or None when it answers 200.
    fn not_ready_because(&self) -> Option<String> {
        if let Some(why) = lock(&self.misconfigured).clone() {
            return Some(format!("misconfigured: {why}"));
        }
        (!self.ready.load(Ordering::SeqCst)).then(|| "not ready".to_owned())
    }

    /// The lease loop finished an attempt (whatever its outcome).
    pub fn beat_lease(&self) {
        self.parts().lease = Some(Instant::now());
    }

    /// A watch delivered an event. Returns true when it had been failing.
    pub fn watch_ok(&self, watch: &str) -> bool {
        self.parts().failing.remove(watch).is_some()
    }

    /// A watch failed. Returns true when it was not failing before.
    pub fn watch_failed(&self, watch: &str) -> bool {
        let mut parts = self.parts();
        let fresh = !parts.failing.contains_key(watch);
        parts.failing.entry(watch.to_owned()).or_insert_with(Instant::now);
        fresh
    }

    /// Forgets the watches (a leadership term ended: its watches are gone).
    pub fn forget_watches(&self) {
        self.parts().failing.clear();
    }

    /// What is stuck, if anything, at `now`.
    pub fn stuck(&self, now: Instant) -> Option<String> {
        let parts = self.parts();
        let too_long = |since: Instant| now.saturating_duration_since(since) > self.stuck_after;
        if let Some(beat) = parts.lease.filter(|b| too_long(*b)) {
            return Some(format!("the leader-election loop has not finished an attempt for {:?}", now - beat));
        }
        let mut stuck: Vec<String> = parts
            .failing
            .iter()
            .filter(|(_, since)| too_long(**since))
            .map(|(watch, since)| format!("the {watch} watch has failed for {:?}", now - *since))
            .collect();
        stuck.sort();
        (!stuck.is_empty()).then(|| stuck.join("; "))
    }

    /// The probe routes.
    pub fn router(&self) -> Router {
        let live = self.clone();
        let ready = self.clone();
        Router::new()
            .route(
                "/healthz",
                get(move || {
                    let stuck = live.stuck(Instant::now());
                    async move {
                        match stuck {
                            None => (StatusCode::OK, "ok".to_owned()),
                            Some(what) => (StatusCode::INTERNAL_SERVER_ERROR, what),
                        }
                    }
                }),
            )
            .route(
                "/readyz",
                get(move || {
                    let why = ready.not_ready_because();
                    async move {
                        match why {
                            None => (StatusCode::OK, "ok".to_owned()),
                            Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                        }
                    }
                }),
            )
    }
}

/// Binds `address` and serves a router on it in the background until the process ends. A port
/// that cannot be bound is an error at once: a process whose probes nobody can reach would never
/// become ready, and say nothing about why.
pub async fn serve(address: SocketAddr, router: Router, what: &'static str) -> anyhow::Result<()> {
    let listener = TcpListener::bind(address).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {address} for {what}: {e}; choose another address or free the port")
    })?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, %address, "{what} server stopped");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(60);

    #[test]
    fn a_lease_loop_that_stops_beating_is_stuck() {
        let health = Health::new(BOUND);
        let start = Instant::now();
        assert_eq!(health.stuck(start + BOUND * 10), None, "without leader election there is no lease loop");
        health.beat_lease();
        assert_eq!(health.stuck(Instant::now() + BOUND / 2), None);
        assert!(health.stuck(Instant::now() + BOUND * 2).unwrap().contains("leader-election loop"));
    }

    #[test]
    fn a_watch_failing_without_a_break_is_stuck_and_one_success_clears_it() {
        let health = Health::new(BOUND);
        assert!(health.watch_failed("IPAddress"));
        assert!(!health.watch_failed("IPAddress"), "a second failure continues the same streak");
        assert_eq!(health.stuck(Instant::now()), None);
        assert!(health.stuck(Instant::now() + BOUND * 2).unwrap().contains("IPAddress watch"));
        assert!(health.watch_ok("IPAddress"));
        assert_eq!(health.stuck(Instant::now() + BOUND * 2), None);
        health.watch_failed("pool");
        health.forget_watches();
        assert_eq!(health.stuck(Instant::now() + BOUND * 2), None);
    }
}
