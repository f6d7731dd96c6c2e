//! A tower layer under every request the process makes: it refuses writes once the fence is
//! closed, bounds each non-watch request in time, and reads the server's clock off responses.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response};
use tower::{BoxError, Layer, Service};

use super::clock::ServerClock;
use super::fence::Fence;

/// API groups whose writes are never fenced: leader election itself, and the reviews that
/// authorise a metrics scrape.
const UNFENCED_PREFIXES: [&str; 3] =
    ["/apis/coordination.k8s.io/", "/apis/authentication.k8s.io/", "/apis/authorization.k8s.io/"];

/// How long requests may take.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// A read (GET of an object or of one page of a list).
    pub read: Duration,
    /// A write.
    pub write: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { read: Duration::from_secs(30), write: Duration::from_secs(10) }
    }
}

/// A request that took longer than its bound.
#[derive(Debug, thiserror::Error)]
#[error("the API server did not answer within {0:?}")]
pub struct TimedOut(Duration);

/// Whether a request changes state that only the leader may change.
pub fn is_fenced(method: &Method, path: &str) -> bool {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    !reads.contains(method) && !UNFENCED_PREFIXES.iter().any(|p| path.starts_with(p))
}

/// The time bound of a request; None for a watch, which the watcher bounds itself.
pub fn bound(method: &Method, query: Option<&str>, timeouts: Timeouts) -> Option<Duration> {
    let watch = query.is_some_and(|q| q.split('&').any(|pair| pair == "watch=true" || pair == "watch=1"));
    match *method {
        _ if watch => None,
        Method::GET | Method::HEAD | Method::OPTIONS => Some(timeouts.read),
        _ => Some(timeouts.write),
    }
}

#[derive(Clone, Debug)]
pub struct GuardLayer {
    pub fence: Fence,
    pub clock: ServerClock,
    pub timeouts: Timeouts,
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard { inner, layer: self.clone() }
    }
}

#[derive(Clone, Debug)]
pub struct Guard<S> {
    inner: S,
    layer: GuardLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

impl<S, B, R> Service<Request<B>> for Guard<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = Response<R>;
    type Error = BoxError;
    type Future = BoxFuture<Response<R>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if is_fenced(request.method(), request.uri().path())
            && let Err(fenced) = self.layer.fence.check()
        {
            return Box::pin(std::future::ready(Err(fenced.into())));
        }
        let limit = bound(request.method(), request.uri().query(), self.layer.timeouts);
        let clock = self.layer.clock.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = match limit {
                Some(limit) => tokio::time::timeout(limit, response).await.map_err(|_| TimedOut(limit))?,
                None => response.await,
            }
            .map_err(Into::into)?;
            if let Some(date) = response.headers().get(http::header::DATE).and_then(|v| v.to_str().ok()) {
                clock.observe_header(date);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_of_allocation_state_are_fenced_and_reads_and_the_lease_are_not() {
        let claims = "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddressclaims/c/status";
        assert!(is_fenced(&Method::PATCH, claims));
        assert!(is_fenced(&Method::POST, "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddresses"));
        assert!(is_fenced(&Method::DELETE, "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/ns/ipaddresses/a"));
        assert!(is_fenced(&Method::PUT, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c"));
        assert!(!is_fenced(&Method::GET, claims));
        assert!(!is_fenced(&Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"));
        assert!(!is_fenced(&Method::POST, "/apis/authentication.k8s.io/v1/tokenreviews"));
    }

    #[test]
    fn watches_are_unbounded_and_other_requests_bounded() {
        let t = Timeouts { read: Duration::from_secs(30), write: Duration::from_secs(10) };
        assert_eq!(bound(&Method::GET, Some("watch=true&resourceVersion=5"), t), None);
        assert_eq!(bound(&Method::GET, Some("limit=500"), t), Some(Duration::from_secs(30)));
        assert_eq!(bound(&Method::GET, None, t), Some(Duration::from_secs(30)));
        assert_eq!(bound(&Method::PATCH, None, t), Some(Duration::from_secs(10)));
        assert_eq!(bound(&Method::GET, Some("watchful=true"), t), Some(Duration::from_secs(30)));
    }

    #[tokio::test]
    async fn a_closed_fence_refuses_a_write_without_sending_it() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let sent = Arc::new(AtomicUsize::new(0));
        let counter = sent.clone();
        let inner = tower::service_fn(move |_: Request<()>| {
            counter.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok::<_, BoxError>(Response::new(())))
        });
        let fence = Fence::closed();
        let layer = GuardLayer { fence: fence.clone(), clock: ServerClock::default(), timeouts: Timeouts::default() };
        let mut guard = layer.layer(inner);
        let write = Request::post("/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/n/ipaddresses").body(()).unwrap();
        let error = guard.call(write).await.unwrap_err();
        assert!(error.to_string().contains("renew deadline"), "{error}");
        assert_eq!(sent.load(Ordering::SeqCst), 0);
        let read = Request::get("/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/n/ipaddresses").body(()).unwrap();
        guard.call(read).await.unwrap();
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        fence.open_until(std::time::Instant::now() + Duration::from_secs(5));
        let write = Request::post("/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/n/ipaddresses").body(()).unwrap();
        guard.call(write).await.unwrap();
        assert_eq!(sent.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_that_hangs_fails_after_its_bound_and_dates_set_the_clock() {
        let hang = tower::service_fn(|_: Request<()>| std::future::pending::<Result<Response<()>, BoxError>>());
        let layer =
            GuardLayer { fence: Fence::always_open(), clock: ServerClock::default(), timeouts: Timeouts::default() };
        let error = layer.layer(hang).call(Request::get("/api/v1/namespaces").body(()).unwrap()).await.unwrap_err();
        assert!(error.to_string().contains("did not answer within 30s"), "{error}");

        let dated = tower::service_fn(|_: Request<()>| {
            let response = Response::builder().header("date", "Thu, 03 Dec 2026 09:32:22 GMT").body(()).unwrap();
            std::future::ready(Ok::<_, BoxError>(response))
        });
        let clock = ServerClock::default();
        let layer = GuardLayer { fence: Fence::always_open(), clock: clock.clone(), timeouts: Timeouts::default() };
        layer.layer(dated).call(Request::get("/version").body(()).unwrap()).await.unwrap();
        assert_ne!(clock.offset(), k8s_openapi::jiff::SignedDuration::ZERO, "the Date header was read");
    }
}
