use std::net::IpAddr;

use proptest::prelude::*;

use super::*;
use crate::allocator::{AllocateError, FamilyPool, Marked, NotInPool, SpecError};
use crate::fixtures::ip;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn pool(prefixes: &[&str], length: u8, excluded: &[&str], gateway: Option<&str>) -> Result<FamilyPool, SpecError> {
    let (prefixes, excluded) = (strings(prefixes), strings(excluded));
    FamilyPool::of_prefixes(&PrefixSpec {
        prefixes: &prefixes,
        excluded: &excluded,
        allocation_length: length,
        gateway,
    })
}

fn take(pool: &mut FamilyPool, n: usize) -> Vec<String> {
    (0..n).map(|_| pool.allocate_lowest().map_or("-".into(), |a| a.to_string())).collect()
}

#[test]
fn sub_prefixes_are_handed_out_lowest_first_as_network_addresses() {
    let mut p = pool(&["fd00::/62"], 64, &[], Some("fd10::1")).unwrap();
    assert!(p.hands_out_prefixes());
    assert_eq!((p.prefix(), p.gateway()), (64, Some(ip("fd10::1"))));
    assert_eq!(take(&mut p, 5), ["fd00::", "fd00:0:0:1::", "fd00:0:0:2::", "fd00:0:0:3::", "-"]);
}

#[test]
fn a_custom_allocation_length_steps_by_its_own_size() {
    let mut p = pool(&["fd06::/48"], 56, &[], None).unwrap();
    assert_eq!(p.counts().total, 256);
    assert_eq!(take(&mut p, 2), ["fd06::", "fd06:0:0:100::"]);
}

#[test]
fn standalone_and_aggregate_sources_are_taken_in_address_order() {
    let mut p = pool(&["fd10::/48", "fd00:0:0:1::/64"], 64, &[], None).unwrap();
    assert_eq!(take(&mut p, 2), ["fd00:0:0:1::", "fd10::"]);
}

#[test]
fn overlapping_sources_merge_and_count_once() {
    let mut p = pool(&["fd00::/63", "fd00::/62", "fd00:0:0:8::/62"], 64, &[], None).unwrap();
    assert_eq!(p.counts().total, 8);
    assert_eq!(take(&mut p, 5)[4], "fd00:0:0:8::");
}

#[test]
fn the_gateway_blocks_nothing_and_excluded_entries_skip_every_sub_prefix_they_touch() {
    let mut p = pool(&["fd00::/62"], 64, &["fd00:0:0:1::/64", "fd00:0:0:2::5"], Some("fd00::1")).unwrap();
    assert_eq!(p.counts().total, 2);
    assert_eq!(take(&mut p, 3), ["fd00::", "fd00:0:0:3::", "-"]);
    assert_eq!(p.allocate(ip("fd00:0:0:2::")), Err(AllocateError::NotInPool { reason: NotInPool::Excluded }));
}

#[test]
fn a_range_exclusion_spanning_sub_prefixes_skips_them_all() {
    let p = pool(&["fd00::/60"], 64, &["fd00:0:0:1::ffff-fd00:0:0:4::"], None).unwrap();
    assert_eq!(p.counts().total, 16 - 4);
}

#[test]
fn an_address_that_is_not_a_sub_prefix_start_is_out_of_range_and_never_frees_a_slot() {
    let mut p = pool(&["fd00::/62"], 64, &[], None).unwrap();
    assert_eq!(p.allocate(ip("fd00::1")), Err(AllocateError::NotInPool { reason: NotInPool::Unaligned }));
    assert_eq!(p.mark_used(ip("fd00::1")), Marked::OutOfRange);
    assert_eq!(p.counts().out_of_range, 1);
    assert_eq!(p.counts().free, 4);
    assert!(p.release(ip("fd00::1")));
    assert_eq!(p.counts().used, 0);
}

#[test]
fn a_slash_32_pool_of_slash_64s_has_two_to_the_32_slots_and_stays_small() {
    let mut p = pool(&["2001:db8::/32"], 64, &[], None).unwrap();
    assert_eq!(p.counts().total, 1 << 32);
    let before = p.heap_bytes();
    assert_eq!(take(&mut p, 3), ["2001:db8::", "2001:db8:0:1::", "2001:db8:0:2::"]);
    assert!(p.heap_bytes() < before + 4096, "{} -> {}", before, p.heap_bytes());
    assert_eq!(p.counts().free, (1 << 32) - 3);
}

#[test]
fn whole_ipv6_space_in_slash_128s_counts_saturated() {
    let p = pool(&["::/0"], 128, &[], None).unwrap();
    assert!(p.counts().saturated);
    let p = pool(&["::/1"], 128, &[], None).unwrap();
    assert_eq!(p.counts().total, 1 << 127);
}

#[test]
fn adopted_sub_prefixes_are_used_and_those_outside_are_out_of_range() {
    let mut p = pool(&["fd00::/62"], 64, &[], None).unwrap();
    let marked: Vec<Marked> =
        ["fd00::", "fd00:0:0:2::", "fd01::", "10.0.0.1", "fd00::"].iter().map(|a| p.mark_used(ip(a))).collect();
    assert_eq!(
        marked,
        [Marked::InRange, Marked::InRange, Marked::OutOfRange, Marked::WrongFamily, Marked::AlreadyUsed]
    );
    assert_eq!(take(&mut p, 3), ["fd00:0:0:1::", "fd00:0:0:3::", "-"]);
    assert_eq!(p.counts().out_of_range, 1);
}

#[test]
fn shrinking_keeps_every_used_sub_prefix_as_out_of_range() {
    let mut p = pool(&["fd01::/62"], 64, &[], None).unwrap();
    assert_eq!(take(&mut p, 1), ["fd01::"]);
    let prefixes = strings(&["fd01:0:0:1::/64"]);
    let spec = PrefixSpec { prefixes: &prefixes, excluded: &[], allocation_length: 64, gateway: None };
    let (mut shrunk, outside) = p.with_prefixes(&spec).unwrap();
    assert_eq!(outside, [ip("fd01::")]);
    assert_eq!((shrunk.counts().out_of_range, shrunk.counts().free), (1, 1));
    assert!(shrunk.is_allocated(ip("fd01::")));
    assert_eq!(take(&mut shrunk, 2), ["fd01:0:0:1::", "-"]);
    let longer = PrefixSpec { allocation_length: 72, ..spec };
    assert_eq!(shrunk.with_prefixes(&longer).unwrap_err(), SpecError::GranularityChanged { from: 64, to: 72 });
}

#[test]
fn the_webhooks_refusals_name_the_field_and_the_entry() {
    let refused = |prefixes: &[&str], length: u8, excluded: &[&str], gateway: Option<&str>| {
        pool(prefixes, length, excluded, gateway).unwrap_err().to_string()
    };
    assert!(refused(&[], 64, &[], None).contains("prefixes is required"));
    assert!(refused(&["fd00::1"], 64, &[], None).contains("provided entry is not a valid IPv6 CIDR"));
    assert!(refused(&["fd00::1/64"], 64, &[], None).contains("CIDR must be network-aligned"));
    assert!(
        refused(&["fd00::/65"], 64, &[], None).contains("CIDR prefix length must be <= allocationPrefixLength (64)")
    );
    assert!(refused(&["10.0.0.0/24"], 64, &[], None).contains("only IPv6 prefixes are supported"));
    assert!(refused(&["fd00::/64"], 64, &[], Some("10.0.0.1")).contains("provided gateway must be IPv6"));
    assert!(refused(&["fd00::/64"], 64, &["10.0.0.1"], None).contains("only IPv6 excluded prefixes are supported"));
    assert!(refused(&["fd00::/64"], 0, &[], None).contains("between 1 and 128"));
    assert!(refused(&["fd00::/64"], 64, &["nope"], None).starts_with("excludedPrefixes[0]"));
    for (prefixes, length) in
        [(&["fd00::/64", "fd01::/64"][..], 64), (&["fd00::/48"], 56), (&["fd00::/48"], 96), (&["fd00::/48"], 128)]
    {
        assert!(pool(prefixes, length, &[], None).is_ok(), "{prefixes:?}/{length}");
    }
}

proptest! {
    /// Against a model: allocation hands out the lowest free allocatable sub-prefix, never one
    /// twice, never one that overlaps an excluded address.
    #[test]
    fn allocation_matches_a_model(
        length in 60u8..=64,
        excluded in proptest::collection::vec(0u128..64, 0..6),
        ops in proptest::collection::vec((any::<bool>(), 0usize..64), 1..80),
    ) {
        let excluded_text: Vec<String> =
            excluded.iter().map(|e| format!("fd00::{:x}:0:0:{:x}", e >> 2, (e & 3) + 1)).collect();
        let prefixes = strings(&["fd00::/58"]);
        let spec = PrefixSpec { prefixes: &prefixes, excluded: &excluded_text, allocation_length: length, gateway: None };
        let mut p = FamilyPool::of_prefixes(&spec).unwrap();
        let step = 1u128 << (128 - u32::from(length));
        let base = u128::from("fd00::".parse::<std::net::Ipv6Addr>().unwrap());
        let slots = 1usize << (length - 58);
        let blocked: Vec<bool> = (0..slots)
            .map(|i| {
                let (first, last) = (base + step * i as u128, base + step * (i as u128 + 1) - 1);
                excluded_text.iter().any(|e| {
                    let v = u128::from(e.parse::<std::net::Ipv6Addr>().unwrap());
                    first <= v && v <= last
                })
            })
            .collect();
        let mut used = vec![false; slots];
        for (allocate, pick) in ops {
            if allocate {
                let expected = (0..slots).find(|&i| !used[i] && !blocked[i]);
                let got = p.allocate_lowest();
                prop_assert_eq!(got, expected.map(|i| IpAddr::V6((base + step * i as u128).into())));
                if let Some(i) = expected { used[i] = true; }
            } else {
                let i = pick % slots;
                let address = IpAddr::V6((base + step * i as u128).into());
                prop_assert_eq!(p.release(address), used[i]);
                used[i] = false;
            }
            let in_use = used.iter().filter(|u| **u).count() as u128;
            prop_assert_eq!(p.counts().used, in_use);
            prop_assert_eq!(p.counts().free, blocked.iter().filter(|b| !**b).count() as u128 - in_use);
        }
    }
}
