//! The `allocationStrategy` field every pool kind carries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::allocator::Strategy;

/// Which free address the pool hands out next: `Lowest` (the default), `LeastRecentlyReleased`
/// (addresses not released lately first, then the one released longest ago, so that a just-freed
/// address is reused last) or `Random`. Requested and sticky addresses are not affected.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum AllocationStrategy {
    /// The lowest free address (the default, as the in-cluster provider does).
    #[default]
    Lowest,
    /// Addresses not released since the controller started first, lowest first; then the
    /// address released longest ago.
    LeastRecentlyReleased,
    /// Any free address, each equally likely.
    Random,
}

impl From<AllocationStrategy> for Strategy {
    fn from(strategy: AllocationStrategy) -> Strategy {
        match strategy {
            AllocationStrategy::Lowest => Strategy::Lowest,
            AllocationStrategy::LeastRecentlyReleased => Strategy::LeastRecentlyReleased,
            AllocationStrategy::Random => Strategy::Random,
        }
    }
}
