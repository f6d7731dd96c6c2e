//! Pools shared by many management clusters through a hub: three control planes on loopback (the
//! hub and two spokes, `spoke-a` and `spoke-b`), a ferro-ipam on each, set up as an operator
//! would with the plain kubectl of `operator/*.sh`. The spokes lease blocks of the hub's pool
//! (`AddressBlock`s in their namespaces of the hub) and serve their claims from them.
//!
//! - `shared`: 1,000 claims on each spoke and 100 on the hub at once, all Ready; the invariants
//!   over the three clusters (`ferro_ipam_e2e::invariants::shared`); then one spoke's claims all
//!   deleted, and its blocks returned while the other's stay.
//! - `rbac`: the spoke's credentials in the hub may keep blocks and its Lease in its own
//!   namespace, and nothing else.
//! - `unreachable`: a claim of a spoke pool whose hub cannot be reached waits, `WaitingForHub`.
//! - `refusals`: the hub grants no block outside a spoke's namespace, nor of a pool not shared.
//! - `docs_page`: the set-up the book's page shows (`docs/shared-pools.md`), run word for word on
//!   a hub and a spoke of its own, serves the spoke's claims.
//! - `storms`: the faults of issue 42 on a hub and two spokes of their own, one test at a time: a
//!   spoke's ferro-ipam killed, the hub's API server stopped, a spoke cut off from the hub, a
//!   spoke's etcd restored from a backup; each mid-storm, then no address twice, every claim
//!   served, nothing leaked.
//!
//! The three planes and their providers are started once (`fleet::fleet`) and shared by the tests.
//! `make test-hub` runs them; the logs stay in each plane's directory, named in the output.

mod docs_page;
mod fleet;
mod look;
mod rbac;
mod refusals;
mod report;
mod shared;
mod storms;
mod unreachable;

use std::time::Duration;

/// Claims each spoke creates at once.
pub const CLAIMS_PER_SPOKE: usize = 1000;
/// Claims the hub creates at once on its own pool, beside the spokes'.
pub const HUB_CLAIMS: usize = 100;
/// Creates in flight per cluster while the claims are made.
pub const CREATES_IN_FLIGHT: usize = 64;
/// Every claim of the three clusters is Ready within this of the first create.
pub const ALL_READY_WITHIN: Duration = Duration::from_secs(180);
/// A spoke whose claims are all deleted has returned every block within this (its hub
/// namespace holds no `AddressBlock`).
pub const BLOCKS_RETURNED_WITHIN: Duration = Duration::from_secs(90);
/// How long the checker looks again while statuses catch up (duplicates and overlaps fail at once).
pub const CHECK_SETTLES_WITHIN: Duration = Duration::from_secs(30);
/// A spoke's Lease in the hub was renewed within this.
pub const SPOKE_LEASE_FRESH: Duration = Duration::from_secs(60);
/// A claim of a pool whose hub cannot be reached says `WaitingForHub` within this.
pub const WAITING_FOR_HUB_WITHIN: Duration = Duration::from_secs(60);
/// ... and gets no address for this long afterwards.
pub const STAYS_WAITING_FOR: Duration = Duration::from_secs(5);
/// The hub says why it does not grant a block (`Granted=False`) within this, and never grants it.
pub const REFUSED_WITHIN: Duration = Duration::from_secs(20);
/// ... and is still not granted this long after it said so.
pub const STILL_REFUSED_FOR: Duration = Duration::from_secs(4);
/// Claims on the spoke the book's page sets up, and how soon they are all Ready.
pub const DOCS_CLAIMS: usize = 40;
pub const DOCS_READY_WITHIN: Duration = Duration::from_secs(60);
/// How long a ferro-ipam may take to become ready.
pub const PROVIDER_READY_WITHIN: Duration = Duration::from_secs(60);
/// How often progress is looked at while waiting.
pub const POLL: Duration = Duration::from_secs(2);
