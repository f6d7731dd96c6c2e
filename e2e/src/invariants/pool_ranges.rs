//! The checker's own reading of a pool spec: which addresses each family of a pool hands out,
//! and how many. Written from the pool API's documentation and the in-cluster provider's rules
//! (entries are single addresses, ranges `a-b` or CIDRs; the gateway, `excludedAddresses` and,
//! unless `allocateReservedIPAddresses`, the network address of `<lowest>/<prefix>` and the IPv4
//! broadcast address are never handed out), without ferro-ipam's allocator: it is the reference
//! the product's allocations and counts are compared with, so it must not share their code.

use std::net::IpAddr;

use ferro_ipam::api::IPPoolSpec;

/// Inclusive ranges of address values (an IPv4 address is its 32-bit value), ascending,
/// disjoint and not touching.
type Ranges = Vec<(u128, u128)>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: IpAddr) -> Family {
        if ip.is_ipv4() { Family::V4 } else { Family::V6 }
    }

    fn bits(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// How the pool status names it.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

fn value(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The addresses one family of a pool hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FamilyRanges {
    pub family: Family,
    allocatable: Ranges,
}

impl FamilyRanges {
    /// Whether the family hands `ip` out (it is of the family and allocatable).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let v = value(ip);
        Family::of(ip) == self.family && self.allocatable.iter().any(|&(a, b)| a <= v && v <= b)
    }

    /// How many addresses it hands out, saturating at `u128::MAX` (all of `::/0` is one more).
    pub fn size(&self) -> u128 {
        self.allocatable.iter().fold(0u128, |sum, &(a, b)| sum.saturating_add((b - a).saturating_add(1)))
    }

    /// How many are left once `taken` of them are in use, saturating like [`size`](Self::size).
    pub fn free_after(&self, taken: u128) -> u128 {
        if self.allocatable == [(0, u128::MAX)] && taken > 0 {
            // 2^128 - taken, computed without the 2^128 that does not fit.
            return u128::MAX - (taken - 1);
        }
        self.size().saturating_sub(taken)
    }
}

/// One family block of a spec: the top-level fields or `dualStack`.
struct Block<'a> {
    path: &'static str,
    addresses: &'a [String],
    prefix: i32,
    gateway: Option<&'a str>,
    excluded: &'a [String],
}

/// The families a pool spec describes (one, or two for a dual-stack pool), in spec order, or
/// why the spec describes no valid pool.
pub fn read(spec: &IPPoolSpec) -> Result<Vec<FamilyRanges>, String> {
    let allocate_reserved = spec.allocate_reserved_ip_addresses.unwrap_or(false);
    let mut blocks = vec![Block {
        path: "spec",
        addresses: &spec.addresses,
        prefix: spec.prefix,
        gateway: spec.gateway.as_deref(),
        excluded: spec.excluded_addresses.as_deref().unwrap_or_default(),
    }];
    if let Some(second) = &spec.dual_stack {
        blocks.push(Block {
            path: "spec.dualStack",
            addresses: &second.addresses,
            prefix: second.prefix,
            gateway: second.gateway.as_deref(),
            excluded: second.excluded_addresses.as_deref().unwrap_or_default(),
        });
    }
    let mut families: Vec<FamilyRanges> = Vec::new();
    for block in &blocks {
        let family = read_block(block, allocate_reserved)?;
        if families.iter().any(|f| f.family == family.family) {
            return Err(format!("{}: a second block of the same family", block.path));
        }
        families.push(family);
    }
    Ok(families)
}

fn read_block(block: &Block, allocate_reserved: bool) -> Result<FamilyRanges, String> {
    let path = block.path;
    let mut family = None;
    let mut listed = Vec::new();
    for (i, text) in block.addresses.iter().enumerate() {
        let (f, first, last) = entry(text).map_err(|e| format!("{path}.addresses[{i}] {text:?}: {e}"))?;
        if *family.get_or_insert(f) != f {
            return Err(format!("{path}.addresses[{i}] {text:?}: another family than the first entry"));
        }
        listed.push((first, last));
    }
    let family = family.ok_or_else(|| format!("{path}.addresses is empty"))?;
    let prefix = u32::try_from(block.prefix)
        .ok()
        .filter(|p| *p <= family.bits())
        .ok_or_else(|| format!("{path}.prefix {} does not fit {}", block.prefix, family.name()))?;
    let listed = merge(listed);
    let (network, broadcast) = cidr(family, listed[0].0, prefix);
    if listed.last().is_some_and(|&(_, last)| last > broadcast) {
        return Err(format!("{path}.addresses reach beyond the /{prefix} of the lowest address"));
    }

    let mut removed = Vec::new();
    for (i, text) in block.excluded.iter().enumerate() {
        let (f, first, last) = entry(text).map_err(|e| format!("{path}.excludedAddresses[{i}] {text:?}: {e}"))?;
        if f != family {
            return Err(format!("{path}.excludedAddresses[{i}] {text:?}: another family than the addresses"));
        }
        removed.push((first, last));
    }
    if let Some(text) = block.gateway.filter(|g| !g.is_empty()) {
        let gateway: IpAddr = text.parse().map_err(|_| format!("{path}.gateway {text:?} is not an address"))?;
        if Family::of(gateway) != family {
            return Err(format!("{path}.gateway {text:?}: another family than the addresses"));
        }
        removed.push((value(gateway), value(gateway)));
    }
    if !allocate_reserved {
        removed.push((network, network));
        if family == Family::V4 {
            removed.push((broadcast, broadcast));
        }
    }
    Ok(FamilyRanges { family, allocatable: subtract(&listed, &merge(removed)) })
}

/// An entry as (family, first, last): `a-b`, `address/length` (host bits allowed) or `address`.
fn entry(text: &str) -> Result<(Family, u128, u128), String> {
    let address = |s: &str| s.parse::<IpAddr>().map_err(|_| format!("{s:?} is not an address"));
    if let Some((a, b)) = text.split_once('-') {
        let (a, b) = (address(a)?, address(b)?);
        if Family::of(a) != Family::of(b) {
            return Err("the ends are of two families".into());
        }
        if value(a) > value(b) {
            return Err("the range runs backwards".into());
        }
        return Ok((Family::of(a), value(a), value(b)));
    }
    if let Some((a, length)) = text.split_once('/') {
        let a = address(a)?;
        let family = Family::of(a);
        let plain_number = !length.is_empty() && (length == "0" || !length.starts_with('0'));
        let length = length
            .parse::<u32>()
            .ok()
            .filter(|l| plain_number && *l <= family.bits())
            .ok_or_else(|| format!("/{length} is no prefix length of {}", family.name()))?;
        let (first, last) = cidr(family, value(a), length);
        return Ok((family, first, last));
    }
    let a = address(text)?;
    Ok((Family::of(a), value(a), value(a)))
}

/// First and last value of the `length`-bit network holding `v`.
fn cidr(family: Family, v: u128, length: u32) -> (u128, u128) {
    let host_bits = family.bits() - length;
    let host_mask = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    (v & !host_mask, v | host_mask)
}

fn merge(mut ranges: Ranges) -> Ranges {
    ranges.sort_unstable();
    let mut merged: Ranges = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// `keep` without `remove` (both merged).
fn subtract(keep: &Ranges, remove: &Ranges) -> Ranges {
    let mut left = Vec::new();
    for &(first, last) in keep {
        let mut from = Some(first);
        for &(a, b) in remove.iter().filter(|&&(a, b)| a <= last && b >= first) {
            let Some(start) = from else { break };
            if a > start {
                left.push((start, a - 1));
            }
            from = (b < last).then(|| b + 1);
        }
        if let Some(start) = from {
            left.push((start, last));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: serde_json::Value) -> IPPoolSpec {
        serde_json::from_value(value).expect("a pool spec")
    }

    fn sizes(value: serde_json::Value) -> Vec<u128> {
        read(&spec(value)).expect("valid").iter().map(FamilyRanges::size).collect()
    }

    #[test]
    fn totals_follow_the_in_cluster_providers_status_tables() {
        use serde_json::json;
        let gateway_in = json!({"addresses": ["10.0.0.1-10.0.0.10"], "prefix": 24, "gateway": "10.0.0.1"});
        assert_eq!(sizes(gateway_in), [9]);
        let gateway_out = json!({"addresses": ["10.0.1.2-10.0.1.10"], "prefix": 24, "gateway": "10.0.1.1"});
        assert_eq!(sizes(gateway_out), [9]);
        assert_eq!(sizes(json!({"addresses": ["10.0.3.0/24"], "prefix": 24, "gateway": "10.0.3.1"})), [253]);
        let kept = json!({"addresses": ["10.0.4.0/24"], "prefix": 24, "allocateReservedIPAddresses": true});
        assert_eq!(sizes(kept), [256]);
        assert_eq!(sizes(json!({"addresses": ["fd00::/120"], "prefix": 120, "gateway": "fd00::1"})), [254]);
        assert_eq!(sizes(json!({"addresses": ["fd00:1::/64"], "prefix": 64})), [(1u128 << 64) - 1]);
        let everything = json!({"addresses": ["::/0"], "prefix": 0, "allocateReservedIPAddresses": true});
        assert_eq!(sizes(everything.clone()), [u128::MAX], "2^128 saturates");
        let whole = read(&spec(everything)).unwrap();
        assert_eq!(
            (whole[0].free_after(0), whole[0].free_after(1), whole[0].free_after(2)),
            (u128::MAX, u128::MAX, u128::MAX - 1)
        );
        assert_eq!(sizes(json!({"addresses": ["::/0"], "prefix": 0})), [u128::MAX], "2^128 - 1 is exact");
    }

    #[test]
    fn excluded_gateway_and_reserved_addresses_are_not_handed_out() {
        let pool = spec(serde_json::json!({
            "addresses": ["10.2.0.0-10.2.0.5", "10.2.0.8/30"], "prefix": 24, "gateway": "10.2.0.1",
            "excludedAddresses": ["10.2.0.2", "10.2.0.9-10.2.0.10"],
        }));
        let families = read(&pool).expect("valid");
        let handed: Vec<u8> =
            (0..=20).filter(|n| families[0].contains(format!("10.2.0.{n}").parse().unwrap())).collect();
        assert_eq!(handed, [3, 4, 5, 8, 11], "network .0, gateway .1, excluded .2 .9 .10");
        assert!(!families[0].contains("fd00::3".parse().unwrap()), "another family");
    }

    #[test]
    fn a_dual_stack_pool_has_two_families_in_spec_order() {
        let pool = spec(serde_json::json!({
            "addresses": ["10.50.0.10-10.50.0.20"], "prefix": 24, "gateway": "10.50.0.1",
            "dualStack": {"addresses": ["fd00:50::10-fd00:50::20"], "prefix": 64, "excludedAddresses": ["fd00:50::10"]},
        }));
        let families = read(&pool).expect("valid");
        assert_eq!(
            families.iter().map(|f| (f.family, f.size())).collect::<Vec<_>>(),
            [(Family::V4, 11), (Family::V6, 16)]
        );
    }

    #[test]
    fn invalid_specs_are_refused_with_the_field() {
        use serde_json::json;
        for (bad, field) in [
            (json!({"addresses": [], "prefix": 24}), "spec.addresses"),
            (json!({"addresses": ["10.0.0.9-10.0.0.2"], "prefix": 24}), "spec.addresses[0]"),
            (json!({"addresses": ["10.0.0.1", "fd00::1"], "prefix": 24}), "spec.addresses[1]"),
            (json!({"addresses": ["10.0.0.1", "10.0.1.1"], "prefix": 24}), "spec.addresses"),
            (json!({"addresses": ["10.0.0.1"], "prefix": 33}), "spec.prefix"),
            (json!({"addresses": ["10.0.0.1/033"], "prefix": 24}), "spec.addresses[0]"),
            (json!({"addresses": ["10.0.0.1"], "prefix": 24, "gateway": "fd00::1"}), "spec.gateway"),
            (
                json!({"addresses": ["10.0.0.1"], "prefix": 24, "dualStack": {"addresses": ["10.1.0.1"], "prefix": 24}}),
                "spec.dualStack",
            ),
        ] {
            let error = read(&spec(bad.clone())).expect_err(&bad.to_string());
            assert!(error.starts_with(field), "{bad}: {error}");
        }
    }
}
