//! The controllers: claims, pools and VIPs, their shared context, and their wiring to the
//! watches. What the watches keep lives in `crate::store`.

pub mod claim;
pub mod cluster_vip;
pub mod context;
pub mod error;
pub mod finalizers;
pub mod hub;
pub mod latency;
#[cfg(test)]
pub(crate) mod mock_api;
pub mod own_writes;
pub mod pool;
mod triggers;
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
