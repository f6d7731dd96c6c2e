//! Admission against parsing, differentially: every IP pool spec that the CEL rules of the CRDs
//! (as committed under `crds/`) admit is one the allocator builds, or one the pool controller
//! reports `Ready=False` for with a message naming the entry, for the one gap the CRD documents
//! (an IPv6 range written backwards, which CEL's 64-bit integers cannot compare). Specs come from
//! proptest: both families, single addresses, ranges either way round, CIDRs aligned or not,
//! prefixes at and past their edges, gateways good and bad, excluded entries and dual-stack
//! blocks. The rules that refuse the other specs are tallied, so that a generator that stops
//! reaching one side shows up as a failure rather than as a test that proves nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;

use ferro_ipam::api::IPPoolSpec;
use ferro_ipam::index::PoolSpec;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::{CompiledSchema, Validator, compile_schema};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

#[path = "support/cel.rs"]
#[expect(dead_code, reason = "the schemas are compiled once here, so `messages` (which compiles per call) goes unused")]
mod cel;

/// The `v1alpha2` schema of a CRD file under `crds/`, compiled once.
fn committed_schema(file: &str) -> CompiledSchema {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {file}: {e}"));
    compile_schema(&cel::schema(&crd))
}

/// The messages of every rule `object` breaks.
fn refusals_of(validator: &Validator, schema: &CompiledSchema, object: &Value) -> Vec<String> {
    match validator.validate_compiled(schema, object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => {
            // The order of the rules' messages is not defined: sorted, the two kinds compare.
            let mut messages: Vec<String> = errors.into_vec().into_iter().map(|e| e.to_string()).collect();
            messages.sort();
            messages
        }
    }
}

/// Address number `n` of a family: `10.0.x.y` or `fd00::n`.
fn address(v6: bool, n: u32) -> String {
    if v6 { format!("fd00::{n:x}") } else { format!("10.0.{}.{}", n / 256 % 256, n % 256) }
}

/// One entry of `addresses` or `excludedAddresses`.
fn entry(v6: bool) -> impl Strategy<Value = String> {
    let n = 0u32..700;
    prop_oneof![
        4 => n.clone().prop_map(move |a| address(v6, a)),
        4 => (n.clone(), n.clone()).prop_map(move |(a, b)| format!("{}-{}", address(v6, a), address(v6, b))),
        2 => (n.clone(), prop::sample::select(if v6 { vec![112u8, 118, 120, 124, 127, 128] } else { vec![16u8, 22, 24, 28, 30, 31, 32] }))
            .prop_map(move |(a, len)| format!("{}/{len}", address(v6, a))),
        1 => n.prop_map(move |a| address(!v6, a)),
        1 => prop::sample::select(vec!["10.0.0.300".to_owned(), "fd00::g".to_owned(), "10.0.0.1-fd00::1".to_owned()]),
    ]
}

/// The prefixes worth trying for a family, its edges included (33 is past IPv4's).
fn prefix(v6: bool) -> impl Strategy<Value = i32> {
    prop::sample::select(if v6 {
        vec![0, 48, 64, 112, 120, 126, 127, 128]
    } else {
        vec![0, 8, 16, 22, 24, 30, 31, 32, 33]
    })
}

fn gateway(v6: bool) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(String::new())),
        3 => (0u32..700).prop_map(move |n| Some(address(v6, n))),
        1 => (0u32..700).prop_map(move |n| Some(address(!v6, n))),
        1 => Just(Some("gw".to_owned())),
    ]
}

/// One family's fields, as JSON.
fn family(v6: bool) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(entry(v6), 1..4),
        prefix(v6),
        gateway(v6),
        prop::option::of(prop::collection::vec(entry(v6), 0..3)),
    )
        .prop_map(|(addresses, prefix, gateway, excluded)| {
            let mut fields = json!({"addresses": addresses, "prefix": prefix});
            if let Some(gateway) = gateway {
                fields["gateway"] = json!(gateway);
            }
            if let Some(excluded) = excluded {
                fields["excludedAddresses"] = json!(excluded);
            }
            fields
        })
}

/// A whole spec: one family, sometimes a second one (usually the other family), sometimes
/// `allocateReservedIPAddresses`.
fn spec() -> impl Strategy<Value = Value> {
    any::<bool>().prop_flat_map(|v6| {
        let second = prop_oneof![3 => Just(None), 2 => family(!v6).prop_map(Some), 1 => family(v6).prop_map(Some)];
        (family(v6), second, prop::option::of(any::<bool>())).prop_map(|(mut spec, second, reserved)| {
            if let Some(second) = second {
                spec["dualStack"] = second;
            }
            if let Some(reserved) = reserved {
                spec["allocateReservedIPAddresses"] = json!(reserved);
            }
            spec
        })
    })
}

/// The rule a refusal came from, without the entry's index, for the tally.
fn rule_of(message: &str) -> String {
    let text = message.split_once(": ").map_or(message, |(_, rest)| rest);
    text.chars().take(90).collect()
}

/// What the builder's error must be when CEL admitted the spec: the documented gap (the quoted
/// entry an IPv6 range), naming its field the way the pool's `Ready=False` message quotes it.
fn is_the_documented_gap(error: &str) -> bool {
    let entry = error.split('"').nth(1).unwrap_or_default();
    error.starts_with("spec.")
        && error.contains("is not a valid range: it ends before it starts")
        && entry.contains(':')
}

#[test]
fn every_ip_pool_spec_the_crd_admits_is_built_or_reported_with_a_message_naming_its_entry() {
    let schemas = [
        ("InClusterIPPool", committed_schema("inclusterippools.ipam.cluster.x-k8s.io.yaml")),
        ("GlobalInClusterIPPool", committed_schema("globalinclusterippools.ipam.cluster.x-k8s.io.yaml")),
    ];
    let validator = Validator::new();
    let refusals: RefCell<BTreeMap<String, usize>> = RefCell::default();
    let (admitted, gaps) = (RefCell::new(0usize), RefCell::new(0usize));
    let mut runner = TestRunner::new(Config { cases: 512, failure_persistence: None, ..Config::default() });
    let outcome = runner.run(&spec(), |spec| {
        let verdicts: Vec<Vec<String>> = schemas
            .iter()
            .map(|(kind, schema)| refusals_of(&validator, schema, &cel::pool(kind, spec.clone())))
            .collect();
        prop_assert_eq!(&verdicts[0], &verdicts[1], "both kinds share their spec rules");
        if !verdicts[0].is_empty() {
            for message in &verdicts[0] {
                *refusals.borrow_mut().entry(rule_of(message)).or_default() += 1;
            }
            return Ok(());
        }
        *admitted.borrow_mut() += 1;
        let parsed: IPPoolSpec = serde_json::from_value(spec.clone())
            .map_err(|e| TestCaseError::fail(format!("admitted spec {spec} does not deserialize: {e}")))?;
        if let Err(error) = PoolSpec::from(&parsed).allocators() {
            prop_assert!(is_the_documented_gap(&error), "CEL admitted {} but the builder refuses it: {}", spec, error);
            *gaps.borrow_mut() += 1;
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let refusals = refusals.into_inner();
    eprintln!(
        "admitted {}, of which the documented gap {}; refusals by rule: {refusals:#?}",
        admitted.borrow(),
        gaps.borrow()
    );
    assert!(*admitted.borrow() >= 30, "the generator must reach admitted specs, got {}", admitted.borrow());
    for rule in ["mixed IP families", "different subnet", "prefix is not valid", "must be an IP address"] {
        assert!(
            refusals.keys().any(|k| k.contains(rule)),
            "no generated spec was refused by the rule {rule:?}: {refusals:#?}"
        );
    }
}
