//! `hub drain`: the judgement on synthetic Leases, and the whole command against a scripted API
//! server (no network).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("a time")
}

fn spoke_labels() -> BTreeMap<String, String> {
    [(SPOKE_LABEL.to_owned(), "east".to_owned())].into()
}

/// The spoke's Lease, renewed at `renewed` on its own clock, with a duration of 40 s.
fn lease(renewed: i64) -> Lease {
    Lease {
        spec: Some(LeaseSpec {
            holder_identity: Some("ferro-ipam".into()),
            lease_duration_seconds: Some(40),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }),
        ..Lease::default()
    }
}

#[test]
fn a_spoke_renewing_its_lease_still_answers_and_one_past_its_duration_and_margin_is_gone() {
    let labels = spoke_labels();
    let judged = |now: i64| judge("spoke-east", Some(&labels), Some(&lease(0)), at(now));
    assert!(matches!(judged(10), Judgement::Answers { .. }), "{:?}", judged(10));
    assert!(matches!(judged(44), Judgement::Answers { .. }), "within the margin: {:?}", judged(44));
    assert_eq!(judged(45), Judgement::Gone { spoke: "east".into(), renewed: Some(at(0)) });
    assert_eq!(
        judge("spoke-east", Some(&labels), None, at(0)),
        Judgement::Gone { spoke: "east".into(), renewed: None },
        "no Lease: the spoke never ran or is gone"
    );
}

#[test]
fn the_hubs_own_stamp_of_a_write_counts_even_when_the_spokes_clock_runs_behind() {
    // The spoke's clock is an hour behind: its renewTime looks long lapsed, but the API server
    // stamped the write a second ago on the hub's clock.
    let mut behind = lease(-3600);
    behind.metadata.managed_fields =
        Some(vec![ManagedFieldsEntry { time: Some(Time(at(99))), ..ManagedFieldsEntry::default() }]);
    let labels = spoke_labels();
    let judged = judge("spoke-east", Some(&labels), Some(&behind), at(100));
    assert!(matches!(judged, Judgement::Answers { renewed, .. } if renewed == at(99)), "{judged:?}");
}

#[test]
fn a_namespace_that_is_missing_or_not_a_spokes_is_refused_whatever_its_lease_says() {
    let unlabelled = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
    let refusals = [
        judge("default", Some(&unlabelled), None, at(1000)),
        judge("default", Some(&BTreeMap::new()), Some(&lease(0)), at(1000)),
        judge("nope", None, None, at(1000)),
    ];
    for refusal in &refusals {
        let Judgement::NotASpoke(why) = refusal else { panic!("not refused: {refusal:?}") };
        assert!(why.contains(SPOKE_LABEL), "{why}");
    }
    assert!(matches!(&refusals[2], Judgement::NotASpoke(why) if why.contains("does not exist")));
}

#[test]
fn a_renewal_ahead_of_the_hubs_clock_is_refused_with_how_to_end_it() {
    let labels = spoke_labels();
    let Judgement::Answers { spoke, renewed, until, now } =
        judge("spoke-east", Some(&labels), Some(&lease(600)), at(0))
    else {
        panic!("a renewal in the hub's future answers");
    };
    let why = still_answers("spoke-east", &spoke, renewed, until, now);
    assert!(why.contains("clock runs ahead") && why.contains("delete lease ferro-ipam-spoke"), "{why}");
}

/// What the scripted API server saw: requests not in the script, and the body of each request.
#[derive(Debug, Default)]
struct Seen {
    unexpected: Vec<String>,
    bodies: Vec<(String, Value)>,
}

/// A scripted API server: each request (`METHOD path`) must be the next one, and gets its answer.
fn scripted(script: Vec<(&str, u16, Value)>) -> (Client, Arc<Mutex<Seen>>) {
    let script: VecDeque<(String, u16, Value)> = script.into_iter().map(|(r, s, v)| (r.to_owned(), s, v)).collect();
    let script = Arc::new(Mutex::new(script));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (script, log) = (script.clone(), log.clone());
        async move {
            let line = format!("{} {}", request.method(), request.uri().path());
            let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let next = script.lock().expect("the script").pop_front();
            let mut log = log.lock().expect("the log");
            log.bodies.push((line.clone(), body));
            let (status, answer) = match next {
                Some((expected, status, answer)) if expected == line => (status, answer),
                _ => {
                    log.unexpected.push(line);
                    (500, json!({"kind": "Status", "code": 500, "message": "unexpected"}))
                }
            };
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&answer).expect("json")))
                .expect("a response");
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    (Client::new(service, "default"), seen)
}

fn namespace(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "spoke-east", "labels": labels}})
}

fn lease_json(renewed: Timestamp) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "ferro-ipam-spoke", "namespace": "spoke-east"},
           "spec": {"holderIdentity": "ferro-ipam", "leaseDurationSeconds": 40,
                    "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()}})
}

fn block(name: &str, cidr: &str) -> Value {
    json!({"apiVersion": "hub.ferro-ipam.dev/v1alpha1", "kind": "AddressBlock",
           "metadata": {"name": name, "namespace": "spoke-east", "uid": format!("{name}-uid")},
           "spec": {"pool": {"kind": "GlobalInClusterIPPool", "name": "shared"}, "family": "IPv4", "size": 16,
                    "spokePool": "InClusterIPPool default/nodes"},
           "status": {"cidr": cidr}})
}

const NAMESPACE: &str = "GET /api/v1/namespaces/spoke-east";
const LEASE: &str = "GET /apis/coordination.k8s.io/v1/namespaces/spoke-east/leases/ferro-ipam-spoke";
const BLOCKS: &str = "GET /apis/hub.ferro-ipam.dev/v1alpha1/namespaces/spoke-east/addressblocks";

fn delete(name: &str) -> String {
    format!("DELETE /apis/hub.ferro-ipam.dev/v1alpha1/namespaces/spoke-east/addressblocks/{name}")
}

#[tokio::test]
async fn a_gone_spokes_blocks_are_all_deleted_and_printed() {
    let (del_a, del_b) = (delete("a"), delete("b"));
    let (client, seen) = scripted(vec![
        (NAMESPACE, 200, namespace(json!({SPOKE_LABEL: "east"}))),
        (LEASE, 200, lease_json(at(0))),
        (
            BLOCKS,
            200,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [block("a", "10.0.0.16/28"), block("b", "10.0.0.32/28")]}),
        ),
        (&del_a, 200, block("a", "10.0.0.16/28")),
        (&del_b, 404, json!({"kind": "Status", "code": 404, "reason": "NotFound", "message": "gone"})),
    ]);
    let answer = drain(&client, "spoke-east", || at(100)).await.expect("drained");
    let seen = seen.lock().expect("the log");
    assert!(seen.unexpected.is_empty(), "{seen:?}");
    let deletes: Vec<&Value> = seen.bodies.iter().filter(|(l, _)| l.starts_with("DELETE")).map(|(_, b)| b).collect();
    assert_eq!(deletes.len(), 2);
    for (body, uid) in deletes.iter().zip(["a-uid", "b-uid"]) {
        assert_eq!(body["preconditions"]["uid"], uid, "the block judged, no other: {body}");
    }
    assert_eq!(exit_status(&answer), 0, "{answer:?}");
    assert_eq!(answer.spoke.as_deref(), Some("east"));
    let returned: Vec<(&str, Option<&str>)> =
        answer.returned.iter().map(|r| (r.address_block.as_str(), r.cidr.as_deref())).collect();
    assert_eq!(returned, [("spoke-east/a", Some("10.0.0.16/28"))], "b was gone already");
    let shown = text(&answer);
    assert!(
        shown.contains("deleted AddressBlock spoke-east/a: 10.0.0.16/28 of GlobalInClusterIPPool shared (spoke pool InClusterIPPool default/nodes)"),
        "{shown}"
    );
    assert!(shown.ends_with("returned 1 blocks to the hub\n"), "{shown}");
}

#[tokio::test]
async fn a_spoke_that_still_renews_its_lease_keeps_its_blocks_and_drain_exits_1() {
    let (client, seen) =
        scripted(vec![(NAMESPACE, 200, namespace(json!({SPOKE_LABEL: "east"}))), (LEASE, 200, lease_json(at(90)))]);
    let answer = drain(&client, "spoke-east", || at(100)).await.expect("judged");
    let seen = seen.lock().expect("the log");
    assert!(seen.unexpected.is_empty() && seen.bodies.len() == 2, "no block listed nor deleted: {seen:?}");
    assert_eq!(exit_status(&answer), REFUSED);
    assert!(answer.returned.is_empty());
    assert!(text(&answer).starts_with("refused: spoke east still answers"), "{}", text(&answer));
}

#[tokio::test]
async fn a_namespace_without_the_spoke_label_is_refused_before_its_lease_is_read() {
    let (client, seen) = scripted(vec![(NAMESPACE, 200, namespace(json!({})))]);
    let answer = drain(&client, "spoke-east", || at(100)).await.expect("judged");
    let seen = seen.lock().expect("the log");
    assert!(seen.unexpected.is_empty() && seen.bodies.len() == 1, "{seen:?}");
    assert_eq!((exit_status(&answer), answer.state.as_str()), (REFUSED, "refused"));
}

#[tokio::test]
async fn a_forbidden_read_is_an_error_naming_the_rights_drain_needs() {
    let forbidden = json!({"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"});
    let (client, _) = scripted(vec![(NAMESPACE, 403, forbidden)]);
    let error = drain(&client, "spoke-east", || at(100)).await.expect_err("could not look");
    assert!(error.to_string().contains("hub drain needs get on namespaces"), "{error}");
}
