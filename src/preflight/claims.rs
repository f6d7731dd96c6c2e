//! What the claim controller would do with each claim on its first pass after start-up, decided
//! by its own steps: the pause rules (`gate`), then the pool, then adopting the claim's
//! `IPAddress` or allocating a new address from the index.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use kube::ResourceExt;

use crate::api::capi::cluster_name;
use crate::api::capi::{Cluster, IPAddress, IPAddressClaim};
use crate::api::conditions::ClaimReason;
use crate::contract::{Admission, ClusterState, Gate, Target, admission, belongs_to, gate, reason_of, request_of};
use crate::index::{HolderKey, Index, PoolKey};
use crate::selection::Purpose;

use super::findings::{Conflict, ConflictKind, NewClaim, SpokeClaim, WaitingClaim, object_name};
use super::gather::Inventory;
use super::spokes::{NOT_KNOWN, Spokes, spoke_pool_of};

/// The reason of a claim the pause rules leave alone (the controller writes nothing for it).
pub(crate) const HELD: &str = "Held";

/// What the controller would do with one claim.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    /// Keep the address its `IPAddress` records.
    Adopt {
        pool: PoolKey,
        claim: String,
        ip: IpAddr,
    },
    /// Refuse its `IPAddress`: the claim stays unserved.
    Refuse(Conflict),
    Wait(WaitingClaim),
    Allocate(NewClaim),
    /// A claim of a spoke pool: its hub's blocks, not known here, decide whether it would get an
    /// address or wait.
    FromHub(SpokeClaim),
    /// Release its address: the claim is being deleted.
    Release,
}

/// The decisions, and the `IPAddress` objects of our pools that no claim owns.
pub(crate) struct Outcome {
    pub decisions: Vec<Decision>,
    pub unclaimed: Vec<String>,
}

type Named<'a, T> = BTreeMap<(String, String), &'a T>;

fn by_name<T: kube::Resource>(objects: &[T]) -> Named<'_, T> {
    objects
        .iter()
        .map(|o| ((o.meta().namespace.clone().unwrap_or_default(), o.meta().name.clone().unwrap_or_default()), o))
        .collect()
}

fn wait(holder: &HolderKey, pool: Option<&PoolKey>, reason: &str, message: String) -> Decision {
    Decision::Wait(WaitingClaim {
        claim: holder.to_string(),
        pool: pool.map(ToString::to_string),
        reason: reason.to_owned(),
        message,
    })
}

/// The claim's own `IPAddress` exists: would the controller adopt it? Of a spoke pool, an
/// address its spec as written allows is taken to be in one of its blocks, which are not known
/// here.
fn adopt(
    index: &Index,
    claim: &IPAddressClaim,
    address: &IPAddress,
    (key, holder): (&PoolKey, &HolderKey),
    spokes: &Spokes,
) -> Decision {
    let refuse = |address: Option<String>, message: String| {
        Decision::Refuse(Conflict {
            kind: ConflictKind::NotAdoptable,
            pool: Some(key.to_string()),
            address,
            objects: vec![holder.to_string()],
            message,
        })
    };
    if !belongs_to(address, claim, key) {
        return refuse(
            Some(address.spec.address.clone()),
            format!(
                "IPAddress {holder} belongs to claim {:?} of {} {:?}, not to the claim of its name; \
                 delete the IPAddress or give the claim another name",
                address.spec.claim_ref.name, address.spec.pool_ref.kind, address.spec.pool_ref.name
            ),
        );
    }
    let Ok(ip) = address.spec.address.parse::<IpAddr>() else {
        // Reported with the address itself (outside the pool).
        return wait(
            holder,
            Some(key),
            ClaimReason::AllocationFailed.as_str(),
            format!("IPAddress {holder} records {:?}, which is not an IP address", address.spec.address),
        );
    };
    let bound = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_some_and(|r| *r.name == *holder.name);
    match index.adopt(key, holder, ip, bound || spokes.may_hold(key, ip)) {
        Ok(()) => Decision::Adopt { pool: key.clone(), claim: holder.to_string(), ip },
        Err(error) => refuse(
            Some(ip.to_string()),
            format!(
                "claim {holder}: {error}; it stays unserved until the other holder is gone or the IPAddress is deleted"
            ),
        ),
    }
}

/// The claim has no `IPAddress`: what would it get?
fn allocate(index: &Index, claim: &IPAddressClaim, key: &PoolKey, holder: &HolderKey) -> Decision {
    let dual_stack = index.pool_spec(key).is_some_and(|s| s.is_dual_stack());
    let request = match request_of(claim, dual_stack) {
        Ok(request) => request,
        Err(message) => return wait(holder, Some(key), ClaimReason::AllocationFailed.as_str(), message),
    };
    match index.allocate(key, holder, request) {
        Ok(ip) => Decision::Allocate(NewClaim {
            claim: holder.to_string(),
            pool: Some(key.to_string()),
            address: Some(ip.to_string()),
        }),
        Err(error) => wait(holder, Some(key), reason_of(&error).as_str(), format!("{key}: {error}")),
    }
}

/// The pool a claim uses, when known before it is served: the one its `poolRef` names, or for a
/// purpose claim the one its `IPAddress` records.
fn known_pool(target: &Target, address: Option<&IPAddress>) -> Option<PoolKey> {
    match target {
        Target::Pool(key) => Some(key.clone()),
        Target::Purpose(purpose) => address.and_then(|a| {
            let namespace = a.namespace().unwrap_or_default();
            PoolKey::of_address(&namespace, &a.spec.pool_ref, a.annotations())
                .filter(|_| Purpose::of_reference(&a.spec.pool_ref) == Some(*purpose))
        }),
    }
}

/// The claim has no `IPAddress` and its pool is a global one: does the pool's namespace
/// selector leave the claim's namespace out? (`namespaces`: every Namespace's labels.)
fn not_admitted(
    index: &Index,
    key: &PoolKey,
    holder: &HolderKey,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<Decision> {
    let facts = index.pool_facts(key)?;
    match admission(key, &facts, &holder.namespace, namespaces.get(&*holder.namespace)) {
        Admission::Admitted => None,
        Admission::NotSelected(why) => {
            Some(wait(holder, Some(key), ClaimReason::NamespaceNotSelected.as_str(), format!("{key}: {why}")))
        }
        Admission::Unknown => Some(wait(
            holder,
            Some(key),
            HELD,
            format!("{key} has a namespaceSelector and namespace {} was not listed", holder.namespace),
        )),
    }
}

/// What a decision reads besides the claim and its `IPAddress`: the Clusters (None when the API
/// server serves none) and every Namespace's labels.
struct Around<'a> {
    clusters: Option<&'a Named<'a, Cluster>>,
    namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    spokes: &'a Spokes,
}

/// A claim of a spoke pool, not served yet: what it would get is not known here.
fn from_hub(holder: &HolderKey, key: &PoolKey, spokes: &Spokes) -> Option<Decision> {
    let hub = spokes.hub(key)?;
    Some(Decision::FromHub(SpokeClaim {
        claim: holder.to_string(),
        pool: key.to_string(),
        note: format!("{}: {NOT_KNOWN}", spoke_pool_of(hub)),
    }))
}

fn decide_one(
    index: &Index,
    claim: &IPAddressClaim,
    target: &Target,
    address: Option<&IPAddress>,
    around: &Around<'_>,
) -> Decision {
    let (clusters, namespaces) = (around.clusters, around.namespaces);
    let holder = HolderKey::new(&claim.namespace().unwrap_or_default(), &claim.name_any());
    let known = known_pool(target, address);
    let facts = known.as_ref().and_then(|key| index.pool_facts(key));
    let cluster = match clusters {
        Some(clusters) => {
            let name = cluster_name(claim);
            let found = name.as_ref().and_then(|n| clusters.get(&(holder.namespace.to_string(), n.clone())).copied());
            ClusterState::of(name, found)
        }
        None => ClusterState::Unnamed,
    };
    if let Gate::Wait(why) = gate(claim, &cluster, facts.as_ref()) {
        return wait(&holder, known.as_ref(), HELD, why);
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Decision::Release;
    }
    let Some(key) = known else {
        // A purpose claim not served yet: its pool is chosen among the labelled ones at run time.
        return Decision::Allocate(NewClaim { claim: holder.to_string(), pool: None, address: None });
    };
    let not_ready = ClaimReason::PoolNotReady.as_str();
    match (facts, address) {
        (None, _) => wait(&holder, Some(&key), not_ready, format!("{key} not found")),
        (Some(f), _) if f.deleting => wait(&holder, Some(&key), not_ready, format!("{key} is being deleted")),
        (Some(_), Some(address)) => adopt(index, claim, address, (&key, &holder), around.spokes),
        (Some(_), None) => not_admitted(index, &key, &holder, namespaces)
            .or_else(|| from_hub(&holder, &key, around.spokes))
            .unwrap_or_else(|| allocate(index, claim, &key, &holder)),
    }
}

/// Decides every claim of ferro-ipam's: those with an `IPAddress` first (adoption), then the
/// others, oldest first (allocation).
pub(crate) fn decide(index: &Index, inventory: &Inventory) -> Outcome {
    let addresses = by_name(&inventory.addresses);
    let clusters = inventory.clusters.as_deref().map(by_name);
    let spokes = Spokes::of(inventory);
    let around = Around { clusters: clusters.as_ref(), namespaces: &inventory.namespaces, spokes: &spokes };
    let claim_names: BTreeSet<(String, String)> = by_name(&inventory.claims).into_keys().collect();
    let mut ours: Vec<(&IPAddressClaim, Target, Option<&IPAddress>)> = inventory
        .claims
        .iter()
        .filter_map(|claim| {
            let target = Target::of(claim)?;
            let key = (claim.namespace().unwrap_or_default(), claim.name_any());
            Some((claim, target, addresses.get(&key).copied()))
        })
        .collect();
    ours.sort_by_key(|(claim, _, address)| {
        (address.is_none(), claim.metadata.creation_timestamp.clone().map(|t| t.0), object_name(*claim))
    });
    let decisions =
        ours.into_iter().map(|(claim, target, address)| decide_one(index, claim, &target, address, &around)).collect();
    let unclaimed = inventory
        .addresses
        .iter()
        .filter(|a| {
            let namespace = a.namespace().unwrap_or_default();
            PoolKey::of_address(&namespace, &a.spec.pool_ref, a.annotations()).is_some()
                && !claim_names.contains(&(namespace, a.name_any()))
        })
        .map(object_name)
        .collect();
    Outcome { decisions, unclaimed }
}
