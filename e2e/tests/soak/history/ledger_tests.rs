use super::*;

fn namespaced(namespace: &str, pool: &str) -> PoolId {
    PoolId::Namespaced { namespace: namespace.into(), name: pool.into() }
}

fn global(pool: &str) -> PoolId {
    PoolId::Global { name: pool.into() }
}

fn held(key: &str, ip: &str, pool: PoolId, rv: u64) -> Observed {
    Observed {
        key: key.into(),
        uid: format!("uid-{key}-{rv}"),
        resource_version: rv.to_string(),
        ip: ip.parse().unwrap(),
        pool,
        hand_made: false,
    }
}

fn by_hand(mut observed: Observed) -> Observed {
    observed.hand_made = true;
    observed
}

#[test]
fn an_address_handed_out_while_another_of_its_pool_holds_it_is_a_duplicate_at_once() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/c-1", "10.0.0.5", namespaced("a", "p"), 10), "ADDED");
    ledger.upsert(held("a/c-2", "10.0.0.5", namespaced("a", "p"), 11), "ADDED");
    assert_eq!(ledger.duplicates.len(), 1, "{:?}", ledger.duplicates);
    assert!(ledger.duplicates[0].contains("a/c-1") && ledger.duplicates[0].contains("a/c-2"));
    // It was a moment of the history: deleting one later does not undo it, nor does a
    // MODIFIED event of the other count it twice.
    ledger.upsert(held("a/c-2", "10.0.0.5", namespaced("a", "p"), 11), "MODIFIED");
    ledger.delete("a/c-1");
    assert_eq!(ledger.duplicates.len(), 1);
}

#[test]
fn an_address_handed_out_again_after_its_deletion_is_no_duplicate() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/c-1", "10.0.0.5", namespaced("a", "p"), 10), "ADDED");
    ledger.delete("a/c-1");
    ledger.upsert(held("a/c-2", "10.0.0.5", namespaced("a", "p"), 12), "ADDED");
    assert!(ledger.duplicates.is_empty());
    assert_eq!((ledger.handed_out, ledger.deleted, ledger.live()), (2, 1, 1));
}

#[test]
fn pools_share_within_a_namespace_and_with_global_pools_not_across_namespaces() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/x", "10.0.0.5", namespaced("a", "p"), 10), "ADDED");
    ledger.upsert(held("b/y", "10.0.0.5", namespaced("b", "p"), 11), "ADDED");
    assert!(ledger.duplicates.is_empty(), "two namespaces may be two networks");
    ledger.upsert(held("a/z", "10.0.0.5", namespaced("a", "other"), 12), "ADDED");
    assert_eq!(ledger.duplicates.len(), 1, "two pools of one namespace share");
    ledger.upsert(held("b/g", "10.0.0.5", global("g"), 13), "ADDED");
    assert_eq!(ledger.duplicates.len(), 4, "a global pool shares with every pool: {:?}", ledger.duplicates);
}

#[test]
fn an_address_made_by_hand_over_a_handed_out_one_is_the_workloads_collision_the_reverse_a_duplicate() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/c-1", "10.0.0.5", namespaced("a", "p"), 10), "ADDED");
    ledger.upsert(by_hand(held("a/hand-1", "10.0.0.5", namespaced("a", "p"), 11)), "ADDED");
    assert_eq!((ledger.duplicates.len(), ledger.collisions.len()), (0, 1));
    ledger.upsert(by_hand(held("a/hand-2", "10.0.0.6", namespaced("a", "p"), 12)), "ADDED");
    ledger.upsert(by_hand(held("a/hand-3", "10.0.0.6", namespaced("a", "p"), 13)), "ADDED");
    assert_eq!(ledger.collisions.len(), 1, "two made by hand may collide (the fault suite does it on purpose)");
    ledger.upsert(held("a/c-2", "10.0.0.6", namespaced("a", "p"), 14), "ADDED");
    assert_eq!(ledger.duplicates.len(), 2, "ferro-ipam handed out an address two hand-made ones hold");
}

#[test]
fn a_relist_deletes_what_it_lacks_adds_what_is_new_and_judges_it() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/old", "10.0.0.1", namespaced("a", "p"), 10), "ADDED");
    ledger.upsert(held("a/kept", "10.0.0.2", namespaced("a", "p"), 11), "ADDED");
    let listed = vec![
        held("a/new-2", "10.0.0.3", namespaced("a", "p"), 31),
        held("a/kept", "10.0.0.2", namespaced("a", "p"), 11),
        held("a/new-1", "10.0.0.3", namespaced("a", "p"), 30),
    ];
    assert_eq!(ledger.relist(listed.clone(), "40"), (1, 2));
    assert_eq!(ledger.duplicates.len(), 1, "two live in one list held one address");
    assert!(ledger.duplicates[0].contains("since the relist at resourceVersion 40"));
    assert!(ledger.differences(&listed).is_empty());
    assert_eq!(ledger.differences(&listed[..1]).len(), 2);
}

#[test]
fn an_object_deleted_and_made_again_under_its_name_is_a_new_holder() {
    let mut ledger = Ledger::default();
    ledger.upsert(held("a/c-1", "10.0.0.5", namespaced("a", "p"), 10), "ADDED");
    let again = held("a/c-1", "10.0.0.9", namespaced("a", "p"), 20);
    assert_eq!(ledger.relist(vec![again], "21"), (0, 1));
    assert_eq!((ledger.live(), ledger.handed_out), (1, 2));
    ledger.upsert(held("a/c-2", "10.0.0.5", namespaced("a", "p"), 22), "ADDED");
    assert!(ledger.duplicates.is_empty(), "10.0.0.5 was freed when c-1 was made again with another address");
}
