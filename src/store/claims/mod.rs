//! ferro-ipam's own claim store and work queue, in place of kube's reflector and controller
//! runner for claims, which kept about two kilobytes per claim (a whole cached object, its
//! `ObjectRef` key of nine strings, and a scheduler slot keyed by that `ObjectRef`).
//!
//! - `record`: one claim as a compact record of the fields the claim path reads;
//! - `store`: the records under dense ids, found by namespace and name;
//! - `queue`: the work queue keyed by those ids, with an urgent lane for new and changed
//!   claims and a paced background lane for claims already settled;
//! - `bits`: a set of dense ids, one bit each.

mod action;
mod bits;
mod queue;
mod record;
mod store;

pub use action::Action;
pub use queue::WorkQueue;
pub use store::{Change, ClaimStore};
