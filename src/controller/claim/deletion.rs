//! Step 5 of the contract, a deleted claim gives its address back; and the claim that was gone
//! before its status could name its new address (client required).

use crate::controller::claim_store::Action;
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
use crate::metrics::PoolLabels;

use super::holds;
use super::loaded::Loaded;
use super::writes::{delete_address, patch_claim, uid_of};

/// A deleted claim, past its pool's reuse grace period, gives its address back: its
/// `IPAddress` deleted, its holds dropped, then its finalizer.
pub async fn release(loaded: &Loaded, deleted_at: Timestamp, ctx: &Context) -> Result<Action> {
    let (claim, holder, pool_key) = (loaded.claim.as_ref(), &loaded.holder, loaded.pool.as_ref());
    if !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let Release::WaitGracePeriod(left) =
        release::plan(deleted_at, loaded.pool_facts(ctx).as_ref(), ctx.kube.clock.now())
    {
        debug!(claim = %holder, ?left, "holding the address for the pool's reuse grace period");
        return Ok(Action::requeue(left));
    }
    let api = ctx.address_api(&holder.namespace);
    let existing = match ctx.cached_address(&holder.namespace, &holder.name) {
        Some(cached) => Some((*cached).clone()),
        None => api.get_opt(&holder.name).await.map_err(|e| Error::kube(format!("reading IPAddress {holder}"), e))?,
    };
    if let Some(existing) = existing.filter(|a| pool_key.is_some_and(|key| address::belongs_to(a, claim, key))) {
        delete_address(ctx, holder, &existing, None).await?;
        if let Some(key) = pool_key {
            ctx.report.metrics.releases.get_or_create(&PoolLabels::of(key)).inc();
        }
        info!(claim = %holder, address = %existing.spec.address, "released");
    }
    ctx.report.latency.waited(holder);
    holds::release(pool_key, holder, ctx);
    if let Some(patch) = finalizers::without_finalizer(claim, RELEASE_ADDRESS_FINALIZER) {
        match patch_claim(ctx, claim, &patch).await {
            Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => {}
            other => drop(other?),
        }
    }
    ctx.writes.own.forget(&uid_of(claim));
    Ok(Action::await_change())
}

/// The claim was gone before its status could name its new address: a term that began with a
/// stale cache served a claim deleted meanwhile. Nothing would ever release that address (the
/// claim's deletion has come and gone), so its `IPAddress` goes now, and the hold with it.
pub async fn forsake(loaded: &Loaded, ctx: &Context) -> Result<Action> {
    let holder = &loaded.holder;
    let existing = ctx
        .address_api(&holder.namespace)
        .get_opt(&holder.name)
        .await
        .map_err(|e| Error::kube(format!("reading IPAddress {holder}"), e))?;
    let claim_uid = uid_of(&loaded.claim);
    let ours = |a: &IPAddress| a.owner_references().iter().any(|o| o.uid == claim_uid);
    if let Some(existing) = existing.filter(ours) {
        delete_address(ctx, holder, &existing, None).await?;
        info!(claim = %holder, address = %existing.spec.address, "the claim was gone before its status was written; its new IPAddress is deleted");
    }
    ctx.report.latency.waited(holder);
    holds::release(None, holder, ctx);
    Ok(Action::await_change())
}
