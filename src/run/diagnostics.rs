//! The diagnostics endpoint: `/metrics` on `--diagnostics-address`.

use std::sync::Arc;

use tracing::{info, warn};

use crate::cli::{RunFlags, parse_bind_address};
use crate::health;
use crate::metrics::Metrics;

/// The `/metrics` route.
fn metrics_router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let text = metrics.encode();
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
                    text,
                )
            }
        }),
    )
}

/// Starts serving `/metrics` in the background, unless `--diagnostics-address` is "0".
pub(super) fn serve(flags: &RunFlags, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let Some(address) = parse_bind_address(&flags.diagnostics_address).map_err(anyhow::Error::msg)? else {
        return Ok(());
    };
    let router = metrics_router(metrics);
    tokio::spawn(async move {
        if let Err(error) = health::serve(address, router).await {
            warn!(%error, "metrics server stopped");
        }
    });
    info!(%address, "serving metrics");
    Ok(())
}
