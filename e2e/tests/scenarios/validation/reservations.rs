//! Bad `spec.reservations`: refused by the API server where CEL can see the problem, reported on
//! the pool (`Ready=False`, reason `InvalidSpec`, and an Event) where it cannot.

use ferro_ipam_e2e::objects::Scope;
use serde_json::{Value, json};

use super::{IN_CLUSTER, wait_pool_event, wait_pool_reason};
use crate::PROMPTLY;

fn pool_with(reservations: Value) -> Value {
    json!({
        "addresses": ["10.65.0.10-10.65.0.20"], "prefix": 24, "gateway": "10.65.0.1",
        "excludedAddresses": ["10.65.0.15"],
        "dualStack": {"addresses": ["fd00:65::10-fd00:65::20"], "prefix": 64, "gateway": "fd00:65::1"},
        "reservations": reservations,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_server_refuses_reservations_cel_can_see_are_wrong() {
    let s = Scope::new("reservations-refused").await;
    let cases = [
        (json!([{"address": "10.65.0.1", "claimName": "a"}]), "an address reserved is the pool's gateway"),
        (json!([{"address": "fd00:65::1", "claimName": "a"}]), "an address reserved is the pool's gateway"),
        (
            json!([{"address": "10.65.0.11", "claimName": "a"}, {"address": "10.65.0.11", "claimName": "b"}]),
            "spec.reservations: an address is reserved twice",
        ),
        (
            json!([{"address": "10.65.0.11", "claimName": "a"}, {"address": "10.65.0.12", "claimName": "a"}]),
            "spec.reservations: a claim is given two addresses of one family",
        ),
        (
            json!([
                {"address": "10.65.0.11", "owner": {"kind": "Metal3Data", "name": "m"}},
                {"address": "10.65.0.12", "owner": {"kind": "Metal3Data", "name": "m"}},
            ]),
            "spec.reservations: a claim is given two addresses of one family",
        ),
        (json!([{"address": "10.65.0.11"}]), "set exactly one of claimName and owner"),
        (json!([{"address": "10.65.0.300", "claimName": "a"}]), "address must be a single IP address"),
    ];
    for (i, (reservations, expected)) in cases.into_iter().enumerate() {
        let error = s.pool(&format!("pool-{i}"), pool_with(reservations)).await.unwrap_err().to_string();
        assert!(error.contains(expected), "case {i}: {error}");
    }
    // One address of each family for one claim is fine.
    s.pool(
        "dual",
        pool_with(json!([{"address": "10.65.0.11", "claimName": "a"}, {"address": "fd00:65::11", "claimName": "a"}])),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reservation_outside_the_pool_or_excluded_makes_it_not_ready_naming_the_field() {
    let s = Scope::new("reservations-invalid").await;
    let _p = s.provider();
    s.pool(
        "outside",
        pool_with(json!([{"address": "10.65.0.11", "claimName": "a"}, {"address": "10.65.0.99", "claimName": "b"}])),
    )
    .await
    .unwrap();
    let (status, _, message) = wait_pool_reason(&s, "outside", "InvalidSpec").await;
    assert_eq!(status, "False");
    assert!(message.contains("spec.reservations[1].address 10.65.0.99 cannot be reserved"), "{message}");
    let note = wait_pool_event(&s, "outside", "InvalidSpec").await;
    assert!(note.contains("spec.reservations[1].address"), "{note}");

    s.pool("excluded", pool_with(json!([{"address": "10.65.0.15", "claimName": "a"}]))).await.unwrap();
    let (_, _, message) = wait_pool_reason(&s, "excluded", "InvalidSpec").await;
    assert!(
        message.contains("spec.reservations[0].address 10.65.0.15") && message.contains("excludedAddresses"),
        "{message}"
    );
    s.claim("a", IN_CLUSTER, "excluded").await.unwrap();
    let why = s.wait_reason("a", "PoolNotReady", PROMPTLY).await.unwrap();
    assert!(why.contains("spec.reservations[0]"), "{why}");
}
