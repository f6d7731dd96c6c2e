//! ferro-ipam: a Cluster API IPAM provider.
//!
//! - [`allocator`]: the address allocator, free of Kubernetes.
//! - [`api`]: the pool CRDs and the Cluster API types served.
//! - [`index`]: the in-memory allocation state of every pool, fed by watches.
//! - [`controller`]: the claim and pool controllers and their wiring.
//! - [`client`]: the Kubernetes client with its write fence, timeouts and server clock.
//! - [`preflight`]: what ferro-ipam would do with a live cluster, read-only.
//! - [`inspect`]: `who-has`, `explain` and `top`, answers for an operator, read-only like preflight.
//! - [`misconfig`]: misconfigurations said loudly: ERROR lines, a gauge, readiness.
//! - `other_provider`: another IPAM provider's Lease, held and renewed, stops allocation.
//! - [`run`], [`cli`], [`health`]: the process.

pub mod allocator;
pub mod api;
pub mod cli;
pub(crate) mod client;
pub(crate) mod controller;
pub(crate) mod health;
pub mod index;
pub mod inspect;
pub mod metrics;
pub mod misconfig;
pub(crate) mod other_provider;
pub mod preflight;
pub mod run;
pub(crate) mod selection;
