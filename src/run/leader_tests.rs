//! Where a replica stands before and after its first attempt at the Lease, against a scripted
//! API that answers only when the test says so.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use prometheus_client::metrics::family::Family;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::*;

fn settings() -> LeaseSettings {
    LeaseSettings {
        namespace: "ipam".to_owned(),
        name: "ferro-ipam".to_owned(),
        identity: "me".to_owned(),
        duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

/// A client whose first request is answered with `first` once `go` fires; every later request
/// gets `later`.
fn held_back(first: (u16, Value), later: (u16, Value)) -> (Client, oneshot::Sender<()>) {
    let (go, gate) = oneshot::channel::<()>();
    let gate = Arc::new(Mutex::new(Some(gate)));
    let service = tower::service_fn(move |_: Request<Body>| {
        let (gate, first, later) = (gate.clone(), first.clone(), later.clone());
        async move {
            let waiting = crate::sync::lock(&gate).take();
            let (status, body) = match waiting {
                Some(gate) => {
                    let _ = gate.await;
                    first
                }
                None => later,
            };
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()));
            Ok::<_, std::convert::Infallible>(response.unwrap_or_else(|_| Response::new(Body::empty())))
        }
    });
    (Client::new(service, "default"), go)
}

fn start(client: Client) -> Campaign {
    let health = Health::default();
    let misconfig = Misconfig::new(health.clone(), Family::default());
    campaign(client, settings(), Fence::closed(), health, misconfig)
}

async fn changed_to(leading: &mut watch::Receiver<Leadership>) -> Leadership {
    tokio::time::timeout(Duration::from_secs(5), leading.changed())
        .await
        .expect("a change")
        .expect("the campaign runs");
    *leading.borrow_and_update()
}

fn lease_of(holder: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "ferro-ipam", "namespace": "ipam", "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "acquireTime": "2026-12-06T00:00:00.000000Z", "renewTime": "2026-12-06T00:00:00.000000Z"},
    })
}

#[tokio::test]
async fn a_replica_is_starting_until_its_first_attempt_finds_the_lease_held_by_another() {
    let (client, go) = held_back((200, lease_of("other")), (200, lease_of("other")));
    let campaign = start(client);
    let mut leading = campaign.leading.clone();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*leading.borrow_and_update(), Leadership::Starting, "no attempt has settled");
    go.send(()).expect("the first request is waiting");
    assert_eq!(changed_to(&mut leading).await, Leadership::Standby);
    campaign.resign(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_replica_that_finds_the_lease_free_goes_from_starting_to_leading() {
    let missing =
        json!({"kind": "Status", "code": 404, "reason": "NotFound", "message": "leases \"ferro-ipam\" not found"});
    let (client, go) = held_back((404, missing), (201, lease_of("me")));
    let campaign = start(client);
    let mut leading = campaign.leading.clone();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(*leading.borrow_and_update(), Leadership::Starting);
    go.send(()).expect("the first request is waiting");
    assert_eq!(changed_to(&mut leading).await, Leadership::Leading(1), "never standing by on the way");
    campaign.resign(Duration::from_secs(1)).await;
}
