//! The faults of issue 42, "never one address twice across the hub and every spoke": each test
//! throws one fault at the hub and its spokes in the middle of a storm of claims, then checks
//! what the issue promises once the fault is over:
//!
//! - no address twice across the three clusters, every claim bound once, every spoke address in
//!   a block granted to its spoke, no two blocks overlapping (`invariants::shared`, over the
//!   test's pool);
//! - every claim served (Ready, bound once) within [`SERVED_WITHIN`] of the fault's end;
//! - nothing leaked: every granted block of the pool is in a spoke's namespace of the hub and
//!   names a spoke pool that exists on that spoke; once the test deletes its claims, every block
//!   goes back to the hub within [`BLOCKS_BACK_WITHIN`].
//!
//! The tests:
//!
//! - `kill`: a spoke's ferro-ipam SIGKILLed mid-storm and started again, while the other spoke
//!   keeps allocating;
//! - `hub_down`: the hub's kube-apiserver SIGKILLed mid-storm, started again 15 s later; the
//!   spokes serve what fits their blocks, the rest waits `WaitingForHub`, bound addresses stay;
//! - `partition`: one spoke reaches the hub through a loopback proxy, which refuses every
//!   connection for 20 s mid-storm; `ferro_ipam_hub_reachable` goes to 0 and back to 1;
//! - `restore`: a spoke's etcd restored from a backup taken before it returned two blocks, one
//!   of which the other spoke has taken since.
//!
//! They run on a hub and two spokes of their own ([`rig`]), not the main fleet: they stop its
//! API server, kill its processes and rewind its etcd, which the main fleet's tests must never
//! see. The fault tests take that fleet one at a time (each test gets fresh pools and
//! namespaces). The module's name sorts after `shared`: cargo runs the tests in name order on two
//! threads here, and a fault test waiting for the fleet holds a thread, which must not keep the
//! main test waiting.
//!
//! Sizes: 300 claims per spoke (not the main test's 1,000) and 50 on the hub, so that the four
//! tests add about four minutes to the target on two cores.

mod hub_down;
mod kill;
mod partition;
mod restore;
mod rig;
mod storm;

use std::time::Duration;

/// Claims each spoke's storm creates in the fault tests (the main test makes 1,000 per spoke;
/// 300 keep the four fault tests to a few minutes on two cores).
pub const STORM_CLAIMS: usize = 300;
/// Claims the hub makes on its own pool beside the spokes' storms.
pub const HUB_STORM_CLAIMS: usize = 50;
/// Claims created per second per cluster: a storm of 300 lasts 5 s.
pub const STORM_RATE: u32 = 60;
/// Claims a spoke cut off from the hub makes once the fault has begun (on top of its storm):
/// more than any room the hub can have granted it before (at most its storm's claims, half a
/// block at hand and the rest of the last block: 23 more), so that some of them must wait for
/// the hub.
pub const SURGE: usize = 40;
/// The fault begins once the first spoke holds this many addresses of its storm.
pub const FAULT_AT: usize = 100;
/// How long the storm may take to reach [`FAULT_AT`].
pub const STORM_STARTS_WITHIN: Duration = Duration::from_secs(120);
/// Liveness: every claim is Ready within this of the fault's end (or of the last create, if later).
pub const SERVED_WITHIN: Duration = Duration::from_secs(90);
/// Claims deleted by the test are gone (their finalizers removed) within this.
pub const CLAIMS_GONE_WITHIN: Duration = Duration::from_secs(90);
/// Once a spoke has no claim of the pool left, all its blocks are back in the hub within this.
pub const BLOCKS_BACK_WITHIN: Duration = Duration::from_secs(60);
