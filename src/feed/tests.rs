//! The feeds, driven with synthetic watch events (no API server).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kube::runtime::watcher::Event;

use super::{AddressFeed, PoolFeed, SpokePools};
use crate::api::capi::{AddressSpec, IPAddress, LocalReference, PoolReference};
use crate::api::{CapiVersion, InClusterIPPool};
use crate::fixtures::pool_spec;
use crate::index::{HolderKey, Index, PoolKey, Request};

fn pool(name: &str, addresses: &[&str]) -> InClusterIPPool {
    let mut pool = InClusterIPPool::new(name, pool_spec(addresses));
    pool.metadata.namespace = Some("ns".into());
    pool
}

fn address(name: &str, pool: &str, ip: &str) -> IPAddress {
    let mut address = IPAddress::new(
        name,
        &CapiVersion::V1Beta2.address_resource(),
        AddressSpec {
            claim_ref: LocalReference { name: name.into() },
            pool_ref: PoolReference {
                api_group: Some("ipam.cluster.x-k8s.io".into()),
                kind: "InClusterIPPool".into(),
                name: pool.into(),
            },
            address: ip.into(),
            prefix: 24,
            gateway: None,
        },
    );
    address.metadata.namespace = Some("ns".into());
    address
}

fn counter() -> (Arc<AtomicUsize>, impl FnOnce() + Send + 'static) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    (count, move || {
        c.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn listed_addresses_are_never_allocated_again() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    pools.apply(&Event::Apply(pool("p", &["10.0.0.1-10.0.0.3"])));
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    for event in [
        Event::Init,
        Event::InitApply(address("a", "p", "10.0.0.1")),
        Event::InitApply(address("b", "p", "10.0.0.2")),
        Event::InitDone,
    ] {
        addresses.apply(&event);
    }
    let key = PoolKey::in_cluster("ns", "p");
    let ip = index.allocate(&key, &HolderKey::new("ns", "new"), Request::default()).expect("one address is left");
    assert_eq!(ip.to_string(), "10.0.0.3");
}

#[test]
fn readiness_callback_runs_once_after_the_first_listing() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (count, listed) = counter();
    let mut addresses = AddressFeed::new(index, listed);
    addresses.apply(&Event::Init);
    assert_eq!(count.load(Ordering::SeqCst), 0);
    addresses.apply(&Event::InitDone);
    addresses.apply(&Event::Init);
    addresses.apply(&Event::InitDone);
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn relisting_forgets_addresses_deleted_while_the_watch_was_down() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    pools.apply(&Event::Apply(pool("p", &["10.0.0.1"])));
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    addresses.apply(&Event::Apply(address("a", "p", "10.0.0.1")));
    let key = PoolKey::in_cluster("ns", "p");
    assert!(index.allocate(&key, &HolderKey::new("ns", "x"), Request::default()).is_err());
    // A re-list that no longer contains "a".
    addresses.apply(&Event::Init);
    addresses.apply(&Event::InitDone);
    assert_eq!(
        index.allocate(&key, &HolderKey::new("ns", "x"), Request::default()).map(|ip| ip.to_string()),
        Ok("10.0.0.1".to_owned())
    );
}

#[test]
fn a_deleted_pool_allocates_nothing_but_keeps_its_holders() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    let p = pool("p", &["10.0.0.1-10.0.0.2"]);
    pools.apply(&Event::Apply(p.clone()));
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    addresses.apply(&Event::Apply(address("a", "p", "10.0.0.1")));
    pools.apply(&Event::Delete(p.clone()));
    let key = PoolKey::in_cluster("ns", "p");
    assert!(index.allocate(&key, &HolderKey::new("ns", "x"), Request::default()).is_err());
    pools.apply(&Event::Apply(p));
    assert_eq!(
        index.allocate(&key, &HolderKey::new("ns", "x"), Request::default()).map(|ip| ip.to_string()),
        Ok("10.0.0.2".to_owned())
    );
}

#[test]
fn addresses_of_other_providers_pools_are_ignored() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    let mut foreign = address("a", "p", "10.0.0.1");
    foreign.spec.pool_ref.api_group = Some("ipam.metal3.io".into());
    addresses.apply(&Event::Apply(foreign));
    assert_eq!(index.report(&PoolKey::in_cluster("ns", "p")).address_objects, 0);
}

fn claim_triggers(triggers: &mut tokio::sync::mpsc::UnboundedReceiver<crate::index::Trigger>) -> Vec<HolderKey> {
    let mut claims = Vec::new();
    while let Ok(trigger) = triggers.try_recv() {
        if let crate::index::Trigger::Claim(holder) = trigger {
            claims.push(holder);
        }
    }
    claims
}

fn protected(mut address: IPAddress) -> IPAddress {
    address.metadata.finalizers = Some(vec![crate::api::keys::PROTECT_ADDRESS_FINALIZER.into()]);
    address
}

#[test]
fn the_echo_of_a_claims_own_address_does_not_wake_it_but_changes_and_deletion_do() {
    let (index, mut triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    pools.apply(&Event::Apply(pool("p", &["10.0.0.1-10.0.0.3"])));
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    let key = PoolKey::in_cluster("ns", "p");
    let holder = HolderKey::new("ns", "a");
    let ip = index.allocate(&key, &holder, Request::default()).expect("room");
    claim_triggers(&mut triggers);

    let created = protected(address("a", "p", &ip.to_string()));
    addresses.apply(&Event::Apply(created.clone()));
    addresses.apply(&Event::Apply(created.clone()));
    assert_eq!(claim_triggers(&mut triggers), Vec::<HolderKey>::new());

    let mut deleting = created.clone();
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    addresses.apply(&Event::Apply(deleting));
    assert_eq!(claim_triggers(&mut triggers), vec![holder.clone()]);
    addresses.apply(&Event::Delete(created));
    assert_eq!(claim_triggers(&mut triggers), vec![holder.clone()]);

    // Made by hand for a claim that holds nothing: the claim must adopt (or refuse) it.
    addresses.apply(&Event::Apply(protected(address("b", "p", "10.0.0.3"))));
    assert_eq!(claim_triggers(&mut triggers), vec![HolderKey::new("ns", "b")]);
}

#[test]
fn an_address_moved_to_another_pool_lets_go_of_the_old_one() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    pools.apply(&Event::Apply(pool("p", &["10.0.0.1"])));
    pools.apply(&Event::Apply(pool("q", &["10.0.0.1"])));
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index.clone(), listed);
    addresses.apply(&Event::Apply(address("a", "p", "10.0.0.1")));
    addresses.apply(&Event::Apply(address("a", "q", "10.0.0.1")));
    assert_eq!(index.report(&PoolKey::in_cluster("ns", "p")).address_objects, 0);
    assert_eq!(index.report(&PoolKey::in_cluster("ns", "q")).address_objects, 1);
}

#[test]
fn addresses_of_one_pool_share_its_key_and_the_key_goes_with_the_last_of_them() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut addresses = AddressFeed::new(index, listed);
    addresses.apply(&Event::Apply(address("a", "p", "10.0.0.1")));
    addresses.apply(&Event::Apply(address("b", "p", "10.0.0.2")));
    let (a, b) = (HolderKey::new("ns", "a"), HolderKey::new("ns", "b"));
    assert!(Arc::ptr_eq(&addresses.known[&a], &addresses.known[&b]), "one key for the pool");
    assert_eq!(addresses.pools.len(), 1);
    addresses.apply(&Event::Apply(address("b", "q", "10.0.0.2")));
    assert_eq!(addresses.pools.len(), 2, "b moved to q");
    addresses.apply(&Event::Delete(address("a", "p", "10.0.0.1")));
    assert_eq!(*addresses.known[&b], PoolKey::in_cluster("ns", "q"));
    assert_eq!(addresses.pools.len(), 1, "p has no address left");
    addresses.apply(&Event::Delete(address("b", "q", "10.0.0.2")));
    assert!(addresses.pools.is_empty() && addresses.known.is_empty());
}

#[test]
fn after_a_watch_failure_nothing_is_allocated_until_the_addresses_are_listed_again() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let (_, listed) = counter();
    let mut pools = PoolFeed::new(index.clone(), SpokePools::new(index.clone()), listed);
    pools.apply(&Event::Apply(pool("p", &["10.0.0.1-10.0.0.3"])));
    let mut addresses = AddressFeed::new(index.clone(), {
        let index = index.clone();
        move || index.set_ready()
    });
    for event in [Event::Init, Event::InitApply(address("a", "p", "10.0.0.1")), Event::InitDone] {
        addresses.apply(&event);
    }
    assert!(index.is_ready());
    addresses.failed();
    assert!(!index.is_ready(), "claims wait while addresses may have changed unseen");
    // Meanwhile "a" was deleted and "hand-made" created: the new listing says so.
    for event in [Event::Init, Event::InitApply(address("hand-made", "p", "10.0.0.2"))] {
        addresses.apply(&event);
    }
    assert!(!index.is_ready(), "a listing counts only once complete");
    addresses.apply(&Event::InitDone);
    assert!(index.is_ready());
    let key = PoolKey::in_cluster("ns", "p");
    let first = index.allocate(&key, &HolderKey::new("ns", "x"), Request::default()).unwrap();
    assert_eq!(first.to_string(), "10.0.0.1", "the address deleted meanwhile is free again");
    let second = index.allocate(&key, &HolderKey::new("ns", "y"), Request::default()).unwrap();
    assert_eq!(second.to_string(), "10.0.0.3", "the hand-made one is never handed out");
}

#[test]
fn a_spoke_pool_hands_out_only_addresses_of_its_blocks_and_keeps_a_block_someone_holds() {
    let (index, _triggers) = Index::new(std::time::Duration::ZERO);
    let spokes = SpokePools::new(index.clone());
    let mut pools = PoolFeed::new(index.clone(), spokes.clone(), || {});
    let mut spoke = pool("p", &["10.0.0.0/24"]);
    spoke.spec.hub = Some(Box::new(crate::api::hub::HubSource {
        kubeconfig_secret: "hub".into(),
        namespace: "spoke-a".into(),
        pool: crate::api::hub::HubPoolReference {
            kind: "GlobalInClusterIPPool".into(),
            name: "shared".into(),
            namespace: None,
        },
        block_size: None,
    }));
    pools.apply(&Event::Apply(spoke));
    let key = PoolKey::in_cluster("ns", "p");
    let claim = HolderKey::new("ns", "c");
    assert_eq!(
        index.allocate(&key, &claim, Request::default()),
        Err(crate::index::AllocError::Exhausted(crate::allocator::Family::V4)),
        "no block is known yet: nothing is allocatable, and the pool is not invalid for it"
    );

    let block: ipnet::IpNet = "10.0.0.16/28".parse().unwrap();
    spokes.set_blocks(&key, vec![block]);
    let ip = index.allocate(&key, &claim, Request::default()).expect("the block has room");
    assert!(block.contains(&ip), "{ip} is in {block}");

    assert!(!spokes.vacate(&key, block), "a claim holds an address of the block");
    assert_eq!(spokes.blocks(&key), Some(vec![block]));
    index.release_claim(&key, &claim);
    assert!(spokes.vacate(&key, block), "nobody holds an address of it any more");
    assert_eq!(spokes.blocks(&key), Some(vec![]));
    assert!(index.allocate(&key, &claim, Request::default()).is_err(), "the vacated block is not allocatable");
}
