use super::*;
use crate::allocator::test_support::{Def, allocatable, def};
use crate::fixtures::ip;

fn take(pool: &mut FamilyPool, n: usize) -> Vec<String> {
    (0..n).map(|_| pool.allocate_lowest().map_or("-".into(), |a| a.to_string())).collect()
}

#[test]
fn pools_are_send_and_sync() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<FamilyPool>();
}

#[test]
fn lowest_free_is_lowest_whatever_the_entry_order() {
    let mut pool = def(&["10.0.0.20-10.0.0.21", "10.0.0.5", "10.0.0.10/31"], 24).pool();
    assert_eq!(take(&mut pool, 6), ["10.0.0.5", "10.0.0.10", "10.0.0.11", "10.0.0.20", "10.0.0.21", "-"]);
}

#[test]
fn excluded_addresses_are_never_allocated() {
    let mut pool = def(&["10.0.0.0/29"], 24).excluding(&["10.0.0.2-10.0.0.3", "10.0.0.5"]).pool();
    assert_eq!(take(&mut pool, 4), ["10.0.0.1", "10.0.0.4", "10.0.0.6", "10.0.0.7"]);
    assert_eq!(pool.allocate_lowest(), None);
    assert_eq!(pool.allocate(ip("10.0.0.5")), Err(AllocateError::NotInPool { reason: NotInPool::Excluded }));
}

#[test]
fn full_pool_allocates_nothing_until_one_is_released() {
    let mut pool = def(&["10.0.0.10-10.0.0.12"], 24).pool();
    assert_eq!(take(&mut pool, 4), ["10.0.0.10", "10.0.0.11", "10.0.0.12", "-"]);
    assert_eq!(pool.counts().free, 0);
    assert!(pool.release(ip("10.0.0.11")));
    assert!(!pool.release(ip("10.0.0.11")));
    assert_eq!(take(&mut pool, 2), ["10.0.0.11", "-"]);
}

#[test]
fn specific_allocation_says_why_it_fails() {
    let mut pool = def(&["10.0.0.0/24"], 24).gateway("10.0.0.1").excluding(&["10.0.0.9"]).pool();
    let reason = |r| Err(AllocateError::NotInPool { reason: r });
    assert_eq!(pool.allocate(ip("10.0.0.7")), Ok(()));
    assert_eq!(pool.allocate(ip("10.0.0.7")), Err(AllocateError::AlreadyAllocated));
    assert_eq!(pool.allocate(ip("10.0.0.1")), reason(NotInPool::Gateway));
    assert_eq!(pool.allocate(ip("10.0.0.9")), reason(NotInPool::Excluded));
    assert_eq!(pool.allocate(ip("10.0.0.0")), reason(NotInPool::Reserved));
    assert_eq!(pool.allocate(ip("10.0.0.255")), reason(NotInPool::Reserved));
    assert_eq!(pool.allocate(ip("10.0.1.1")), reason(NotInPool::Outside));
    assert_eq!(pool.allocate(ip("fd00::1")), reason(NotInPool::WrongFamily));
    assert!(pool.is_allocated(ip("10.0.0.7")));
    assert_eq!(pool.allocate_lowest(), Some(ip("10.0.0.2")));
}

#[test]
fn out_of_range_addresses_are_remembered_counted_and_released() {
    let mut pool = def(&["10.0.0.10-10.0.0.20"], 24).gateway("10.0.0.1").pool();
    assert_eq!(pool.mark_used(ip("10.0.0.10")), Marked::InRange);
    assert_eq!(pool.mark_used(ip("10.0.0.10")), Marked::AlreadyUsed);
    assert_eq!(pool.mark_used(ip("10.0.0.50")), Marked::OutOfRange);
    assert_eq!(pool.mark_used(ip("10.0.0.1")), Marked::OutOfRange);
    assert_eq!(pool.mark_used(ip("10.0.0.50")), Marked::AlreadyUsed);
    assert_eq!(pool.mark_used(ip("fd00::1")), Marked::WrongFamily);
    assert_eq!(
        pool.counts(),
        Counts { total: 11, used: 3, in_range_used: 1, free: 10, out_of_range: 2, saturated: false }
    );
    assert!(pool.is_allocated(ip("10.0.0.50")));
    let ranges: Vec<_> = pool.out_of_range_ranges().collect();
    assert_eq!(ranges, [(ip("10.0.0.1"), ip("10.0.0.1")), (ip("10.0.0.50"), ip("10.0.0.50"))]);
    assert!(pool.release(ip("10.0.0.50")));
    assert!(!pool.is_allocated(ip("10.0.0.50")));
    assert!(!pool.release(ip("fd00::1")));
    assert_eq!(pool.counts().out_of_range, 1);
}

#[test]
fn rebuild_records_existing_addresses_and_lists_those_outside() {
    let d = def(&["10.0.0.10-10.0.0.20"], 24);
    let existing = ["10.0.0.12", "10.0.0.10", "10.0.0.99", "fd00::1", "10.0.0.12"].map(ip);
    let (mut pool, outside) = FamilyPool::rebuild(&d.spec(), existing).unwrap();
    assert_eq!(outside, [ip("10.0.0.99"), ip("fd00::1")]);
    assert_eq!(pool.counts().used, 3);
    assert_eq!(take(&mut pool, 2), ["10.0.0.11", "10.0.0.13"]);
}

#[test]
fn shrinking_a_pool_keeps_used_addresses_as_out_of_range() {
    let mut pool = def(&["10.0.0.10-10.0.0.20"], 24).gateway("10.0.0.1").reserved_allowed().pool();
    let _ = take(&mut pool, 5);
    let shrunk = def(&["10.0.0.13-10.0.0.20"], 24).gateway("10.0.0.1");
    let (mut pool, outside) = pool.with_spec(&shrunk.spec()).unwrap();
    assert_eq!(outside, ["10.0.0.10", "10.0.0.11", "10.0.0.12"].map(ip));
    let counts = pool.counts();
    assert_eq!((counts.total, counts.used, counts.out_of_range, counts.free), (8, 5, 3, 6));
    assert_eq!(pool.allocate_lowest(), Some(ip("10.0.0.15")));
    // Growing it back turns them into in-range addresses again; nothing was dropped.
    let grown = def(&["10.0.0.0/24"], 24).gateway("10.0.0.1");
    let (pool, outside) = pool.with_spec(&grown.spec()).unwrap();
    assert!(outside.is_empty());
    let counts = pool.counts();
    assert_eq!((counts.in_range_used, counts.out_of_range), (6, 0));
    for address in ["10.0.0.10", "10.0.0.12", "10.0.0.14", "10.0.0.15"] {
        assert!(pool.is_allocated(ip(address)), "{address}");
    }
}

#[test]
fn changing_family_is_refused_while_addresses_are_in_use() {
    let mut pool = def(&["10.0.0.1-10.0.0.5"], 24).pool();
    let v6 = def(&["fd00::/120"], 120);
    assert!(pool.with_spec(&v6.spec()).is_ok());
    let _ = pool.allocate_lowest();
    let error = pool.with_spec(&v6.spec()).unwrap_err();
    assert_eq!(error, SpecError::FamilyChanged { from: Family::V4, to: Family::V6, in_use: 1 });
    assert!(error.to_string().contains("release them first"));
}

#[test]
fn overlapping_pools_are_detected_on_allocatable_addresses() {
    let a = def(&["10.0.0.0/24"], 24).pool();
    let b = def(&["10.0.0.200-10.0.1.5"], 16).pool();
    let c = def(&["10.0.1.0/24"], 24).pool();
    assert!(a.overlaps(&b) && b.overlaps(&a) && b.overlaps(&c));
    assert!(!a.overlaps(&c));
    // 10.0.0.255 is the broadcast address of `a`, so not allocatable there: no overlap.
    let broadcast_only = def(&["10.0.0.255"], 24).reserved_allowed().pool();
    assert!(!a.overlaps(&broadcast_only));
    assert!(!a.overlaps(&def(&["fd00::/64"], 64).pool()));
}

#[test]
fn ipv6_48_pool_counts_exactly_and_costs_nothing_until_used() {
    let mut pool = def(&["fd00:1::/48"], 48).gateway("fd00:1::1").pool();
    let counts = pool.counts();
    assert_eq!(counts.total, (1u128 << 80) - 2);
    assert_eq!(counts.free, counts.total);
    assert!(!counts.saturated);
    assert!(pool.heap_bytes() < 1024);
    assert_eq!(pool.allocate_lowest(), Some(ip("fd00:1::2")));
    assert_eq!(pool.counts().free, (1u128 << 80) - 3);
}

#[test]
fn a_whole_ipv6_space_saturates_and_says_so() {
    let mut pool = def(&["::/0"], 0).reserved_allowed().pool();
    let counts = pool.counts();
    assert_eq!((counts.total, counts.free, counts.saturated), (u128::MAX, u128::MAX, true));
    assert_eq!(pool.allocate_lowest(), Some(ip("::")));
    let counts = pool.counts();
    assert_eq!((counts.free, counts.saturated), (u128::MAX, true));
    let added = pool.allocate_range(ip("::"), ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
    assert_eq!(added, Ok(u128::MAX));
    assert_eq!(pool.allocate_lowest(), None);
    let counts = pool.counts();
    assert_eq!((counts.free, counts.in_range_used, counts.saturated), (0, u128::MAX, true));
    assert!(pool.release(ip("::1")));
    assert_eq!(
        pool.counts(),
        Counts {
            total: u128::MAX,
            used: u128::MAX,
            in_range_used: u128::MAX,
            free: 1,
            out_of_range: 0,
            saturated: true,
        }
    );
    let reserved = def(&["::/0"], 0).pool();
    assert_eq!((reserved.counts().total, reserved.counts().saturated), (u128::MAX, false));
}

#[test]
fn a_nearly_full_ipv6_64_finds_its_last_free_address_at_once() {
    let mut pool = def(&["fd00::/64"], 64).reserved_allowed().pool();
    let added = pool.allocate_range(ip("fd00::"), ip("fd00::ffff:ffff:ffff:fffe"));
    assert_eq!(added, Ok(u64::MAX as u128));
    assert!(pool.heap_bytes() < 16_384, "{}", pool.heap_bytes());
    assert_eq!(pool.counts().free, 1);
    assert_eq!(pool.allocate_lowest(), Some(ip("fd00::ffff:ffff:ffff:ffff")));
    assert_eq!(pool.allocate_lowest(), None);
    assert!(pool.release(ip("fd00::1234:0:0:1")));
    assert_eq!(pool.allocate_lowest(), Some(ip("fd00::1234:0:0:1")));
}

#[test]
fn range_allocation_skips_what_is_not_allocatable() {
    let mut pool = def(&["10.0.0.0/24"], 24).gateway("10.0.0.1").excluding(&["10.0.0.5"]).pool();
    assert_eq!(pool.allocate(ip("10.0.0.3")), Ok(()));
    assert_eq!(pool.allocate_range(ip("10.0.0.6"), ip("9.0.0.0")), Ok(3));
    assert_eq!(pool.allocate_lowest(), Some(ip("10.0.0.7")));
    assert_eq!(
        pool.allocate_range(ip("10.0.0.6"), ip("fd00::")),
        Err(AllocateError::NotInPool { reason: NotInPool::WrongFamily })
    );
}

/// The in-cluster provider's pool-status table (`inclusterippool_test.go`): prefix, addresses,
/// gateway, then total, used and free after `used` claims.
#[test]
fn in_cluster_status_table_total_used_free() {
    struct Case {
        prefix: u8,
        addresses: &'static [&'static str],
        gateway: &'static str,
        total: u128,
        used: u128,
        free: u128,
    }
    let case = |prefix, addresses, gateway, total, used, free| Case { prefix, addresses, gateway, total, used, free };
    let cases = [
        case(24, &["10.0.0.10-10.0.0.20"], "", 11, 1, 10),
        case(24, &["10.0.0.10-10.0.0.20"], "", 11, 2, 9),
        case(24, &["10.0.0.10-10.0.0.20"], "10.0.0.10", 10, 1, 9),
        case(24, &["10.0.0.10-10.0.0.20"], "10.0.0.10", 10, 2, 8),
        case(24, &["10.0.0.10-10.0.0.20"], "10.0.0.1", 11, 1, 10),
        case(24, &["10.0.0.0-10.0.0.1"], "10.0.0.2", 1, 1, 0),
        case(24, &["10.0.0.254-10.0.0.255"], "10.0.0.1", 1, 1, 0),
        case(120, &["fe80::ffff"], "fe80::a", 1, 1, 0),
    ];
    for Case { prefix, addresses, gateway, total, used, free } in cases {
        let mut pool = def(addresses, prefix).gateway(gateway).pool();
        let before = pool.counts();
        assert_eq!((before.total, before.used, before.free), (total, 0, total), "{addresses:?}");
        for _ in 0..used {
            assert!(pool.allocate_lowest().is_some());
        }
        let after = pool.counts();
        assert_eq!((after.total, after.used, after.free), (total, used, free), "{addresses:?}");
    }
}

/// The in-cluster provider's out-of-range table: a pool with `allocateReservedIPAddresses`
/// serves claims, then is edited (addresses changed, reserved addresses no longer allocatable).
#[test]
fn in_cluster_status_table_out_of_range_after_an_edit() {
    let cases: [(&[&str], &[&str], usize, u128); 4] = [
        (&["10.0.0.10-10.0.0.20"], &["10.0.0.13-10.0.0.20"], 5, 3),
        // Upstream expects 0 here, but its check passes before the edit is reconciled: the
        // first claim got 10.0.0.0, which the edit leaves outside (and reserved), so it is 1.
        (&["10.0.0.0-10.0.0.255"], &["10.0.0.1-10.0.0.255"], 4, 1),
        (&["10.0.0.0-10.0.0.255"], &["10.0.0.0", "10.0.0.2-10.0.0.255"], 5, 1),
        (&["10.0.0.251-10.0.0.255"], &["10.0.0.251-10.0.0.254"], 5, 1),
    ];
    for (before, after, claims, out_of_range) in cases {
        let mut pool = def(before, 24).gateway("10.0.0.1").reserved_allowed().pool();
        for _ in 0..claims {
            assert!(pool.allocate_lowest().is_some());
        }
        let edited: Def = def(after, 24).gateway("10.0.0.1");
        let (pool, outside) = pool.with_spec(&edited.spec()).unwrap();
        let counts = pool.counts();
        assert_eq!(counts.out_of_range, out_of_range, "{after:?}");
        assert_eq!(outside.len() as u128, out_of_range);
        assert_eq!(counts.used, claims as u128, "{after:?}");
    }
}

#[test]
fn drained_clones_leave_the_original_untouched() {
    let pool = def(&["10.0.0.1-10.0.0.3"], 24).pool();
    assert_eq!(allocatable(&pool).len(), 3);
    assert_eq!(pool.counts().used, 0);
}
