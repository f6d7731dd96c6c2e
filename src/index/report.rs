//! What a pool's status says, read off its entry.

use std::net::IpAddr;

use crate::allocator::{Family, FamilyPool};

use super::entry::PoolEntry;
use super::keys::{HolderKey, PoolKey};
use super::reservations::Reserved;

/// Exact counts of one family of a pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilyReport {
    pub family: Option<Family>,
    /// Addresses the pool can hand out.
    pub total: u128,
    /// Held addresses, out-of-range ones included.
    pub used: u128,
    /// Addresses free to hand out.
    pub free: u128,
    /// Held addresses that are not in the pool.
    pub out_of_range: u128,
    /// Reserved addresses their claims do not hold: neither free nor used.
    pub reserved: u128,
}

/// A pool's state, for its status and conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolReport {
    /// Why the pool cannot allocate (empty: its object is not known), or None when it can.
    pub invalid: Option<String>,
    pub families: Vec<FamilyReport>,
    /// Held addresses of a family the pool does not have, or outside its ranges.
    pub out_of_range: Vec<IpAddr>,
    /// Addresses held by more than one claim or `IPAddress`.
    pub conflicts: Vec<(IpAddr, Vec<HolderKey>)>,
    /// `IPAddress` objects that reference the pool.
    pub address_objects: usize,
    /// Addresses allocated to claims whose `IPAddress` is not seen yet (being written).
    pub in_flight: usize,
    /// Addresses held by anyone.
    pub held: usize,
    /// The pool hands out sub-prefixes (a prefix pool).
    pub hands_out_prefixes: bool,
    /// A spoke pool: it hands out the addresses of the blocks its hub leased to it.
    pub leased: bool,
    /// A hub pool: the blocks leased to each spoke, by the spoke's namespace in the hub.
    pub blocks_by_spoke: Vec<(String, usize)>,
    /// Pools sharing this one's address space whose ranges intersect its own.
    pub overlaps: Vec<PoolKey>,
    /// Holders of the `IPAddress` objects that record this pool's addresses.
    pub object_holders: Vec<HolderKey>,
    /// `IPAddress` objects with no claim of their name: not allocated by ferro-ipam (filled in by
    /// the pool controller, which sees the claims).
    pub unclaimed: Vec<HolderKey>,
    /// Addresses remembered for released claims, with their deadlines.
    pub remembered: Vec<(HolderKey, IpAddr, k8s_openapi::jiff::Timestamp)>,
    /// The pool's reservations, each with the holders of its address.
    pub reservations: Vec<(Reserved, Vec<HolderKey>)>,
}

/// The blocks of a hub pool leased to each spoke, by namespace, in order.
fn blocks_by_spoke(entry: &PoolEntry) -> Vec<(String, usize)> {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for (holder, _) in entry.leased_blocks() {
        *counts.entry(holder.namespace.to_string()).or_default() += 1;
    }
    counts.into_iter().collect()
}

impl PoolReport {
    pub fn of(entry: &PoolEntry) -> PoolReport {
        let mut report = PoolReport {
            address_objects: entry.address_objects(),
            in_flight: entry.in_flight(),
            held: entry.held_addresses(),
            conflicts: entry.conflicts(),
            remembered: entry.remembered(),
            object_holders: entry.object_holders(),
            reservations: entry.reservation_holders(),
            leased: entry.spec().and_then(|spec| spec.hub()).is_some(),
            blocks_by_spoke: blocks_by_spoke(entry),
            ..PoolReport::default()
        };
        match entry.allocators() {
            Err(why) => report.invalid = Some(why.to_owned()),
            Ok(pools) => {
                report.hands_out_prefixes = pools.iter().any(FamilyPool::hands_out_prefixes);
                report.out_of_range = entry.out_of_range();
                report.families = pools
                    .iter()
                    .map(|pool| {
                        let counts = pool.counts();
                        let reserved = entry.reserved_aside(pool.family());
                        FamilyReport {
                            family: Some(pool.family()),
                            total: counts.total,
                            used: counts.used.saturating_sub(reserved),
                            free: counts.free,
                            out_of_range: counts.out_of_range,
                            reserved,
                        }
                    })
                    .collect();
                // Addresses of a family the pool does not have count as out of range of the first.
                let foreign = report
                    .out_of_range
                    .iter()
                    .filter(|ip| !pools.iter().any(|p| p.family() == Family::of(**ip)))
                    .count() as u128;
                if let Some(first) = report.families.first_mut() {
                    first.used += foreign;
                    first.out_of_range += foreign;
                }
            }
        }
        report
    }

    /// Pool-wide sums over the families.
    pub fn totals(&self) -> FamilyReport {
        self.families.iter().fold(FamilyReport::default(), |sum, f| FamilyReport {
            family: None,
            total: sum.total.saturating_add(f.total),
            used: sum.used.saturating_add(f.used),
            free: sum.free.saturating_add(f.free),
            out_of_range: sum.out_of_range.saturating_add(f.out_of_range),
            reserved: sum.reserved.saturating_add(f.reserved),
        })
    }
}
