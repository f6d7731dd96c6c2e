//! Property tests past one chunk: the allocator against a model made of sets of ranges, over
//! three address spaces - an IPv4 /12 (sixteen 2^16-offset chunks), both ends of an IPv6 /64,
//! and both ends of `::/0` - with values drawn around chunk boundaries and the ends of the space.
//! Bulk operations fill chunks past the array form into bitmaps and whole chunks, runs of
//! releases shrink them back, and ranges cross many chunks. Counts, saturation, the lowest free
//! address and every boundary are checked against the model after each operation.

#[path = "allocator_chunks/ranges_model.rs"]
mod ranges_model;
#[path = "allocator_chunks/spaces.rs"]
mod spaces;

use std::net::IpAddr;

use ferro_ipam::allocator::{AllocateError, FamilyPool, FamilySpec, Marked, NotInPool};
use proptest::prelude::*;
use ranges_model::{Big, Set};
use spaces::{CHUNK, Space, offset};

#[derive(Clone, Debug)]
enum Entry {
    Single(u128),
    Range(u128, u128),
    /// An aligned block of 2^bits offsets around a value.
    Block(u128, u32),
    /// The whole space.
    Whole,
}

impl Entry {
    fn span(&self, space: Space) -> (u128, u128) {
        match *self {
            Entry::Single(v) => (v, v),
            Entry::Range(a, b) => (a, b),
            Entry::Block(v, bits) => {
                let mask = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
                (v & !mask, v | mask)
            }
            Entry::Whole => (0, space.last()),
        }
    }

    fn render(&self, space: Space) -> String {
        let (first, last) = self.span(space);
        match *self {
            Entry::Single(_) => space.ip(first).to_string(),
            Entry::Range(..) => format!("{}-{}", space.ip(first), space.ip(last)),
            Entry::Block(_, bits) => {
                format!("{}/{}", space.ip(first), u32::from(space.prefix()) + space.host_bits() - bits)
            }
            Entry::Whole => format!("{}/{}", space.ip(0), space.prefix()),
        }
    }
}

fn entry(space: Space) -> impl Strategy<Value = Entry> {
    let bits = space.host_bits();
    prop_oneof![
        2 => offset(space).prop_map(Entry::Single),
        4 => (offset(space), offset(space)).prop_map(|(a, b)| Entry::Range(a.min(b), a.max(b))),
        2 => (offset(space), 0u32..=18u32.min(bits)).prop_map(|(v, b)| Entry::Block(v, b)),
        1 => Just(Entry::Whole),
    ]
}

#[derive(Clone, Debug)]
struct Def {
    addresses: Vec<Entry>,
    excluded: Vec<Entry>,
    gateway: Option<u128>,
    allocate_reserved: bool,
}

fn def(space: Space) -> impl Strategy<Value = Def> {
    (
        prop::collection::vec(entry(space), 1..4),
        prop::collection::vec(prop_oneof![entry(space), offset(space).prop_map(Entry::Single)], 0..3),
        prop::option::of(offset(space)),
        any::<bool>(),
    )
        .prop_map(|(addresses, excluded, gateway, allocate_reserved)| Def {
            addresses,
            excluded,
            gateway,
            allocate_reserved,
        })
}

/// The model's view of a definition.
struct Model {
    space: Space,
    listed: Set,
    excluded: Set,
    gateway: Option<u128>,
    reserved: Set,
    allocatable: Set,
    used: Set,
}

impl Model {
    fn new(space: Space, def: &Def, used: Set) -> Model {
        let listed = Set::of(def.addresses.iter().map(|e| e.span(space)));
        let excluded = Set::of(def.excluded.iter().map(|e| e.span(space)));
        let reserved = match (def.allocate_reserved, space) {
            (true, _) => Set::default(),
            (false, Space::V4) => Set::of([(0, 0), (space.last(), space.last())]),
            (false, _) => Set::of([(0, 0)]),
        };
        let removed = excluded.union(&reserved).union(&Set::of(def.gateway.map(|g| (g, g))));
        let allocatable = listed.minus(&removed);
        Model { space, listed, excluded, gateway: def.gateway, reserved, allocatable, used }
    }

    fn reason(&self, v: u128) -> Option<NotInPool> {
        if !self.listed.contains(v) {
            Some(NotInPool::Outside)
        } else if self.gateway == Some(v) {
            Some(NotInPool::Gateway)
        } else if self.excluded.contains(v) {
            Some(NotInPool::Excluded)
        } else if self.reserved.contains(v) {
            Some(NotInPool::Reserved)
        } else {
            None
        }
    }

    /// Total, used, used in range, free and out of range, each up to 2^128.
    fn counts(&self) -> [Big; 5] {
        let total = self.allocatable.size();
        let in_range = self.used.intersect(&self.allocatable).size();
        let out_of_range = self.used.minus(&self.allocatable).size();
        [total, in_range.add(out_of_range), in_range, total.sub(in_range), out_of_range]
    }

    /// Offsets where something changes: every range end and its neighbours, chunk boundaries,
    /// the ends of the space.
    fn probes(&self) -> Vec<u128> {
        let last = self.space.last();
        let mut probes: Vec<u128> = (0..8u128).flat_map(|c| [c * CHUNK, (c * CHUNK).saturating_sub(1)]).collect();
        probes.extend([0, 1, last - 1, last]);
        for set in [&self.listed, &self.excluded, &self.allocatable, &self.used] {
            for (a, b) in set.ranges().take(64) {
                probes.extend([a.saturating_sub(1), a, b, b.saturating_add(1)]);
            }
        }
        probes.retain(|v| *v <= last);
        probes.sort_unstable();
        probes.dedup();
        probes
    }
}

/// Hands the allocator's definition of `def` (as the CRD would carry it) to `with`.
fn with_spec<T>(space: Space, def: &Def, with: impl FnOnce(&FamilySpec) -> T) -> T {
    let render = |entries: &[Entry]| -> Vec<String> { entries.iter().map(|e| e.render(space)).collect() };
    let (addresses, excluded) = (render(&def.addresses), render(&def.excluded));
    let gateway = def.gateway.map(|g| space.ip(g).to_string());
    let (prefix, allocate_reserved, gateway) = (space.prefix(), def.allocate_reserved, gateway.as_deref());
    with(&FamilySpec { addresses: &addresses, excluded: &excluded, prefix, gateway, allocate_reserved })
}

fn build(space: Space, def: &Def) -> FamilyPool {
    with_spec(space, def, |spec| FamilyPool::new(spec).expect("generated definitions are valid"))
}

fn check_agreement(pool: &FamilyPool, model: &Model) -> Result<(), TestCaseError> {
    let space = model.space;
    let (counts, expected) = (pool.counts(), model.counts());
    let read = [counts.total, counts.used, counts.in_range_used, counts.free, counts.out_of_range];
    prop_assert_eq!(read, expected.map(Big::saturating), "total, used, in range, free, out of range");
    prop_assert_eq!(counts.saturated, expected.iter().any(Big::exceeds_u128));
    for v in model.probes() {
        let ip = space.ip(v);
        prop_assert_eq!(pool.is_allocated(ip), model.used.contains(v), "is_allocated({})", ip);
        prop_assert_eq!(pool.check(ip).err(), model.reason(v), "check({})", ip);
    }
    let offsets = |(a, b): (IpAddr, IpAddr)| (space.offset(a), space.offset(b));
    let allocatable: Vec<(u128, u128)> = pool.allocatable_ranges().map(offsets).collect();
    prop_assert_eq!(allocatable, model.allocatable.ranges().collect::<Vec<_>>());
    let outside: Vec<(u128, u128)> = pool.out_of_range_ranges().map(offsets).collect();
    prop_assert_eq!(outside, model.used.minus(&model.allocatable).ranges().collect::<Vec<_>>());
    Ok(())
}

#[derive(Clone, Debug)]
enum Op {
    AllocateLowest(u32),
    Allocate(u128),
    Release(u128),
    MarkUsed(u128),
    AllocateRange(u128, u128),
    /// Releases `n` offsets one by one from the first.
    ReleaseRun(u128, u32),
    WithSpec(Def),
}

fn op(space: Space) -> impl Strategy<Value = Op> {
    // Runs of a few thousand cross the array-to-bitmap (4096) and bitmap-to-array (2048) marks.
    let run = prop_oneof![6 => 1u32..8, 1 => 2040u32..2100, 1 => 4090u32..4200];
    let last = space.last();
    prop_oneof![
        4 => run.clone().prop_map(Op::AllocateLowest),
        2 => offset(space).prop_map(Op::Allocate),
        2 => offset(space).prop_map(Op::Release),
        1 => offset(space).prop_map(Op::MarkUsed),
        2 => (offset(space), offset(space)).prop_map(|(a, b)| Op::AllocateRange(a.min(b), a.max(b))),
        1 => (offset(space), 0u128..70_000).prop_map(move |(a, n)| Op::AllocateRange(a, a.saturating_add(n).min(last))),
        2 => (offset(space), run).prop_map(|(a, n)| Op::ReleaseRun(a, n)),
        1 => def(space).prop_map(Op::WithSpec),
    ]
}

fn apply(pool: &mut FamilyPool, model: &mut Model, op: Op) -> Result<(), TestCaseError> {
    let space = model.space;
    match op {
        Op::AllocateLowest(n) => {
            for _ in 0..n {
                let expected = model.allocatable.lowest_outside(&model.used);
                prop_assert_eq!(pool.allocate_lowest(), expected.map(|v| space.ip(v)));
                let Some(v) = expected else { break };
                model.used.insert(v, v);
            }
        }
        Op::Allocate(v) => {
            let expected = match model.reason(v) {
                Some(reason) => Err(AllocateError::NotInPool { reason }),
                None if model.used.contains(v) => Err(AllocateError::AlreadyAllocated),
                None => Ok(()),
            };
            prop_assert_eq!(pool.allocate(space.ip(v)), expected);
            if expected.is_ok() {
                model.used.insert(v, v);
            }
        }
        Op::Release(v) => {
            prop_assert_eq!(pool.release(space.ip(v)), model.used.contains(v));
            model.used.remove(v, v);
        }
        Op::MarkUsed(v) => {
            let expected = match (model.used.contains(v), model.allocatable.contains(v)) {
                (true, _) => Marked::AlreadyUsed,
                (false, true) => Marked::InRange,
                (false, false) => Marked::OutOfRange,
            };
            prop_assert_eq!(pool.mark_used(space.ip(v)), expected);
            model.used.insert(v, v);
        }
        Op::AllocateRange(a, b) => {
            let newly = Set::of([(a, b)]).intersect(&model.allocatable).minus(&model.used);
            prop_assert_eq!(pool.allocate_range(space.ip(a), space.ip(b)), Ok(newly.size().saturating()));
            model.used = model.used.union(&newly);
        }
        Op::ReleaseRun(first, n) => {
            let last = first.saturating_add(u128::from(n) - 1).min(space.last());
            for v in first..=last {
                prop_assert_eq!(pool.release(space.ip(v)), model.used.contains(v), "release({})", space.ip(v));
            }
            model.used.remove(first, last);
        }
        Op::WithSpec(def) => {
            let (edited, outside) = with_spec(space, &def, |spec| pool.with_spec(spec)).expect("valid edit");
            *model = Model::new(space, &def, std::mem::take(&mut model.used));
            let listed: Vec<u128> = outside.into_iter().map(|ip| space.offset(ip)).collect();
            let expected = model.used.minus(&model.allocatable).first_values(ferro_ipam::allocator::MAX_LISTED_OUTSIDE);
            prop_assert_eq!(listed, expected, "never dropped, listed in order");
            *pool = edited;
        }
    }
    check_agreement(pool, model)
}

fn space() -> impl Strategy<Value = Space> {
    prop_oneof![Just(Space::V4), Just(Space::V6Net), Just(Space::V6All)]
}

fn scenario() -> impl Strategy<Value = (Space, Def, Vec<Op>)> {
    space().prop_flat_map(|space| (Just(space), def(space), prop::collection::vec(op(space), 1..25)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn the_pool_agrees_with_a_model_of_ranges_across_chunks((space, initial, ops) in scenario()) {
        let mut pool = build(space, &initial);
        let mut model = Model::new(space, &initial, Set::default());
        check_agreement(&pool, &model)?;
        for op in ops {
            apply(&mut pool, &mut model, op)?;
        }
    }

    #[test]
    fn no_address_is_handed_out_twice_across_chunks_in_either_family(
        (space, initial, ops) in space().prop_flat_map(|space| (
            Just(space),
            def(space),
            prop::collection::vec(prop_oneof![3 => (1u32..3000).prop_map(Err), 1 => offset(space).prop_map(Ok)], 1..40),
        )),
    ) {
        let mut pool = build(space, &initial);
        let mut holders = std::collections::BTreeSet::new();
        for op in ops {
            match op {
                Err(count) => for _ in 0..count {
                    match pool.allocate_lowest() {
                        Some(ip) => prop_assert!(holders.insert(ip), "{} handed out twice", ip),
                        None => {
                            prop_assert_eq!(pool.counts().free, 0);
                            break;
                        }
                    }
                },
                Ok(v) => {
                    let ip = space.ip(v);
                    prop_assert_eq!(pool.release(ip), holders.remove(&ip));
                }
            }
        }
    }
}

/// The whole of `::/0`: counts of 2^128 read `u128::MAX` and say they saturated.
#[test]
fn the_whole_ipv6_space_saturates_its_counts_and_says_so() {
    let space = Space::V6All;
    let whole = Def { addresses: vec![Entry::Whole], excluded: vec![], gateway: None, allocate_reserved: true };
    let mut pool = build(space, &whole);
    let counts = pool.counts();
    assert_eq!((counts.total, counts.free, counts.saturated), (u128::MAX, u128::MAX, true));
    assert_eq!(pool.allocate_range(space.ip(0), space.ip(u128::MAX)), Ok(u128::MAX), "2^128 newly used");
    let counts = pool.counts();
    assert_eq!((counts.used, counts.free, counts.saturated), (u128::MAX, 0, true));
    assert!(pool.release(space.ip(u128::MAX / 2)));
    let counts = pool.counts();
    assert_eq!((counts.used, counts.free, counts.saturated), (u128::MAX, 1, true), "2^128 - 1 used, total still 2^128");
    assert_eq!(pool.allocate_lowest(), Some(space.ip(u128::MAX / 2)));
    assert_eq!(pool.allocate_lowest(), None);
    // Without the reserved network address, the total is 2^128 - 1: exact.
    let mut reserved = whole;
    reserved.allocate_reserved = false;
    let counts = build(space, &reserved).counts();
    assert_eq!((counts.total, counts.saturated), (u128::MAX, false));
}
