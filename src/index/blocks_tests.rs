//! A hub pool's blocks leased to spokes, with synthetic holds (no API server).

use std::time::Duration;

use ipnet::IpNet;

use super::*;
use crate::allocator::Family;
use crate::fixtures::{holder, pool_spec, ready_pool};

fn block(name: &str) -> HolderKey {
    HolderKey::new("spoke-a", name)
}

fn net(cidr: &str) -> IpNet {
    cidr.parse().unwrap()
}

#[test]
fn blocks_are_aligned_free_and_never_shared_with_claims_or_other_blocks() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.0/26"]);
    // A claim of the hub takes 10.0.0.1: the first block of 16 is not free any more.
    assert_eq!(index.allocate(&key, &holder("hub-claim"), Request::default()).unwrap().to_string(), "10.0.0.1");
    let first = index.lease_block(&key, &block("b1"), Family::V4, 16, None).unwrap();
    assert_eq!(first, net("10.0.0.16/28"));
    let second = index.lease_block(&key, &block("b2"), Family::V4, 16, None).unwrap();
    assert_eq!(second, net("10.0.0.32/28"));
    assert_eq!(index.lease_block(&key, &block("b1"), Family::V4, 16, None), Ok(first), "asked again: the same block");
    // The hub's claims skip leased addresses: the rest of 10.0.0.0/28, then 10.0.0.48/28.
    for n in 0..14 {
        let ip = index.allocate(&key, &holder(&format!("c{n}")), Request::default()).unwrap();
        assert!(!first.contains(&ip) && !second.contains(&ip), "{ip} is leased");
    }
    let taken = index.lease_block(&key, &block("b3"), Family::V4, 16, Some(net("10.0.0.16/28")));
    assert!(matches!(taken, Err(AllocError::Requested { .. })), "{taken:?}");
}

#[test]
fn a_dropped_block_is_free_again_and_a_full_pool_refuses_more() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.0/27"]);
    let a = index.lease_block(&key, &block("a"), Family::V4, 16, None).unwrap();
    let b = index.lease_block(&key, &block("b"), Family::V4, 16, None).unwrap();
    assert_ne!(a, b);
    assert_eq!(index.lease_block(&key, &block("c"), Family::V4, 16, None), Err(AllocError::Exhausted(Family::V4)));
    assert!(matches!(index.allocate(&key, &holder("hub"), Request::default()), Err(AllocError::Exhausted(_))));
    index.drop_block(&key, &block("a"));
    assert_eq!(index.lease_block(&key, &block("c"), Family::V4, 16, None), Ok(a), "the returned block");
}

#[test]
fn leased_blocks_stay_used_across_an_edit_of_the_pool() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.0/27"]);
    let leased = index.hold_block(&key, &block("seen"), net("10.0.0.0/28"));
    assert!(leased.is_empty());
    // The pool grows: its allocators are rebuilt, the block stays used.
    index.upsert_pool(&key, &pool_spec(&["10.0.0.0/26"]), PoolFacts::default(), &[]);
    for n in 0..20 {
        let ip = index.allocate(&key, &holder(&format!("h{n}")), Request::default()).unwrap();
        assert!(!net("10.0.0.0/28").contains(&ip), "{ip} is leased");
    }
}

#[test]
fn a_block_seen_over_a_held_address_is_reported_not_taken() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.0/27"]);
    let ip = index.allocate(&key, &holder("hub"), Request::default()).unwrap();
    let shared = index.hold_block(&key, &block("restored"), net("10.0.0.0/28"));
    assert_eq!(shared, vec![ip], "both hold it: a conflict to report");
    assert_eq!(index.claim_hold(&key, &holder("hub")), Some(ip), "the claim keeps its address");
}
