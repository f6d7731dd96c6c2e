use std::convert::Infallible;

use axum::http::{Request as HttpRequest, Response as HttpResponse};
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

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
    let gate = Gate::new(client);
    assert_eq!(gate.decide("reader", "/metrics").await.unwrap(), Decision::Allowed);
    assert_eq!(gate.decide("stranger", "/metrics").await.unwrap(), Decision::Forbidden);
    assert_eq!(gate.decide("forged", "/metrics").await.unwrap(), Decision::Unauthenticated);
}

#[tokio::test]
async fn the_access_review_asks_for_get_on_the_non_resource_path_as_the_reviewed_user() {
    let (client, seen) = api_server();
    Gate::new(client).decide("reader", "/metrics").await.unwrap();
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
    let gate = Gate::new(client);
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
