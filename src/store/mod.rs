//! What the watches keep: claims, `IPAddress`es, Clusters and Namespaces, as compact records
//! read lean off the wire, and the watch streams that fill them.
//!
//! - `claims`: the claim store and the controller's work queue, with the claim records;
//! - `addresses`: the `IPAddress` cache and its records;
//! - `by_cluster`: which claims belong to which Cluster;
//! - `namespaces`: the labels of every Namespace, for global pools' namespace selectors;
//! - `compact`, `keyed`, `lean`: the compact forms, keyed maps and lean parsing the records use;
//! - `watches`: how a watch retries and relists, and what it tells the health probe.
//!
//! The store knows no controller: it imports nothing of `crate::controller`, and a controller
//! reads it and queues work through it.

pub mod addresses;
pub(crate) mod by_cluster;
pub mod claims;
pub(crate) mod compact;
pub(crate) mod keyed;
pub(crate) mod lean;
pub mod namespaces;
pub(crate) mod watches;
