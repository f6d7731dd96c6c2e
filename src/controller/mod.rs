//! The controllers: claims, pools, and the watches that feed the index.

pub mod address_cache;
mod by_cluster;
pub mod claim;
pub mod claim_store;
pub mod cluster_vip;
mod compact;
pub mod context;
pub mod error;
pub mod finalizers;
mod keyed;
pub mod latency;
mod lean;
#[cfg(test)]
pub(crate) mod mock_api;
pub mod namespaces;
pub mod own_writes;
pub mod pool;
mod triggers;
pub(crate) mod watches;
pub mod wiring;
pub mod write_throttle;

use kube::api::{PatchParams, PostParams};

use crate::api::keys::FIELD_MANAGER;

/// Every patch ferro-ipam sends names it as the field manager.
pub fn write_params() -> PatchParams {
    PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() }
}

/// Every object ferro-ipam creates names it as the field manager.
pub fn create_params() -> PostParams {
    PostParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PostParams::default() }
}
