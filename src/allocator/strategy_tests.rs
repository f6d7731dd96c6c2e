use std::collections::BTreeSet;
use std::net::IpAddr;

use super::*;
use crate::allocator::test_support::def;
use crate::allocator::{FamilyPool, MAX_REMEMBERED_RELEASES};
use crate::fixtures::ip;

fn pool_with(addresses: &str, prefix: u8, strategy: Strategy) -> FamilyPool {
    let mut pool = def(&[addresses], prefix).pool();
    pool.set_strategy(strategy);
    pool.seed(7);
    pool
}

fn next(pool: &mut FamilyPool) -> String {
    pool.allocate_next().map_or("-".into(), |a| a.to_string())
}

#[test]
fn lowest_hands_out_a_just_released_address_again_at_once() {
    let mut pool = pool_with("10.0.0.1-10.0.0.4", 24, Strategy::Lowest);
    assert_eq!([next(&mut pool), next(&mut pool)], ["10.0.0.1", "10.0.0.2"]);
    assert!(pool.release(ip("10.0.0.1")));
    assert_eq!(next(&mut pool), "10.0.0.1");
}

#[test]
fn least_recently_released_hands_out_unreleased_addresses_first_then_the_oldest_release() {
    let mut pool = pool_with("10.0.0.1-10.0.0.5", 24, Strategy::LeastRecentlyReleased);
    for _ in 0..3 {
        let _ = pool.allocate_next();
    }
    assert!(pool.release(ip("10.0.0.2")));
    assert!(pool.release(ip("10.0.0.1")));
    let order: Vec<String> = (0..5).map(|_| next(&mut pool)).collect();
    assert_eq!(order, ["10.0.0.4", "10.0.0.5", "10.0.0.2", "10.0.0.1", "-"]);
}

#[test]
fn a_remembered_release_is_free_in_every_answer() {
    let mut pool = pool_with("10.0.0.1-10.0.0.3", 24, Strategy::LeastRecentlyReleased);
    let first = pool.allocate_next().expect("free");
    assert!(pool.release(first));
    assert!(!pool.is_allocated(first));
    assert!(!pool.release(first), "released once only");
    assert_eq!(pool.counts().free, 3);
    assert_eq!(pool.counts().in_range_used, 0);
    assert_eq!(pool.allocate(first), Ok(()), "a requested address is handed out whatever the order");
    assert!(pool.is_allocated(first));
    assert_eq!(pool.released_oldest_first(), Vec::<IpAddr>::new());
}

#[test]
fn the_release_memory_is_bounded_and_forgets_the_oldest_first() {
    let extra = 100;
    let size = MAX_REMEMBERED_RELEASES + extra;
    let mut pool = pool_with("10.0.0.0/16", 16, Strategy::LeastRecentlyReleased);
    let taken: Vec<IpAddr> = (0..size).map(|_| pool.allocate_next().expect("room")).collect();
    for address in &taken {
        assert!(pool.release(*address));
    }
    assert_eq!(pool.released_oldest_first().len(), MAX_REMEMBERED_RELEASES);
    assert_eq!(pool.counts().in_range_used, 0);
    // The forgotten ones are plain free addresses again, handed out lowest first: the first
    // `extra` released, then the never-used rest of the /16.
    assert_eq!(pool.allocate_next(), Some(taken[0]));
    assert_eq!(pool.released_oldest_first()[0], taken[extra]);
}

#[test]
fn leaving_least_recently_released_forgets_the_order_and_frees_the_addresses() {
    let mut pool = pool_with("10.0.0.1-10.0.0.3", 24, Strategy::LeastRecentlyReleased);
    let first = pool.allocate_next().expect("free");
    assert!(pool.release(first));
    pool.set_strategy(Strategy::Lowest);
    assert_eq!(pool.allocate_next(), Some(first));
}

#[test]
fn an_edit_of_the_pool_keeps_the_release_order_of_addresses_still_in_it() {
    let mut pool = pool_with("10.0.0.1-10.0.0.4", 24, Strategy::LeastRecentlyReleased);
    for _ in 0..3 {
        let _ = pool.allocate_next();
    }
    for address in ["10.0.0.3", "10.0.0.1", "10.0.0.2"] {
        assert!(pool.release(ip(address)));
    }
    let (edited, _) = pool.with_spec(&def(&["10.0.0.2-10.0.0.9"], 24).spec()).expect("valid edit");
    assert_eq!(edited.strategy(), Strategy::LeastRecentlyReleased);
    assert_eq!(edited.released_oldest_first(), [ip("10.0.0.3"), ip("10.0.0.2")], "10.0.0.1 left the pool");
    assert_eq!(edited.counts().free, 8);
}

#[test]
fn random_hands_out_each_free_address_once() {
    let mut pool = pool_with("10.0.0.0/26", 24, Strategy::Random);
    let handed: BTreeSet<IpAddr> = std::iter::from_fn(|| pool.allocate_next()).collect();
    assert_eq!(handed.len(), 63, "10.0.0.1-10.0.0.63: the network address is reserved");
    assert!(handed.iter().all(|a| pool.check(*a).is_ok()));
    assert_eq!(pool.counts().free, 0);
}

#[test]
fn random_picks_every_free_address_about_equally_often() {
    let mut pool = pool_with("10.0.0.1-10.0.0.8", 24, Strategy::Random);
    pool.allocate(ip("10.0.0.3")).expect("free");
    let mut seen = std::collections::BTreeMap::<IpAddr, u32>::new();
    for _ in 0..7000 {
        let address = pool.allocate_next().expect("free");
        *seen.entry(address).or_default() += 1;
        assert!(pool.release(address));
    }
    assert_eq!(seen.len(), 7, "never the held 10.0.0.3");
    assert!(seen.values().all(|&n| (800..1200).contains(&n)), "{seen:?}");
}

#[test]
fn random_finds_the_free_addresses_of_a_large_sparse_space() {
    let mut pool = pool_with("fd00::/64", 64, Strategy::Random);
    let _ = pool.allocate_range(ip("fd00::"), ip("fd00::ffff:ffff:ffff:fffe"));
    pool.set_strategy(Strategy::Random);
    assert_eq!(pool.allocate_next(), Some(ip("fd00::ffff:ffff:ffff:ffff")), "the one address left");
    assert_eq!(pool.allocate_next(), None);
    assert!(pool.release(ip("fd00::1234:5678")));
    assert_eq!(pool.allocate_next(), Some(ip("fd00::1234:5678")));
    let mut wide = pool_with("fd00::/64", 64, Strategy::Random);
    let handed: BTreeSet<IpAddr> = (0..2000).filter_map(|_| wide.allocate_next()).collect();
    assert_eq!(handed.len(), 2000);
    assert_eq!(wide.counts().in_range_used, 2000);
}

#[test]
fn below_stays_below_its_bound() {
    let mut rng = Rng::seeded(1);
    for bound in [1u128, 2, 3, 1000, u128::MAX] {
        assert!((0..100).all(|_| rng.below(bound) < bound));
    }
}
