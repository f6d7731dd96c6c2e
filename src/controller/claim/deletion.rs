//! Step 5 of the contract, a deleted claim gives its address back; and the claim that was gone
//! before its status could name its new address (client required).

use crate::store::claims::Action;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tracing::{debug, info};

use crate::api::capi::IPAddress;
use crate::api::keys::RELEASE_ADDRESS_FINALIZER;
use crate::contract::address;
use crate::contract::release::{self, Release};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result, status_code};
use crate::controller::finalizers;
use crate::index::PoolKey;
use crate::metrics::PoolLabels;

use super::holds;
use super::loaded::Loaded;
use super::writes::{Deleted, delete_address, patch_claim, uid_of};

/// A deleted claim, past its pool's reuse grace period, gives its address back: its
/// `IPAddress` deleted, its holds dropped, then its finalizer.
///
/// The address deleted is the one the API server holds for the claim, judged on what is known
/// of it: the pool it records is taken from the object itself when the index does not know the
/// claim's pool (a purpose claim whose hold is gone), so that no `IPAddress` is left behind
/// for the garbage collector to strand in `Terminating` with its protecting finalizer.
pub async fn release(loaded: &Loaded, deleted_at: Timestamp, ctx: &Context) -> Result<Action> {
    let (claim, holder) = (loaded.claim.as_ref(), &loaded.holder);
    if !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let Release::WaitGracePeriod(left) =
        release::plan(deleted_at, loaded.pool_facts(ctx).as_ref(), ctx.kube.clock.now())
    {
        debug!(claim = %holder, ?left, "holding the address for the pool's reuse grace period");
        return Ok(Action::requeue(left));
    }
    let existing = released_address(loaded, ctx).await?;
    let pool_key = loaded.pool.clone().or_else(|| existing.as_ref().and_then(pool_of));
    if let Some(existing) = &existing {
        if delete_address(ctx, holder, existing).await? == Deleted::Replaced {
            debug!(claim = %holder, "another IPAddress of the claim's name appeared; looking again");
            return Ok(Action::requeue(LOOK_AGAIN));
        }
        if let Some(key) = &pool_key {
            ctx.report.metrics.releases.get_or_create(&PoolLabels::of(key)).inc();
        }
        info!(claim = %holder, address = %existing.spec.address, "released");
    }
    ctx.report.latency.waited(holder);
    holds::release(pool_key.as_ref(), holder, ctx);
    if let Some(patch) = finalizers::without_finalizer(claim, RELEASE_ADDRESS_FINALIZER) {
        match patch_claim(ctx, claim, &patch).await {
            Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => {}
            other => drop(other?),
        }
    }
    ctx.writes.own.forget(&uid_of(claim));
    Ok(Action::await_change())
}

/// How soon a release whose `IPAddress` was replaced under it looks again.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(200);

/// The `IPAddress` a deleted claim releases, if there is one: of the claim's name, naming the
/// claim, and in the claim's pool, or, when the index does not know that pool, owned by the
/// claim (by UID), as the API server has it now.
async fn released_address(loaded: &Loaded, ctx: &Context) -> Result<Option<IPAddress>> {
    let (claim, holder) = (loaded.claim.as_ref(), &loaded.holder);
    let cached = ctx.cached_address(&holder.namespace, &holder.name).filter(|_| loaded.pool.is_some());
    let existing = match cached {
        Some(cached) => Some((*cached).clone()),
        None => ctx
            .address_api(&holder.namespace)
            .get_opt(&holder.name)
            .await
            .map_err(|e| Error::kube(format!("reading IPAddress {holder}"), e))?,
    };
    Ok(existing.filter(|a| match &loaded.pool {
        Some(key) => address::belongs_to(a, claim, key),
        None => address::names(a, claim) && owned_by(a, &uid_of(claim)),
    }))
}

/// The pool an `IPAddress` records (its allocated-from annotation, else its `poolRef`).
fn pool_of(address: &IPAddress) -> Option<PoolKey> {
    PoolKey::of_address(&address.namespace().unwrap_or_default(), &address.spec.pool_ref, address.annotations())
}

/// Whether the claim of this UID owns the `IPAddress`.
fn owned_by(address: &IPAddress, claim_uid: &str) -> bool {
    !claim_uid.is_empty() && address.owner_references().iter().any(|o| o.uid == claim_uid)
}

/// The claim was gone before its status could name its new address: a term that began with a
/// stale cache served a claim deleted meanwhile. Nothing would ever release that address (the
/// claim's deletion has come and gone), so its `IPAddress` goes now, and the hold with it.
/// Only an `IPAddress` the API server holds now, owned by that very claim (by UID), is deleted.
pub async fn forsake(loaded: &Loaded, ctx: &Context) -> Result<Action> {
    let holder = &loaded.holder;
    let existing = ctx
        .address_api(&holder.namespace)
        .get_opt(&holder.name)
        .await
        .map_err(|e| Error::kube(format!("reading IPAddress {holder}"), e))?;
    let claim_uid = uid_of(&loaded.claim);
    if let Some(existing) = existing.filter(|a| owned_by(a, &claim_uid)) {
        if delete_address(ctx, holder, &existing).await? == Deleted::Replaced {
            return Ok(Action::requeue(LOOK_AGAIN));
        }
        info!(claim = %holder, address = %existing.spec.address, "the claim was gone before its status was written; its new IPAddress is deleted");
    }
    ctx.report.latency.waited(holder);
    holds::release(None, holder, ctx);
    Ok(Action::await_change())
}
