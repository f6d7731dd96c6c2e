//! Preflight's look at the in-cluster provider's leader Lease, against a scripted API server:
//! held, absent, and unreadable, each in the findings, the report and the exit status.

use http::Method;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::findings::Findings;
use super::other_provider::read;
use super::{CLEAN, FAILED, Inventory, PROBLEMS, analyse, text};
use crate::api::CapiVersion;
use crate::controller::mock_api::{Expect, MockApi};
use crate::other_provider::IN_CLUSTER_LEASE;

const LEASE_PATH: &str =
    "/apis/coordination.k8s.io/v1/namespaces/capi-ipam-in-cluster-system/leases/7bb7acb4.ipam.cluster.x-k8s.io";

fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("a time")
}

/// The findings of an empty, clean cluster once the Lease has been read with `answer`.
async fn findings_with_lease(answer: Expect) -> Findings {
    let (client, mock) = MockApi::client(vec![answer]);
    let mut findings = analyse(&Inventory::empty(CapiVersion::V1Beta2), now());
    assert!(findings.clean, "{}", text(&findings));
    findings.check_lease(read(&client, IN_CLUSTER_LEASE, now()).await);
    mock.finish();
    findings
}

fn json_of(findings: &Findings) -> Value {
    serde_json::to_value(findings).expect("findings serialize")
}

#[tokio::test]
async fn a_lease_held_and_renewed_is_another_provider_running() {
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "7bb7acb4.ipam.cluster.x-k8s.io", "namespace": "capi-ipam-in-cluster-system"},
        "spec": {"holderIdentity": "in-cluster-manager-1", "leaseDurationSeconds": 15,
                 "renewTime": "2023-11-14T22:13:15.000000Z"},
    });
    let f = findings_with_lease(Expect::new(Method::GET, LEASE_PATH).answer(200, lease)).await;
    let other = f.other_provider.as_ref().expect("another provider");
    assert_eq!((other.lease.as_str(), other.holder.as_str()), (IN_CLUSTER_LEASE, "in-cluster-manager-1"));
    assert_eq!(f.other_provider_unchecked, None);
    assert!(!f.clean);
    assert_eq!(f.exit_status(), PROBLEMS);
    let report = text(&f);
    assert!(report.contains("Another IPAM provider is running"), "{report}");
    assert!(report.contains("Not clean: another IPAM provider is running"), "{report}");
    assert_eq!(json_of(&f)["otherProvider"]["holder"], "in-cluster-manager-1");
}

#[tokio::test]
async fn a_lease_that_does_not_exist_means_no_other_provider() {
    let f = findings_with_lease(Expect::new(Method::GET, LEASE_PATH).refuse(404, "NotFound")).await;
    assert_eq!((&f.other_provider, &f.other_provider_unchecked), (&None, &None));
    assert!(f.clean);
    assert_eq!(f.exit_status(), CLEAN);
    let json = json_of(&f);
    assert!(json.get("otherProvider").is_none() && json.get("otherProviderUnchecked").is_none(), "{json}");
    assert!(text(&f).contains("Clean:"), "{}", text(&f));
}

#[tokio::test]
async fn a_forbidden_lease_is_a_check_not_done_with_the_api_servers_message() {
    let message = "leases.coordination.k8s.io \"7bb7acb4.ipam.cluster.x-k8s.io\" is forbidden: User \"system:serviceaccount:ferro-ipam-preflight:preflight\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"capi-ipam-in-cluster-system\"";
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
                        "reason": "Forbidden", "message": message});
    let f = findings_with_lease(Expect::new(Method::GET, LEASE_PATH).answer(403, status)).await;
    assert_eq!(f.other_provider, None, "an unreadable Lease is not a provider either");
    let unchecked = f.other_provider_unchecked.as_ref().expect("the check is reported as not done");
    assert_eq!(unchecked.lease, IN_CLUSTER_LEASE);
    assert_eq!(unchecked.error, format!("{message} (403 Forbidden)"));
    assert!(!f.clean, "a check not done is no pass");
    assert_eq!(f.exit_status(), FAILED);
    let report = text(&f);
    assert!(report.contains("Not checked whether another IPAM provider is running"), "{report}");
    assert!(report.contains(message), "{report}");
    assert!(report.contains("get leases in capi-ipam-in-cluster-system"), "{report}");
    assert!(!report.contains("Clean:"), "{report}");
    let json = json_of(&f);
    assert_eq!(json["clean"], false);
    assert_eq!(json["otherProviderUnchecked"]["lease"], IN_CLUSTER_LEASE);
    assert_eq!(json["otherProviderUnchecked"]["error"], unchecked.error.as_str());
}

#[tokio::test]
async fn any_failed_read_but_not_found_is_a_check_not_done() {
    let f = findings_with_lease(Expect::new(Method::GET, LEASE_PATH).refuse(500, "InternalError")).await;
    assert!(f.other_provider_unchecked.as_ref().is_some_and(|u| u.error.contains("500")), "{f:?}");
    assert_eq!(f.exit_status(), FAILED);
}

#[test]
fn the_preflight_job_example_may_get_the_lease_preflight_reads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples/preflight-job.yaml");
    let text = std::fs::read_to_string(&path).expect("the example");
    let objects: Vec<Value> = serde_saphyr::from_multiple(&text).expect("the example's YAML");
    let (_, name) = IN_CLUSTER_LEASE.split_once('/').expect("NAMESPACE/NAME");
    let has = |list: &Value, item: &str| list.as_array().is_some_and(|l| l.iter().any(|v| v == item));
    let grants = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole")
        .flat_map(|o| o["rules"].as_array().cloned().unwrap_or_default())
        .any(|rule| {
            has(&rule["apiGroups"], "coordination.k8s.io")
                && has(&rule["resources"], "leases")
                && has(&rule["verbs"], "get")
                && (rule.get("resourceNames").is_none() || has(&rule["resourceNames"], name))
        });
    assert!(grants, "docs/examples/preflight-job.yaml does not let preflight get the Lease {IN_CLUSTER_LEASE}");
}
