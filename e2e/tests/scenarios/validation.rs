//! Pool validation without a webhook: every rejection of the in-cluster provider's webhook that
//! CEL can express is refused by the API server itself, with a message naming the field. What
//! CEL cannot see (an IPv6 range written backwards, an update dropping addresses in use) becomes a
//! pool condition and an Event, and the allocated addresses are kept. Ranges: `ranges.rs`.

mod ranges;
mod reservations;

use ferro_ipam_e2e::invariants;
use std::time::Duration;

use ferro_ipam_e2e::objects::{Readiness, Scope};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::{A_WHILE, PROMPTLY};

const IN_CLUSTER: &str = "InClusterIPPool";
const ENTRY: &str = "must be an IP address, a range a-b of two addresses of one family, or a CIDR";

/// A spec the webhook refuses, and what the API server's message must contain: the field's
/// path and the words of the rule.
struct Refused {
    case: &'static str,
    spec: Value,
    field: &'static str,
    says: &'static str,
}

fn refused_specs() -> Vec<Refused> {
    let case = |case, spec, field, says| Refused { case, spec, field, says };
    vec![
        case("empty addresses", json!({"addresses": [], "prefix": 24}), "spec.addresses", "spec.addresses is required"),
        case("no addresses at all", json!({"prefix": 24}), "spec.addresses", "Required value"),
        case(
            "negative prefix",
            json!({"addresses": ["10.0.0.1"], "prefix": -1}),
            "spec.prefix",
            "greater than or equal to 0",
        ),
        case(
            "prefix beyond 128",
            json!({"addresses": ["fd00::1"], "prefix": 129}),
            "spec.prefix",
            "less than or equal to 128",
        ),
        case(
            "IPv4 prefix beyond 32",
            json!({"addresses": ["10.0.0.1"], "prefix": 33}),
            "spec.prefix",
            "provided prefix is not valid",
        ),
        case(
            "entry that is no address",
            json!({"addresses": ["10.0.0.1", "not-an-ip"], "prefix": 24}),
            "spec.addresses[1]",
            ENTRY,
        ),
        case(
            "entry with an octet beyond 255",
            json!({"addresses": ["10.0.0.300"], "prefix": 24}),
            "spec.addresses[0]",
            ENTRY,
        ),
        case("range with a missing end", json!({"addresses": ["10.0.0.1-"], "prefix": 24}), "spec.addresses[0]", ENTRY),
        case(
            "range of two families",
            json!({"addresses": ["10.0.0.1-fd00::1"], "prefix": 24}),
            "spec.addresses[0]",
            ENTRY,
        ),
        case("CIDR with a bad length", json!({"addresses": ["10.0.0.0/33"], "prefix": 24}), "spec.addresses[0]", ENTRY),
        case(
            "IPv4 and IPv6 mixed",
            json!({"addresses": ["10.0.0.1", "fd00::1"], "prefix": 24}),
            "spec.addresses",
            "provided addresses are of mixed IP families",
        ),
        case(
            "entry outside the lowest address's network",
            json!({"addresses": ["10.0.0.10-10.0.0.20", "10.0.1.5"], "prefix": 24}),
            "spec.addresses",
            "provided address belongs to a different subnet than others",
        ),
        case(
            "CIDR larger than the prefix",
            json!({"addresses": ["10.0.0.0/23"], "prefix": 24}),
            "spec.addresses",
            "provided address belongs to a different subnet than others",
        ),
        case(
            "gateway of the other family",
            json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "fd00::1"}),
            "spec.gateway",
            "provided gateway and addresses are of mixed IP families",
        ),
        case(
            "gateway that is no address",
            json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "router"}),
            "spec.gateway",
            "provided gateway is not a valid IP address",
        ),
        case(
            "excluded entry that is no address",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.5", "ten"]}),
            "spec.excludedAddresses[1]",
            ENTRY,
        ),
        case(
            "excluded entries of mixed families",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.5", "fd00::5"]}),
            "spec.excludedAddresses",
            "provided addresses are of mixed IP families",
        ),
        case(
            "excluded entries of another family than the addresses",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["fd00::5"]}),
            "spec.excludedAddresses",
            "addresses and excluded addresses are of mixed IP families",
        ),
        case(
            "negative grace period",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "addressReuseGracePeriodSeconds": -1}),
            "spec.addressReuseGracePeriodSeconds",
            "greater than or equal to 0",
        ),
    ]
}

/// Whether an error message names the field and says what the rule says, with no rule that
/// failed to evaluate beside it; the mismatch otherwise.
fn names_the_field(case: &Refused, result: anyhow::Result<()>) -> Option<String> {
    match result {
        Ok(()) => Some(format!("{}: accepted {}", case.case, case.spec)),
        Err(error) => {
            let message = format!("{error:#}");
            if message.contains("evaluating rule") {
                return Some(format!("{}: a rule failed to evaluate instead of speaking: {message}", case.case));
            }
            (!(message.contains(case.field) && message.contains(case.says))).then(|| {
                format!("{}: the message does not name {:?} with {:?}: {message}", case.case, case.field, case.says)
            })
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_the_in_cluster_webhook_refuses_are_refused_by_the_api_server_naming_the_field() {
    let s = Scope::new("refused-pools").await;
    let _p = s.provider();
    let mut wrong = Vec::new();
    for (n, case) in refused_specs().iter().enumerate() {
        let namespaced = s.pool(&format!("bad-{n}"), case.spec.clone()).await;
        wrong.extend(names_the_field(case, namespaced));
        let global = s.global_pool(&s.global_name(&format!("bad-{n}")), case.spec.clone()).await;
        wrong.extend(names_the_field(case, global).map(|w| format!("global {w}")));
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn valid_pools_are_accepted_and_ready() {
    let s = Scope::new("valid-pools").await;
    let _p = s.provider();
    let valid = [
        // The in-cluster provider's README examples, as written there (`exclude` is not a field
        // of the pool and is dropped).
        ("readme", json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "gateway": "10.0.0.1"})),
        (
            "readme-mixed-entries",
            json!({
                "addresses": ["10.0.0.0/24", "10.0.1.10-10.0.1.100", "10.0.2.1", "10.0.2.2"],
                "exclude": ["10.10.0.16/28", "10.10.0.242", "10.0.1.25-10.0.1.30"],
                "prefix": 22,
                "gateway": "10.0.0.1",
            }),
        ),
        (
            "readme-reserved",
            json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "gateway": "10.0.0.1", "allocateReservedIPAddresses": true}),
        ),
        (
            "excluded",
            json!({"addresses": ["10.0.0.0/24", "10.0.1.10-10.0.1.100"], "excludedAddresses": ["10.0.0.16/28", "10.0.1.25-10.0.1.30", "10.0.0.242"], "prefix": 22, "gateway": "10.0.0.1"}),
        ),
        (
            "ipv6",
            json!({"addresses": ["fd00:10::/64", "fd00:10::1:0-fd00:10::1:ff"], "prefix": 48, "gateway": "fd00:10::1", "excludedAddresses": ["fd00:10::5"]}),
        ),
        ("single-ip", json!({"addresses": ["192.168.9.9"], "prefix": 32, "allocateReservedIPAddresses": true})),
        // As in the in-cluster provider, a /32 is its own network and broadcast address: the
        // pool is valid but hands out nothing unless reserved addresses are allowed.
        ("single-ip-reserved", json!({"addresses": ["192.168.9.10"], "prefix": 32})),
        (
            "grace-period",
            json!({"addresses": ["10.9.0.10-10.9.0.20"], "prefix": 24, "addressReuseGracePeriodSeconds": 60}),
        ),
    ];
    for (name, spec) in &valid {
        if let Err(error) = s.pool(name, spec.clone()).await {
            panic!("pool {name} {spec} refused: {error:#}");
        }
    }
    // A global pool is seen by every scenario's provider: give it a range no other scenario uses.
    let global = s.global_name("readme");
    s.global_pool(&global, json!({"addresses": ["10.199.0.0/24"], "prefix": 24, "gateway": "10.199.0.1"}))
        .await
        .unwrap();
    for (name, _) in &valid {
        // The README examples share 10.0.0.0/24 in one namespace, so they also report the overlap.
        let accepted: &[(&str, &str)] = match *name {
            "single-ip-reserved" => &[("False", "NoAllocatableAddresses")],
            "readme" | "readme-mixed-entries" | "readme-reserved" | "excluded" => &[("True", "OverlapsOtherPools")],
            _ => &[("True", "Valid")],
        };
        s.eventually(&format!("pool {name} is one of {accepted:?}"), PROMPTLY, || async {
            s.pool_ready(name)
                .await
                .is_some_and(|(status, reason, _)| accepted.contains(&(status.as_str(), reason.as_str())))
        })
        .await
        .unwrap();
    }
    // The single-IP /32 pool hands out its one address.
    s.claim("c", IN_CLUSTER, "single-ip").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "192.168.9.9");
    s.global_pools().delete(&global, &DeleteParams::default()).await.unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn update_that_makes_a_valid_pool_invalid_is_refused() {
    let s = Scope::new("refused-update").await;
    let _p = s.provider();
    let spec = json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"});
    s.pool("pool", spec.clone()).await.unwrap();
    s.claim("c", IN_CLUSTER, "pool").await.unwrap();
    s.wait_allocated("c", PROMPTLY).await.unwrap();
    let updates = [
        (json!({"addresses": []}), "spec.addresses", "spec.addresses is required"),
        (json!({"addresses": ["10.0.0.10-10.0.0.20", "fd00::1"]}), "spec.addresses", "mixed IP families"),
        (json!({"addresses": ["10.0.0.10-10.0.0.20", "bogus"]}), "spec.addresses[1]", ENTRY),
        (json!({"prefix": 40}), "spec.prefix", "provided prefix is not valid"),
        (json!({"prefix": -1}), "spec.prefix", "greater than or equal to 0"),
        (json!({"prefix": 28}), "spec.addresses", "different subnet"),
        (json!({"gateway": "fd00::1"}), "spec.gateway", "mixed IP families"),
        (json!({"excludedAddresses": ["fd00::1"]}), "spec.excludedAddresses", "mixed IP families"),
        (
            json!({"addressReuseGracePeriodSeconds": -5}),
            "spec.addressReuseGracePeriodSeconds",
            "greater than or equal to 0",
        ),
    ];
    let mut wrong = Vec::new();
    for (patch, field, says) in &updates {
        let result = s.pools().patch("pool", &PatchParams::default(), &Patch::Merge(json!({"spec": patch}))).await;
        match result {
            Ok(_) => wrong.push(format!("{patch}: accepted")),
            Err(error) => {
                let message = error.to_string();
                if !(message.contains(field) && message.contains(says)) || message.contains("evaluating rule") {
                    wrong.push(format!("{patch}: the message does not name {field:?} with {says:?}: {message}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    let stored = serde_json::to_value(s.pools().get("pool").await.unwrap().spec).unwrap();
    assert_eq!(stored, spec, "the pool is unchanged");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// The pool's `Ready` condition once it has `reason`.
pub(crate) async fn wait_pool_reason(s: &Scope, pool: &str, reason: &str) -> Readiness {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    loop {
        let ready = s.pool_ready(pool).await;
        if let Some(ready) = ready.clone().filter(|(_, r, _)| r == reason) {
            return ready;
        }
        assert!(tokio::time::Instant::now() < deadline, "pool {pool} never got reason {reason}; Ready is {ready:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The note of a Warning Event about the pool with `reason`.
pub(crate) async fn wait_pool_event(s: &Scope, pool: &str, reason: &str) -> String {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    loop {
        let events = s.events_about(IN_CLUSTER, pool).await.unwrap();
        if let Some((_, _, note)) = events.iter().find(|(kind, r, _)| kind == "Warning" && r == reason) {
            return note.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Warning Event {reason} about pool {pool}; its Events: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pool_shrunk_below_its_allocated_addresses_reports_them_and_keeps_them() {
    let s = Scope::new("shrunk-pool").await;
    let _p = s.provider();
    s.pool("pool", json!({"addresses": ["10.0.0.10-10.0.0.13"], "prefix": 24, "gateway": "10.0.0.1"})).await.unwrap();
    for name in ["a", "b"] {
        s.claim(name, IN_CLUSTER, "pool").await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    let before = s.address_map().await.unwrap();
    assert_eq!(before["a"], "10.0.0.10");
    assert_eq!(before["b"], "10.0.0.11");

    // Dropping the addresses in use is no error the API server can see: it is accepted, and
    // reported on the pool.
    s.pools()
        .patch("pool", &PatchParams::default(), &Patch::Merge(json!({"spec": {"addresses": ["10.0.0.12-10.0.0.14"]}})))
        .await
        .unwrap();
    let (_, _, message) = wait_pool_reason(&s, "pool", "AddressesOutOfRange").await;
    assert!(message.contains("10.0.0.10") && message.contains("10.0.0.11"), "{message}");
    let note = wait_pool_event(&s, "pool", "AddressesOutOfRange").await;
    assert!(note.contains("10.0.0.10"), "{note}");
    s.eventually("status counts them out of range", PROMPTLY, || async {
        let status = s.pools().get("pool").await.unwrap().status;
        status.and_then(|st| st.ip_addresses).is_some_and(|c| c.out_of_range == 2 && c.used == 2)
    })
    .await
    .unwrap();

    // The addresses stay allocated to their claims, and a new claim gets one of the new range.
    s.claim("c", IN_CLUSTER, "pool").await.unwrap();
    assert_eq!(s.wait_allocated("c", PROMPTLY).await.unwrap().spec.address, "10.0.0.12");
    s.stays("the out-of-range addresses stay with their claims", A_WHILE, || async {
        let now = s.address_map().await.unwrap();
        now.get("a") == before.get("a")
            && now.get("b") == before.get("b")
            && s.claim_ready("a").await.is_some_and(|(st, _, _)| st == "True")
    })
    .await
    .unwrap();

    // Growing the pool back over them hands them out to nobody else.
    s.pools()
        .patch("pool", &PatchParams::default(), &Patch::Merge(json!({"spec": {"addresses": ["10.0.0.10-10.0.0.14"]}})))
        .await
        .unwrap();
    wait_pool_reason(&s, "pool", "Valid").await;
    for name in ["d", "e"] {
        s.claim(name, IN_CLUSTER, "pool").await.unwrap();
    }
    let mut got: Vec<String> = Vec::new();
    for name in ["d", "e"] {
        got.push(s.wait_allocated(name, PROMPTLY).await.unwrap().spec.address);
    }
    got.sort();
    assert_eq!(got, ["10.0.0.13", "10.0.0.14"]);
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
