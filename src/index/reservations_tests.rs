use super::*;
use crate::api::{IPPoolSpec, ReservationOwner};
use crate::index::build_allocators;

fn pools() -> Vec<FamilyPool> {
    let spec = IPPoolSpec {
        addresses: vec!["10.0.0.10-10.0.0.20".into()],
        prefix: 24,
        gateway: Some("10.0.0.11".into()),
        excluded_addresses: Some(vec!["10.0.0.15".into()]),
        ..IPPoolSpec::default()
    };
    build_allocators(&spec).expect("valid")
}

fn named(address: &str, claim: &str) -> Reservation {
    Reservation { address: address.into(), claim_name: Some(claim.into()), ..Reservation::default() }
}

fn owned(address: &str, kind: &str, name: &str) -> Reservation {
    let owner = ReservationOwner { kind: kind.into(), name: name.into() };
    Reservation { address: address.into(), owner: Some(owner), ..Reservation::default() }
}

#[test]
fn a_reservation_matches_a_claim_by_name_or_by_owner() {
    let reserved =
        check(&[named("10.0.0.12", "vm-0-0"), owned("10.0.0.13", "Metal3Data", "m3-0")], &pools()).expect("valid");
    let holder = HolderKey::new("ns", "vm-0-0");
    assert_eq!(for_claim(&reserved, &holder, &[], Family::V4).map(|r| r.address.to_string()), Some("10.0.0.12".into()));
    let owners = [ClaimOwner { kind: "Metal3Data".into(), name: "m3-0".into() }];
    let other = HolderKey::new("ns", "m3-0-provisioning");
    assert_eq!(
        for_claim(&reserved, &other, &owners, Family::V4).map(|r| r.field.as_str()),
        Some("spec.reservations[1]")
    );
    assert_eq!(for_claim(&reserved, &other, &[], Family::V4), None);
    assert_eq!(for_claim(&reserved, &holder, &[], Family::V6), None, "the reservation is IPv4");
}

#[test]
fn a_claim_namespace_narrows_a_name_match() {
    let mut reservation = named("10.0.0.12", "vip");
    reservation.claim_namespace = Some("team-a".into());
    let reserved = check(&[reservation], &pools()).expect("valid");
    assert!(for_claim(&reserved, &HolderKey::new("team-a", "vip"), &[], Family::V4).is_some());
    assert!(for_claim(&reserved, &HolderKey::new("team-b", "vip"), &[], Family::V4).is_none());
}

#[test]
fn what_cel_cannot_see_is_refused_naming_the_field() {
    let refused = |reservations: &[Reservation]| check(reservations, &pools()).unwrap_err();
    let outside = refused(&[named("10.0.0.12", "a"), named("10.0.0.30", "b")]);
    assert!(outside.starts_with("spec.reservations[1].address 10.0.0.30 cannot be reserved"), "{outside}");
    assert!(outside.contains("not in the pool's addresses"), "{outside}");
    assert!(refused(&[named("10.0.0.15", "a")]).contains("excludedAddresses"));
    assert!(refused(&[named("10.0.0.11", "a")]).contains("gateway"));
    assert!(refused(&[named("fd00::1", "a")]).contains("the pool has no IPv6 addresses"));
    assert!(refused(&[named("10.0.0.300", "a")]).contains("is not an IP address"));
    let twice = refused(&[named("10.0.0.12", "a"), named("10.0.0.12", "b")]);
    assert!(twice.contains("reserved in spec.reservations[0] already"), "{twice}");
    let two = refused(&[named("10.0.0.12", "a"), named("10.0.0.13", "a")]);
    assert!(two.contains("a second IPv4 address"), "{two}");
    let neither = Reservation { address: "10.0.0.12".into(), ..Reservation::default() };
    assert!(refused(&[neither]).contains("set exactly one of claimName and owner"));
}

mod in_the_index {
    use std::time::Duration;

    use crate::api::{IPPoolSpec, Reservation, ReservationOwner};
    use crate::index::{AllocError, ClaimOwner, HolderKey, Index, PoolFacts, PoolKey, Request};

    fn pool(index: &Index, reservations: Vec<Reservation>) -> PoolKey {
        let key = PoolKey::in_cluster("ns", "p");
        let spec = IPPoolSpec {
            addresses: vec!["10.0.0.1-10.0.0.3".into()],
            prefix: 24,
            reservations: Some(reservations),
            ..IPPoolSpec::default()
        };
        index.upsert_pool(&key, &spec, PoolFacts::default(), &[]);
        key
    }

    fn for_claim(address: &str, claim: &str) -> Reservation {
        Reservation { address: address.into(), claim_name: Some(claim.into()), ..Reservation::default() }
    }

    fn allocate(index: &Index, key: &PoolKey, claim: &str) -> Result<String, AllocError> {
        index.allocate(key, &HolderKey::new("ns", claim), Request::default()).map(|ip| ip.to_string())
    }

    #[test]
    fn a_reserved_address_goes_to_its_claim_and_never_to_another() {
        let (index, _t) = Index::new(Duration::from_secs(600));
        let key = pool(&index, vec![for_claim("10.0.0.1", "vm-0")]);
        assert_eq!(allocate(&index, &key, "a"), Ok("10.0.0.2".into()), "10.0.0.1 is kept for vm-0");
        assert_eq!(allocate(&index, &key, "b"), Ok("10.0.0.3".into()));
        assert!(matches!(allocate(&index, &key, "c"), Err(AllocError::Exhausted(_))), "full but for the reservation");
        let requested = Request { address: Some("10.0.0.1".parse().unwrap()), ..Request::default() };
        let refused = index.allocate(&key, &HolderKey::new("ns", "c"), requested).unwrap_err().to_string();
        assert!(refused.contains("reserved for claim vm-0 (spec.reservations[0])"), "{refused}");
        assert_eq!(allocate(&index, &key, "vm-0"), Ok("10.0.0.1".into()));
    }

    #[test]
    fn a_released_reserved_address_stays_kept_for_its_claim() {
        let (index, _t) = Index::new(Duration::ZERO);
        let key = pool(&index, vec![for_claim("10.0.0.2", "vm-0")]);
        assert_eq!(allocate(&index, &key, "vm-0"), Ok("10.0.0.2".into()));
        index.release_claim(&key, &HolderKey::new("ns", "vm-0"));
        assert_eq!(allocate(&index, &key, "a"), Ok("10.0.0.1".into()));
        assert_eq!(allocate(&index, &key, "b"), Ok("10.0.0.3".into()));
        assert!(allocate(&index, &key, "c").is_err());
        let totals = index.report(&key).totals();
        assert_eq!((totals.used, totals.free, totals.reserved), (2, 0, 1));
        assert_eq!(allocate(&index, &key, "vm-0"), Ok("10.0.0.2".into()));
        assert_eq!(index.report(&key).totals().reserved, 0, "held by its claim: counted as used");
    }

    #[test]
    fn an_owner_reservation_goes_to_the_claim_that_owner_owns() {
        let (index, _t) = Index::new(Duration::ZERO);
        let owner = ReservationOwner { kind: "Metal3Data".into(), name: "m3-0".into() };
        let key = pool(
            &index,
            vec![Reservation { address: "10.0.0.3".into(), owner: Some(owner), ..Reservation::default() }],
        );
        let owners = vec![ClaimOwner { kind: "Metal3Data".into(), name: "m3-0".into() }];
        let request = Request { owners, ..Request::default() };
        assert_eq!(
            index.allocate(&key, &HolderKey::new("ns", "m3-0-pool"), request).map(|ip| ip.to_string()),
            Ok("10.0.0.3".into())
        );
    }

    #[test]
    fn a_reserved_address_held_by_another_is_reported_and_refused_to_its_claim() {
        let (index, _t) = Index::new(Duration::ZERO);
        let key = pool(&index, vec![]);
        assert_eq!(allocate(&index, &key, "squatter"), Ok("10.0.0.1".into()));
        // The reservation is written after the address was handed out.
        let _ = pool(&index, vec![for_claim("10.0.0.1", "vm-0")]);
        let refused = allocate(&index, &key, "vm-0").unwrap_err().to_string();
        assert!(
            refused.contains("reserved for this claim (spec.reservations[0]) but IPAddress ns/squatter also holds it"),
            "{refused}"
        );
        let (_, holders) = &index.report(&key).reservations[0];
        assert_eq!(holders, &[HolderKey::new("ns", "squatter")]);
    }

    #[test]
    fn a_reserved_claim_refused_for_a_squatter_is_woken_when_the_squatter_goes() {
        let (index, mut triggers) = Index::new(Duration::ZERO);
        let key = pool(&index, vec![]);
        assert_eq!(allocate(&index, &key, "squatter"), Ok("10.0.0.1".into()));
        // The reservation is written after the address was handed out.
        let _ = pool(&index, vec![for_claim("10.0.0.1", "vm-0")]);
        assert!(allocate(&index, &key, "vm-0").is_err());
        while triggers.try_recv().is_ok() {}
        index.release_claim(&key, &HolderKey::new("ns", "squatter"));
        let mut woken = Vec::new();
        while let Ok(trigger) = triggers.try_recv() {
            woken.push(trigger);
        }
        assert!(woken.contains(&crate::index::Trigger::Claim(HolderKey::new("ns", "vm-0"))), "{woken:?}");
        assert_eq!(allocate(&index, &key, "other"), Ok("10.0.0.2".into()), "still set aside for vm-0");
        assert_eq!(allocate(&index, &key, "vm-0"), Ok("10.0.0.1".into()));
    }
}
