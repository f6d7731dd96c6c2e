//! Kubernetes types: the pool CRDs ferro-ipam owns, and the Cluster API types it serves.
//!
//! Nothing in here talks to an API server; controllers live in `crate::controller`.

pub mod bounded;
pub mod capi;
pub mod conditions;
pub mod crdgen;
pub mod hub;
pub mod keys;
pub mod pool;
pub mod prefix_pool;
pub mod prefix_validation;
pub mod reservation;
pub mod strategy;
pub mod tenancy;
pub mod validation;

pub use capi::{CapiVersion, IPAddress, IPAddressClaim, PoolReference};
pub use pool::{GlobalInClusterIPPool, IPPoolSpec, IPPoolStatus, InClusterIPPool, SecondFamily};
pub use prefix_pool::{GlobalInClusterPrefixPool, InClusterPrefixPool, PrefixPoolSpec};
pub use reservation::{Reservation, ReservationOwner};
pub use strategy::AllocationStrategy;
pub use tenancy::NamespaceSelector;
