//! The diagnostics endpoint: `/metrics` on `--diagnostics-address`. By default over HTTPS, each
//! scrape authenticated and authorised by the API server (as Cluster API providers serve it);
//! with `--insecure-diagnostics`, plain HTTP for anyone.

mod auth;
mod tls;

use std::sync::Arc;

use kube::Client;
use tracing::{error, info};

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

/// Starts serving `/metrics` in the background, unless `--diagnostics-address` is "0". `client`
/// reviews the tokens of scrapes.
pub(super) async fn serve(flags: &RunFlags, metrics: Arc<Metrics>, client: Client) -> anyhow::Result<()> {
    let Some(address) = parse_bind_address(&flags.diagnostics_address).map_err(anyhow::Error::msg)? else {
        return Ok(());
    };
    let router = metrics_router(metrics);
    if flags.insecure_diagnostics {
        health::serve(address, router, "metrics").await?;
        info!(%address, "serving metrics over plain HTTP, without authentication (--insecure-diagnostics)");
        return Ok(());
    }
    let config = tls::server_config(flags)?;
    let gate = Arc::new(auth::Gate::new(client));
    let router = router.route_layer(axum::middleware::from_fn_with_state(gate, auth::authorise));
    let listener = tls::TlsListener::bind(address, config).await.map_err(|error| {
        anyhow::anyhow!("cannot listen on {address} for metrics: {error}; choose another address or free the port")
    })?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            error!(%error, %address, "metrics server stopped");
        }
    });
    let certificate = match &flags.tls_cert_dir {
        Some(dir) => format!("from {}", dir.display()),
        None => "self-signed".to_owned(),
    };
    info!(%address, %certificate, "serving metrics over HTTPS to scrapers the API server authorises");
    Ok(())
}
