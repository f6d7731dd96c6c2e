use super::*;
use crate::fixtures::ip;

fn bounds(entry: &str) -> (IpAddr, IpAddr) {
    let parsed = parse_entry(entry).unwrap();
    (parsed.first(), parsed.last())
}

#[test]
fn single_addresses_parse_in_both_families() {
    assert_eq!(bounds("10.0.0.1"), (ip("10.0.0.1"), ip("10.0.0.1")));
    assert_eq!(bounds("fd00::1"), (ip("fd00::1"), ip("fd00::1")));
    assert_eq!(parse_entry("fd00::1").unwrap().kind(), EntryKind::Single);
}

#[test]
fn ranges_include_both_ends_and_may_be_one_address() {
    assert_eq!(bounds("10.0.0.1-10.0.0.9"), (ip("10.0.0.1"), ip("10.0.0.9")));
    assert_eq!(bounds("fd00::1-fd00::1"), (ip("fd00::1"), ip("fd00::1")));
}

#[test]
fn cidr_with_host_bits_means_its_network() {
    let parsed = parse_entry("10.0.0.5/24").unwrap();
    assert_eq!((parsed.first(), parsed.last()), (ip("10.0.0.0"), ip("10.0.0.255")));
    assert_eq!(parsed.kind(), EntryKind::Cidr { prefix_len: 24 });
    assert_eq!(parsed.to_string(), "10.0.0.0/24");
    assert_eq!(bounds("fe80::1/126"), (ip("fe80::"), ip("fe80::3")));
    assert_eq!(bounds("::/0"), (ip("::"), ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
    assert_eq!(bounds("0.0.0.0/0"), (ip("0.0.0.0"), ip("255.255.255.255")));
}

#[test]
fn malformed_entries_are_refused_as_the_in_cluster_provider_refuses_them() {
    for bad in [
        "192.168.1.2612",
        "192.168.1.2-192.168.1.4-",
        "192.168.1.2-192.168.1.4-192.168.1.9",
        "192.168.1.4-192.168.1.2",
        "192.168.1.4/21-192.168.1.2",
        "192.168.1.4/-192.168.1.2",
        "192.168.1.2.4",
        "192.168.1.2/33",
        "fe80::zzzz",
        "fe80::3-fe80::1",
        "fe80::1/129",
        "10.0.0.1-fd00::1",
        "010.0.0.1",
        "fe80::1%eth0",
        "10.0.0.0/024",
        "10.0.0.0/+8",
        "10.0.0.0/",
        " 10.0.0.1",
        "",
    ] {
        assert!(parse_entry(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn error_messages_quote_the_entry_and_say_what_to_write() {
    let message = |s: &str| parse_entry(s).unwrap_err().to_string();
    assert_eq!(message("10.0.0.300"), "\"10.0.0.300\" is not an IP address, a range a-b, or a CIDR");
    assert!(message("10.0.0.9-10.0.0.1").contains("write the lower address first"));
    assert!(message("10.0.0.1-fd00::1").contains("both ends must be of one family"));
    assert!(message("10.0.0.1-x").contains("\"x\" is not an IP address"));
    assert!(message("10.0.0.0/33").contains("from 0 to 32 for IPv4"));
    assert!(message("fd00::/129").contains("from 0 to 128 for IPv6"));
}

#[test]
fn entries_know_what_they_contain() {
    let entry = parse_entry("10.0.0.0/30").unwrap();
    assert!(entry.contains(ip("10.0.0.3")));
    assert!(!entry.contains(ip("10.0.0.4")));
    assert!(!entry.contains(ip("::a00:3")));
    assert_eq!(entry.family(), Family::V4);
}

#[test]
fn split_by_family_keeps_order_and_reports_the_bad_index() {
    let entries: Vec<String> = ["10.0.0.1", "fd00::/64", "10.0.1.0/24", "fd01::1-fd01::9"].map(String::from).to_vec();
    let split = split_by_family(&entries).unwrap();
    assert_eq!(split.of(Family::V4), ["10.0.0.1", "10.0.1.0/24"]);
    assert_eq!(split.of(Family::V6), ["fd00::/64", "fd01::1-fd01::9"]);

    let bad: Vec<String> = ["10.0.0.1", "nope"].map(String::from).to_vec();
    let (index, error) = split_by_family(&bad).unwrap_err();
    assert_eq!(index, 1);
    assert!(matches!(error, EntryError::NotAnAddress { .. }));
}
