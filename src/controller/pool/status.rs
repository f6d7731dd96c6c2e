//! A pool's status from its index report (pure).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::IPPoolStatus;
use crate::api::conditions::PoolReason;
use crate::api::pool::{FamilyCounts, IPAddressCounts, ReleasedAddress};
use crate::index::PoolReport;

/// How many addresses a condition message lists before it says "and N more".
const LISTED: usize = 5;

fn saturate(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn listing<T: ToString>(items: &[T]) -> String {
    let shown: Vec<String> = items.iter().take(LISTED).map(ToString::to_string).collect();
    match items.len().saturating_sub(LISTED) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// The `Ready` condition: whether the pool is ready, the reason, and the message.
type Readiness = (bool, PoolReason, String);

/// The `Ready` condition's status, reason and message for a report: the first of what stops
/// the pool, what is wrong with addresses it keeps serving, and how full it is.
pub fn readiness(report: &PoolReport, deleting_with: Option<usize>) -> Readiness {
    stopped(report, deleting_with).or_else(|| troubled(report)).unwrap_or_else(|| capacity(report))
}

/// Why the pool hands out nothing, if it does not: its spec is invalid, or it is being deleted.
fn stopped(report: &PoolReport, deleting_with: Option<usize>) -> Option<Readiness> {
    if let Some(invalid) = &report.invalid {
        return Some((false, PoolReason::InvalidSpec, format!("the pool cannot hand out addresses: {invalid}")));
    }
    let count = deleting_with?;
    Some((
        false,
        PoolReason::Deleting,
        format!(
            "the pool is being deleted but {count} IPAddresses still reference it; it goes once their claims are deleted"
        ),
    ))
}

/// What is wrong with addresses the pool holds, while it still hands out others: the pool
/// stays ready, but the condition names the addresses.
fn troubled(report: &PoolReport) -> Option<Readiness> {
    if !report.conflicts.is_empty() {
        let listed: Vec<String> = report
            .conflicts
            .iter()
            .map(|(ip, holders)| {
                format!("{ip} ({})", holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
            })
            .collect();
        return Some((
            true,
            PoolReason::AddressConflict,
            format!("addresses held by more than one IPAddress: {}", listing(&listed)),
        ));
    }
    if !report.overlaps.is_empty() {
        return Some((
            true,
            PoolReason::OverlapsOtherPools,
            format!(
                "the pool's addresses overlap {}; an address taken in either is never handed out by the other, \
                 but make the ranges disjoint",
                listing(&report.overlaps)
            ),
        ));
    }
    if !report.out_of_range.is_empty() {
        return Some((
            true,
            PoolReason::AddressesOutOfRange,
            format!(
                "{} allocated addresses lie outside the pool: {}; they stay allocated and are never handed out again",
                report.out_of_range.len(),
                listing(&report.out_of_range)
            ),
        ));
    }
    if report.unclaimed.is_empty() {
        return None;
    }
    Some((
        true,
        PoolReason::UnclaimedAddresses,
        format!(
            "IPAddresses without a claim of their name hold addresses of the pool: {}; ferro-ipam did not allocate them \
             and never hands their addresses out",
            listing(&report.unclaimed)
        ),
    ))
}

/// How full the pool is; a pool whose spec leaves nothing to hand out is not ready, and says
/// which fields to change.
fn capacity(report: &PoolReport) -> Readiness {
    let totals = report.totals();
    if report.leased && totals.free == 0 {
        let message = match totals.total {
            0 => "no block is leased from the hub yet: blocks are asked for as claims come".to_owned(),
            total => {
                format!("all {total} addresses of the blocks leased from the hub are allocated: more are asked for")
            }
        };
        return (true, PoolReason::Exhausted, message);
    }
    if report.leased {
        return (
            true,
            PoolReason::Valid,
            format!("{} of {} addresses of the blocks leased from the hub free", totals.free, totals.total),
        );
    }
    if totals.total == 0 && report.hands_out_prefixes {
        return (
            false,
            PoolReason::NoAllocatableAddresses,
            "the pool's prefixes leave no sub-prefix to hand out: every sub-prefix of allocationPrefixLength overlaps \
             excludedPrefixes; narrow excludedPrefixes or add prefixes"
                .to_owned(),
        );
    }
    if totals.total == 0 {
        return (
            false,
            PoolReason::NoAllocatableAddresses,
            "the pool's addresses leave nothing to hand out: the gateway, excludedAddresses and the network (and, for IPv4, broadcast) \
             address of <lowest address>/<prefix> are never allocated; widen addresses or set allocateReservedIPAddresses"
                .to_owned(),
        );
    }
    let unit = if report.hands_out_prefixes { "sub-prefixes" } else { "addresses" };
    if totals.free == 0 {
        return (true, PoolReason::Exhausted, format!("all {} {unit} are allocated", totals.total));
    }
    (true, PoolReason::Valid, format!("{} of {} {unit} free", totals.free, totals.total))
}

/// The status a pool should have, keeping the transition time of an unchanged `Ready` status.
pub fn desired(
    report: &PoolReport,
    current: Option<&IPPoolStatus>,
    generation: Option<i64>,
    deleting_with: Option<usize>,
    now: Timestamp,
) -> IPPoolStatus {
    let totals = report.totals();
    let counts = (report.invalid.is_none()).then(|| IPAddressCounts {
        total: saturate(totals.total),
        used: i64::try_from(report.address_objects).unwrap_or(i64::MAX),
        free: saturate(totals.free),
        out_of_range: saturate(totals.out_of_range),
        reserved: (totals.reserved > 0).then(|| saturate(totals.reserved)),
    });
    let families = report
        .families
        .iter()
        .map(|f| FamilyCounts {
            family: f.family.map(|f| f.to_string()).unwrap_or_default(),
            total: f.total.to_string(),
            used: f.used.to_string(),
            free: f.free.to_string(),
            out_of_range: f.out_of_range.to_string(),
            reserved: (f.reserved > 0).then(|| f.reserved.to_string()),
        })
        .collect();
    let (ready, reason, message) = readiness(report, deleting_with);
    let status = if ready { "True" } else { "False" };
    let previous = current.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    let since = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => Time(now),
    };
    let recently_released = report
        .remembered
        .iter()
        .take(256)
        .map(|(holder, ip, until)| ReleasedAddress {
            address: ip.to_string(),
            claim: holder.to_string(),
            until: until.to_string(),
        })
        .collect();
    IPPoolStatus {
        recently_released,
        ip_addresses: counts,
        families,
        conditions: vec![Condition {
            type_: "Ready".to_owned(),
            status: status.to_owned(),
            reason: reason.as_str().to_owned(),
            message: crate::api::bounded::truncate(&message, crate::api::bounded::CONDITION_MESSAGE),
            last_transition_time: since,
            observed_generation: generation,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocator::Family;
    use crate::index::{FamilyReport, HolderKey};

    fn report(total: u128, free: u128, objects: usize) -> PoolReport {
        PoolReport {
            families: vec![FamilyReport {
                family: Some(Family::V4),
                total,
                used: total - free,
                free,
                out_of_range: 0,
                reserved: 0,
            }],
            address_objects: objects,
            held: objects,
            ..PoolReport::default()
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_700_000_000).expect("valid")
    }

    #[test]
    fn counts_follow_the_report_and_used_counts_address_objects() {
        let s = desired(&report(10, 7, 3), None, Some(1), None, now());
        assert_eq!(
            s.ip_addresses,
            Some(IPAddressCounts { total: 10, used: 3, free: 7, out_of_range: 0, reserved: None })
        );
        assert_eq!(s.families[0].family, "IPv4");
        assert_eq!(s.conditions[0].reason, "Valid");
    }

    #[test]
    fn huge_ipv6_counts_saturate_in_ip_addresses_and_stay_exact_in_families() {
        let big = 1u128 << 80;
        let s = desired(&report(big, big - 1, 1), None, None, None, now());
        assert_eq!(s.ip_addresses.as_ref().map(|c| c.total), Some(i64::MAX));
        assert_eq!(s.families[0].total, big.to_string());
    }

    #[test]
    fn invalid_pool_is_not_ready_and_reports_no_counts() {
        let invalid = PoolReport { invalid: Some("spec.addresses[0]: bad".into()), ..PoolReport::default() };
        let s = desired(&invalid, None, None, None, now());
        assert_eq!(s.conditions[0].status, "False");
        assert_eq!(s.conditions[0].reason, "InvalidSpec");
        assert!(s.conditions[0].message.contains("spec.addresses[0]"));
        assert_eq!(s.ip_addresses, None);
    }

    #[test]
    fn out_of_range_and_conflicts_are_named_in_the_condition() {
        let mut r = report(10, 9, 2);
        r.out_of_range = vec!["10.9.9.9".parse().unwrap()];
        assert!(readiness(&r, None).2.contains("10.9.9.9"));
        assert_eq!(readiness(&r, None).1, PoolReason::AddressesOutOfRange);
        r.conflicts = vec![("10.0.0.2".parse().unwrap(), vec![HolderKey::new("a", "x"), HolderKey::new("b", "y")])];
        assert_eq!(readiness(&r, None).1, PoolReason::AddressConflict);
        assert!(readiness(&r, None).2.contains("a/x"));
    }

    #[test]
    fn pool_with_nothing_to_hand_out_is_not_ready_and_says_why() {
        let (ready, reason, message) = readiness(&report(0, 0, 0), None);
        assert!(!ready);
        assert_eq!(reason, PoolReason::NoAllocatableAddresses);
        assert!(message.contains("allocateReservedIPAddresses"));
    }

    #[test]
    fn overlapping_pools_and_unclaimed_addresses_are_named() {
        let mut r = report(10, 9, 1);
        r.unclaimed = vec![HolderKey::new("ns", "hand-made")];
        assert_eq!(readiness(&r, None).1, PoolReason::UnclaimedAddresses);
        assert!(readiness(&r, None).2.contains("ns/hand-made"));
        r.overlaps = vec![crate::index::PoolKey::global("wide")];
        assert_eq!(readiness(&r, None).1, PoolReason::OverlapsOtherPools);
        assert!(readiness(&r, None).2.contains("GlobalInClusterIPPool wide"));
    }

    #[test]
    fn full_pool_says_so() {
        assert_eq!(readiness(&report(4, 0, 4), None).1, PoolReason::Exhausted);
    }

    #[test]
    fn a_prefix_pool_speaks_of_sub_prefixes_and_its_exclusions() {
        let mut r = report(4, 1, 3);
        r.hands_out_prefixes = true;
        assert_eq!(readiness(&r, None).2, "1 of 4 sub-prefixes free");
        let mut empty = report(0, 0, 0);
        empty.hands_out_prefixes = true;
        let (ready, reason, message) = readiness(&empty, None);
        assert!(!ready && reason == PoolReason::NoAllocatableAddresses);
        assert!(message.contains("excludedPrefixes") && !message.contains("allocateReservedIPAddresses"), "{message}");
    }

    #[test]
    fn transition_time_is_kept_while_the_status_stays() {
        let first = desired(&report(10, 7, 3), None, None, None, Timestamp::from_second(100).expect("valid"));
        let second = desired(&report(10, 6, 4), Some(&first), None, None, now());
        assert_eq!(second.conditions[0].last_transition_time, first.conditions[0].last_transition_time);
    }
}
