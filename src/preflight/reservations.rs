//! Reservations that a held address contradicts (pure): the reserved address is held by a claim
//! the reservation is not for, so its own claim cannot get it until that one lets it go.

use std::collections::BTreeSet;

use kube::ResourceExt;

use crate::api::capi::IPAddressClaim;
use crate::index::{ClaimOwner, HolderKey, Index, PoolKey};

use super::findings::{Conflict, ConflictKind};

/// The owners a claim carries, by kind and name.
fn owners_of(claims: &[IPAddressClaim], holder: &HolderKey) -> Vec<ClaimOwner> {
    claims
        .iter()
        .find(|c| c.namespace().as_deref() == Some(holder.namespace.as_str()) && *c.name_any() == *holder.name)
        .map(|c| {
            c.owner_references().iter().map(|o| ClaimOwner { kind: o.kind.clone(), name: o.name.clone() }).collect()
        })
        .unwrap_or_default()
}

/// One conflict per reserved address held by a claim (or `IPAddress`) it is not reserved for.
pub(super) fn contradicted(index: &Index, pools: &BTreeSet<PoolKey>, claims: &[IPAddressClaim]) -> Vec<Conflict> {
    let mut found = Vec::new();
    for pool in pools {
        for (reserved, holders) in index.report(pool).reservations {
            let others: Vec<String> = holders
                .iter()
                .filter(|holder| !reserved.claim.matches(holder, &owners_of(claims, holder)))
                .map(ToString::to_string)
                .collect();
            if others.is_empty() {
                continue;
            }
            found.push(Conflict {
                kind: ConflictKind::ReservationHeld,
                pool: Some(pool.to_string()),
                address: Some(reserved.address.to_string()),
                message: format!(
                    "{} is reserved for {} ({}) but {} holds it: the reserved claim cannot get it until that \
                     IPAddress is deleted; move the reservation or release the address",
                    reserved.address,
                    reserved.claim,
                    reserved.field,
                    others.join(", ")
                ),
                objects: others,
            });
        }
    }
    found
}
