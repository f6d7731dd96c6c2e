use std::collections::BTreeMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn reference(kind: &str, name: &str) -> PoolReference {
    PoolReference { api_group: Some("ipam.cluster.x-k8s.io".into()), kind: kind.into(), name: name.into() }
}

const VSPHERE: &str = "infrastructure-vsphere";

#[test]
fn reserved_names_of_either_kind_ask_for_a_purpose() {
    assert_eq!(Purpose::of_reference(&reference("GlobalInClusterIPPool", "cluster-api-vips")), Some(Purpose::Vip));
    assert_eq!(Purpose::of_reference(&reference("InClusterIPPool", "cluster-api-vm-ips")), Some(Purpose::VmIp));
    assert_eq!(Purpose::of_reference(&reference("InClusterIPPool", "nodes")), None);
    let foreign = PoolReference { api_group: Some("ipam.metal3.io".into()), ..reference("IPPool", "cluster-api-vips") };
    assert_eq!(Purpose::of_reference(&foreign), None);
}

#[test]
fn namespaced_pools_of_the_claims_namespace_come_first_by_name() {
    let vip = labels(&[(VIPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let b = PoolKey::in_cluster("team", "b");
    let a = PoolKey::in_cluster("team", "a");
    let elsewhere = PoolKey::in_cluster("other", "c");
    let global = PoolKey::global("g");
    let pools = [(&b, &vip), (&elsewhere, &vip), (&global, &vip), (&a, &vip)];
    let found = candidates(Purpose::Vip, "team", Some(VSPHERE), pools);
    assert_eq!(found.namespaced, vec![a.clone(), b.clone()]);
    assert_eq!(found.global, vec![global.clone()]);
    // No overflow label: the global pool is not in the order, and the message says why.
    assert_eq!(found.order(), vec![&a, &b]);
    assert_eq!(found.blocked_global(), [global]);
}

#[test]
fn global_pools_serve_when_the_namespace_has_none() {
    let vip = labels(&[(VIPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let (g2, g1) = (PoolKey::global("g2"), PoolKey::global("g1"));
    let found = candidates(Purpose::Vip, "team", None, [(&g2, &vip), (&g1, &vip)]);
    assert_eq!(found.order(), vec![&g1, &g2]);
    assert!(found.blocked_global().is_empty());
}

#[test]
fn overflow_label_on_a_namespaced_pool_opens_the_global_ones() {
    let local =
        labels(&[(VM_IPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true"), (ALLOW_OVERFLOW_VM_IPS_LABEL, "true")]);
    let global = labels(&[(VM_IPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let (n, g) = (PoolKey::in_cluster("team", "n"), PoolKey::global("g"));
    let found = candidates(Purpose::VmIp, "team", None, [(&g, &global), (&n, &local)]);
    assert_eq!(found.order(), vec![&n, &g]);
    // The VIP overflow label does not open VM-IP overflow.
    let wrong =
        labels(&[(VM_IPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true"), (ALLOW_OVERFLOW_VIPS_LABEL, "true")]);
    let found = candidates(Purpose::VmIp, "team", None, [(&g, &global), (&n, &wrong)]);
    assert_eq!(found.order(), vec![&n]);
}

#[test]
fn a_pool_serves_its_own_provider_unless_it_allows_all() {
    let scoped = labels(&[(VIPS_LABEL, "true"), (PROVIDER_LABEL, VSPHERE)]);
    let open = labels(&[(VIPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let unscoped = labels(&[(VIPS_LABEL, "true")]);
    let (s, o, u) = (PoolKey::global("scoped"), PoolKey::global("open"), PoolKey::global("unscoped"));
    let pools = [(&s, &scoped), (&o, &open), (&u, &unscoped)];
    let vsphere = candidates(Purpose::Vip, "team", Some(VSPHERE), pools);
    assert_eq!(vsphere.global, vec![o.clone(), s.clone()]);
    let ionos = candidates(Purpose::Vip, "team", Some("infrastructure-ionoscloud"), pools);
    assert_eq!(ionos.global, vec![o.clone()]);
    assert_eq!(ionos.refused.iter().map(|r| &r.pool).collect::<Vec<_>>(), vec![&s, &u]);
    let message = no_pool_message(Purpose::Vip, "team", Some("infrastructure-ionoscloud"), &ionos);
    assert!(message.contains("serves only infrastructure-vsphere"), "{message}");
    assert!(message.contains(ALLOW_ALL_PROVIDERS_LABEL), "{message}");
}

#[test]
fn pools_without_the_purpose_label_or_with_it_false_are_ignored() {
    let vm_only = labels(&[(VM_IPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let off = labels(&[(VIPS_LABEL, "false"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let both = labels(&[(VIPS_LABEL, "True"), (VM_IPS_LABEL, "true"), (ALLOW_ALL_PROVIDERS_LABEL, "true")]);
    let (a, b, c) = (PoolKey::global("a"), PoolKey::global("b"), PoolKey::global("c"));
    let found = candidates(Purpose::Vip, "team", None, [(&a, &vm_only), (&b, &off), (&c, &both)]);
    assert_eq!(found.order(), vec![&c]);
    assert!(found.refused.is_empty());
}

#[test]
fn exhaustion_names_the_event_by_what_is_short() {
    assert_eq!(Purpose::Vip.exhausted_reason(false), "out-of-vips");
    assert_eq!(Purpose::VmIp.exhausted_reason(false), "out-of-vm-ips");
    assert_eq!(Purpose::VmIp.exhausted_reason(true), "out-of-vips-and-vm-ips");
}
