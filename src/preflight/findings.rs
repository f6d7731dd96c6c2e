//! What preflight found, in the shape `-o json` prints. The shape is part of the interface
//! (docs/migration.md documents it): fields are only ever added, and `formatVersion` goes up
//! when one changes meaning.

use serde::Serialize;

use super::other_provider::{LeaseCheck, OtherProvider, UncheckedLease};

/// The name of an object as findings print it: `<namespace>/<name>` or `<name>`.
pub(crate) fn object_name<K: kube::Resource>(object: &K) -> String {
    match object.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", object.meta().name.as_deref().unwrap_or_default()),
        None => object.meta().name.clone().unwrap_or_default(),
    }
}

/// The version of the JSON shape.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// Everything preflight found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Findings {
    pub format_version: u32,
    /// True when nothing conflicts, no pool is refused or invalid, every object was readable, and
    /// no other IPAM provider runs (its Lease read and found free): the exit status is 0 exactly
    /// then.
    pub clean: bool,
    /// The `IPAddressClaim`/`IPAddress` version the API server serves (`v1beta2` or `v1beta1`).
    pub capi_version: String,
    pub summary: Summary,
    pub pools: Vec<PoolFinding>,
    pub conflicts: Vec<Conflict>,
    pub waiting: Vec<WaitingClaim>,
    pub to_allocate: Vec<NewClaim>,
    /// Claims without an `IPAddress` of spoke pools: served from blocks leased from the hub,
    /// which are not known here, so whether they would get an address or wait is not told.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spoke_claims: Vec<SpokeClaim>,
    /// `IPAddress` objects of our pools that no claim of their name owns. ferro-ipam keeps their
    /// addresses and never hands them out; the pool reports them (`UnclaimedAddresses`).
    pub unclaimed: Vec<String>,
    /// Objects preflight could not read as ferro-ipam reads them; the controller could not either.
    pub unreadable: Vec<Unreadable>,
    pub features: Features,
    /// Another IPAM provider whose leader Lease is held and renewed: ferro-ipam would allocate
    /// nothing until it stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_provider: Option<OtherProvider>,
    /// Another IPAM provider's Lease that could not be read: whether it runs is unknown, so the
    /// check was not done (the exit status is 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_provider_unchecked: Option<UncheckedLease>,
}

/// Counts of everything else, for scripts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Pools of the four kinds (prefix pools when their CRDs serve `v1alpha2`).
    pub pools: usize,
    /// Pools the CRD's rules would refuse or whose spec gives no addresses.
    pub invalid_pools: usize,
    /// `IPAddress` objects whose pool (`spec.poolRef`, or the `ferro-ipam.dev/allocated-from`
    /// annotation) is of one of the four pool kinds, whether or not that pool exists: prefix
    /// pools' sub-prefixes included.
    pub addresses: usize,
    /// Addresses that live claims would keep.
    pub adopted: usize,
    pub conflicts: usize,
    pub waiting: usize,
    /// Claims without an `IPAddress` that would get one at once.
    pub to_allocate: usize,
    /// Claims without an `IPAddress` of spoke pools, whose fate the hub's blocks decide.
    #[serde(skip_serializing_if = "is_zero")]
    pub spoke_claims: usize,
    /// Claims being deleted, whose addresses would be released (after the grace period).
    pub releasing: usize,
    pub unclaimed: usize,
    pub unreadable: usize,
}

/// One pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolFinding {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// Messages of the CRD rules (CEL) that ferro-ipam's CRD would refuse the pool with.
    pub refused: Vec<String>,
    /// Why the controller could not hand out addresses from the pool (`InvalidSpec`), if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    pub paused: bool,
    pub dual_stack: bool,
    /// The purpose labels it carries (`cluster-api-vips`, `cluster-api-vm-ips`).
    pub purposes: Vec<String>,
    /// Addresses the pool can hand out and of those still free, as decimal strings (IPv6 pools
    /// can hold 2^128).
    pub total: String,
    pub free: String,
    /// Pools sharing its address space whose ranges intersect its own.
    pub overlaps: Vec<String>,
    /// A spoke pool (`spec.hub`): its hub's pool and namespace, and that its room is not known
    /// here (`total` and `free` count only the blocks known here: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// The addresses live claims would keep, lowest first.
    pub adopted: Vec<Adopted>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Adopted {
    /// `<namespace>/<name>` of the claim (and of its `IPAddress`).
    pub claim: String,
    pub address: String,
}

/// Which kind of conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ConflictKind {
    /// One address held by more than one `IPAddress` in one pool.
    Duplicate,
    /// An `IPAddress` whose address lies outside its pool, or is no IP address.
    OutsidePool,
    /// An `IPAddress` naming an IP pool that does not exist.
    Foreign,
    /// More than one `IPAddress` naming the same claim in `spec.claimRef`.
    ClaimedTwice,
    /// A claim's own `IPAddress` that the controller would refuse to adopt.
    NotAdoptable,
    /// An address of `spec.reservations` that a claim it is not reserved for holds.
    ReservationHeld,
}

impl ConflictKind {
    /// The name `-o json` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::Duplicate => "duplicate",
            ConflictKind::OutsidePool => "outsidePool",
            ConflictKind::Foreign => "foreign",
            ConflictKind::ClaimedTwice => "claimedTwice",
            ConflictKind::NotAdoptable => "notAdoptable",
            ConflictKind::ReservationHeld => "reservationHeld",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub kind: ConflictKind,
    /// The pool, as `<kind> [<namespace>/]<name>`, when one is concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `<namespace>/<name>` of the `IPAddress` objects (or claims) involved.
    pub objects: Vec<String>,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingClaim {
    pub claim: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// `Held` (a pause rule or a missing Cluster: the claim is left alone), or the reason its
    /// `Ready` condition would give: `PoolNotReady`, `PoolExhausted`, `AllocationFailed`.
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewClaim {
    pub claim: String,
    /// None for a purpose claim: its pool is chosen among the labelled pools when ferro-ipam runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The address it would get, when the pool is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// A claim of a spoke pool, not served yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpokeClaim {
    pub claim: String,
    pub pool: String,
    /// The pool's hub, and why its fate is not told: `a spoke pool of the hub's <pool> (hub
    /// namespace <ns>): served from blocks leased from the hub; not known here`.
    pub note: String,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub kind: String,
    /// `[<namespace>/]<name>`.
    pub object: String,
    pub error: String,
}

/// ferro-ipam features the cluster uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    pub dual_stack_pools: usize,
    /// Pools labelled for a purpose (`cluster-api-vips`, `cluster-api-vm-ips`).
    pub purpose_pools: usize,
    /// Claims whose `poolRef` asks for a purpose instead of naming a pool.
    pub purpose_claims: usize,
    pub prefix_pools: PrefixPools,
    /// `IPAddress` objects of other pool kinds or API groups: not ferro-ipam's, left alone.
    pub other_addresses: usize,
}

/// The prefix-pool kinds: whether they are served, and how many pools of each there are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixPools {
    /// Whether the API server serves the prefix-pool kinds (their CRDs are installed).
    pub served: bool,
    pub in_cluster: usize,
    pub global: usize,
}

impl Findings {
    /// Conflicts, refused or invalid pools and unreadable objects: each stands in the way.
    pub fn problems(&self) -> usize {
        self.conflicts.len() + self.summary.invalid_pools + self.unreadable.len()
    }

    /// Records what was found of another provider's Lease: held, or unreadable, it leaves the
    /// findings not clean.
    pub(crate) fn check_lease(&mut self, check: LeaseCheck) {
        match check {
            LeaseCheck::Free => {}
            LeaseCheck::Held(other) => self.other_provider = Some(other),
            LeaseCheck::Unchecked(unchecked) => self.other_provider_unchecked = Some(unchecked),
        }
        self.clean &= self.other_provider.is_none() && self.other_provider_unchecked.is_none();
    }

    /// 2 when a check could not be done (the findings are incomplete), else 1 when anything
    /// stands in the way, else 0.
    pub fn exit_status(&self) -> i32 {
        if self.other_provider_unchecked.is_some() {
            super::FAILED
        } else if self.clean {
            super::CLEAN
        } else {
            super::PROBLEMS
        }
    }
}
