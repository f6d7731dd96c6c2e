//! The diagnostics endpoint: `/metrics` on `--diagnostics-address`. By default over HTTPS, each
//! scrape authenticated and authorised by the API server (as Cluster API providers serve it);
//! with `--insecure-diagnostics`, plain HTTP for anyone.

mod auth;
mod certificate;
mod tls;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tracing::{error, info};

use crate::cli::{RunFlags, parse_bind_address};
use crate::client;
use crate::health;
use crate::metrics::Metrics;

/// Requests answered at once on the HTTPS endpoint; more get 503 with Retry-After. A Prometheus
/// pair needs two; the rest of the room is for scrapes waiting on a review.
const REQUESTS_IN_FLIGHT: usize = 64;

/// Refuses a request, 503, when [`REQUESTS_IN_FLIGHT`] are already being answered.
async fn limit_in_flight(State(in_flight): State<Arc<Semaphore>>, request: Request, next: Next) -> Response {
    let Ok(_slot) = in_flight.try_acquire() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            "Service Unavailable: too many requests in flight; retry later\n",
        )
            .into_response();
    };
    next.run(request).await
}

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

/// Starts serving `/metrics` in the background, unless `--diagnostics-address` is "0". The tokens
/// of scrapes are reviewed with a client of `kube_config`'s own, within [`auth::LIMITS`].
pub(super) async fn serve(flags: &RunFlags, metrics: Arc<Metrics>, kube_config: kube::Config) -> anyhow::Result<()> {
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
    let limits = auth::LIMITS;
    // Each review is up to two requests; the client's own limit is a second fence behind the gate's.
    let client = client::reviews(kube_config, 2.0 * limits.reviews_per_second as f32, 2 * limits.review_burst)?;
    let gate = Arc::new(auth::Gate::new(client, limits));
    let in_flight = Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT));
    let router = router
        .route_layer(axum::middleware::from_fn_with_state(gate, auth::authorise))
        .layer(axum::middleware::from_fn_with_state(in_flight, limit_in_flight));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use tower::ServiceExt as _;

    use super::*;

    #[tokio::test]
    async fn a_request_past_the_limit_in_flight_is_refused_with_503_and_retry_after() {
        let release = Arc::new(Semaphore::new(0));
        let entered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (held, inside) = (release.clone(), entered.clone());
        let in_flight = Arc::new(Semaphore::new(2));
        let router = axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let held = held.clone();
                    inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    async move {
                        let _released = held.acquire().await;
                        "ok"
                    }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(in_flight.clone(), limit_in_flight));
        let get = |router: axum::Router| async move {
            let request = axum::http::Request::get("/metrics").body(Body::empty()).unwrap();
            router.oneshot(request).await.unwrap()
        };
        let held: Vec<_> = (0..2).map(|_| tokio::spawn(get(router.clone()))).collect();
        while entered.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::task::yield_now().await;
        }
        let refused =
            tokio::time::timeout(Duration::from_secs(5), get(router.clone())).await.expect("answered at once");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        release.add_permits(2);
        for request in held {
            assert_eq!(request.await.unwrap().status(), StatusCode::OK);
        }
        assert_eq!(get(router).await.status(), StatusCode::OK, "room again");
    }
}
