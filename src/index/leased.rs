//! A spoke pool's spec as its allocators see it: only the addresses of the blocks the hub
//! leased to it are allocatable; the rest of its addresses are excluded until a block brings
//! them. Held addresses outside every block stay held (as out of range), never dropped.

use ipnet::IpNet;

use crate::allocator::{Family, parse_entry, value_of};
use crate::api::IPPoolSpec;

/// `spec` with every address outside `blocks` excluded, in each family.
pub fn within_blocks(spec: &IPPoolSpec, blocks: &[IpNet]) -> IPPoolSpec {
    let mut spec = spec.clone();
    let first = exclude_outside(&spec.addresses, blocks);
    extend(&mut spec.excluded_addresses, first);
    if let Some(second) = spec.dual_stack.as_mut() {
        let more = exclude_outside(&second.addresses, blocks);
        extend(&mut second.excluded_addresses, more);
    }
    spec
}

fn extend(excluded: &mut Option<Vec<String>>, more: Vec<String>) {
    if !more.is_empty() {
        excluded.get_or_insert_with(Vec::new).extend(more);
    }
}

/// The ranges between the lowest and the highest of `addresses` that no block covers, as
/// entries. Nothing when an entry does not parse: the spec is refused for that anyway.
fn exclude_outside(addresses: &[String], blocks: &[IpNet]) -> Vec<String> {
    let Ok(entries) = addresses.iter().map(|a| parse_entry(a)).collect::<Result<Vec<_>, _>>() else {
        return Vec::new();
    };
    let Some(family) = entries.first().map(|e| e.family()) else { return Vec::new() };
    let low = entries.iter().map(|e| value_of(e.first())).min().unwrap_or_default();
    let high = entries.iter().map(|e| value_of(e.last())).max().unwrap_or_default();
    let mut covered: Vec<(u128, u128)> = blocks
        .iter()
        .filter(|b| Family::of(b.network()) == family)
        .map(|b| (value_of(b.network()), value_of(b.broadcast())))
        .collect();
    covered.sort_unstable();
    let mut gaps = Vec::new();
    let mut next = Some(low);
    for (first, last) in covered {
        let Some(from) = next else { break };
        if first > from && from <= high {
            gaps.push((from, (first - 1).min(high)));
        }
        if last >= from {
            next = last.checked_add(1);
        }
    }
    if let Some(from) = next.filter(|from| *from <= high) {
        gaps.push((from, high));
    }
    gaps.into_iter()
        .filter_map(|(a, b)| match a == b {
            true => Some(family.address(a)?.to_string()),
            false => Some(format!("{}-{}", family.address(a)?, family.address(b)?)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::build_allocators;

    fn spec(addresses: &[&str]) -> IPPoolSpec {
        IPPoolSpec {
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            prefix: 24,
            ..IPPoolSpec::default()
        }
    }

    fn allocatable(spec: &IPPoolSpec) -> u128 {
        build_allocators(spec).expect("a valid spec").iter().map(|p| p.counts().total).sum()
    }

    #[test]
    fn only_the_addresses_of_the_blocks_are_allocatable() {
        let pool = spec(&["10.0.0.10-10.0.0.200"]);
        assert_eq!(allocatable(&within_blocks(&pool, &[])), 0, "no block: nothing");
        let one = within_blocks(&pool, &["10.0.0.16/28".parse().unwrap()]);
        assert_eq!(allocatable(&one), 16);
        assert_eq!(one.excluded_addresses.unwrap(), ["10.0.0.10-10.0.0.15", "10.0.0.32-10.0.0.200"]);
        // A block at the edge counts only its addresses inside the pool.
        let edge = within_blocks(&pool, &["10.0.0.0/28".parse().unwrap(), "10.0.0.192/28".parse().unwrap()]);
        assert_eq!(allocatable(&edge), 6 + 9);
    }

    #[test]
    fn each_family_of_a_dual_stack_pool_keeps_its_own_blocks() {
        let mut pool = spec(&["10.0.0.0/24"]);
        pool.dual_stack = Some(crate::api::SecondFamily {
            addresses: vec!["fd00::/120".into()],
            prefix: 64,
            ..crate::api::SecondFamily::default()
        });
        let leased = within_blocks(&pool, &["fd00::10/124".parse().unwrap()]);
        let pools = build_allocators(&leased).expect("valid");
        assert_eq!(pools[0].counts().total, 0);
        assert_eq!(pools[1].counts().total, 16);
    }
}
