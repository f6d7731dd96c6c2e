//! The reason and message a claim's `Ready` condition gives when its pool refuses it (pure).

use crate::api::conditions::ClaimReason;
use crate::index::{AllocError, PoolKey};

/// The reason a claim's `Ready` condition gives for an allocation error.
pub fn reason_of(error: &AllocError) -> ClaimReason {
    match error {
        AllocError::Exhausted(_) => ClaimReason::PoolExhausted,
        AllocError::PoolMissing | AllocError::PoolInvalid(_) => ClaimReason::PoolNotReady,
        AllocError::FamilyNotInPool(_) | AllocError::Requested { .. } => ClaimReason::AllocationFailed,
        AllocError::Conflict { .. } => ClaimReason::AddressConflict,
    }
}

/// The reason and message for `pool`'s refusal, saying what ends the wait.
pub fn refusal(error: &AllocError, pool: &PoolKey) -> (ClaimReason, String) {
    let reason = reason_of(error);
    let mut message = format!("{pool}: {error}");
    if reason == ClaimReason::AddressConflict {
        message.push_str("; the claim stays unserved until the other holder is gone or its IPAddress is deleted");
    }
    if reason == ClaimReason::PoolExhausted {
        message.push_str("; the claim is served as soon as an address is released or the pool grows");
    }
    (reason, message)
}

/// A spoke pool's refusal for want of room: the claim waits for a block from the hub named in
/// `hub`, and `problem` says what keeps the pool from the hub now, if anything.
pub fn waiting_for_hub(
    pool: &PoolKey,
    hub: &crate::api::hub::HubSource,
    problem: Option<&str>,
) -> (ClaimReason, String) {
    let source = &hub.pool;
    let hub_pool = match &source.namespace {
        Some(ns) => format!("{} {ns}/{}", source.kind, source.name),
        None => format!("{} {}", source.kind, source.name),
    };
    let mut message = format!(
        "{pool} has no free address in the blocks it holds: waiting for a block of the hub's {hub_pool} (hub namespace {})",
        hub.namespace
    );
    match problem {
        Some(problem) => message.push_str(&format!("; the hub cannot serve it now: {problem}")),
        None => message.push_str("; the claim is served as soon as the hub grants one or an address is released"),
    }
    (ClaimReason::WaitingForHub, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_says_what_ends_the_wait() {
        let pool = PoolKey::in_cluster("ns", "p");
        let (reason, message) = refusal(&AllocError::Exhausted(crate::allocator::Family::V4), &pool);
        assert_eq!(reason, ClaimReason::PoolExhausted);
        assert!(message.contains("as soon as an address is released"), "{message}");
        let (reason, message) = refusal(&AllocError::PoolMissing, &pool);
        assert_eq!(reason, ClaimReason::PoolNotReady);
        assert!(!message.contains("as soon as"), "{message}");
    }
}
