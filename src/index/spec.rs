//! From a pool object's spec to the allocator's per-family definitions.

use crate::allocator::{Family, FamilyPool, FamilySpec, PrefixSpec, Strategy};
use crate::api::{IPPoolSpec, PrefixPoolSpec};

/// The spec of a pool of any kind.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolSpec {
    /// An `InClusterIPPool` or `GlobalInClusterIPPool`.
    Addresses(IPPoolSpec),
    /// An `InClusterPrefixPool` or `GlobalInClusterPrefixPool`.
    Prefixes(PrefixPoolSpec),
}

impl From<&IPPoolSpec> for PoolSpec {
    fn from(spec: &IPPoolSpec) -> Self {
        PoolSpec::Addresses(spec.clone())
    }
}

impl From<&PrefixPoolSpec> for PoolSpec {
    fn from(spec: &PrefixPoolSpec) -> Self {
        PoolSpec::Prefixes(spec.clone())
    }
}

impl PoolSpec {
    /// The allocators the spec describes, or why it describes none.
    pub fn allocators(&self) -> Result<Vec<FamilyPool>, String> {
        let mut pools = match self {
            PoolSpec::Addresses(spec) => build_allocators(spec)?,
            PoolSpec::Prefixes(spec) => vec![build_prefix_allocator(spec)?],
        };
        for pool in &mut pools {
            pool.set_strategy(self.strategy());
        }
        Ok(pools)
    }

    /// The pool's reservations checked against its allocators, or the first problem.
    pub fn reservations(&self, allocators: &[FamilyPool]) -> Result<Vec<super::Reserved>, String> {
        let listed = match self {
            PoolSpec::Addresses(spec) => spec.reservations.as_deref(),
            PoolSpec::Prefixes(spec) => spec.reservations.as_deref(),
        };
        super::reservations::check(listed.unwrap_or_default(), allocators)
    }

    /// The order the pool hands out free addresses in.
    pub fn strategy(&self) -> Strategy {
        let field = match self {
            PoolSpec::Addresses(spec) => spec.allocation_strategy,
            PoolSpec::Prefixes(spec) => spec.allocation_strategy,
        };
        field.unwrap_or_default().into()
    }

    /// The prefix and gateway written into `IPAddress`es of `family`.
    pub fn settings(&self, family: Family) -> Option<(i32, Option<String>)> {
        match self {
            PoolSpec::Addresses(spec) => family_settings(spec, family),
            PoolSpec::Prefixes(spec) => (family == Family::V6)
                .then(|| (spec.allocation_length(), spec.gateway.clone().filter(|g| !g.is_empty()))),
        }
    }

    /// The prefix and gateway written into `IPAddress`es of the pool's first family.
    pub fn first_settings(&self) -> (i32, Option<String>) {
        match self {
            PoolSpec::Addresses(spec) => (spec.prefix, spec.gateway.clone().filter(|g| !g.is_empty())),
            PoolSpec::Prefixes(spec) => (spec.allocation_length(), spec.gateway.clone().filter(|g| !g.is_empty())),
        }
    }

    /// The hub a spoke pool leases its addresses from, if it is one.
    pub fn hub(&self) -> Option<&crate::api::hub::HubSource> {
        match self {
            PoolSpec::Addresses(spec) => spec.hub.as_deref(),
            PoolSpec::Prefixes(_) => None,
        }
    }

    /// Whether the pool hands out two families.
    pub fn is_dual_stack(&self) -> bool {
        matches!(self, PoolSpec::Addresses(spec) if spec.dual_stack.is_some())
    }
}

/// The allocator of a prefix pool, or why there is none. The CRD's CEL rules refuse bad specs
/// before they are stored; this catches specs stored before the rules existed.
pub fn build_prefix_allocator(spec: &PrefixPoolSpec) -> Result<FamilyPool, String> {
    let length = spec.allocation_length();
    let allocation_length = u8::try_from(length).map_err(|_| {
        format!("spec.allocationPrefixLength {length} is not valid: allocationPrefixLength must be between 1 and 128")
    })?;
    let prefix = PrefixSpec {
        prefixes: &spec.prefixes,
        excluded: spec.excluded_prefixes.as_deref().unwrap_or_default(),
        allocation_length,
        gateway: spec.gateway.as_deref().filter(|g| !g.is_empty()),
    };
    FamilyPool::of_prefixes(&prefix).map_err(|e| format!("spec.{e}"))
}

/// One family of a pool spec, borrowed: the top-level fields or the `dualStack` block.
struct FamilyFields<'a> {
    path: &'static str,
    addresses: &'a [String],
    excluded: &'a [String],
    prefix: i32,
    gateway: Option<&'a str>,
}

fn families(spec: &IPPoolSpec) -> Vec<FamilyFields<'_>> {
    let mut all = vec![FamilyFields {
        path: "spec",
        addresses: &spec.addresses,
        excluded: spec.excluded_addresses.as_deref().unwrap_or_default(),
        prefix: spec.prefix,
        gateway: spec.gateway.as_deref(),
    }];
    if let Some(second) = &spec.dual_stack {
        all.push(FamilyFields {
            path: "spec.dualStack",
            addresses: &second.addresses,
            excluded: second.excluded_addresses.as_deref().unwrap_or_default(),
            prefix: second.prefix,
            gateway: second.gateway.as_deref(),
        });
    }
    all
}

/// The per-family allocators a pool spec describes (one, or two for a dual-stack pool), or why
/// it describes none.
///
/// The CRD's CEL rules refuse most bad specs before they are stored; this catches what CEL cannot
/// see (an IPv6 range written backwards, a prefix that does not fit the addresses) and specs stored
/// before the rules existed.
pub fn build_allocators(spec: &IPPoolSpec) -> Result<Vec<FamilyPool>, String> {
    let allocate_reserved = spec.allocate_reserved_ip_addresses.unwrap_or(false);
    let mut pools: Vec<FamilyPool> = Vec::new();
    for fields in families(spec) {
        let prefix = u8::try_from(fields.prefix).map_err(|_| {
            format!("{}.prefix {} is not valid: use 0-32 for IPv4, 0-128 for IPv6", fields.path, fields.prefix)
        })?;
        let family = FamilySpec {
            addresses: fields.addresses,
            excluded: fields.excluded,
            prefix,
            gateway: fields.gateway.filter(|g| !g.is_empty()),
            allocate_reserved,
        };
        let pool = FamilyPool::new(&family).map_err(|e| format!("{}.{e}", fields.path))?;
        if pools.iter().any(|p| p.family() == pool.family()) {
            return Err(format!(
                "{}.addresses are {} like spec.addresses: the second family of a dual-stack pool must be the other one",
                fields.path,
                pool.family()
            ));
        }
        pools.push(pool);
    }
    Ok(pools)
}

/// The prefix and gateway a pool writes into `IPAddress`es of `family`.
pub fn family_settings(spec: &IPPoolSpec, family: Family) -> Option<(i32, Option<String>)> {
    families(spec)
        .into_iter()
        .find(|f| f.addresses.first().is_some_and(|a| family_of_entry(a) == Some(family)))
        .map(|f| (f.prefix, f.gateway.filter(|g| !g.is_empty()).map(str::to_owned)))
}

fn family_of_entry(entry: &str) -> Option<Family> {
    crate::allocator::parse_entry(entry).ok().map(|range| range.family())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pool::SecondFamily;

    fn dual() -> IPPoolSpec {
        IPPoolSpec {
            addresses: vec!["10.0.0.10-10.0.0.20".into()],
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            dual_stack: Some(SecondFamily {
                addresses: vec!["fd00::10-fd00::20".into()],
                prefix: 64,
                gateway: Some("fd00::1".into()),
                excluded_addresses: Some(vec!["fd00::10".into()]),
            }),
            ..IPPoolSpec::default()
        }
    }

    #[test]
    fn dual_stack_spec_builds_one_allocator_per_family_in_order() {
        let pools = build_allocators(&dual()).expect("valid");
        assert_eq!(pools.iter().map(FamilyPool::family).collect::<Vec<_>>(), [Family::V4, Family::V6]);
        assert_eq!(pools[1].counts().total, 16, "fd00::10 excluded from 17");
    }

    #[test]
    fn each_family_writes_its_own_prefix_and_gateway() {
        assert_eq!(family_settings(&dual(), Family::V4), Some((24, Some("10.0.0.1".into()))));
        assert_eq!(family_settings(&dual(), Family::V6), Some((64, Some("fd00::1".into()))));
    }

    #[test]
    fn second_family_of_the_same_kind_is_refused_naming_the_field() {
        let mut spec = dual();
        spec.dual_stack.as_mut().unwrap().addresses = vec!["10.0.1.1".into()];
        spec.dual_stack.as_mut().unwrap().gateway = None;
        spec.dual_stack.as_mut().unwrap().excluded_addresses = None;
        spec.dual_stack.as_mut().unwrap().prefix = 24;
        let error = build_allocators(&spec).unwrap_err();
        assert!(error.starts_with("spec.dualStack.addresses"), "{error}");
    }

    #[test]
    fn a_prefix_spec_writes_its_allocation_length_and_gateway_and_counts_sub_prefixes() {
        let spec = PoolSpec::Prefixes(PrefixPoolSpec {
            prefixes: vec!["fd00::/48".into()],
            allocation_prefix_length: Some(56),
            gateway: Some("fd00::1".into()),
            excluded_prefixes: None,
            allocation_strategy: None,
            reservations: None,
            namespace_selector: None,
        });
        assert_eq!(spec.settings(Family::V6), Some((56, Some("fd00::1".into()))));
        assert_eq!(spec.settings(Family::V4), None);
        assert_eq!(spec.allocators().unwrap()[0].counts().total, 256);
        let unset = PrefixPoolSpec { prefixes: vec!["fd00::/62".into()], ..PrefixPoolSpec::default() };
        assert_eq!(PoolSpec::from(&unset).settings(Family::V6), Some((64, None)), "64 when unset");
        let bad = PrefixPoolSpec { prefixes: vec!["fd00::1/64".into()], ..unset };
        let error = PoolSpec::from(&bad).allocators().unwrap_err();
        assert!(error.starts_with("spec.prefixes[0]") && error.contains("network-aligned"), "{error}");
    }

    #[test]
    fn errors_name_the_family_block() {
        let mut spec = dual();
        spec.dual_stack.as_mut().unwrap().addresses = vec!["fd00::20-fd00::10".into()];
        let error = build_allocators(&spec).unwrap_err();
        assert!(error.starts_with("spec.dualStack.addresses[0]"), "{error}");
    }
}
