//! The CAPI IPAM contract's rules for one claim, as pure functions: whether it may be worked on
//! (`gate`), where its address comes from (`target`), what it asks for (`request`), the
//! `IPAddress` that records it (`address`), its status (`status`), when a deleted claim gives its
//! address back (`release`), whether a global pool serves the claim's namespace (`tenancy`),
//! and the reason a claim gives for a refusal (`reasons`).
//!
//! The claim controller applies them to the live cluster; preflight and `explain` apply the same
//! rules to a snapshot. None of them reads a cache or calls the API server.

pub mod address;
pub mod gate;
pub mod reasons;
pub mod release;
pub mod request;
pub mod status;
pub mod target;
pub mod tenancy;

pub use address::belongs_to;
pub use gate::{ClusterState, Gate, gate};
pub use reasons::{reason_of, refusal, waiting_for_hub};
pub use request::of as request_of;
pub use target::{Target, passed_over};
pub use tenancy::{Admission, admission};
