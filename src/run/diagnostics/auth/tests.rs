use std::convert::Infallible;

use axum::http::{Request as HttpRequest, Response as HttpResponse};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

/// The requests the fake API server received so far.
fn count(seen: &Seen) -> usize {
    seen.lock().unwrap().len()
}

/// The requests the fake API server received: (path, body).
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A client whose API server knows two tokens: "reader" (user `reader`, who may get /metrics)
/// and "stranger" (user `stranger`, who may not). Any other token is not authenticated.
fn api_server() -> (Client, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let service = tower::service_fn(move |request: HttpRequest<Body>| {
        let log = log.clone();
        async move {
            let path = request.uri().path().to_owned();
            let body: Value = serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap()).unwrap();
            log.lock().unwrap().push((path.clone(), body.clone()));
            let status = if path.ends_with("/tokenreviews") {
                match body["spec"]["token"].as_str() {
                    Some(user @ ("reader" | "stranger")) => {
                        json!({"authenticated": true, "user": {"username": user, "groups": ["system:authenticated"]}})
                    }
                    _ => json!({"authenticated": false}),
                }
            } else {
                json!({"allowed": body["spec"]["user"] == "reader"})
            };
            let mut answer = body;
            answer["status"] = status;
            Ok::<_, Infallible>(HttpResponse::new(Body::from(serde_json::to_vec(&answer).unwrap())))
        }
    });
    (Client::new(service, "default"), seen)
}

#[tokio::test]
async fn a_user_with_get_on_the_path_is_allowed_and_others_are_told_apart() {
    let (client, _) = api_server();
    let gate = Gate::new(client, LIMITS);
    assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed);
    assert_eq!(gate.decide("stranger", "/metrics").await.unwrap(), Decision::Forbidden);
    assert_eq!(gate.decide("forged", "/metrics").await.unwrap(), Decision::Unauthenticated);
}

#[tokio::test]
async fn the_access_review_asks_for_get_on_the_non_resource_path_as_the_reviewed_user() {
    let (client, seen) = api_server();
    Gate::new(client, LIMITS).decide("reader", "/metrics").await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "/apis/authentication.k8s.io/v1/tokenreviews");
    assert_eq!(seen[0].1["spec"]["token"], "reader");
    assert_eq!(seen[1].0, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
    let spec = &seen[1].1["spec"];
    assert_eq!((&spec["user"], &spec["groups"]), (&json!("reader"), &json!(["system:authenticated"])));
    assert_eq!(spec["nonResourceAttributes"], json!({"path": "/metrics", "verb": "get"}));
}

#[tokio::test(start_paused = true)]
async fn decisions_are_remembered_a_minute_when_allowed_and_ten_seconds_otherwise() {
    let (client, seen) = api_server();
    let gate = Gate::new(client, LIMITS);
    let asked = || seen.lock().unwrap().len();
    gate.decide("reader", "/metrics").await.unwrap();
    gate.decide("forged", "/metrics").await.unwrap();
    assert_eq!(asked(), 3);
    tokio::time::advance(Duration::from_secs(9)).await;
    gate.decide("reader", "/metrics").await.unwrap();
    gate.decide("forged", "/metrics").await.unwrap();
    assert_eq!(asked(), 3, "both remembered");
    tokio::time::advance(Duration::from_secs(2)).await;
    gate.decide("reader", "/metrics").await.unwrap();
    gate.decide("forged", "/metrics").await.unwrap();
    assert_eq!(asked(), 4, "the refusal is asked again, the permission still remembered");
    tokio::time::advance(Duration::from_secs(60)).await;
    gate.decide("reader", "/metrics").await.unwrap();
    assert_eq!(asked(), 6);
}

#[test]
fn only_a_bearer_authorization_carries_a_token() {
    let with = |value: &str| {
        HttpRequest::builder().header(header::AUTHORIZATION, value).body(axum::body::Body::empty()).unwrap()
    };
    assert_eq!(bearer(&with("Bearer abc")), Some("abc"));
    assert_eq!(bearer(&with("bearer abc ")), Some("abc"));
    assert_eq!(bearer(&with("Basic abc")), None);
    assert_eq!(bearer(&with("Bearer ")), None);
    assert_eq!(bearer(&HttpRequest::new(axum::body::Body::empty())), None);
}

#[test]
fn an_allowed_answer_survives_a_flood_of_refusals_and_each_cache_keeps_its_size() {
    let limits = Limits { allowed_tokens: 2, refused_tokens: 8, ..LIMITS };
    let mut memory = Memory::new(&limits);
    let now = Instant::now();
    memory.remember("/metrics prometheus".into(), Decision::Allowed, now);
    for i in 0..10_000 {
        memory.remember(format!("/metrics forged-{i}"), Decision::Unauthenticated, now);
    }
    assert_eq!(memory.recall("/metrics prometheus", now), Recalled::Fresh(Decision::Allowed));
    assert_eq!(memory.refused.len(), 8, "the refusals are bounded");
    assert_eq!(memory.recall("/metrics forged-9999", now), Recalled::Fresh(Decision::Unauthenticated));
    assert_eq!(memory.recall("/metrics forged-0", now), Recalled::Unknown, "the oldest refusals went");
    // Only allowed tokens push allowed ones out, least recently used first.
    memory.remember("/metrics second".into(), Decision::Allowed, now);
    memory.recall("/metrics prometheus", now);
    memory.remember("/metrics third".into(), Decision::Allowed, now);
    assert_eq!(memory.recall("/metrics prometheus", now), Recalled::Fresh(Decision::Allowed));
    assert_eq!(memory.recall("/metrics second", now), Recalled::Unknown);
    // An expired permission is remembered as one, and a refusal replaces it.
    let later = now + ALLOWED_FOR;
    assert_eq!(memory.recall("/metrics prometheus", later), Recalled::WasAllowed);
    memory.remember("/metrics prometheus".into(), Decision::Forbidden, later);
    assert_eq!(memory.recall("/metrics prometheus", later), Recalled::Fresh(Decision::Forbidden));
    assert_eq!(memory.allowed.len(), 1);
}

#[tokio::test]
async fn a_flood_of_new_tokens_reaches_the_api_server_no_faster_than_the_bucket() {
    let (client, seen) = api_server();
    let limits = Limits { reviews_per_second: 5, review_burst: 20, ..LIMITS };
    let gate = Gate::new(client, limits);
    let started = std::time::Instant::now();
    assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed);
    let mut busy = 0;
    for i in 0..10_000 {
        match gate.decide(&format!("forged-{i}"), "/metrics").await {
            Ok(decision) => assert_eq!(decision, Decision::Unauthenticated),
            Err(Unanswered::Busy { retry_after }) => {
                assert!(retry_after >= Duration::from_secs(1), "{retry_after:?}");
                busy += 1;
            }
            Err(Unanswered::Api(error)) => panic!("{error}"),
        }
        if i % 1000 == 0 {
            assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed, "the scraper goes on");
        }
    }
    // TokenReviews: the reader's and one per forged token reviewed (the reader's access review left out).
    let reviews = count(&seen) - 1;
    let elapsed = started.elapsed().as_secs_f64();
    let bound = 1 + 20 + (elapsed * 5.0).ceil() as usize;
    assert!(reviews <= bound, "{reviews} reviews in {elapsed:.2}s, more than {bound}");
    assert_eq!(busy, 10_000 - (reviews - 1), "every token not reviewed was refused as busy");
}

/// An API server that takes a second for each review, and tells how many it had at once at most.
fn slow_api_server() -> (Client, Arc<Mutex<(usize, usize)>>) {
    let at_once: Arc<Mutex<(usize, usize)>> = Arc::default();
    let count = at_once.clone();
    let service = tower::service_fn(move |request: HttpRequest<Body>| {
        let count = count.clone();
        async move {
            {
                let mut count = count.lock().unwrap();
                count.0 += 1;
                count.1 = count.1.max(count.0);
            }
            let mut answer: Value =
                serde_json::from_slice(&request.into_body().collect_bytes().await.unwrap()).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            count.lock().unwrap().0 -= 1;
            answer["status"] = json!({"authenticated": false});
            Ok::<_, Infallible>(HttpResponse::new(Body::from(serde_json::to_vec(&answer).unwrap())))
        }
    });
    (Client::new(service, "default"), at_once)
}

#[tokio::test(start_paused = true)]
async fn no_more_reviews_run_at_once_than_the_limit_and_a_scrape_waits_for_a_slot_only_so_long() {
    let (client, at_once) = slow_api_server();
    let limits = Limits { concurrent_reviews: 2, review_burst: 1000, review_wait: Duration::from_secs(3), ..LIMITS };
    let gate = Arc::new(Gate::new(client, limits));
    let scrapes: Vec<_> = (0..20)
        .map(|i| {
            let gate = gate.clone();
            tokio::spawn(async move { gate.decide(&format!("forged-{i}"), "/metrics").await })
        })
        .collect();
    let mut busy = 0;
    for scrape in scrapes {
        match scrape.await.unwrap() {
            Ok(decision) => assert_eq!(decision, Decision::Unauthenticated),
            Err(Unanswered::Busy { retry_after }) => {
                assert_eq!(retry_after, Duration::from_secs(1));
                busy += 1;
            }
            Err(Unanswered::Api(error)) => panic!("{error}"),
        }
    }
    assert_eq!(at_once.lock().unwrap().1, 2, "two reviews at once at most");
    assert!((12..=16).contains(&busy), "those that got no slot within 3 s were refused: {busy}");
}

#[tokio::test(start_paused = true)]
async fn a_token_allowed_before_is_reviewed_again_without_waiting_for_the_bucket() {
    let (client, seen) = api_server();
    let gate = Gate::new(client, Limits { reviews_per_second: 1, review_burst: 1, ..LIMITS });
    assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed);
    tokio::time::advance(ALLOWED_FOR).await;
    assert!(matches!(gate.decide("forged", "/metrics").await, Err(Unanswered::Busy { .. })), "the bucket is empty");
    assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed);
    assert_eq!(count(&seen), 4, "the reader was reviewed again");
}
