//! Who may scrape: the bearer token of each request is authenticated with a TokenReview, and its
//! user authorised with a SubjectAccessReview for `get` on the request's non-resource URL
//! (`/metrics`), as controller-runtime's secure metrics filter does. No token: 401; a token the
//! API server does not accept: 401; a user without the permission: 403.
//!
//! Decisions are remembered per token for a short while (a minute when allowed, 10 s otherwise),
//! so that a Prometheus scraping every 30 s costs the API server two requests a minute at most.
//!
//! Anyone who reaches the port can send new tokens, so what reaches the API server is bounded
//! ([`LIMITS`]): reviews of tokens not seen allowed before take a turn from a token bucket, at
//! most a few run at once, and a scrape that gets no turn (or no slot in time) is answered 429
//! with Retry-After, never reviewed. Allowed and refused answers are remembered in two separate
//! LRU caches, so that a flood of bad tokens cannot push a scraper's "allowed" out; a token
//! allowed before is reviewed again, when its answer expires, without waiting for the bucket.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use lru::LruCache;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::warn;

use crate::sync::lock;

const ALLOWED_FOR: Duration = Duration::from_secs(60);
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// At most one warning about refused reviews in this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// How much reviewing the scrapes may cost the API server.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Reviews of new tokens per second, sustained (each is a TokenReview and, for a token the
    /// API server accepts, a SubjectAccessReview).
    pub reviews_per_second: u32,
    /// Reviews of new tokens at once after a quiet time.
    pub review_burst: u32,
    /// Reviews under way at once.
    pub concurrent_reviews: usize,
    /// How long a scrape may wait for a review slot.
    pub review_wait: Duration,
    /// Tokens whose "allowed" is remembered; only tokens the API server allowed take a place.
    pub allowed_tokens: usize,
    /// Tokens whose refusal is remembered.
    pub refused_tokens: usize,
}

/// The limits in force. A Prometheus needs one review a minute per token; 5 a second leaves room
/// for hundreds of scrapers, and holds a flood of new tokens to 10 API requests a second.
pub(super) const LIMITS: Limits = Limits {
    reviews_per_second: 5,
    review_burst: 20,
    concurrent_reviews: 4,
    review_wait: Duration::from_secs(3),
    allowed_tokens: 256,
    refused_tokens: 1024,
};

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Decision {
    Allowed,
    /// The API server does not accept the token.
    Unauthenticated,
    /// The token's user lacks `get` on the path.
    Forbidden,
}

/// Why a token has no decision.
#[derive(Debug)]
pub(super) enum Unanswered {
    /// The limits leave no review for it now; ask again after this long.
    Busy { retry_after: Duration },
    /// The API server failed to answer.
    Api(kube::Error),
}

/// What the caches know of a token.
#[derive(Debug, PartialEq, Eq)]
enum Recalled {
    Fresh(Decision),
    /// Allowed once, and the answer has expired.
    WasAllowed,
    Unknown,
}

/// The answers remembered: allowed and refused apart, each an LRU of its own size.
struct Memory {
    allowed: LruCache<String, Instant>,
    refused: LruCache<String, (Instant, Decision)>,
}

impl Memory {
    fn new(limits: &Limits) -> Self {
        let size = |n: usize| std::num::NonZeroUsize::new(n).unwrap_or(std::num::NonZeroUsize::MIN);
        Memory {
            allowed: LruCache::new(size(limits.allowed_tokens)),
            refused: LruCache::new(size(limits.refused_tokens)),
        }
    }

    fn recall(&mut self, key: &str, now: Instant) -> Recalled {
        if let Some(until) = self.allowed.get(key) {
            return if now < *until { Recalled::Fresh(Decision::Allowed) } else { Recalled::WasAllowed };
        }
        match self.refused.get(key) {
            Some((until, decision)) if now < *until => Recalled::Fresh(*decision),
            _ => Recalled::Unknown,
        }
    }

    fn remember(&mut self, key: String, decision: Decision, now: Instant) {
        if decision == Decision::Allowed {
            self.refused.pop(&key);
            self.allowed.put(key, now + ALLOWED_FOR);
        } else {
            self.allowed.pop(&key);
            self.refused.put(key, (now + REFUSED_FOR, decision));
        }
    }
}

/// Reviews tokens with the API server, within [`Limits`], and remembers the answers.
pub(super) struct Gate {
    client: Client,
    limits: Limits,
    memory: Mutex<Memory>,
    bucket: DefaultDirectRateLimiter,
    slots: Semaphore,
    /// Scrapes refused for the limits since the last warning, and when that was.
    refused: AtomicU64,
    warned: Mutex<Option<Instant>>,
}

impl Gate {
    pub(super) fn new(client: Client, limits: Limits) -> Self {
        let positive = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(positive(limits.reviews_per_second)).allow_burst(positive(limits.review_burst));
        Gate {
            client,
            limits,
            memory: Mutex::new(Memory::new(&limits)),
            bucket: RateLimiter::direct(quota),
            slots: Semaphore::new(limits.concurrent_reviews.max(1)),
            refused: AtomicU64::new(0),
            warned: Mutex::new(None),
        }
    }

    /// What `token` may do on `path`: remembered, or asked of the API server if the limits allow.
    pub(super) async fn decide(&self, token: &str, path: &str) -> Result<Decision, Unanswered> {
        let key = format!("{path} {token}");
        let recalled = lock(&self.memory).recall(&key, Instant::now());
        match recalled {
            Recalled::Fresh(decision) => return Ok(decision),
            // Only a token the API server allowed can be here: no flood of new tokens can.
            Recalled::WasAllowed => {}
            Recalled::Unknown => {
                if let Err(not_until) = self.bucket.check() {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    return Err(self.busy(wait));
                }
            }
        }
        let Ok(Ok(_slot)) = tokio::time::timeout(self.limits.review_wait, self.slots.acquire()).await else {
            return Err(self.busy(Duration::from_secs(1)));
        };
        let decision = self.review(token, path).await.map_err(Unanswered::Api)?;
        lock(&self.memory).remember(key, decision, Instant::now());
        Ok(decision)
    }

    /// A scrape refused for the limits: counted, and warned of at most once per [`WARN_EVERY`].
    fn busy(&self, wait: Duration) -> Unanswered {
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut warned = lock(&self.warned);
        if warned.is_none_or(|at| now >= at + WARN_EVERY) {
            *warned = Some(now);
            self.refused.store(0, Ordering::Relaxed);
            let limits = &self.limits;
            warn!(
                refused,
                reviews_per_second = limits.reviews_per_second,
                review_burst = limits.review_burst,
                concurrent_reviews = limits.concurrent_reviews,
                "refusing metrics scrapes with 429: their tokens would need more reviews by the API server than the limit allows"
            );
        }
        // Whole seconds, as Retry-After has them.
        Unanswered::Busy {
            retry_after: Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
                .max(Duration::from_secs(1)),
        }
    }

    async fn review(&self, token: &str, path: &str) -> Result<Decision, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..TokenReviewSpec::default() },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone()).create(&PostParams::default(), &review).await?;
        let status = reviewed.status.unwrap_or_default();
        let (true, Some(user)) = (status.authenticated == Some(true), status.user) else {
            return Ok(Decision::Unauthenticated);
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answered =
            Api::<SubjectAccessReview>::all(self.client.clone()).create(&PostParams::default(), &access).await?;
        Ok(if answered.status.is_some_and(|s| s.allowed) { Decision::Allowed } else { Decision::Forbidden })
    }
}

/// The bearer token of a request's `Authorization` header.
fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The middleware: lets a request through only if its token may `get` its path.
pub(super) async fn authorise(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let Some(token) = bearer(&request) else {
        return (StatusCode::UNAUTHORIZED, "Unauthorized: send a ServiceAccount token as a bearer token\n")
            .into_response();
    };
    let path = request.uri().path().to_owned();
    match gate.decide(token, &path).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => {
            (StatusCode::UNAUTHORIZED, "Unauthorized: the API server does not accept this token\n").into_response()
        }
        Ok(Decision::Forbidden) => {
            (StatusCode::FORBIDDEN, format!("Forbidden: this token's user may not get {path}\n")).into_response()
        }
        Err(Unanswered::Busy { retry_after }) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, retry_after.as_secs().to_string())],
            "Too Many Requests: too many new tokens to review with the API server; retry later\n",
        )
            .into_response(),
        Err(Unanswered::Api(error)) => {
            warn!(path = %path, %error, "reviewing a scrape's token with the API server failed");
            (StatusCode::SERVICE_UNAVAILABLE, "the API server could not review the token\n").into_response()
        }
    }
}

#[cfg(test)]
mod tests;
