//! The index with synthetic holds (no API server).

use std::time::Duration;

use super::*;
use crate::api::IPPoolSpec;
use crate::fixtures::{holder, pool_spec, ready_pool};

#[test]
fn a_recreated_claim_gets_its_released_address_back_while_it_is_free() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    let low = index.allocate(&key, &holder("low"), Request::default()).unwrap();
    let kept = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.release_claim(&key, &holder("low"));
    index.release_claim(&key, &holder("vm"));
    // Lower addresses are free, yet the claim of the same name gets its own back.
    assert_eq!(index.allocate(&key, &holder("vm"), Request::default()), Ok(kept));
    assert_eq!(index.allocate(&key, &holder("other"), Request::default()), Ok(low));
}

#[test]
fn a_remembered_address_reserves_nothing_for_others() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    let ip = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.release_claim(&key, &holder("vm"));
    assert_eq!(index.allocate(&key, &holder("other"), Request::default()), Ok(ip), "lowest free first, as ever");
    let back = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    assert_ne!(back, ip, "taken meanwhile: the claim gets another address");
}

#[test]
fn without_a_sticky_window_nothing_is_remembered() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    index.allocate(&key, &holder("low"), Request::default()).unwrap();
    index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.release_claim(&key, &holder("low"));
    index.release_claim(&key, &holder("vm"));
    assert_eq!(index.allocate(&key, &holder("vm"), Request::default()).map(|i| i.to_string()), Ok("10.0.0.1".into()));
    assert!(index.report(&key).remembered.is_empty());
}

#[test]
fn remembered_addresses_are_reported_with_their_claim() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.release_claim(&key, &holder("vm"));
    let report = index.report(&key);
    assert_eq!((report.families[0].free, report.families[0].used), (5, 0));
    assert_eq!(report.remembered.len(), 1);
    assert_eq!(report.remembered[0].0, holder("vm"));
}

#[test]
fn remembered_addresses_survive_a_restart_through_the_pool_status() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = PoolKey::in_cluster("ns", "p");
    let until = Timestamp::now().saturating_add(SignedDuration::from_secs(60)).unwrap();
    let remembered = [(holder("vm"), "10.0.0.3".parse().unwrap(), until)];
    index.upsert_pool(&key, &pool_spec(&["10.0.0.1-10.0.0.5"]), PoolFacts::default(), &remembered);
    assert_eq!(index.allocate(&key, &holder("vm"), Request::default()).map(|ip| ip.to_string()), Ok("10.0.0.3".into()));
}

#[test]
fn expired_memories_are_forgotten() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = PoolKey::in_cluster("ns", "p");
    let past = Timestamp::now().saturating_sub(SignedDuration::from_secs(1)).unwrap();
    let remembered = [(holder("vm"), "10.0.0.3".parse().unwrap(), past)];
    index.upsert_pool(&key, &pool_spec(&["10.0.0.1-10.0.0.5"]), PoolFacts::default(), &remembered);
    assert_eq!(index.allocate(&key, &holder("vm"), Request::default()).map(|ip| ip.to_string()), Ok("10.0.0.1".into()));
}

#[test]
fn an_explicit_request_wins_over_a_memory() {
    let (index, _t) = Index::new(Duration::from_secs(600));
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.release_claim(&key, &holder("vm"));
    let wanted = "10.0.0.4".parse().unwrap();
    assert_eq!(
        index.allocate(&key, &holder("vm"), Request { address: Some(wanted), ..Request::default() }),
        Ok(wanted)
    );
}

#[test]
fn two_objects_on_one_address_are_reported_as_a_conflict_and_the_address_stays_taken() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.2"]);
    let ip = "10.0.0.1".parse().unwrap();
    index.set_hold(&key, &holder("a"), HoldKind::Object, Some(ip));
    index.set_hold(&key, &holder("b"), HoldKind::Object, Some(ip));
    assert_eq!(index.report(&key).conflicts, vec![(ip, vec![holder("a"), holder("b")])]);
    index.set_hold(&key, &holder("a"), HoldKind::Object, None);
    assert_eq!(index.allocate(&key, &holder("c"), Request::default()).map(|i| i.to_string()), Ok("10.0.0.2".into()));
}

#[test]
fn overlapping_pools_never_hand_out_an_address_the_other_holds() {
    let (index, _t) = Index::new(Duration::ZERO);
    let a = PoolKey::in_cluster("ns", "a");
    let g = PoolKey::global("g");
    index.upsert_pool(&a, &pool_spec(&["10.0.0.1-10.0.0.3"]), PoolFacts::default(), &[]);
    index.upsert_pool(&g, &pool_spec(&["10.0.0.2-10.0.0.4"]), PoolFacts::default(), &[]);
    // A hand-made IPAddress in the global pool holds .2.
    index.set_hold(&g, &HolderKey::new("other", "x"), HoldKind::Object, Some("10.0.0.2".parse().unwrap()));
    let got: Vec<String> =
        ["c1", "c2"].iter().map(|n| index.allocate(&a, &holder(n), Request::default()).unwrap().to_string()).collect();
    assert_eq!(got, ["10.0.0.1", "10.0.0.3"], ".2 is skipped");
    // And the global pool skips what the namespaced one handed out.
    assert_eq!(index.allocate(&g, &holder("c3"), Request::default()).map(|i| i.to_string()), Ok("10.0.0.4".into()));
    let refused =
        index.allocate(&g, &holder("c4"), Request { address: Some("10.0.0.1".parse().unwrap()), ..Request::default() });
    assert!(matches!(refused, Err(AllocError::Requested { .. })), "{refused:?}");
}

#[test]
fn an_address_skipped_for_an_overlapping_pool_comes_back_once_that_pool_lets_it_go() {
    let (index, _t) = Index::new(Duration::ZERO);
    let a = PoolKey::in_cluster("ns", "a");
    let b = PoolKey::in_cluster("ns", "b");
    index.upsert_pool(&a, &pool_spec(&["10.0.0.1"]), PoolFacts::default(), &[]);
    index.upsert_pool(&b, &pool_spec(&["10.0.0.1"]), PoolFacts::default(), &[]);
    index.allocate(&b, &holder("in-b"), Request::default()).unwrap();
    assert!(index.allocate(&a, &holder("in-a"), Request::default()).is_err());
    index.release_claim(&b, &holder("in-b"));
    index.expire_remembered();
    assert_eq!(index.allocate(&a, &holder("in-a"), Request::default()).map(|i| i.to_string()), Ok("10.0.0.1".into()));
}

#[test]
fn a_pool_moves_between_missing_invalid_and_ready_and_its_holds_outlive_each_state() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = PoolKey::in_cluster("ns", "p");
    let vm = holder("vm");
    assert_eq!(index.allocate(&key, &vm, Request::default()), Err(AllocError::PoolMissing), "never seen");

    assert_eq!(ready_pool(&index, &["10.0.0.1-10.0.0.5"]), key);
    let taken = index.allocate(&key, &vm, Request::default()).unwrap();
    assert!(index.pool_spec(&key).is_some() && index.pool_facts(&key).is_some());

    // An edit that makes the spec invalid: nothing is handed out, the reason is kept, the hold stays.
    index.upsert_pool(&key, &pool_spec(&["10.0.0.9-10.0.0.1"]), PoolFacts::default(), &[]);
    match index.allocate(&key, &holder("other"), Request::default()) {
        Err(AllocError::PoolInvalid(reason)) => assert!(reason.contains("10.0.0.9-10.0.0.1"), "{reason}"),
        other => panic!("expected PoolInvalid, got {other:?}"),
    }
    assert_eq!(index.claim_hold(&key, &vm), Some(taken));

    // Deleted: spec and facts are gone, the hold is not.
    index.remove_pool(&key);
    assert_eq!(index.allocate(&key, &holder("other"), Request::default()), Err(AllocError::PoolMissing));
    assert!(index.pool_spec(&key).is_none() && index.pool_facts(&key).is_none());
    assert_eq!(index.claim_hold(&key, &vm), Some(taken));

    // Back, valid again: the held address is still taken.
    ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    assert_ne!(index.allocate(&key, &holder("other"), Request::default()), Ok(taken));
}

fn woken_pools(triggers: &mut tokio::sync::mpsc::UnboundedReceiver<Trigger>) -> Vec<String> {
    let mut woken = Vec::new();
    while let Ok(trigger) = triggers.try_recv() {
        if let Trigger::Pool(key) = trigger {
            woken.push(key.name);
        }
    }
    woken.sort();
    woken
}

/// A pool being deleted waits for every reference: its last claim's release must wake it, even
/// when the claim's `IPAddress` went first (then the claim hold alone kept it, "in flight").
#[test]
fn releasing_a_claim_wakes_its_pool_after_its_address_object_went_first() {
    let (index, mut triggers) = Index::new(Duration::ZERO);
    let key = ready_pool(&index, &["10.0.0.1-10.0.0.5"]);
    let ip = index.allocate(&key, &holder("vm"), Request::default()).unwrap();
    index.set_hold(&key, &holder("vm"), HoldKind::Object, Some(ip));
    index.set_hold(&key, &holder("vm"), HoldKind::Object, None);
    assert_eq!(index.report(&key).in_flight, 1, "the claim hold alone is left");
    woken_pools(&mut triggers);
    index.release_claim(&key, &holder("vm"));
    assert_eq!(index.report(&key).in_flight, 0);
    assert_eq!(woken_pools(&mut triggers), ["p"], "the pool is not woken by the release");
}

#[test]
fn pools_listed_at_start_do_not_wake_each_other_but_a_later_edit_wakes_the_pools_it_overlapped_or_overlaps() {
    let (index, mut triggers) = Index::new(Duration::ZERO);
    let keys: Vec<PoolKey> = (0..3).map(|n| PoolKey::in_cluster("ns", &format!("p{n}"))).collect();
    for (n, key) in keys.iter().enumerate() {
        index.upsert_pool(key, &pool_spec(&[&format!("10.0.{n}.1-10.0.{n}.9")]), PoolFacts::default(), &[]);
    }
    let mut sent = Vec::new();
    while let Ok(trigger) = triggers.try_recv() {
        sent.push(trigger);
    }
    let expected: Vec<Trigger> = keys.iter().map(|k| Trigger::Pool(k.clone())).collect();
    assert_eq!(sent, expected, "each pool once, its neighbours not at all");

    index.set_ready();
    // p0 moves onto p1: p1 is to see the overlap, p2 (same namespace, apart) is left alone.
    index.upsert_pool(&keys[0], &pool_spec(&["10.0.1.1-10.0.1.9"]), PoolFacts::default(), &[]);
    assert_eq!(woken_pools(&mut triggers), ["p0", "p1"]);
    // p0 moves next to p2: p1 is to see the overlap end, p2 to see one begin.
    index.upsert_pool(&keys[0], &pool_spec(&["10.0.2.5-10.0.2.20"]), PoolFacts::default(), &[]);
    assert_eq!(woken_pools(&mut triggers), ["p0", "p1", "p2"]);
    // A change of facts only moves no range: nobody else is woken.
    let paused = PoolFacts { paused: true, ..PoolFacts::default() };
    index.upsert_pool(&keys[0], &pool_spec(&["10.0.2.5-10.0.2.20"]), paused, &[]);
    assert_eq!(woken_pools(&mut triggers), ["p0"]);
    // Deleted: the pool it overlapped is to see the overlap end.
    index.remove_pool(&keys[0]);
    assert_eq!(woken_pools(&mut triggers), ["p2"]);
}

#[test]
fn a_pools_report_names_the_pools_it_overlaps_until_they_go() {
    let (index, _t) = Index::new(Duration::ZERO);
    let (a, b, far) =
        (PoolKey::in_cluster("ns", "a"), PoolKey::in_cluster("ns", "b"), PoolKey::in_cluster("ns", "far"));
    index.upsert_pool(&a, &pool_spec(&["10.0.0.1-10.0.0.20"]), PoolFacts::default(), &[]);
    index.upsert_pool(&b, &pool_spec(&["10.0.0.10-10.0.0.30"]), PoolFacts::default(), &[]);
    index.upsert_pool(&far, &pool_spec(&["10.9.0.1-10.9.0.9"]), PoolFacts::default(), &[]);
    assert_eq!(index.report(&a).overlaps, vec![b.clone()]);
    assert!(index.report(&far).overlaps.is_empty());
    index.remove_pool(&b);
    assert!(index.report(&a).overlaps.is_empty(), "a deleted pool overlaps nothing");
}

fn lrr_spec(addresses: &[&str]) -> IPPoolSpec {
    IPPoolSpec {
        allocation_strategy: Some(crate::api::AllocationStrategy::LeastRecentlyReleased),
        ..pool_spec(addresses)
    }
}

#[test]
fn a_least_recently_released_pool_keeps_its_release_order_over_an_edit_and_a_restart() {
    let (index, _t) = Index::new(Duration::ZERO);
    let key = PoolKey::in_cluster("ns", "p");
    index.upsert_pool(&key, &lrr_spec(&["10.0.0.1-10.0.0.4"]), PoolFacts::default(), &[]);
    let first = index.allocate(&key, &holder("a"), Request::default()).unwrap();
    index.release_claim(&key, &holder("a"));
    // An edit keeps 10.0.0.1 at the back of the line.
    index.upsert_pool(&key, &lrr_spec(&["10.0.0.1-10.0.0.5"]), PoolFacts::default(), &[]);
    let next = index.allocate(&key, &holder("b"), Request::default()).unwrap();
    assert_eq!((first.to_string(), next.to_string()), ("10.0.0.1".into(), "10.0.0.2".into()));

    // A new process learns the order from the pool's status (its sticky memory) only.
    let (restarted, _t) = Index::new(Duration::from_secs(600));
    let until = Timestamp::now().checked_add(SignedDuration::from_secs(60)).unwrap();
    let remembered = [(holder("a"), first, until)];
    restarted.upsert_pool(&key, &lrr_spec(&["10.0.0.1-10.0.0.5"]), PoolFacts::default(), &remembered);
    let after = restarted.allocate(&key, &holder("c"), Request::default()).unwrap();
    assert_eq!(after.to_string(), "10.0.0.2", "10.0.0.1 was released lately, the status says");
}
