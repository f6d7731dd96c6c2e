//! The `Ready` condition of claims and pools, and its reasons.

/// Reasons of a claim's `Ready` condition, as the CAPI IPAM contract names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimReason {
    /// The address is allocated and written.
    Allocated,
    /// The pool is missing, paused, being deleted or invalid.
    PoolNotReady,
    /// The pool has no free address.
    PoolExhausted,
    /// Anything else (a requested address is taken, an API error).
    AllocationFailed,
    /// The claim's `IPAddress` records an address it cannot have (another holder has it, or the
    /// pool may not hand it out); nothing is written for the claim until that is resolved.
    AddressConflict,
    /// The claim's pool is a global pool whose `spec.namespaceSelector` does not select the
    /// claim's namespace (or no labelled global pool of a purpose does).
    NamespaceNotSelected,
    /// The claim's pool is a spoke pool with no free address in the blocks it holds: it waits
    /// for a block from the hub (or for the hub to answer).
    WaitingForHub,
}

impl ClaimReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimReason::Allocated => "Allocated",
            ClaimReason::PoolNotReady => "PoolNotReady",
            ClaimReason::PoolExhausted => "PoolExhausted",
            ClaimReason::AllocationFailed => "AllocationFailed",
            ClaimReason::AddressConflict => "AddressConflict",
            ClaimReason::NamespaceNotSelected => "NamespaceNotSelected",
            ClaimReason::WaitingForHub => "WaitingForHub",
        }
    }
}

/// Reasons of a pool's `Ready` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolReason {
    /// The spec is valid and every allocated address lies in the pool.
    Valid,
    /// The spec cannot be turned into addresses (see the message).
    InvalidSpec,
    /// Some allocated addresses are no longer inside the pool (it was shrunk).
    AddressesOutOfRange,
    /// No free address is left.
    Exhausted,
    /// The addresses leave nothing to hand out (all reserved, excluded or the gateway).
    NoAllocatableAddresses,
    /// The pool's ranges intersect another pool's that shares its address space.
    OverlapsOtherPools,
    /// `IPAddress` objects with no claim of their name hold addresses of the pool.
    UnclaimedAddresses,
    /// One address is held by more than one `IPAddress`.
    AddressConflict,
    /// The pool is being deleted but addresses still reference it.
    Deleting,
    /// Another IPAM provider's leader Lease is held and renewed: ferro-ipam allocates nothing.
    OtherProviderActive,
}

impl PoolReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolReason::Valid => "Valid",
            PoolReason::InvalidSpec => "InvalidSpec",
            PoolReason::AddressesOutOfRange => "AddressesOutOfRange",
            PoolReason::Exhausted => "Exhausted",
            PoolReason::AddressConflict => "AddressConflict",
            PoolReason::OverlapsOtherPools => "OverlapsOtherPools",
            PoolReason::UnclaimedAddresses => "UnclaimedAddresses",
            PoolReason::NoAllocatableAddresses => "NoAllocatableAddresses",
            PoolReason::Deleting => "Deleting",
            PoolReason::OtherProviderActive => "OtherProviderActive",
        }
    }
}
