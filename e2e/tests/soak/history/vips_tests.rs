use super::*;

fn cluster(name: &str, rv: Revision, endpoint: Option<&str>) -> ClusterSeen {
    ClusterSeen {
        uid: format!("uid-{name}"),
        revision: rv,
        asks: true,
        endpoint: endpoint.map(str::to_owned),
        deleting: false,
    }
}

fn deleting(mut seen: ClusterSeen, rv: Revision) -> ClusterSeen {
    seen.deleting = true;
    seen.revision = rv;
    seen
}

fn address(name: &str, rv: Revision, ip: &str) -> AddressSeen {
    AddressSeen { uid: format!("uid-{name}"), revision: rv, ip: ip.into() }
}

fn moment(clusters: &[(&str, ClusterSeen)], addresses: &[(&str, AddressSeen)]) -> Moment {
    Moment {
        clusters: clusters.iter().map(|(k, c)| (k.to_string(), c.clone())).collect(),
        addresses: addresses.iter().map(|(k, a)| (k.to_string(), a.clone())).collect(),
    }
}

/// A ledger whose two watches have listed nothing at revision 1.
fn started() -> VipLedger {
    let mut ledger = VipLedger::default();
    ledger.clusters_listed(vec![], 1);
    ledger.addresses_listed(vec![], 1);
    ledger
}

/// `a/wl` asks for a VIP (rv 10), gets its IPAddress with 10.0.0.5 (rv 11) and its endpoint (rv 12).
fn served(ledger: &mut VipLedger) {
    ledger.cluster("a/wl".into(), cluster("wl", 10, None));
    ledger.address(Some(("a/wl-control-plane-vip".into(), address("wl", 11, "10.0.0.5"))), 11);
    ledger.cluster("a/wl".into(), cluster("wl", 12, Some("10.0.0.5")));
}

#[test]
fn an_endpoint_held_by_its_own_clusters_vip_address_is_not_lost() {
    let held = moment(
        &[("a/wl", cluster("wl", 12, Some("fd00::5")))],
        &[("a/wl-control-plane-vip", address("wl", 11, "fd00:0::5"))],
    );
    assert_eq!(vip_rules::lost(&held), vec![], "the same address, spelled another way");
    let waiting = moment(&[("a/wl", cluster("wl", 10, None))], &[]);
    assert_eq!(vip_rules::lost(&waiting), vec![], "no endpoint yet, nothing to hold");
}

#[test]
fn an_endpoint_whose_vip_address_is_gone_or_records_another_is_lost() {
    let gone = moment(&[("a/wl", cluster("wl", 12, Some("10.0.0.5")))], &[]);
    let lost = vip_rules::lost(&gone);
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(lost[0].what.contains("a/wl-control-plane-vip is gone"), "{}", lost[0].what);
    let other = moment(
        &[("a/wl", cluster("wl", 12, Some("10.0.0.5")))],
        &[("a/wl-control-plane-vip", address("wl", 13, "10.0.0.6"))],
    );
    assert!(vip_rules::lost(&other).iter().any(|b| b.what.contains("records 10.0.0.6")));
    let elsewhere = moment(
        &[("a/wl", cluster("wl", 12, Some("10.0.0.5")))],
        &[("b/wl-control-plane-vip", address("wl", 11, "10.0.0.5"))],
    );
    assert_eq!(vip_rules::lost(&elsewhere).len(), 1, "the IPAddress of another namespace is not the Cluster's");
}

#[test]
fn a_cluster_being_deleted_may_lose_its_vip_and_one_not_asking_is_not_judged() {
    let released = moment(&[("a/wl", deleting(cluster("wl", 12, Some("10.0.0.5")), 20))], &[]);
    assert_eq!(vip_rules::lost(&released), vec![], "from its deletionTimestamp on, the VIP is released");
    let mut own = cluster("wl", 12, Some("192.0.2.10"));
    own.asks = false;
    assert_eq!(vip_rules::lost(&moment(&[("a/wl", own)], &[])), vec![], "an endpoint ferro-ipam did not write");
}

#[test]
fn two_live_clusters_with_one_endpoint_are_a_duplicate_until_one_is_being_deleted() {
    let (one, two) = (cluster("one", 12, Some("10.0.0.5")), cluster("two", 14, Some("10.0.0.5")));
    let shared = vip_rules::duplicated(&moment(&[("a/one", one.clone()), ("a/two", two.clone())], &[]));
    assert_eq!(shared.len(), 1, "{shared:?}");
    assert!(shared[0].what.contains("a/one") && shared[0].what.contains("a/two"));
    let leaving = moment(&[("a/one", deleting(one, 13)), ("a/two", two)], &[]);
    assert_eq!(vip_rules::duplicated(&leaving), vec![], "the first one released its VIP to the second");
}

#[test]
fn an_address_of_one_clusters_vip_claim_recording_another_live_clusters_endpoint_is_a_duplicate() {
    let taken = moment(
        &[("a/one", cluster("one", 12, Some("10.0.0.5"))), ("a/two", cluster("two", 14, None))],
        &[("a/two-control-plane-vip", address("two", 13, "10.0.0.5"))],
    );
    let held = vip_rules::duplicated(&taken);
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].what.contains("IPAddress a/two-control-plane-vip") && held[0].what.contains("Cluster a/one"));
    let owner_leaving = moment(
        &[("a/one", deleting(cluster("one", 12, Some("10.0.0.5")), 15))],
        &[("a/two-control-plane-vip", address("two", 13, "10.0.0.5"))],
    );
    assert_eq!(vip_rules::duplicated(&owner_leaving), vec![]);
    let own = moment(
        &[("a/one", cluster("one", 12, Some("10.0.0.5")))],
        &[("a/one-control-plane-vip", address("one", 11, "10.0.0.5"))],
    );
    assert_eq!(vip_rules::duplicated(&own), vec![], "a Cluster's own VIP");
}

#[test]
fn the_two_watches_are_judged_in_resource_version_order_whatever_the_order_they_arrive_in() {
    // The IPAddress watch delivers the address's deletion (rv 21) before the Cluster watch
    // delivers the deletionTimestamp (rv 20): the Cluster was being deleted first.
    let mut ledger = started();
    served(&mut ledger);
    ledger.address_gone("a/wl-control-plane-vip", 21);
    ledger.cluster("a/wl".into(), deleting(cluster("wl", 12, Some("10.0.0.5")), 20));
    ledger.cluster_gone("a/wl", 22);
    ledger.addresses_through(22);
    assert_eq!((ledger.lost.len(), ledger.unjudged()), (0, 0), "{:?}", ledger.lost);
    // The other way round: the address went (rv 19) before the deletionTimestamp (rv 20).
    let mut ledger = started();
    served(&mut ledger);
    ledger.address_gone("a/wl-control-plane-vip", 19);
    ledger.cluster("a/wl".into(), deleting(cluster("wl", 12, Some("10.0.0.5")), 20));
    assert_eq!(ledger.lost.len(), 1, "{:?}", ledger.lost);
    assert!(ledger.lost[0].starts_with("at resourceVersion 19:"), "{}", ledger.lost[0]);
}

#[test]
fn a_breach_that_came_and_went_is_still_a_failure_and_is_reported_once() {
    let mut ledger = started();
    served(&mut ledger);
    ledger.cluster("a/two".into(), cluster("two", 13, None));
    // ferro-ipam hands a/wl's VIP to a/two's claim while a/wl holds it, then takes it back.
    ledger.address(Some(("a/two-control-plane-vip".into(), address("two", 14, "10.0.0.5"))), 14);
    ledger.address(Some(("a/two-control-plane-vip".into(), address("two", 16, "10.0.0.5"))), 16);
    ledger.address_gone("a/two-control-plane-vip", 17);
    ledger.clusters_through(17);
    assert_eq!(ledger.duplicated.len(), 1, "{:?}", ledger.duplicated);
    assert!(ledger.duplicated[0].starts_with("at resourceVersion 14:"));
}

#[test]
fn moments_inside_a_gap_are_not_judged_and_the_list_that_closes_it_is() {
    let mut ledger = started();
    served(&mut ledger);
    // The Cluster watch is refused with 410 Gone after rv 12 and lists again at 30, where a/wl
    // is gone: its deletionTimestamp, unseen, came before its VIP's release at 21, which the
    // IPAddress watch delivered. The moments between are not judged.
    ledger.address_gone("a/wl-control-plane-vip", 21);
    ledger.clusters_listed(vec![], 30);
    ledger.addresses_through(30);
    assert_eq!((ledger.lost.len(), ledger.unjudged()), (0, 0), "{:?}", ledger.lost);
    // A list that shows a live Cluster's VIP gone is judged at once.
    ledger.cluster("a/two".into(), cluster("two", 31, None));
    ledger.address(Some(("a/two-control-plane-vip".into(), address("two", 32, "10.0.0.6"))), 32);
    ledger.cluster("a/two".into(), cluster("two", 33, Some("10.0.0.6")));
    ledger.addresses_listed(vec![], 40);
    ledger.clusters_through(40);
    assert_eq!(ledger.lost.len(), 1, "{:?}", ledger.lost);
    assert!(ledger.lost[0].starts_with("at resourceVersion 40:"), "{}", ledger.lost[0]);
}

#[test]
fn nothing_is_judged_past_what_both_watches_have_delivered_until_fresh_lists_agree() {
    let mut ledger = started();
    served(&mut ledger);
    // The address is gone at 21; the Cluster watch has delivered only up to 12 so far.
    ledger.address_gone("a/wl-control-plane-vip", 21);
    assert_eq!((ledger.lost.len(), ledger.unjudged()), (0, 1));
    let listed_cluster = [("a/wl".to_owned(), cluster("wl", 12, Some("10.0.0.5")))];
    let stale = [("a/wl".to_owned(), cluster("wl", 10, None))];
    assert_eq!(ledger.settle((&stale, 30), (&[], 30)).len(), 1, "a list that disagrees settles nothing");
    assert_eq!(ledger.unjudged(), 1);
    assert_eq!(ledger.settle((&listed_cluster, 30), (&[], 30)), Vec::<String>::new());
    assert_eq!((ledger.lost.len(), ledger.unjudged()), (1, 0), "the Cluster was live when its VIP went");
}

#[test]
fn the_ledger_counts_clusters_asking_and_endpoints_written() {
    let mut ledger = started();
    served(&mut ledger);
    ledger.cluster("a/two".into(), cluster("two", 13, None));
    let mut plain = cluster("plain", 14, None);
    plain.asks = false;
    ledger.cluster("a/plain".into(), plain);
    assert_eq!(ledger.counts(), (2, 1));
    assert_eq!(ledger.never_written(), vec!["a/two"]);
    assert!(ledger.moments > 0);
}
