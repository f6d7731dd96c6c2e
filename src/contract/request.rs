//! What a claim asks of its pool: a family, a specific address (pure).

use std::net::IpAddr;

use kube::ResourceExt;

use crate::allocator::Family;
use crate::api::capi::IPAddressClaim;
use crate::api::keys::{IP_FAMILY_ANNOTATION, REQUESTED_ADDRESS_ANNOTATION};
use crate::index::{ClaimOwner, Request};

fn parse_family(value: &str) -> Option<Family> {
    match value.trim().to_ascii_lowercase().as_str() {
        "ipv4" | "v4" | "4" => Some(Family::V4),
        "ipv6" | "v6" | "6" => Some(Family::V6),
        _ => None,
    }
}

/// The family a claim's name asks for, the way CAPIC names its claims (`nic-<machine>-ipv6`).
fn family_from_name(name: &str) -> Option<Family> {
    if name.ends_with("-ipv4") {
        Some(Family::V4)
    } else if name.ends_with("-ipv6") {
        Some(Family::V6)
    } else {
        None
    }
}

/// The request a claim makes. In order: the requested-address annotation (its family goes with
/// it), the ip-family annotation, and, on a dual-stack pool only, a name ending in `-ipv4` or
/// `-ipv6`. Without any, the pool's first family. A bad annotation is an error naming it.
pub fn of(claim: &IPAddressClaim, dual_stack: bool) -> Result<Request, String> {
    let annotations = claim.annotations();
    let family = match annotations.get(IP_FAMILY_ANNOTATION) {
        Some(value) => Some(parse_family(value).ok_or_else(|| {
            format!("annotation {IP_FAMILY_ANNOTATION}: {value:?} is not an address family; write IPv4 or IPv6")
        })?),
        None if dual_stack => family_from_name(&claim.name_any()),
        None => None,
    };
    let address = match annotations.get(REQUESTED_ADDRESS_ANNOTATION) {
        Some(value) => Some(
            value
                .trim()
                .parse::<IpAddr>()
                .map_err(|_| format!("annotation {REQUESTED_ADDRESS_ANNOTATION}: {value:?} is not an IP address"))?,
        ),
        None => None,
    };
    if let (Some(address), Some(family)) = (address, family)
        && Family::of(address) != family
    {
        return Err(format!(
            "annotation {REQUESTED_ADDRESS_ANNOTATION} asks for {address}, an {} address, but {IP_FAMILY_ANNOTATION} asks for {family}",
            Family::of(address)
        ));
    }
    let owners = claim
        .owner_references()
        .iter()
        .map(|owner| ClaimOwner { kind: owner.kind.clone(), name: owner.name.clone() })
        .collect();
    Ok(Request { family: address.map(Family::of).or(family), address, owners })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::claim;

    fn annotated(name: &str, pairs: &[(&str, &str)]) -> IPAddressClaim {
        let mut c = claim(name, "pool");
        for (k, v) in pairs {
            c.annotations_mut().insert((*k).into(), (*v).into());
        }
        c
    }

    #[test]
    fn plain_claim_asks_for_the_first_family() {
        assert_eq!(of(&claim("vm-0", "pool"), true), Ok(Request::default()));
    }

    #[test]
    fn family_annotation_picks_the_family() {
        let c = annotated("vm-0", &[(IP_FAMILY_ANNOTATION, "IPv6")]);
        assert_eq!(of(&c, true).unwrap().family, Some(Family::V6));
        let bad = annotated("vm-0", &[(IP_FAMILY_ANNOTATION, "ipv5")]);
        assert!(of(&bad, true).unwrap_err().contains("ipv5"));
    }

    #[test]
    fn capic_style_names_pick_the_family_on_dual_stack_pools_only() {
        assert_eq!(of(&claim("nic-m-ipv6", "pool"), true).unwrap().family, Some(Family::V6));
        assert_eq!(of(&claim("nic-m-ipv4", "pool"), true).unwrap().family, Some(Family::V4));
        assert_eq!(of(&claim("nic-m-ipv6", "pool"), false).unwrap().family, None);
    }

    #[test]
    fn requested_address_brings_its_family_and_must_agree_with_the_annotation() {
        let c = annotated("vm-0", &[(REQUESTED_ADDRESS_ANNOTATION, "fd00::7")]);
        assert_eq!(
            of(&c, false),
            Ok(Request { family: Some(Family::V6), address: Some("fd00::7".parse().unwrap()), owners: Vec::new() })
        );
        let clash = annotated("vm-0", &[(REQUESTED_ADDRESS_ANNOTATION, "10.0.0.7"), (IP_FAMILY_ANNOTATION, "IPv6")]);
        assert!(of(&clash, true).is_err());
        let bad = annotated("vm-0", &[(REQUESTED_ADDRESS_ANNOTATION, "10.0.0.999")]);
        assert!(of(&bad, false).unwrap_err().contains("10.0.0.999"));
    }
}
