//! The client-side limit of `--kube-api-qps` and `--kube-api-burst`, as client-go applies it: a
//! token bucket that holds up to `burst` requests and refills at `qps` per second. A request that
//! finds the bucket empty waits for its turn; none is refused.
//!
//! The bucket is kept as its "theoretical arrival time" (the generic cell rate algorithm): one
//! instant under a lock, and no timer task.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

use crate::sync::lock;

/// Wraps a service so that its requests keep to a rate.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Bucket>,
}

impl RateLimitLayer {
    /// `qps` requests per second sustained, `burst` at once after a quiet time. `qps` must be
    /// above 0 and `burst` at least 1 (the flags are checked for that).
    pub fn new(qps: f32, burst: u32) -> Self {
        let interval = Duration::from_secs_f64(1.0 / f64::from(qps));
        RateLimitLayer {
            bucket: Arc::new(Bucket {
                interval,
                tolerance: interval * burst.saturating_sub(1),
                arrival: Mutex::new(None),
            }),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit { inner, bucket: self.bucket.clone() }
    }
}

struct Bucket {
    /// Time between two requests at the sustained rate.
    interval: Duration,
    /// How far ahead of the sustained rate a burst may run.
    tolerance: Duration,
    /// When the next request would be due at the sustained rate; None before the first.
    arrival: Mutex<Option<Instant>>,
}

impl Bucket {
    /// Takes the next turn: the instant at which a request made at `now` may go.
    fn reserve(&self, now: Instant) -> Instant {
        let mut arrival = lock(&self.arrival);
        let due = arrival.map_or(now, |a| a.max(now));
        *arrival = Some(due + self.interval);
        due.checked_sub(self.tolerance).map_or(now, |at| at.max(now))
    }
}

/// A service whose requests wait for their turn in a shared bucket.
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Bucket>,
}

impl<S, Request> Service<Request> for RateLimit<S>
where
    S: Service<Request> + Clone + Send + 'static,
    S::Future: Send,
    Request: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let at = self.bucket.reserve(Instant::now());
        // The service made ready by poll_ready goes with this request; a clone stays for the next.
        let fresh = self.inner.clone();
        let mut ready = std::mem::replace(&mut self.inner, fresh);
        Box::pin(async move {
            tokio::time::sleep_until(at).await;
            ready.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::future::join_all;

    use super::*;

    /// Answers each request with the instant it reached the service.
    #[derive(Clone)]
    struct Clock;

    impl Service<()> for Clock {
        type Response = Instant;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Instant, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            std::future::ready(Ok(Instant::now()))
        }
    }

    /// Sends `n` requests at once; the delay of each after `start`, in milliseconds.
    async fn burst_of(service: &RateLimit<Clock>, n: usize, start: Instant) -> Vec<u128> {
        let calls = (0..n).map(|_| service.clone().call(()));
        join_all(calls).await.into_iter().map(|at| (at.unwrap() - start).as_millis()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_and_the_rest_at_the_sustained_rate() {
        let service = RateLimitLayer::new(2.0, 3).layer(Clock);
        let start = Instant::now();
        assert_eq!(burst_of(&service, 6, start).await, [0, 0, 0, 500, 1000, 1500]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_bucket_refills_up_to_the_burst_and_no_further() {
        let service = RateLimitLayer::new(10.0, 2).layer(Clock);
        burst_of(&service, 4, Instant::now()).await;
        tokio::time::sleep(Duration::from_secs(60)).await;
        let start = Instant::now();
        assert_eq!(burst_of(&service, 4, start).await, [0, 0, 100, 200]);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_spaced_at_the_rate_never_wait() {
        let service = RateLimitLayer::new(5.0, 1).layer(Clock);
        for _ in 0..5 {
            let start = Instant::now();
            assert_eq!(burst_of(&service, 1, start).await, [0]);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
