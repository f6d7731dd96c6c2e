//! A pool's reservations: addresses kept for the claims that match (pure).
//!
//! The CRD's CEL rules refuse most bad reservations before they are stored (not an IP, no or
//! two matchers, the gateway, an address twice, a claim given two of one family); what CEL
//! cannot see (an address outside the pool's ranges or in its exclusions, or not a sub-prefix's
//! network address) makes the pool invalid here, naming the field.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use crate::allocator::{Family, FamilyPool};
use crate::api::Reservation;

use super::keys::HolderKey;

/// An owner of a claim, from its `ownerReferences`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClaimOwner {
    pub kind: String,
    pub name: String,
}

/// The claims a reservation is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimMatch {
    /// A claim of this name (and namespace, when given).
    Named { name: String, namespace: Option<String> },
    /// A claim with this owner.
    OwnedBy(ClaimOwner),
}

impl ClaimMatch {
    pub fn matches(&self, holder: &HolderKey, owners: &[ClaimOwner]) -> bool {
        match self {
            ClaimMatch::Named { name, namespace } => {
                **name == *holder.name && namespace.as_ref().is_none_or(|ns| **ns == *holder.namespace)
            }
            ClaimMatch::OwnedBy(owner) => owners.contains(owner),
        }
    }
}

impl fmt::Display for ClaimMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimMatch::Named { name, namespace: Some(ns) } => write!(f, "claim {ns}/{name}"),
            ClaimMatch::Named { name, namespace: None } => write!(f, "claim {name}"),
            ClaimMatch::OwnedBy(owner) => write!(f, "claims owned by {} {}", owner.kind, owner.name),
        }
    }
}

/// One reservation, checked against the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reserved {
    /// `spec.reservations[i]`.
    pub field: String,
    pub address: IpAddr,
    pub claim: ClaimMatch,
}

impl fmt::Display for Reserved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {} ({})", self.address, self.claim, self.field)
    }
}

fn claim_match(reservation: &Reservation, field: &str) -> Result<ClaimMatch, String> {
    match (&reservation.claim_name, &reservation.owner) {
        (Some(name), None) => {
            Ok(ClaimMatch::Named { name: name.clone(), namespace: reservation.claim_namespace.clone() })
        }
        (None, Some(owner)) => {
            Ok(ClaimMatch::OwnedBy(ClaimOwner { kind: owner.kind.clone(), name: owner.name.clone() }))
        }
        _ => Err(format!("{field}: set exactly one of claimName and owner: the claim the address is reserved for")),
    }
}

/// The pool's reservations, each checked against its allocators, or the first problem in words
/// that name the field.
pub fn check(reservations: &[Reservation], pools: &[FamilyPool]) -> Result<Vec<Reserved>, String> {
    let mut checked: Vec<Reserved> = Vec::with_capacity(reservations.len());
    let mut addresses: BTreeMap<IpAddr, String> = BTreeMap::new();
    for (i, reservation) in reservations.iter().enumerate() {
        let field = format!("spec.reservations[{i}]");
        let address: IpAddr = reservation.address.trim().parse().map_err(|_| {
            format!("{field}.address {:?} is not an IP address: write a single address", reservation.address)
        })?;
        let family = Family::of(address);
        let pool = pools
            .iter()
            .find(|p| p.family() == family)
            .ok_or_else(|| format!("{field}.address {address} is {family}, and the pool has no {family} addresses"))?;
        if let Err(why) = pool.check(address) {
            return Err(format!("{field}.address {address} cannot be reserved: {why}"));
        }
        if let Some(earlier) = addresses.insert(address, field.clone()) {
            return Err(format!("{field}.address {address} is reserved in {earlier} already; reserve it once"));
        }
        let claim = claim_match(reservation, &field)?;
        if let Some(earlier) = checked.iter().find(|r| r.claim == claim && Family::of(r.address) == family) {
            return Err(format!(
                "{field} gives {claim} a second {family} address ({address} after {} in {}); a claim gets one address",
                earlier.address, earlier.field
            ));
        }
        checked.push(Reserved { field, address, claim });
    }
    Ok(checked)
}

/// The reservation for a claim in `family`, if any.
pub fn for_claim<'a>(
    reserved: &'a [Reserved],
    holder: &HolderKey,
    owners: &[ClaimOwner],
    family: Family,
) -> Option<&'a Reserved> {
    reserved.iter().find(|r| Family::of(r.address) == family && r.claim.matches(holder, owners))
}

#[cfg(test)]
#[path = "reservations_tests.rs"]
mod tests;
