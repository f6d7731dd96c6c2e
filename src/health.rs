//! Liveness and readiness: `/healthz` answers while the process runs; `/readyz` once this
//! replica is useful: a leader whose index is complete, or a replica standing by for the lease.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;

/// Shared readiness flag.
#[derive(Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The probe routes.
    pub fn router(&self) -> Router {
        let health = self.clone();
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = health.is_ready();
                    async move {
                        if ready {
                            (StatusCode::OK, "ok")
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                        }
                    }
                }),
            )
    }
}

/// Serves a router on `address` until the process ends.
pub async fn serve(address: SocketAddr, router: Router) -> anyhow::Result<()> {
    let listener = TcpListener::bind(address).await.map_err(|e| anyhow::anyhow!("listening on {address}: {e}"))?;
    axum::serve(listener, router).await?;
    Ok(())
}
