//! ferro-ipam: a Cluster API IPAM provider.
//!
//! - [`allocator`]: the address allocator, free of Kubernetes.
//! - [`api`]: the pool CRDs and the Cluster API types served.
//! - [`index`]: the in-memory allocation state of every pool.
//! - `contract`: the CAPI IPAM contract's rules for one claim, pure; the claim controller,
//!   preflight and `explain` all apply them.
//! - `feed`: how `IPAddress` and pool objects, from a watch or a listing, fill the index.
//! - `store`: what the watches keep (claims, `IPAddress`es, Clusters, Namespaces) as compact
//!   records, the claim work queue, and the watch streams that fill them.
//! - `controller`: the claim, pool and VIP controllers, their context and their wiring.
//! - `client`: the Kubernetes client with its write fence, timeouts and server clock; API
//!   discovery, the infrastructure provider of a claim, and what an API error means.
//! - `selection`: which labelled pools serve a purpose claim, in order.
//! - [`preflight`]: what ferro-ipam would do with a live cluster, read-only.
//! - [`inspect`]: `who-has`, `explain` and `top`, answers for an operator, read-only like preflight.
//! - [`misconfig`]: misconfigurations said loudly: ERROR lines, a gauge, readiness.
//! - `other_provider`: another IPAM provider's Lease, held and renewed, stops allocation.
//! - `lease`: how a Lease record is judged (held, expired, free) and written; leader election
//!   and `other_provider` both read Leases this way.
//! - `intern`: strings shared by the compact records of the store and by the index's holder
//!   keys; a leaf below the index, which is why it is not inside `store`.
//! - [`run`], [`cli`], `health`, `sync`: the process.
//!
//! Layers point one way; each imports only the layers before it:
//!
//! 1. `allocator`;
//! 2. `index`;
//! 3. `store` and `feed`;
//! 4. `contract`;
//! 5. `controller` (and beside it, reading the layers below but not the controllers,
//!    `preflight` and `inspect`);
//! 6. `run`.
//!
//! `api`, `client`, `intern`, `sync`, `heap` and `metrics` are leaves any layer may use.
//!
//! # Glossary
//!
//! - **holder**: a claim and the `IPAddress` it owns, which share a namespace and a name
//!   (`index::HolderKey`).
//! - **hold**: an address a holder keeps in the index. A holder has up to two: its claim's
//!   (from allocation until release) and its `IPAddress` object's (while the object exists). An
//!   address with a hold is never handed out again.
//! - **foreign**: an address of a pool held in another pool whose ranges overlap it; the pool's
//!   allocator skips it.
//! - **sticky**: a released claim's address, remembered for `--sticky-address-seconds` so that a
//!   claim of the same namespace and name gets it back if it is still free. A memory reserves
//!   nothing: anyone may take the address meanwhile.
//! - **purpose**: "a VIP" or "a VM IP". A purpose claim names the purpose label
//!   (`cluster-api-vips`, `cluster-api-vm-ips`) as its `poolRef` name instead of a pool; ferro-ipam
//!   chooses among the pools that carry that label, the claim's namespace first.
//! - **term**: one leadership of one replica, from taking the Lease to losing it. Each term
//!   builds its index afresh, and its controllers end with it.
//! - **fence**: the gate in the client that refuses every write once the term's renew deadline
//!   has passed on the local clock, before any other replica can take the Lease.
//! - **suspended**: a term whose fence is shut because renewals failed; it resumes if the Lease
//!   still names this replica at the next renewal.

#![forbid(unsafe_code)]

pub mod allocator;
pub mod api;
pub mod cli;
pub(crate) mod client;
pub(crate) mod contract;
pub(crate) mod controller;
pub(crate) mod feed;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod health;
pub(crate) mod heap;
pub mod index;
pub mod inspect;
pub mod intern;
pub(crate) mod lease;
pub mod metrics;
pub mod misconfig;
pub(crate) mod other_provider;
pub mod preflight;
pub mod run;
pub(crate) mod selection;
pub(crate) mod store;
pub(crate) mod sync;
