//! The pool CRD's CEL rules, evaluated locally (no API server): every case of the in-cluster
//! webhook's table that CEL can express is refused with a message naming the field, and valid
//! pools pass. The e2e suite checks the same cases against a real API server.

use ferro_ipam::api::crdgen;
use serde_json::{Value, json};

#[path = "support/cel.rs"]
mod cel;

/// The messages of every rule the spec breaks.
fn refusals(spec: Value) -> Vec<String> {
    cel::messages(&cel::schema(&crdgen::in_cluster_ip_pool()), &cel::pool("InClusterIPPool", spec), None)
}

fn assert_refused(spec: Value, expected: &str) {
    let messages = refusals(spec.clone());
    assert!(
        messages.iter().any(|m| m.contains(expected)),
        "spec {spec} should be refused with {expected:?}, got {messages:?}"
    );
}

#[test]
fn valid_pools_pass() {
    for spec in [
        json!({"addresses": ["10.0.0.10", "10.0.0.24-10.0.0.32", "10.0.0.128/28"], "prefix": 24, "gateway": "10.0.0.1"}),
        json!({"addresses": ["10.0.0.0/24"], "prefix": 24}),
        json!({"addresses": ["fd00::10-fd00::20"], "prefix": 64, "gateway": "fd00::1", "excludedAddresses": ["fd00::15"]}),
        json!({"addresses": ["10.0.0.5/24"], "prefix": 16, "excludedAddresses": ["10.0.0.7", "10.0.0.8-10.0.0.9", "10.0.0.64/30"]}),
        json!({"addresses": ["192.168.1.1"], "prefix": 32}),
        json!({"addresses": ["10.0.0.2-10.0.0.9"], "prefix": 24, "gateway": ""}),
    ] {
        assert_eq!(refusals(spec.clone()), Vec::<String>::new(), "spec {spec} should pass");
    }
}

#[test]
fn empty_addresses_are_refused() {
    assert_refused(json!({"addresses": [], "prefix": 24}), "spec.addresses is required");
}

#[test]
fn entries_that_are_not_ip_range_or_cidr_are_refused_and_named() {
    let bad = "must be an IP address, a range a-b of two addresses of one family, or a CIDR";
    for (addresses, index) in [
        (json!(["10.0.0.300"]), 0),
        (json!(["10.0.0.1", "not-an-ip"]), 1),
        (json!(["10.0.0.1-fd00::1"]), 0),
        (json!(["10.0.0.1-10.0.0.2-10.0.0.3"]), 0),
    ] {
        assert_refused(json!({"addresses": addresses, "prefix": 24}), &format!("spec.addresses[{index}]: {bad}"));
    }
}

#[test]
fn mixed_families_in_addresses_are_refused() {
    assert_refused(
        json!({"addresses": ["10.0.0.1", "fd00::1"], "prefix": 24}),
        "spec.addresses: provided addresses are of mixed IP families",
    );
}

#[test]
fn gateway_of_the_other_family_or_not_an_ip_is_refused() {
    assert_refused(
        json!({"addresses": ["10.0.0.2"], "prefix": 24, "gateway": "fd00::1"}),
        "spec.gateway: provided gateway and addresses are of mixed IP families",
    );
    assert_refused(
        json!({"addresses": ["10.0.0.2"], "prefix": 24, "gateway": "gw"}),
        "spec.gateway: provided gateway is not a valid IP address",
    );
}

#[test]
fn bad_or_mixed_excluded_addresses_are_refused() {
    assert_refused(
        json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.x"]}),
        "spec.excludedAddresses[0]: must be an IP address",
    );
    assert_refused(
        json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.1", "fd00::1"]}),
        "spec.excludedAddresses: provided addresses are of mixed IP families",
    );
    assert_refused(
        json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["fd00::1"]}),
        "addresses and excluded addresses are of mixed IP families",
    );
}

#[test]
fn prefix_too_long_for_ipv4_is_refused() {
    assert_refused(json!({"addresses": ["10.0.0.2"], "prefix": 33}), "spec.prefix: provided prefix is not valid");
}

#[test]
fn entries_outside_the_subnet_of_the_lowest_address_are_refused() {
    assert_refused(json!({"addresses": ["10.0.0.2", "10.0.1.2"], "prefix": 24}), "belongs to a different subnet");
    assert_refused(json!({"addresses": ["10.0.0.250-10.0.1.5"], "prefix": 24}), "belongs to a different subnet");
    assert_refused(json!({"addresses": ["10.0.0.0/23"], "prefix": 24}), "belongs to a different subnet");
    assert_refused(json!({"addresses": ["fd00::1", "fd01::1"], "prefix": 64}), "belongs to a different subnet");
}

#[test]
fn a_broken_entry_is_reported_once_not_by_every_rule() {
    let messages = refusals(json!({"addresses": ["bogus"], "prefix": 24, "gateway": "10.0.0.1"}));
    assert_eq!(messages.len(), 1, "{messages:?}");
}

#[test]
fn dual_stack_pools_pass_when_the_second_family_is_the_other_one() {
    let spec = json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1",
        "dualStack": {"addresses": ["fd00::10-fd00::20"], "prefix": 64, "gateway": "fd00::1"}});
    assert_eq!(refusals(spec), Vec::<String>::new());
}

#[test]
fn dual_stack_block_follows_the_same_rules_naming_its_own_fields() {
    let base = |dual: Value| json!({"addresses": ["10.0.0.10"], "prefix": 24, "dualStack": dual});
    assert_refused(
        base(json!({"addresses": ["10.0.1.1"], "prefix": 24})),
        "spec.dualStack.addresses must be of the other IP family",
    );
    assert_refused(
        base(json!({"addresses": ["fd00::1"], "prefix": 64, "gateway": "10.0.0.1"})),
        "spec.dualStack.gateway",
    );
    assert_refused(
        base(json!({"addresses": ["fd00::1", "fd01::1"], "prefix": 64})),
        "spec.dualStack.addresses: provided address belongs to a different subnet",
    );
    assert_refused(
        base(json!({"addresses": ["fd00::zz"], "prefix": 64})),
        "spec.dualStack.addresses[0]: must be an IP address",
    );
}

#[test]
fn prefix_outside_the_schema_range_gets_no_second_error_from_the_subnet_rule() {
    // The schema refuses 129 (the API server checks it); no CEL rule adds an error of its own.
    assert_eq!(refusals(json!({"addresses": ["fd00::1"], "prefix": 129})), Vec::<String>::new());
    assert_eq!(refusals(json!({"addresses": ["fd00::1"], "prefix": -1})), Vec::<String>::new());
}

const BACKWARDS: &str = "provided range ends before it starts: write the lower address first";

#[test]
fn backwards_ipv4_ranges_are_refused_in_either_list_naming_the_entry() {
    assert_refused(
        json!({"addresses": ["10.0.0.5", "10.0.0.20-10.0.0.10"], "prefix": 24}),
        &format!("spec.addresses[1]: {BACKWARDS}"),
    );
    // Each octet counts by its weight: .2.1 lies above .1.255 although "1" < "255".
    assert_refused(json!({"addresses": ["10.0.2.1-10.0.1.255"], "prefix": 16}), BACKWARDS);
    assert_refused(
        json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "excludedAddresses": ["10.0.0.9-10.0.0.8"]}),
        &format!("spec.excludedAddresses[0]: {BACKWARDS}"),
    );
    assert_refused(
        json!({"addresses": ["fd00::1"], "prefix": 64, "dualStack": {"addresses": ["10.0.0.9-10.0.0.2"], "prefix": 24}}),
        &format!("spec.dualStack.addresses[0]: {BACKWARDS}"),
    );
}

#[test]
fn forward_ranges_and_equal_ends_pass_and_only_the_backwards_rule_speaks() {
    for addresses in [json!(["10.0.0.10-10.0.0.20"]), json!(["10.0.0.10-10.0.0.10"]), json!(["10.0.1.255-10.0.2.1"])] {
        let spec = json!({"addresses": addresses, "prefix": 16});
        assert_eq!(refusals(spec.clone()), Vec::<String>::new(), "spec {spec} should pass");
    }
    let messages = refusals(json!({"addresses": ["10.0.0.20-10.0.0.10"], "prefix": 24}));
    assert_eq!(messages.len(), 1, "{messages:?}");
}

#[test]
fn backwards_ipv6_ranges_pass_the_crd_and_are_left_to_the_pool_condition() {
    assert_eq!(refusals(json!({"addresses": ["fd00::9-fd00::2"], "prefix": 64})), Vec::<String>::new());
}

#[test]
fn entries_the_backwards_rule_cannot_read_are_left_to_the_entry_rule() {
    for entry in ["10.0.0.300-10.0.0.1", "10.0.0.1-", "x-y", "10.0.0.9-fd00::1"] {
        let messages = refusals(json!({"addresses": [entry], "prefix": 24}));
        assert!(!messages.iter().any(|m| m.contains(BACKWARDS)), "{entry}: {messages:?}");
        assert!(!messages.is_empty(), "{entry} must be refused by the entry rule");
    }
}
