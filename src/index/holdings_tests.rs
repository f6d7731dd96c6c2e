use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

/// The plain model: each holder's holds in a map; who uses an address is found by looking at all.
#[derive(Default)]
struct Model(BTreeMap<HolderKey, Holds>);

impl Model {
    fn set(&mut self, holder: &HolderKey, holds: Holds) {
        match holds == Holds::default() {
            true => self.0.remove(holder),
            false => self.0.insert(holder.clone(), holds),
        };
    }

    fn users(&self, ip: IpAddr) -> BTreeSet<HolderKey> {
        self.0.iter().filter(|(_, h)| h.object == Some(ip) || h.claim == Some(ip)).map(|(k, _)| k.clone()).collect()
    }

    fn addresses(&self) -> Vec<IpAddr> {
        let all: BTreeSet<IpAddr> = self.0.values().flat_map(|h| [h.object, h.claim]).flatten().collect();
        all.into_iter().collect()
    }
}

fn holder(n: usize) -> HolderKey {
    HolderKey::new(if n.is_multiple_of(2) { "even" } else { "odd" }, &format!("claim-{n}"))
}

/// A few addresses of both families, so that holders meet on them.
fn ip(n: usize) -> IpAddr {
    match n % 2 {
        0 => IpAddr::from([10, 0, 0, n as u8]),
        _ => IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, n as u16]),
    }
}

fn agree(holdings: &Holdings, model: &Model, holders: usize, ips: usize) {
    for n in 0..holders {
        assert_eq!(holdings.get(&holder(n)), model.0.get(&holder(n)).copied().unwrap_or_default(), "holds of {n}");
    }
    for n in 0..ips {
        let users: Vec<HolderKey> = holdings.users(ip(n)).cloned().collect();
        let unique: BTreeSet<HolderKey> = users.iter().cloned().collect();
        assert_eq!(users.len(), unique.len(), "a holder of {} is named once", ip(n));
        assert_eq!(unique, model.users(ip(n)), "users of {}", ip(n));
        assert_eq!(holdings.users_of(ip(n)), unique.len());
    }
    assert_eq!(holdings.addresses(), model.addresses());
    assert_eq!(holdings.address_count(), model.addresses().len());
    let listed: BTreeMap<HolderKey, Holds> = holdings.iter().map(|(k, h)| (k.clone(), h)).collect();
    assert_eq!(listed, model.0);
    assert_eq!(holdings.is_empty(), model.0.is_empty());
}

proptest! {
    #[test]
    fn holdings_answer_as_a_plain_map_of_holds_does(
        steps in prop::collection::vec((0..8usize, prop::option::of(0..5usize), prop::option::of(0..5usize)), 1..80),
    ) {
        let (mut holdings, mut model) = (Holdings::default(), Model::default());
        for (who, object, claim) in steps {
            let holds = Holds { object: object.map(ip), claim: claim.map(ip) };
            holdings.set(&holder(who), holds);
            model.set(&holder(who), holds);
            agree(&holdings, &model, 8, 5);
        }
    }
}

#[test]
fn thousands_of_holders_across_chunks_are_each_found_by_holder_and_by_address() {
    let count = CHUNK * 3 + 5;
    let address = |n: usize| IpAddr::from([10, (n >> 16) as u8, (n >> 8) as u8, n as u8]);
    let mut holdings = Holdings::default();
    for n in 0..count {
        holdings.set(&holder(n), Holds { object: Some(address(n)), claim: Some(address(n)) });
    }
    // Every third lets go, and as many new holders take their slots.
    for n in (0..count).step_by(3) {
        holdings.set(&holder(n), Holds::default());
    }
    let released = count.div_ceil(3);
    for n in count..count + released {
        holdings.set(&holder(n), Holds { object: None, claim: Some(address(n)) });
    }
    assert_eq!(holdings.chunks.len(), count.div_ceil(CHUNK), "freed slots are used again before new ones");
    for n in 0..count + released {
        let users: Vec<&HolderKey> = holdings.users(address(n)).collect();
        match n < count && n % 3 == 0 {
            true => assert!(users.is_empty(), "{n} let go"),
            false => assert_eq!(users, [&holder(n)]),
        }
    }
    assert_eq!(holdings.address_count(), count);
}

#[test]
fn a_holder_keeps_one_address_when_object_and_claim_agree() {
    assert!(std::mem::size_of::<Option<Slot>>() <= 40, "a slot is {} bytes", std::mem::size_of::<Option<Slot>>());
    let mut holdings = Holdings::default();
    let (a, b) = (ip(0), ip(2));
    holdings.set(&holder(0), Holds { object: Some(a), claim: Some(a) });
    assert_eq!(holdings.by_address.len(), 1);
    holdings.set(&holder(0), Holds { object: Some(a), claim: Some(b) });
    assert_eq!(holdings.by_address.len(), 2);
    assert_eq!(holdings.address_count(), 2);
    holdings.set(&holder(0), Holds { object: None, claim: Some(b) });
    assert_eq!(holdings.addresses(), [b]);
}
