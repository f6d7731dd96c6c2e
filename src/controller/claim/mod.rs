//! The claim controller: fulfils `IPAddressClaim`s that reference our pools, in the order the
//! CAPI IPAM contract gives: gate (pause rules) -> finalizer -> address -> status; and on
//! deletion: grace period -> delete the address -> free it -> drop the finalizer.
//!
//! The contract's rules are pure functions of `crate::contract`. The steps here, and what each
//! may touch:
//! - `loaded`, `purpose`: read the claim, its Cluster and its pools, and give a verdict on a
//!   pool (no client required, the index only read);
//! - `holds`: the one module that changes the index (no client required);
//! - `next`: maps each outcome to the wake-up and the requeue it needs, and is the one place a
//!   claim signs up to be woken (no client required);
//! - `writes`, `deletion`: the API calls (client required).
//!
//! A new claim's path, from its watch event to its `IPAddress` create, runs through these
//! files of ferro-ipam's own, in order (the pure layers it calls, `index` and `contract`, and
//! the client, not counted):
//! 1. `store/watches.rs`: the watch stream, its retries and read-ahead;
//! 2. `store/lean.rs`: the event's object parsed lean;
//! 3. `controller/wiring/claims.rs`: the event applied to the store, the claim queued, and
//!    later taken by a worker;
//! 4. `store/claims/store.rs` and 5. `store/claims/record.rs`: the claim kept as a compact
//!    record, and read back as an object for the reconcile;
//! 6. `store/claims/queue.rs`: the work queue;
//! 7. `controller/wiring/support.rs`: the reconcile counted and timed;
//! 8. `controller/claim/mod.rs` (this file): the steps;
//! 9. `loaded.rs`; 10. `controller/finalizers.rs`; 11. `holds.rs`; 12. `writes.rs`.

#[cfg(test)]
mod api_tests;
mod deletion;
mod holds;
mod loaded;
mod next;
#[cfg(test)]
mod next_tests;
mod purpose;
#[cfg(test)]
mod settled_tests;
mod writes;

use std::net::IpAddr;
use std::sync::Arc;

use crate::store::claims::Action;
use tracing::debug;

use crate::api::capi::IPAddressClaim;
use crate::api::conditions::ClaimReason;
use crate::api::keys::RELEASE_ADDRESS_FINALIZER;
use crate::contract::status::Readiness;
use crate::contract::{Gate, Target, gate};

use super::context::Context;
use super::error::{Error, Result, status_code};
use super::finalizers;
pub use holds::settled;
use loaded::Loaded;
use next::{Outcome, Unfulfilled};

/// Reconciles one claim: load it once, then gate -> finalizer -> address -> status, or release.
pub async fn reconcile(claim: Arc<IPAddressClaim>, ctx: Arc<Context>) -> Result<Action> {
    let Some((holder, target)) = Loaded::identify(&claim) else {
        return Ok(Action::await_change());
    };
    // A deletion is a new version, so it is never waited for; this only spares repeating a write.
    let (uid, version) = (writes::uid_of(&claim), writes::version_of(&claim));
    if claim.metadata.deletion_timestamp.is_none() && ctx.writes.own.outdated(&uid, &version) {
        debug!(claim = %holder, "the cached claim predates our last write to it; waiting for the watch to bring it");
        return Ok(Action::await_change());
    }
    ctx.index.wait_ready().await;
    let loaded = Loaded::load(claim, holder, target, &ctx);
    if let Gate::Wait(why) = gate(&loaded.claim, &loaded.cluster_state(&ctx), loaded.pool_facts(&ctx).as_ref()) {
        debug!(claim = %loaded.holder, %why, "leaving the claim alone for now");
        return Ok(next::after(&ctx, &loaded, &Outcome::Held));
    }
    if let Some(deleted_at) = &loaded.claim.metadata.deletion_timestamp {
        let deleted_at = deleted_at.0;
        return deletion::release(&loaded, deleted_at, &ctx).await;
    }
    let loaded = with_finalizer(loaded, &ctx).await?;
    let outcome = match fulfil(&loaded, &ctx).await {
        Ok(ip) => Outcome::Fulfilled(ip),
        Err(Failure::Unfulfilled(why)) => Outcome::Unfulfilled(why),
        Err(Failure::Api(error)) => {
            let readiness = Readiness::failed(ClaimReason::AllocationFailed, error.to_string());
            writes::status(&ctx, &loaded, None, &readiness).await?;
            return Err(error);
        }
    };
    let action = next::after(&ctx, &loaded, &outcome);
    let Some((readiness, address_name)) = readiness(&outcome, &loaded) else {
        return Ok(action);
    };
    match writes::status(&ctx, &loaded, address_name, &readiness).await {
        Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) && address_name.is_some() => {
            deletion::forsake(&loaded, &ctx).await
        }
        written => written.map(|()| action),
    }
}

/// Step 2, then straight on with the claim as the API server returned it.
async fn with_finalizer(loaded: Loaded, ctx: &Context) -> Result<Loaded> {
    match finalizers::with_finalizer(loaded.claim.as_ref(), RELEASE_ADDRESS_FINALIZER) {
        Some(patch) => {
            let written = writes::patch_claim(ctx, &loaded.claim, &patch).await?;
            Ok(loaded.with_claim(written))
        }
        None => Ok(loaded),
    }
}

/// Step 3: the pool (a purpose claim's is chosen now, unless it has one), then the address:
/// the existing `IPAddress` kept, or a new one written.
async fn fulfil(loaded: &Loaded, ctx: &Context) -> Result<IpAddr, Failure> {
    let (pool, taken) = match (&loaded.target, &loaded.pool) {
        (Target::Purpose(purpose), None) => {
            let chosen = holds::choose(*purpose, loaded, ctx).await?;
            (chosen.pool, Some(chosen.ip))
        }
        (_, Some(key)) | (Target::Pool(key), None) => (holds::serving(key.clone(), loaded, ctx)?, None),
    };
    if let Some(existing) = ctx.cached_address(&loaded.holder.namespace, &loaded.holder.name) {
        return writes::keep(loaded, &existing, &pool.side(), ctx).await;
    }
    ctx.report.latency.seen(&loaded.holder);
    let ip = match taken {
        Some(ip) => ip,
        None => holds::take(loaded, &pool, ctx)?,
    };
    writes::create_address(loaded, &pool, ip, ctx).await
}

/// The status an outcome writes (its `Ready` condition, and the `IPAddress` it names); none
/// while the claim waits for something that settles within moments, or is held back.
fn readiness<'a>(outcome: &Outcome, loaded: &'a Loaded) -> Option<(Readiness, Option<&'a str>)> {
    match outcome {
        Outcome::Fulfilled(ip) => Some((Readiness::allocated(&ip.to_string()), Some(&*loaded.holder.name))),
        Outcome::Unfulfilled(Unfulfilled::NotReady { reason, message }) => {
            Some((Readiness::failed(*reason, message.clone()), None))
        }
        Outcome::Unfulfilled(Unfulfilled::PurposeExhausted { message, event_reason, .. }) => {
            Some((Readiness::failed(ClaimReason::PoolExhausted, message.clone()).with_event(event_reason), None))
        }
        Outcome::Held
        | Outcome::Unfulfilled(Unfulfilled::Recreating | Unfulfilled::Unprotected(_) | Unfulfilled::NamespaceUnknown) => {
            None
        }
    }
}

/// Why fulfilling a claim stopped short.
enum Failure {
    /// The claim has no address now; `next` says what it waits for.
    Unfulfilled(Unfulfilled),
    /// The API server failed a request.
    Api(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Api(error)
    }
}

impl From<Unfulfilled> for Failure {
    fn from(why: Unfulfilled) -> Self {
        Failure::Unfulfilled(why)
    }
}
