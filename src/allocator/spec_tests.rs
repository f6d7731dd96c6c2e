//! Validation (the in-cluster webhook's rules) and the allocatable set (the in-cluster
//! provider's `PoolSpecToIPSet` cases, with its counts).

use super::*;
use crate::allocator::test_support::{allocatable, def};
use crate::fixtures::ip;

fn addresses(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

#[test]
fn empty_addresses_are_refused() {
    assert_eq!(def(&[], 24).error(), SpecError::NoAddresses);
    assert!(SpecError::NoAddresses.to_string().starts_with("addresses is empty"));
}

#[test]
fn a_bad_entry_is_named_by_field_and_index() {
    let error = def(&["10.0.0.1", "10.0.0.2", "10.0.0.300"], 24).error();
    assert_eq!(error.to_string(), "addresses[2] \"10.0.0.300\" is not an IP address, a range a-b, or a CIDR");
    let error = def(&["10.0.0.0/24"], 24).excluding(&["10.0.0.9-10.0.0.1"]).error();
    assert!(matches!(error, SpecError::BadEntry { field: SpecField::ExcludedAddresses, index: 0, .. }));
    assert!(error.to_string().starts_with("excludedAddresses[0] \"10.0.0.9-10.0.0.1\""));
}

#[test]
fn mixed_families_are_refused_in_addresses_gateway_and_excluded() {
    let error = def(&["10.0.0.1", "fd00::1"], 24).error();
    assert_eq!(
        error.to_string(),
        "addresses[1] \"fd00::1\" is IPv6 but addresses[0] is IPv4: all addresses of a pool \
         must be of one family"
    );
    let error = def(&["10.0.0.1"], 24).gateway("fd00::1").error();
    assert!(matches!(error, SpecError::GatewayFamily { .. }), "{error}");
    let error = def(&["10.0.0.1"], 24).excluding(&["10.0.0.2", "fd00::1"]).error();
    assert!(matches!(error, SpecError::ExcludedFamily { index: 1, .. }), "{error}");
    let error = def(&["10.0.0.1"], 24).gateway("10.0.0.256").error();
    assert!(matches!(error, SpecError::BadGateway { .. }), "{error}");
}

#[test]
fn prefix_must_fit_the_family() {
    assert_eq!(def(&["10.0.0.1"], 33).error(), SpecError::PrefixTooLong { prefix: 33, family: Family::V4 });
    assert!(def(&["fd00::1"], 129).error().to_string().contains("use 0 to 128"));
    let _ = def(&["fd00::1"], 128).pool();
    let _ = def(&["10.0.0.1"], 32).pool();
}

#[test]
fn every_entry_must_lie_in_the_lowest_addresses_subnet() {
    let error = def(&["10.0.1.0/24", "10.0.0.10"], 24).error();
    assert_eq!(
        error.to_string(),
        "addresses[0] \"10.0.1.0/24\" is outside 10.0.0.0/24, the subnet of the lowest address \
         with prefix 24: shorten the prefix or move the entry into it"
    );
    let _ = def(&["10.0.1.0/24", "10.0.0.10"], 23).pool();
    // Excluded entries and the gateway are not checked, as in the in-cluster webhook.
    let _ = def(&["10.0.0.10"], 24).excluding(&["192.168.0.0/16"]).gateway("10.9.9.9").pool();
}

#[test]
fn empty_gateway_means_no_gateway() {
    let pool = def(&["10.0.0.1-10.0.0.3"], 24).gateway("").pool();
    assert_eq!(pool.gateway(), None);
    assert_eq!(pool.counts().total, 3);
}

#[test]
fn prefix_zero_reserves_the_whole_spaces_ends_only() {
    let pool = def(&["192.168.0.3-192.168.0.10"], 0).gateway("192.168.0.1").pool();
    assert_eq!(pool.counts().total, 8);
}

#[test]
fn single_ranges_and_cidrs_combine_with_the_gateway_outside() {
    let pool = def(&["192.168.0.2", "192.168.0.3-192.168.0.4", "192.168.0.6/31"], 24).gateway("192.168.0.1").pool();
    assert_eq!(
        allocatable(&pool),
        addresses(&["192.168.0.2", "192.168.0.3", "192.168.0.4", "192.168.0.6", "192.168.0.7"])
    );
}

#[test]
fn ipv4_network_address_is_reserved_unless_allocate_reserved() {
    let d = def(&["192.168.0.0", "192.168.0.3-192.168.0.4", "192.168.0.6/31"], 24).gateway("192.168.0.1");
    assert_eq!(d.pool().check(ip("192.168.0.0")), Err(NotInPool::Reserved));
    assert_eq!(d.pool().counts().total, 4);
    assert_eq!(d.reserved_allowed().pool().counts().total, 5);
}

#[test]
fn ipv4_broadcast_is_reserved_unless_allocate_reserved() {
    let d = def(&["192.168.1.0", "192.168.0.255", "192.168.0.3-192.168.0.4", "192.168.0.6/31", "192.168.255.255"], 16)
        .gateway("192.168.0.1");
    let pool = d.pool();
    assert_eq!(pool.check(ip("192.168.1.0")), Ok(()));
    assert_eq!(pool.check(ip("192.168.0.255")), Ok(()));
    assert_eq!(pool.check(ip("192.168.255.255")), Err(NotInPool::Reserved));
    assert_eq!(pool.counts().total, 6);
    assert_eq!(d.reserved_allowed().pool().check(ip("192.168.255.255")), Ok(()));
}

#[test]
fn the_gateway_is_never_allocatable_even_with_allocate_reserved() {
    let d = def(&["192.168.0.0", "192.168.0.1", "192.168.0.3-192.168.0.4", "192.168.0.6/31", "192.168.0.255"], 24)
        .gateway("192.168.0.1");
    assert_eq!(d.pool().counts().total, 4);
    let pool = d.reserved_allowed().pool();
    assert_eq!(pool.check(ip("192.168.0.1")), Err(NotInPool::Gateway));
    assert_eq!(
        allocatable(&pool),
        addresses(&["192.168.0.0", "192.168.0.3", "192.168.0.4", "192.168.0.6", "192.168.0.7", "192.168.0.255"])
    );
}

#[test]
fn excluded_singles_ranges_and_subnets_are_removed() {
    let d = def(&["192.168.0.0-192.168.0.10"], 24).gateway("192.168.0.1");
    let pool = d.clone().excluding(&["192.168.0.5", "192.168.0.6", "192.168.0.7"]).pool();
    assert_eq!(
        allocatable(&pool),
        addresses(&["192.168.0.2", "192.168.0.3", "192.168.0.4", "192.168.0.8", "192.168.0.9", "192.168.0.10"])
    );
    assert_eq!(pool.check(ip("192.168.0.6")), Err(NotInPool::Excluded));
    assert_eq!(pool.check(ip("192.168.0.11")), Err(NotInPool::Outside));

    let whole = def(&["192.168.0.0/24"], 24).gateway("192.168.0.1");
    assert_eq!(whole.clone().excluding(&["192.168.0.128/25"]).pool().counts().total, 126);
    assert_eq!(whole.excluding(&["192.168.0.2-192.168.0.20"]).pool().counts().total, 234);
}

#[test]
fn ipv6_reserves_the_subnet_anycast_address_but_has_no_broadcast() {
    let d = def(&["fd01::2", "fd01::3-fd01::4", "fd01::6/127"], 120).gateway("fd01::1");
    assert_eq!(d.pool().counts().total, 5);
    let with_anycast = def(&["fd01::0", "fd01::3-fd01::4", "fd01::6/127"], 120).gateway("fd01::1");
    assert_eq!(with_anycast.pool().check(ip("fd01::")), Err(NotInPool::Reserved));
    assert_eq!(with_anycast.pool().counts().total, 4);
    // The last address of the subnet (fd01::/96 here) is allocatable: IPv6 has no broadcast.
    let top =
        def(&["fd01::ffff", "fd01::1:0", "fd01::3-fd01::4", "fd01::6/127", "fd01::ffff:ffff"], 96).gateway("fd01::1");
    assert_eq!(top.pool().check(ip("fd01::ffff:ffff")), Ok(()));
    assert_eq!(top.pool().counts().total, 7);
    let gateway_listed = def(&["fd01::1", "fd01::3-fd01::4", "fd01::6/127"], 120).gateway("fd01::1");
    assert_eq!(gateway_listed.pool().counts().total, 4);
    let all = def(&["fd01::0", "fd01::1", "fd01::3-fd01::4", "fd01::6/127", "fd01::ffff:ffff"], 120).gateway("fd01::1");
    // fd01::ffff:ffff lies outside fd01::/120: refused like the in-cluster webhook would.
    assert!(matches!(all.error(), SpecError::OutsideSubnet { index: 4, .. }));
}

#[test]
fn reserved_addresses_come_from_the_lowest_address_subnet_not_each_entry() {
    // The subnet is 10.0.0.0/16 (from 10.0.0.10): 10.0.1.0 and 10.0.0.255 stay allocatable.
    let pool = def(&["10.0.1.0", "10.0.0.255", "10.0.0.10"], 16).pool();
    assert_eq!(pool.counts().total, 3);
}
