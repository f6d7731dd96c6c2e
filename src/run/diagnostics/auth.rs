//! Who may scrape: the bearer token of each request is authenticated with a TokenReview, and its
//! user authorised with a SubjectAccessReview for `get` on the request's non-resource URL
//! (`/metrics`), as controller-runtime's secure metrics filter does. No token: 401; a token the
//! API server does not accept: 401; a user without the permission: 403.
//!
//! Decisions are remembered per token for a short while (a minute when allowed, 10 s otherwise),
//! so that a Prometheus scraping every 30 s costs the API server two requests a minute at most.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;
use tracing::warn;

use crate::sync::lock;

const ALLOWED_FOR: Duration = Duration::from_secs(60);
const REFUSED_FOR: Duration = Duration::from_secs(10);
/// Above this many remembered tokens, the memory is cleared.
const REMEMBERED_AT_MOST: usize = 1024;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Decision {
    Allowed,
    /// The API server does not accept the token.
    Unauthenticated,
    /// The token's user lacks `get` on the path.
    Forbidden,
}

/// Reviews tokens with the API server and remembers the answers.
pub(super) struct Gate {
    client: Client,
    remembered: Mutex<HashMap<String, (Instant, Decision)>>,
}

impl Gate {
    pub(super) fn new(client: Client) -> Self {
        Gate { client, remembered: Mutex::new(HashMap::new()) }
    }

    /// What `token` may do on `path`: remembered, or asked of the API server.
    pub(super) async fn decide(&self, token: &str, path: &str) -> Result<Decision, kube::Error> {
        let key = format!("{path} {token}");
        if let Some(decision) = self.recall(&key) {
            return Ok(decision);
        }
        let decision = self.review(token, path).await?;
        let keep = if decision == Decision::Allowed { ALLOWED_FOR } else { REFUSED_FOR };
        let mut remembered = lock(&self.remembered);
        if remembered.len() >= REMEMBERED_AT_MOST {
            remembered.clear();
        }
        remembered.insert(key, (Instant::now() + keep, decision));
        Ok(decision)
    }

    fn recall(&self, key: &str) -> Option<Decision> {
        let remembered = lock(&self.remembered);
        remembered.get(key).filter(|(until, _)| Instant::now() < *until).map(|(_, decision)| *decision)
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
        Err(error) => {
            warn!(path = %path, %error, "reviewing a scrape's token with the API server failed");
            (StatusCode::SERVICE_UNAVAILABLE, "the API server could not review the token\n").into_response()
        }
    }
}

#[cfg(test)]
mod tests;
