//! Pool status counts, recomputed from the pool spec (as the checker reads it) and the
//! `IPAddress` objects: nothing of ferro-ipam's allocator or index.
//!
//! - total: the addresses the pool hands out;
//! - used: the `IPAddress` objects in the pool (out-of-range ones included);
//! - outOfRange: the distinct addresses of those objects the pool does not hand out (one of a
//!   family the pool lacks counts against its first family);
//! - free: total minus the distinct in-range addresses and the reserved addresses
//!   (`spec.reservations`) nobody holds. Where a pool shares its addresses with
//!   another that holds some of them, ferro-ipam skips those too once it meets them while
//!   allocating, so free may be lower by up to that many (and a family's used higher).
//!
//! `status.families` (exact, per family) is compared when present: the in-cluster provider
//! does not write it.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use ferro_ipam::api::IPPoolStatus;

use super::findings::Findings;
use super::pool_ranges::{self, Family, FamilyRanges};
use super::world::{Held, PoolId, World};

/// What one family of a pool should report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FamilyCounts {
    family: Family,
    total: u128,
    /// Lowest and highest used and free counts the objects allow.
    used: (u128, u128),
    free: (u128, u128),
    out_of_range: u128,
}

pub fn check(world: &World, held: &[Held], found: &mut Findings) {
    for (id, pool) in world.pools.iter().filter(|(_, p)| !p.deleting) {
        let reported = pool.status.as_ref().and_then(|s| s.ip_addresses.as_ref());
        match pool_ranges::read(&pool.spec) {
            Err(why) => {
                if let Some(c) = reported {
                    found.pending.push(format!(
                        "{id}: the spec describes no valid pool ({why}), yet status counts {:?}",
                        (c.total, c.used, c.free, c.out_of_range)
                    ));
                }
            }
            Ok(families) => {
                let reserved: BTreeSet<IpAddr> =
                    pool.spec.reservations.iter().flatten().filter_map(|r| r.address.parse().ok()).collect();
                let expected = expected(id, &families, held, &reserved);
                let objects = held.iter().filter(|h| h.pool == *id).count();
                compare(id, pool.status.as_ref(), &expected, objects, found);
            }
        }
    }
}

fn expected(id: &PoolId, families: &[FamilyRanges], held: &[Held], reserved: &BTreeSet<IpAddr>) -> Vec<FamilyCounts> {
    let own: BTreeSet<IpAddr> = held.iter().filter(|h| h.pool == *id).map(|h| h.ip).collect();
    let aside: BTreeSet<IpAddr> = reserved.difference(&own).copied().collect();
    let neighbours: BTreeSet<IpAddr> = held
        .iter()
        .filter(|h| h.pool != *id && h.pool.shares_addresses_with(id) && !own.contains(&h.ip))
        .map(|h| h.ip)
        .collect();
    let foreign_family = own.iter().filter(|ip| !families.iter().any(|f| f.family == Family::of(**ip))).count();
    let count =
        |set: &BTreeSet<IpAddr>, keep: &dyn Fn(IpAddr) -> bool| set.iter().filter(|ip| keep(**ip)).count() as u128;
    families
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let in_range = count(&own, &|ip| f.contains(ip));
            let mut out_of_range = count(&own, &|ip| Family::of(ip) == f.family && !f.contains(ip));
            if i == 0 {
                out_of_range += foreign_family as u128;
            }
            let skipped = count(&neighbours, &|ip| f.contains(ip));
            let taken = in_range + count(&aside, &|ip| f.contains(ip));
            FamilyCounts {
                family: f.family,
                total: f.size(),
                used: (in_range + out_of_range, in_range + out_of_range + skipped),
                free: (f.free_after(taken + skipped), f.free_after(taken)),
                out_of_range,
            }
        })
        .collect()
}

fn int64(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count, or the range of counts allowed.
struct Between<T>(T, T);

impl<T: fmt::Display + PartialEq> fmt::Display for Between<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == self.1 { write!(f, "{}", self.0) } else { write!(f, "{} to {}", self.0, self.1) }
    }
}

fn compare(
    id: &PoolId,
    status: Option<&IPPoolStatus>,
    expected: &[FamilyCounts],
    objects: usize,
    found: &mut Findings,
) {
    let sum = |pick: fn(&FamilyCounts) -> u128| expected.iter().fold(0u128, |s, f| s.saturating_add(pick(f)));
    let total = int64(sum(|f| f.total));
    let free = (int64(sum(|f| f.free.0)), int64(sum(|f| f.free.1)));
    let out_of_range = int64(sum(|f| f.out_of_range));
    let used = i64::try_from(objects).unwrap_or(i64::MAX);
    let want = format!("({total}, {used}, {}, {out_of_range})", Between(free.0, free.1));
    match status.and_then(|s| s.ip_addresses.as_ref()) {
        None => found.pending.push(format!("{id}: status has no counts; the spec and objects say {want}")),
        Some(c) => {
            let free_ok = free.0 <= c.free && c.free <= free.1;
            if (c.total, c.used, c.out_of_range) != (total, used, out_of_range) || !free_ok {
                found.pending.push(format!(
                    "{id}: status counts (total, used, free, outOfRange) = ({}, {}, {}, {}); the spec and objects say {want}",
                    c.total, c.used, c.free, c.out_of_range
                ));
            }
        }
    }
    let reported = status.map(|s| s.families.as_slice()).unwrap_or_default();
    if reported.is_empty() {
        return;
    }
    let described = |f: &FamilyCounts| {
        let (used, free) = (Between(f.used.0, f.used.1), Between(f.free.0, f.free.1));
        format!("{} ({}, {used}, {free}, {})", f.family.name(), f.total, f.out_of_range)
    };
    let matches = reported.len() == expected.len()
        && reported.iter().zip(expected).all(|(r, e)| {
            let within =
                |text: &str, (low, high): (u128, u128)| text.parse().is_ok_and(|n: u128| low <= n && n <= high);
            r.family == e.family.name()
                && r.total == e.total.to_string()
                && r.out_of_range == e.out_of_range.to_string()
                && within(&r.used, e.used)
                && within(&r.free, e.free)
        });
    if !matches {
        let reported: Vec<String> = reported
            .iter()
            .map(|r| format!("{} ({}, {}, {}, {})", r.family, r.total, r.used, r.free, r.out_of_range))
            .collect();
        let expected: Vec<String> = expected.iter().map(described).collect();
        found.pending.push(format!(
            "{id}: status.families (total, used, free, outOfRange) = [{}]; the spec and objects say [{}]",
            reported.join(", "),
            expected.join(", ")
        ));
    }
}
