//! The allocatable ranges of every pool, grouped by address space and kept up to date when a
//! pool's spec changes, so that finding the pools a pool overlaps reads no other pool's state
//! and costs about the same with ten pools or ten thousand.
//!
//! Each group keeps its ranges in an [`Intervals`] table: sorted by first address, one sorted
//! map per size class (ranges whose length has the same number of bits). A range of class `c`
//! is shorter than `2^c`, so only ranges starting less than `2^c` before the queried range can
//! reach into it: each class is one ordered range scan, and at most 129 classes exist.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::keys::PoolKey;
use super::registry::share_addresses;

/// An address space: prefix pools or address pools, of one namespace or global (`None`).
type Space = (bool, Option<String>);

fn space_of(key: &PoolKey) -> Space {
    (key.kind.is_prefix(), if key.kind.is_global() { None } else { key.namespace.clone() })
}

/// An address as a point on one line per family, so that IPv4 and IPv6 ranges never meet.
type Point = (u8, u128);

fn point(ip: IpAddr) -> Point {
    match ip {
        IpAddr::V4(v4) => (4, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (6, u128::from(v6)),
    }
}

/// Ranges of many pools, answering "which pools reach into this range" without a scan.
#[derive(Default)]
struct Intervals {
    /// By size class, by first address: the last address of each range starting there, and its pool.
    classes: BTreeMap<u32, BTreeMap<Point, Vec<(u128, PoolKey)>>>,
}

/// The class of a range: the number of bits of `last - first`.
fn class_of(first: u128, last: u128) -> u32 {
    128 - (last - first).leading_zeros()
}

/// The longest distance, `last - first`, of a range of class `class`.
fn reach(class: u32) -> u128 {
    if class >= 128 { u128::MAX } else { (1u128 << class) - 1 }
}

impl Intervals {
    fn insert(&mut self, key: &PoolKey, (first, last): (Point, Point)) {
        let class = class_of(first.1, last.1);
        self.classes.entry(class).or_default().entry(first).or_default().push((last.1, key.clone()));
    }

    fn remove(&mut self, key: &PoolKey, (first, last): (Point, Point)) {
        let class = class_of(first.1, last.1);
        let Some(starts) = self.classes.get_mut(&class) else { return };
        if let Some(here) = starts.get_mut(&first) {
            if let Some(at) = here.iter().position(|(l, k)| *l == last.1 && k == key) {
                here.swap_remove(at);
            }
            if here.is_empty() {
                starts.remove(&first);
            }
        }
        if starts.is_empty() {
            self.classes.remove(&class);
        }
    }

    /// Every pool with a range intersecting `first..=last` (a pool may come more than once).
    fn touching(&self, (first, last): (Point, Point), found: &mut Vec<PoolKey>) {
        let family = first.0;
        for (&class, starts) in &self.classes {
            let lowest = (family, first.1.saturating_sub(reach(class)));
            for (_, ranges) in starts.range(lowest..=(family, last.1)) {
                found.extend(ranges.iter().filter(|(end, _)| *end >= first.1).map(|(_, key)| key.clone()));
            }
        }
    }
}

/// The pools of one address space, with their ranges.
#[derive(Default)]
struct Group {
    ranges: HashMap<PoolKey, Vec<(Point, Point)>>,
    intervals: Intervals,
}

impl Group {
    fn set(&mut self, key: &PoolKey, ranges: Vec<(Point, Point)>) {
        self.remove(key);
        for range in &ranges {
            self.intervals.insert(key, *range);
        }
        self.ranges.insert(key.clone(), ranges);
    }

    fn remove(&mut self, key: &PoolKey) -> Option<Vec<(Point, Point)>> {
        let old = self.ranges.remove(key)?;
        for range in &old {
            self.intervals.remove(key, *range);
        }
        Some(old)
    }
}

/// Ranges by pool, by address space; and every namespaced pool's ranges once more by sort, for
/// the global pools, which share addresses with every namespace.
#[derive(Default)]
pub struct Spans {
    spaces: HashMap<Space, Group>,
    /// Keyed by `is_prefix`.
    namespaced: HashMap<bool, Intervals>,
}

impl Spans {
    /// Records a pool's allocatable ranges (none: it hands nothing out).
    pub fn set(&mut self, key: &PoolKey, ranges: Vec<(IpAddr, IpAddr)>) {
        self.remove(key);
        if ranges.is_empty() {
            return;
        }
        let ranges: Vec<(Point, Point)> =
            ranges.into_iter().map(|(a, b)| (point(a), point(b))).filter(|(a, b)| a.0 == b.0 && a.1 <= b.1).collect();
        if !key.kind.is_global() {
            let all = self.namespaced.entry(key.kind.is_prefix()).or_default();
            for range in &ranges {
                all.insert(key, *range);
            }
        }
        self.spaces.entry(space_of(key)).or_default().set(key, ranges);
    }

    pub fn remove(&mut self, key: &PoolKey) {
        let space = space_of(key);
        let Some(group) = self.spaces.get_mut(&space) else { return };
        let old = group.remove(key);
        if group.ranges.is_empty() {
            self.spaces.remove(&space);
        }
        if let (Some(old), false) = (old, key.kind.is_global())
            && let Some(all) = self.namespaced.get_mut(&key.kind.is_prefix())
        {
            for range in old {
                all.remove(key, range);
            }
        }
    }

    /// The pools sharing `pool`'s address space whose ranges intersect its own, sorted. A
    /// namespaced pool looks at its namespace and the global pools; a global pool at every pool
    /// of its sort.
    pub fn overlapping(&self, pool: &PoolKey) -> Vec<PoolKey> {
        let (prefix, namespace) = space_of(pool);
        let Some(ranges) = self.spaces.get(&(prefix, namespace.clone())).and_then(|g| g.ranges.get(pool)) else {
            return Vec::new();
        };
        let tables: Vec<&Intervals> = match namespace {
            None => [self.spaces.get(&(prefix, None)).map(|g| &g.intervals), self.namespaced.get(&prefix)]
                .into_iter()
                .flatten()
                .collect(),
            Some(ns) => [(prefix, Some(ns)), (prefix, None)]
                .iter()
                .filter_map(|s| self.spaces.get(s))
                .map(|g| &g.intervals)
                .collect(),
        };
        let mut found = Vec::new();
        for table in tables {
            for range in ranges {
                table.touching(*range, &mut found);
            }
        }
        found.retain(|other| share_addresses(other, pool));
        found.sort();
        found.dedup();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(a: &str, b: &str) -> Vec<(IpAddr, IpAddr)> {
        vec![(a.parse().unwrap(), b.parse().unwrap())]
    }

    #[test]
    fn a_pool_overlaps_its_namespace_and_the_global_pools_only() {
        let mut spans = Spans::default();
        let a = PoolKey::in_cluster("ns", "a");
        let b = PoolKey::in_cluster("ns", "b");
        let elsewhere = PoolKey::in_cluster("other", "a");
        let global = PoolKey::global("g");
        spans.set(&a, range("10.0.0.1", "10.0.0.20"));
        spans.set(&b, range("10.0.0.15", "10.0.0.30"));
        spans.set(&elsewhere, range("10.0.0.1", "10.0.0.20"));
        spans.set(&global, range("10.0.0.19", "10.0.0.19"));
        assert_eq!(spans.overlapping(&a), vec![b.clone(), global.clone()]);
        assert_eq!(spans.overlapping(&elsewhere), vec![global.clone()]);
        let mut everyone = vec![elsewhere.clone(), a.clone(), b.clone()];
        everyone.sort();
        assert_eq!(spans.overlapping(&global), everyone, "a global pool shares with every namespace");

        // An edit that moves b away, and a pool that hands nothing out any more.
        spans.set(&b, range("10.0.1.1", "10.0.1.9"));
        spans.set(&global, Vec::new());
        assert!(spans.overlapping(&a).is_empty());
        spans.remove(&elsewhere);
        assert!(!spans.spaces.contains_key(&(false, Some("other".into()))), "an empty space is dropped");
        assert!(spans.overlapping(&global).is_empty(), "a removed pool leaves the global table too");
    }

    #[test]
    fn families_never_meet_and_ranges_touching_at_one_address_overlap() {
        let mut spans = Spans::default();
        let (v4, v6, edge) =
            (PoolKey::in_cluster("ns", "v4"), PoolKey::in_cluster("ns", "v6"), PoolKey::in_cluster("ns", "edge"));
        // ::a00:1 is 10.0.0.1's number on the IPv6 line.
        spans.set(&v4, range("10.0.0.1", "10.0.0.255"));
        spans.set(&v6, range("::a00:1", "::a00:ff"));
        spans.set(&edge, range("10.0.0.255", "10.0.1.10"));
        assert_eq!(spans.overlapping(&v4), vec![edge.clone()]);
        assert!(spans.overlapping(&v6).is_empty());
    }

    /// Every size class, against a plain pairwise comparison of the same ranges.
    #[test]
    fn overlaps_match_a_pairwise_comparison() {
        let mut spans = Spans::default();
        let mut all: Vec<(PoolKey, u32, u32)> = Vec::new();
        let mut seed = 0x2545_f491_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for n in 0..300 {
            let first = next() % 1_000_000;
            // Lengths from one address to about a million, so ranges fall in many classes.
            let len = next() % (1 << (next() % 21));
            let key = PoolKey::in_cluster("ns", &format!("p{n}"));
            let (a, b) = (first, first.saturating_add(len));
            spans.set(&key, range(&std::net::Ipv4Addr::from(a).to_string(), &std::net::Ipv4Addr::from(b).to_string()));
            all.push((key, a, b));
        }
        for (key, a, b) in &all {
            let mut expected: Vec<PoolKey> =
                all.iter().filter(|(k, c, d)| k != key && a <= d && c <= b).map(|(k, _, _)| k.clone()).collect();
            expected.sort();
            assert_eq!(spans.overlapping(key), expected, "{key:?}");
        }
    }
}
