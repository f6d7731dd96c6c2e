//! Property tests: the allocator against a naive model (sets of addresses) over small random
//! pools of either family — random entries (singles, ranges, CIDRs), exclusions, gateway,
//! prefix and reserved flag — and random operations, including edits of the pool definition.
//!
//! Each allocation strategy is run against the model. Pinned: no address has two holders,
//! `allocate_next` returns exactly the model's next address (`Lowest`: the lowest free one;
//! `LeastRecentlyReleased`: the lowest free one not released since, else the one released
//! longest ago; `Random`: some free one), counts are always exact, and out-of-range addresses
//! are never dropped. All of it stays inside one chunk; `allocator_chunks.rs` goes past it.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ferro_ipam::allocator::{
    AllocateError, Counts, FamilyPool, FamilySpec, Marked, NotInPool, Strategy as Order, parse_entry,
};
use proptest::prelude::*;

/// Addresses are small values: 10.0.0.<v> or fd00::<v>. Entries use 0..64; operations,
/// exclusions and gateways reach a little further, so some fall outside the pool.
const ENTRY_SPAN: u8 = 64;
const OP_SPAN: u8 = 80;

#[derive(Clone, Debug)]
enum Entry {
    Single(u8),
    Range(u8, u8),
    /// A value and how many host bits its CIDR has (0..=5): always inside 0..64.
    Cidr(u8, u8),
}

#[derive(Clone, Debug)]
struct Def {
    v6: bool,
    addresses: Vec<Entry>,
    excluded: Vec<Entry>,
    gateway: Option<u8>,
    /// The prefix is /26 (or /122) minus this, so every entry lies in the lowest's subnet.
    prefix_slack: u8,
    allocate_reserved: bool,
}

#[derive(Clone, Debug)]
enum Op {
    AllocateNext,
    Allocate(u8),
    Release(u8),
    MarkUsed(u8),
    AllocateRange(u8, u8),
    OtherFamily(u8),
    WithSpec(Def),
    Rebuild,
}

fn entry(max: u8) -> impl Strategy<Value = Entry> {
    prop_oneof![
        (0..max).prop_map(Entry::Single),
        (0..max, 0..max).prop_map(|(a, b)| Entry::Range(a.min(b), a.max(b))),
        (0..ENTRY_SPAN, 0u8..=5).prop_map(|(v, host_bits)| Entry::Cidr(v, host_bits)),
    ]
}

fn def(v6: bool) -> impl Strategy<Value = Def> {
    (
        prop::collection::vec(entry(ENTRY_SPAN), 1..5),
        prop::collection::vec(entry(OP_SPAN), 0..3),
        prop::option::of(0..OP_SPAN),
        0u8..=2,
        any::<bool>(),
    )
        .prop_map(move |(addresses, excluded, gateway, prefix_slack, allocate_reserved)| Def {
            v6,
            addresses,
            excluded,
            gateway,
            prefix_slack,
            allocate_reserved,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::AllocateNext),
        3 => (0..OP_SPAN).prop_map(Op::Allocate),
        4 => (0..OP_SPAN).prop_map(Op::Release),
        2 => (0..OP_SPAN).prop_map(Op::MarkUsed),
        1 => (0..OP_SPAN, 0..OP_SPAN).prop_map(|(a, b)| Op::AllocateRange(a, b)),
        1 => (0..OP_SPAN).prop_map(Op::OtherFamily),
        1 => def(false).prop_map(Op::WithSpec),
        1 => Just(Op::Rebuild),
    ]
}

fn order() -> impl Strategy<Value = Order> {
    prop_oneof![Just(Order::Lowest), Just(Order::LeastRecentlyReleased), Just(Order::Random)]
}

fn text(v6: bool, value: u8) -> String {
    if v6 { format!("fd00::{value:x}") } else { format!("10.0.0.{value}") }
}

fn address(v6: bool, value: u8) -> IpAddr {
    text(v6, value).parse().expect("model address")
}

fn value_of(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(v4) => v4.octets()[3],
        IpAddr::V6(v6) => v6.octets()[15],
    }
}

impl Entry {
    fn render(&self, v6: bool) -> String {
        match *self {
            Entry::Single(v) => text(v6, v),
            Entry::Range(a, b) => format!("{}-{}", text(v6, a), text(v6, b)),
            Entry::Cidr(v, host_bits) => {
                let bits = if v6 { 128 } else { 32 };
                format!("{}/{}", text(v6, v), bits - host_bits)
            }
        }
    }

    fn values(&self) -> std::ops::RangeInclusive<u8> {
        match *self {
            Entry::Single(v) => v..=v,
            Entry::Range(a, b) => a..=b,
            Entry::Cidr(v, host_bits) => {
                let size = 1u8 << host_bits;
                let first = v & !(size - 1);
                first..=first + (size - 1)
            }
        }
    }
}

/// The definition as the CRD would carry it, and the model's view of it.
struct Rendered {
    addresses: Vec<String>,
    excluded: Vec<String>,
    gateway: Option<String>,
    prefix: u8,
    allocate_reserved: bool,
}

impl Rendered {
    fn of(def: &Def) -> Rendered {
        Rendered {
            addresses: def.addresses.iter().map(|e| e.render(def.v6)).collect(),
            excluded: def.excluded.iter().map(|e| e.render(def.v6)).collect(),
            gateway: def.gateway.map(|g| text(def.v6, g)),
            prefix: if def.v6 { 122 } else { 26 } - def.prefix_slack,
            allocate_reserved: def.allocate_reserved,
        }
    }

    fn spec(&self) -> FamilySpec<'_> {
        FamilySpec {
            addresses: &self.addresses,
            excluded: &self.excluded,
            prefix: self.prefix,
            gateway: self.gateway.as_deref(),
            allocate_reserved: self.allocate_reserved,
        }
    }
}

/// Why the model thinks a value is not allocatable.
fn model_reason(def: &Def, value: u8) -> Option<NotInPool> {
    let listed: BTreeSet<u8> = def.addresses.iter().flat_map(Entry::values).collect();
    // The prefix is /26 (or /122) minus the slack: 6 + slack host bits. Every entry is below
    // 64, so the lowest address's subnet starts at 0 and ends at 2^(6 + slack) - 1 (a
    // broadcast address for IPv4 only).
    let network = 0u8;
    let broadcast = (1u16 << (6 + def.prefix_slack)) - 1;
    if !listed.contains(&value) {
        Some(NotInPool::Outside)
    } else if def.gateway == Some(value) {
        Some(NotInPool::Gateway)
    } else if def.excluded.iter().any(|e| e.values().contains(&value)) {
        Some(NotInPool::Excluded)
    } else if !def.allocate_reserved && (value == network || (!def.v6 && u16::from(value) == broadcast)) {
        Some(NotInPool::Reserved)
    } else {
        None
    }
}

struct Model {
    def: Def,
    order: Order,
    allocatable: BTreeSet<u8>,
    /// Every used address, in range or not.
    used: BTreeSet<u8>,
    /// `LeastRecentlyReleased`: free allocatable addresses in the order they were released.
    released: Vec<u8>,
}

impl Model {
    fn new(def: Def, order: Order) -> Model {
        let allocatable = (0..=u8::MAX).filter(|v| model_reason(&def, *v).is_none()).collect();
        Model { def, order, allocatable, used: BTreeSet::new(), released: Vec::new() }
    }

    fn take(&mut self, value: u8) -> bool {
        self.released.retain(|v| *v != value);
        self.used.insert(value)
    }

    /// The address the strategy hands out next; for `Random`, every free one is fine.
    fn next(&self) -> Option<u8> {
        let mut free = self.allocatable.difference(&self.used).copied();
        match self.order {
            Order::Lowest | Order::Random => free.next(),
            Order::LeastRecentlyReleased => {
                free.find(|v| !self.released.contains(v)).or_else(|| self.released.first().copied())
            }
        }
    }

    fn counts(&self) -> Counts {
        let in_range = self.used.intersection(&self.allocatable).count() as u128;
        let total = self.allocatable.len() as u128;
        Counts {
            total,
            used: self.used.len() as u128,
            in_range_used: in_range,
            free: total - in_range,
            out_of_range: self.used.len() as u128 - in_range,
            saturated: false,
        }
    }

    fn outside(&self) -> Vec<u8> {
        self.used.difference(&self.allocatable).copied().collect()
    }
}

fn check_agreement(pool: &FamilyPool, model: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(pool.counts(), model.counts());
    // Nothing at or above OP_SPAN is ever listed or used; check a margin beyond it.
    for value in 0..OP_SPAN + 16 {
        let ip = address(model.def.v6, value);
        prop_assert_eq!(pool.is_allocated(ip), model.used.contains(&value), "{}", ip);
        let reason = model_reason(&model.def, value);
        prop_assert_eq!(pool.check(ip).err(), reason, "{}", ip);
    }
    let out: Vec<u8> = pool.out_of_range_ranges().flat_map(|(a, b)| value_of(a)..=value_of(b)).collect();
    prop_assert_eq!(out, model.outside());
    Ok(())
}

fn apply(pool: &mut FamilyPool, model: &mut Model, op: Op) -> Result<(), TestCaseError> {
    let v6 = model.def.v6;
    match op {
        Op::AllocateNext => {
            let expected = model.next();
            let got = pool.allocate_next();
            if model.order == Order::Random {
                let got = got.map(value_of);
                prop_assert_eq!(got.is_some(), expected.is_some());
                if let Some(v) = got {
                    prop_assert!(model.allocatable.contains(&v) && !model.used.contains(&v), "{} is not free", v);
                }
                model.used.extend(got);
            } else {
                prop_assert_eq!(got, expected.map(|v| address(v6, v)));
                if let Some(v) = expected {
                    model.take(v);
                }
            }
        }
        Op::Allocate(v) => {
            let expected = match model_reason(&model.def, v) {
                Some(reason) => Err(AllocateError::NotInPool { reason }),
                None if model.used.contains(&v) => Err(AllocateError::AlreadyAllocated),
                None => Ok(()),
            };
            prop_assert_eq!(pool.allocate(address(v6, v)), expected);
            if expected.is_ok() {
                model.take(v);
            }
        }
        Op::Release(v) => {
            let was_used = model.used.remove(&v);
            prop_assert_eq!(pool.release(address(v6, v)), was_used);
            if was_used && model.order == Order::LeastRecentlyReleased && model.allocatable.contains(&v) {
                model.released.push(v);
            }
        }
        Op::MarkUsed(v) => {
            let expected = match (model.allocatable.contains(&v), model.take(v)) {
                (_, false) => Marked::AlreadyUsed,
                (true, true) => Marked::InRange,
                (false, true) => Marked::OutOfRange,
            };
            prop_assert_eq!(pool.mark_used(address(v6, v)), expected);
        }
        Op::AllocateRange(a, b) => {
            let newly: Vec<u8> =
                (a.min(b)..=a.max(b)).filter(|v| model.allocatable.contains(v) && !model.used.contains(v)).collect();
            let added = pool.allocate_range(address(v6, a), address(v6, b));
            prop_assert_eq!(added, Ok(newly.len() as u128));
            for v in newly {
                model.take(v);
            }
        }
        Op::OtherFamily(v) => {
            let other = address(!v6, v);
            prop_assert_eq!(pool.mark_used(other), Marked::WrongFamily);
            prop_assert!(!pool.release(other));
            prop_assert!(!pool.is_allocated(other));
            prop_assert_eq!(pool.allocate(other), Err(AllocateError::NotInPool { reason: NotInPool::WrongFamily }));
        }
        Op::WithSpec(mut def) => {
            def.v6 = v6;
            let rendered = Rendered::of(&def);
            let (edited, outside) = pool.with_spec(&rendered.spec()).expect("valid edit");
            let used = std::mem::take(&mut model.used);
            let released = std::mem::take(&mut model.released);
            *model = Model::new(def, model.order);
            model.used = used;
            // The order is carried for the addresses still allocatable (and free) here.
            model.released = released.into_iter().filter(|v| model.allocatable.contains(v)).collect();
            let outside: Vec<u8> = outside.into_iter().map(value_of).collect();
            prop_assert_eq!(outside, model.outside(), "never dropped, listed in order");
            *pool = edited;
        }
        Op::Rebuild => {
            let rendered = Rendered::of(&model.def);
            let existing: Vec<IpAddr> = model.used.iter().rev().map(|&v| address(v6, v)).collect();
            let (mut rebuilt, outside) = FamilyPool::rebuild(&rendered.spec(), existing).expect("valid");
            // A restart: the release order is gone with the process.
            rebuilt.set_strategy(model.order);
            model.released.clear();
            let mut outside: Vec<u8> = outside.into_iter().map(value_of).collect();
            outside.sort_unstable();
            prop_assert_eq!(outside, model.outside());
            *pool = rebuilt;
        }
    }
    check_agreement(pool, model)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_pool_agrees_with_a_naive_model(
        v6 in any::<bool>(),
        order in order(),
        initial in def(false),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let initial = Def { v6, ..initial };
        let rendered = Rendered::of(&initial);
        let mut pool = FamilyPool::new(&rendered.spec()).expect("generated definitions are valid");
        pool.set_strategy(order);
        let mut model = Model::new(initial, order);
        check_agreement(&pool, &model)?;
        for op in ops {
            apply(&mut pool, &mut model, op)?;
        }
    }

    #[test]
    fn no_address_is_handed_out_twice_until_released(
        v6 in any::<bool>(),
        order in order(),
        initial in def(false),
        ops in prop::collection::vec(prop_oneof![3 => Just(None), 1 => (0..OP_SPAN).prop_map(Some)], 1..200),
    ) {
        let initial = Def { v6, ..initial };
        let rendered = Rendered::of(&initial);
        let mut pool = FamilyPool::new(&rendered.spec()).expect("valid");
        pool.set_strategy(order);
        let mut holders: BTreeSet<IpAddr> = BTreeSet::new();
        for op in ops {
            match op {
                None => {
                    if let Some(ip) = pool.allocate_next() {
                        prop_assert!(holders.insert(ip), "{} handed out twice", ip);
                    } else {
                        prop_assert_eq!(pool.counts().free, 0);
                    }
                }
                Some(v) => {
                    let ip = address(v6, v);
                    prop_assert_eq!(pool.release(ip), holders.remove(&ip));
                }
            }
        }
    }

    #[test]
    fn any_entry_text_parses_or_is_refused_without_panicking(text in "[0-9a-fA-F:./%-]{0,45}") {
        if let Ok(entry) = parse_entry(&text) {
            prop_assert!(entry.contains(entry.first()) && entry.contains(entry.last()));
        }
    }

    #[test]
    fn any_definition_builds_or_is_refused_without_panicking(
        addresses in prop::collection::vec(address_text(), 0..4),
        excluded in prop::collection::vec(address_text(), 0..3),
        gateway in prop::option::of(address_text()),
        prefix in prop_oneof![0u8..=32, 0u8..=128, Just(0u8), any::<u8>()],
        allocate_reserved in any::<bool>(),
        probe in address_text(),
    ) {
        let spec = FamilySpec {
            addresses: &addresses,
            excluded: &excluded,
            prefix,
            gateway: gateway.as_deref(),
            allocate_reserved,
        };
        if let Ok(mut pool) = FamilyPool::new(&spec) {
            let counts = pool.counts();
            prop_assert_eq!(counts.free, counts.total);
            if let Some(ip) = pool.allocate_lowest() {
                prop_assert_eq!(pool.check(ip), Ok(()));
                prop_assert!(pool.is_allocated(ip));
            }
            if let Ok(ip) = probe.parse::<IpAddr>() {
                let _ = pool.mark_used(ip);
                let _ = pool.allocate_range(ip, ip);
                let _ = pool.release(ip);
            }
        }
    }
}

/// Entry-like text from the corners of both families, well-formed or not.
fn address_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0.0.0.0".to_owned()),
        Just("255.255.255.255".to_owned()),
        Just("::".to_owned()),
        Just("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".to_owned()),
        Just("::/0".to_owned()),
        Just("0.0.0.0/0".to_owned()),
        Just(String::new()),
        (0u32..=u32::MAX, 0u8..=33).prop_map(|(v, len)| format!("{}/{len}", std::net::Ipv4Addr::from(v))),
        (any::<u128>(), 0u8..=129).prop_map(|(v, len)| format!("{}/{len}", std::net::Ipv6Addr::from(v))),
        (any::<u32>(), any::<u32>()).prop_map(|(a, b)| format!(
            "{}-{}",
            std::net::Ipv4Addr::from(a),
            std::net::Ipv4Addr::from(b)
        )),
        any::<u32>().prop_map(|v| std::net::Ipv4Addr::from(v).to_string()),
        "[0-9a-f:./-]{0,20}",
    ]
}
