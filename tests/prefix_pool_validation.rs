//! The prefix-pool CRD's CEL rules, evaluated locally (no API server): every case of the
//! in-cluster v1.1.0 prefix-pool webhook's table (`TestInClusterPrefixPoolInvalidScenarios`) is
//! refused with its message and the field named, its valid cases pass, and
//! `allocationPrefixLength` cannot change. The e2e suite checks the same against a real API
//! server.

use ferro_ipam::api::crdgen;
use serde_json::{Value, json};

#[path = "support/cel.rs"]
mod cel;

fn refusals(spec: Value, old: Option<Value>) -> Vec<String> {
    let kind = "InClusterPrefixPool";
    let old = old.map(|spec| cel::pool(kind, spec));
    cel::messages(&cel::schema(&crdgen::in_cluster_prefix_pool()), &cel::pool(kind, spec), old.as_ref())
}

fn assert_refused(spec: Value, expected: &str) {
    let messages = refusals(spec.clone(), None);
    assert!(
        messages.iter().any(|m| m.contains(expected)),
        "{spec} should be refused with {expected:?}, got {messages:?}"
    );
}

#[test]
fn the_webhooks_valid_cases_pass() {
    for spec in [
        json!({"prefixes": ["fd00::/64", "fd01::/64"]}),
        json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 56}),
        json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 96}),
        json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 128}),
        json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 64, "gateway": "fd00::1",
               "excludedPrefixes": ["fd00::5", "fd00:0:0:1::/64", "fd00:0:0:2::1-fd00:0:0:2::9"]}),
        json!({"prefixes": ["fd00::/62"], "gateway": ""}),
    ] {
        assert_eq!(refusals(spec.clone(), None), Vec::<String>::new(), "{spec} should pass");
    }
}

#[test]
fn the_webhooks_refusals_are_refused_with_its_words_naming_the_field() {
    for (spec, expected) in [
        (json!({"prefixes": []}), "spec.prefixes: prefixes is required"),
        (json!({"prefixes": ["fd00::1"]}), "spec.prefixes[0]: spec.prefixes: provided entry is not a valid IPv6 CIDR"),
        (
            json!({"prefixes": ["fd00::/64", "fd00::1/64"]}),
            "spec.prefixes[1]: spec.prefixes: CIDR must be network-aligned",
        ),
        (json!({"prefixes": ["fd00::/65"]}), "spec.prefixes: CIDR prefix length must be <= allocationPrefixLength"),
        (
            json!({"prefixes": ["fd00::/57"], "allocationPrefixLength": 56}),
            "CIDR prefix length must be <= allocationPrefixLength",
        ),
        (json!({"prefixes": ["10.0.0.0/24"]}), "spec.prefixes[0]: spec.prefixes: only IPv6 prefixes are supported"),
        (json!({"prefixes": ["fd00::/64"], "gateway": "10.0.0.1"}), "spec.gateway: provided gateway must be IPv6"),
        (
            json!({"prefixes": ["fd00::/64"], "gateway": "nope"}),
            "spec.gateway: provided gateway is not a valid IP address",
        ),
        (
            json!({"prefixes": ["fd00::/64"], "excludedPrefixes": ["10.0.0.1"]}),
            "spec.excludedPrefixes[0]: spec.excludedPrefixes: only IPv6 excluded prefixes are supported",
        ),
        (
            json!({"prefixes": ["fd00::/64"], "excludedPrefixes": ["nope"]}),
            "spec.excludedPrefixes: provided entry is not a valid IP, range, nor CIDR",
        ),
    ] {
        assert_refused(spec, expected);
    }
}

#[test]
fn an_entry_that_is_no_cidr_gets_only_its_own_message() {
    let messages = refusals(json!({"prefixes": ["nope"]}), None);
    assert_eq!(messages.len(), 1, "{messages:?}");
}

#[test]
fn allocation_prefix_length_is_immutable() {
    let old = json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 56});
    let messages = refusals(json!({"prefixes": ["fd00::/48"], "allocationPrefixLength": 64}), Some(old.clone()));
    assert!(messages.iter().any(|m| m.contains("spec.allocationPrefixLength is immutable")), "{messages:?}");
    let edited = json!({"prefixes": ["fd00::/48", "fd01::/48"], "allocationPrefixLength": 56, "gateway": "fd00::1"});
    assert_eq!(refusals(edited, Some(old)), Vec::<String>::new());
}
