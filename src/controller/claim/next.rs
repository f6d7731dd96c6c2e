//! What a claim's reconcile came to, and what it waits for next. `plan` maps each outcome to the
//! wake-up it needs and the requeue (no client required); `after` is the one place a claim signs
//! itself up to be woken. A failure path added later gets its wake-up from `plan`'s match, which
//! does not compile until the new outcome is mapped.

use std::net::IpAddr;
use std::time::Duration;

use crate::store::claims::Action;

use crate::api::conditions::ClaimReason;
use crate::contract::Target;
use crate::controller::context::Context;
use crate::index::{PoolKey, Trigger};

use super::loaded::Loaded;

/// How long a claim that waits for something the watches will announce sleeps at most anyway.
pub const RECHECK: Duration = Duration::from_secs(600);

/// How soon a claim looks again at something that settles within moments.
pub const SHORTLY: Duration = Duration::from_secs(2);

/// What one reconcile of a live claim came to.
#[derive(Debug)]
pub enum Outcome {
    /// The gate holds the claim back (paused, or its Cluster paused or missing).
    Held,
    /// The claim's `IPAddress` exists with this address.
    Fulfilled(IpAddr),
    /// The claim has no address now.
    Unfulfilled(Unfulfilled),
}

/// Why a claim has no address now.
#[derive(Debug)]
pub enum Unfulfilled {
    /// Its `IPAddress` was deleted while it lives: recreated with the same address once gone.
    Recreating,
    /// The pool is not yet protected against deletion (moments after it appeared).
    Unprotected(PoolKey),
    /// The pool has a namespace selector and the claim's Namespace is not listed yet: the
    /// Namespace watch's event, or the requeue, brings it back.
    NamespaceUnknown,
    /// The claim cannot be served now: reason and message for its `Ready` condition.
    NotReady { reason: ClaimReason, message: String },
    /// No labelled pool of a purpose claim has room: `PoolExhausted`, and an Event of this
    /// reason on the claim and its Cluster. `refused` are the pools that had no address for it.
    PurposeExhausted { message: String, event_reason: &'static str, refused: Vec<PoolKey> },
}

impl Unfulfilled {
    pub fn not_ready(reason: ClaimReason, message: impl Into<String>) -> Self {
        Unfulfilled::NotReady { reason, message: message.into() }
    }
}

/// What wakes a waiting claim before its requeue.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// Nothing: the requeue, or the claim's own watch events.
    Nothing,
    /// A change of this pool, or an address of it freed.
    Pool(PoolKey),
    /// Any labelled pool appearing, changing or going, or an address freed in one of these.
    PurposePools(Vec<PoolKey>),
}

/// The wake-up and the requeue an outcome needs, for a claim of `target` whose pool, if known,
/// is `pool` (pure).
pub fn plan(target: &Target, pool: Option<&PoolKey>, outcome: &Outcome) -> (Wake, Action) {
    // A claim waits on its own pool when it has one; a purpose claim without one, on them all.
    let on_its_pool = || match (target, pool) {
        (Target::Pool(key), _) | (Target::Purpose(_), Some(key)) => Wake::Pool(key.clone()),
        (Target::Purpose(_), None) => Wake::PurposePools(Vec::new()),
    };
    match outcome {
        Outcome::Held => (on_its_pool(), Action::await_change()),
        Outcome::Fulfilled(_) => (Wake::Nothing, Action::await_change()),
        Outcome::Unfulfilled(Unfulfilled::Recreating) => (Wake::Nothing, Action::requeue(SHORTLY)),
        Outcome::Unfulfilled(Unfulfilled::Unprotected(key)) => (Wake::Pool(key.clone()), Action::requeue(SHORTLY)),
        Outcome::Unfulfilled(Unfulfilled::NamespaceUnknown) => (Wake::Nothing, Action::requeue(SHORTLY)),
        Outcome::Unfulfilled(Unfulfilled::NotReady { .. }) => (on_its_pool(), Action::requeue(RECHECK)),
        Outcome::Unfulfilled(Unfulfilled::PurposeExhausted { refused, .. }) => {
            (Wake::PurposePools(refused.clone()), Action::requeue(RECHECK))
        }
    }
}

/// Signs the claim up for the wake-up its outcome needs and returns its requeue. A pool that
/// changed since the claim was loaded may have woken nobody (the claim was not signed up yet),
/// so then the claim is triggered at once.
pub fn after(ctx: &Context, loaded: &Loaded, outcome: &Outcome) -> Action {
    let (wake, action) = plan(&loaded.target, loaded.pool.as_ref(), outcome);
    let holder = &loaded.holder;
    match &wake {
        Wake::Nothing => return action,
        Wake::Pool(key) => ctx.index.wait_for_pool(key, holder),
        Wake::PurposePools(refused) => {
            ctx.index.wait_for_purpose_pools(holder);
            for key in refused {
                ctx.index.wait_for_pool(key, holder);
            }
        }
    }
    if ctx.index.pool_changes() != loaded.pool_changes {
        ctx.index.trigger(Trigger::Claim(holder.clone()));
    }
    action
}
