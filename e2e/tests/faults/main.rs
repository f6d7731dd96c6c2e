//! Fault injection: two replicas of the real binary with a short lease, a storm of claims, and
//! a fault in the middle of it: the API server or etcd stopped and started again, the leader
//! frozen, the leader partitioned, a forced relist, skewed clocks, a conflicting `IPAddress`,
//! SIGTERM in every state, restarts and a takeover with control-plane VIPs in use. After each: the invariants of the objects, allocation windows that
//! never overlap (from the replicas' logs), and every claim served promptly once the fault ends.
//!
//! Tests that stop, restart or freeze the control plane start one of their own; the others
//! share one. Takeover times go to `target/fault-report.txt`.

mod conflict;
mod freeze;
mod partition;
mod relist;
mod restart;
mod rig;
mod shutdown;
mod skew;
mod storm;
mod vips;

use std::time::Duration;

/// How long a test waits for something ferro-ipam should do promptly.
pub const PROMPTLY: Duration = Duration::from_secs(20);
/// Liveness: once a fault ends, every claim is served within this.
pub const SERVED_WITHIN: Duration = Duration::from_secs(30);
