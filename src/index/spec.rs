//! From a pool object's spec to the allocator's per-family definitions.

use crate::allocator::{FamilyPool, FamilySpec};
use crate::api::IPPoolSpec;

/// The per-family allocators a pool spec describes, or why it describes none.
///
/// The CRD's CEL rules refuse most bad specs before they are stored; this catches what CEL cannot
/// see (a range written backwards, a prefix that does not fit the addresses) and specs stored
/// before the rules existed.
pub fn build_allocators(spec: &IPPoolSpec) -> Result<Vec<FamilyPool>, String> {
    let prefix = u8::try_from(spec.prefix)
        .map_err(|_| format!("spec.prefix {} is not valid: use 0-32 for IPv4, 0-128 for IPv6", spec.prefix))?;
    let excluded = spec.excluded_addresses.as_deref().unwrap_or_default();
    let family = FamilySpec {
        addresses: &spec.addresses,
        excluded,
        prefix,
        gateway: spec.gateway.as_deref().filter(|g| !g.is_empty()),
        allocate_reserved: spec.allocate_reserved_ip_addresses.unwrap_or(false),
    };
    let pool = FamilyPool::new(&family).map_err(|e| e.to_string())?;
    Ok(vec![pool])
}
