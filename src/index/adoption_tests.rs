//! Adoption and conflicts: an `IPAddress` is adopted only when nobody else holds its address
//! and the pool may hand it out; a conflict never hands the address to a third claim.

use std::net::IpAddr;
use std::time::Duration;

use super::*;
use crate::fixtures::{holder, ip, pool_spec};

fn pool(index: &Index) -> PoolKey {
    let key = PoolKey::in_cluster("ns", "p");
    index.upsert_pool(&key, &pool_spec(&["10.0.0.1-10.0.0.3"]).with_gateway("10.0.0.1"), PoolFacts::default(), &[]);
    key
}

fn conflict(result: Result<IpAddr, AllocError>) -> String {
    match result {
        Err(AllocError::Conflict { reason, .. }) => reason,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn an_address_object_holding_another_claims_address_is_not_adopted_and_never_handed_out_again() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = pool(&index);
    let first = index.allocate(&key, &holder("first"), Request::default()).unwrap();
    // An IPAddress named like claim "second" records the first claim's address.
    index.set_hold(&key, &holder("second"), HoldKind::Object, Some(first));
    let reason = conflict(index.allocate(&key, &holder("second"), Request::default()));
    assert!(reason.contains("ns/first"), "{reason}");
    assert_eq!(
        index.adopt(&key, &holder("second"), first, false),
        Err(AllocError::Conflict { address: first, reason })
    );
    let third = index.allocate(&key, &holder("third"), Request::default()).unwrap();
    assert_ne!(third, first);
    assert_eq!(index.report(&key).families[0].used, 2, "the address stays used, by the object");
}

#[test]
fn the_gateway_and_addresses_outside_the_pool_are_not_adopted() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = pool(&index);
    let reason = conflict(index.adopt(&key, &holder("gw"), ip("10.0.0.1"), false).map(|_| ip("10.0.0.1")));
    assert!(reason.contains("gateway"), "{reason}");
    let reason = conflict(index.adopt(&key, &holder("far"), ip("10.9.9.9"), false).map(|_| ip("10.9.9.9")));
    assert!(!reason.is_empty());
    assert_eq!(index.adopt(&key, &holder("fine"), ip("10.0.0.3"), false), Ok(()));
    // A claim served before keeps an address its pool has since left out (the pool reports it).
    assert_eq!(index.adopt(&key, &holder("shrunk"), ip("10.9.9.8"), true), Ok(()));
    assert_eq!(index.allocate(&key, &holder("fine"), Request::default()), Ok(ip("10.0.0.3")));
}

#[test]
fn a_hand_made_object_appearing_for_a_served_address_is_a_conflict_that_wakes_the_claim() {
    let (index, mut triggers) = Index::new(Duration::ZERO);
    let key = pool(&index);
    let served = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    while triggers.try_recv().is_ok() {}
    index.set_hold(&key, &holder("hand-made"), HoldKind::Object, Some(served));
    let woken: Vec<Trigger> = std::iter::from_fn(|| triggers.try_recv().ok()).collect();
    assert!(woken.contains(&Trigger::Claim(holder("vm"))), "{woken:?}");
    let reason = conflict(index.allocate(&key, &holder("vm"), Request::default()));
    assert!(reason.contains("ns/hand-made"), "{reason}");
    // Once the foreign object is gone, the claim is woken and keeps its address.
    index.set_hold(&key, &holder("hand-made"), HoldKind::Object, None);
    let woken: Vec<Trigger> = std::iter::from_fn(|| triggers.try_recv().ok()).collect();
    assert!(woken.contains(&Trigger::Claim(holder("vm"))), "{woken:?}");
    assert_eq!(index.allocate(&key, &holder("vm"), Request::default()), Ok(served));
}

#[test]
fn an_address_held_in_an_overlapping_pool_is_not_adopted() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = pool(&index);
    let other = PoolKey::in_cluster("ns", "q");
    index.upsert_pool(&other, &pool_spec(&["10.0.0.0/24"]), PoolFacts::default(), &[]);
    index.set_hold(&other, &HolderKey::new("ns", "elsewhere"), HoldKind::Object, Some(ip("10.0.0.2")));
    let reason = conflict(index.adopt(&key, &holder("vm"), ip("10.0.0.2"), true).map(|_| ip("10.0.0.2")));
    assert!(reason.contains("overlapping"), "{reason}");
}

#[test]
fn an_allocation_whose_address_object_is_not_written_yet_counts_as_in_flight() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = pool(&index);
    let served = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    let report = index.report(&key);
    assert_eq!((report.address_objects, report.in_flight), (0, 1));
    index.set_hold(&key, &holder("vm"), HoldKind::Object, Some(served));
    let report = index.report(&key);
    assert_eq!((report.address_objects, report.in_flight), (1, 0));
    index.allocate(&key, &holder("late"), Request::default()).unwrap();
    index.drop_unwritten(&key, &holder("late"));
    index.drop_unwritten(&key, &holder("vm"));
    let report = index.report(&key);
    assert_eq!((report.address_objects, report.in_flight, report.held), (1, 0, 1), "a written address is kept");
}

#[test]
fn slots_of_pools_that_do_not_exist_are_dropped_once_nothing_is_left_in_them() {
    let (index, _t) = Index::new(Duration::ZERO);
    let missing = PoolKey::in_cluster("ns", "typo");
    // A claim naming a pool that does not exist waits for it; an IPAddress may name it too.
    index.wait_for_pool(&missing, &holder("vm"));
    index.set_hold(&missing, &holder("stray"), HoldKind::Object, Some(ip("10.0.0.7")));
    assert_eq!(index.slots(), 1);
    index.release_claim(&missing, &holder("vm"));
    assert_eq!(index.slots(), 1, "the stray address still names it");
    index.set_hold(&missing, &holder("stray"), HoldKind::Object, None);
    assert_eq!(index.slots(), 0);
    // An existing pool keeps its slot, empty or not, until its object goes.
    let key = pool(&index);
    index.allocate(&key, &holder("a"), Request::default()).unwrap();
    index.release_claim(&key, &holder("a"));
    assert_eq!(index.slots(), 1);
    index.remove_pool(&key);
    assert_eq!(index.slots(), 0);
}
