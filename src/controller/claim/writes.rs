//! The claim controller's writes to the API server (client required): the claim's `IPAddress`
//! created, adopted or deleted, the claim's finalizer and its status. Each write waits for the
//! fence, and each claim write is noted so that the stale cache it replaced is not acted on.

use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, Preconditions};
use serde_json::Value;
use tracing::{info, warn};

use crate::api::capi::{IPAddress, IPAddressClaim};
use crate::api::conditions::ClaimReason;
use crate::api::keys::PROTECT_ADDRESS_FINALIZER;
use crate::contract::address::{self, PoolSide};
use crate::contract::refusal;
use crate::contract::status::{self, Readiness};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result, status_code};
use crate::controller::{create_params, finalizers, write_params};
use crate::index::{AllocError, HolderKey};
use crate::metrics::PoolLabels;

use super::Failure;
use super::holds;
use super::loaded::{Loaded, ReadyPool};
use super::next::Unfulfilled;

/// Writes the claim's `IPAddress` with `ip`; adopts the one that exists already (409).
pub async fn create_address(loaded: &Loaded, pool: &ReadyPool, ip: IpAddr, ctx: &Context) -> Result<IpAddr, Failure> {
    let holder = &loaded.holder;
    let side = pool.side_for(ip);
    let desired = address::desired(&loaded.claim, ctx.kube.capi, &side, ip, loaded.cluster_name.as_deref());
    // When the create left (local clock): the fence allowed it then, whenever the answer comes.
    ctx.kube.fence.wait_open().await;
    let sent = Timestamp::now();
    match ctx.address_api(&holder.namespace).create(&create_params(), &desired).await {
        Ok(_) => {
            ctx.report.metrics.allocations.get_or_create(&PoolLabels::of(&pool.key)).inc();
            if let Some(latency) = ctx.report.latency.waited(holder) {
                ctx.report.metrics.allocation_latency.observe(latency.as_secs_f64());
            }
            info!(claim = %holder, %ip, pool = %pool.key, %sent, "allocated");
            Ok(ip)
        }
        Err(error) if status_code(&error) == Some(409) => {
            // An IPAddress of this name exists that the watch has not shown yet: adopt it.
            let existing = ctx
                .address_api(&holder.namespace)
                .get(&holder.name)
                .await
                .map_err(|e| Error::kube(format!("reading IPAddress {holder}"), e))?;
            keep(loaded, &existing, &side, ctx).await
        }
        // The claim keeps its hold on the address: a create that failed on the wire may still
        // have been stored, and the next attempt uses the same address.
        Err(error) => Err(Error::kube(format!("creating IPAddress {holder}"), error).into()),
    }
}

/// An `IPAddress` of the claim's name exists: adopt it, or let it go and recreate it.
pub async fn keep(loaded: &Loaded, existing: &IPAddress, pool: &PoolSide, ctx: &Context) -> Result<IpAddr, Failure> {
    let (claim, holder) = (loaded.claim.as_ref(), &loaded.holder);
    if !address::belongs_to(existing, claim, &pool.key) {
        let message = format!(
            "IPAddress {holder} already exists for claim {:?} of {} {:?}; delete it or give the claim another name",
            existing.spec.claim_ref.name, existing.spec.pool_ref.kind, existing.spec.pool_ref.name
        );
        return Err(Unfulfilled::not_ready(ClaimReason::AllocationFailed, message).into());
    }
    let ip: IpAddr = existing.spec.address.parse().map_err(|_| {
        let message = format!("IPAddress {holder} records {:?}, which is not an IP address", existing.spec.address);
        Unfulfilled::not_ready(ClaimReason::AllocationFailed, message)
    })?;
    if let Some(block) = ctx.caches.spokes.lost_block(&pool.key, ip) {
        return give_up_lost(existing, holder, &pool.key, ip, block, ctx).await;
    }
    // The claim takes over the object's hold, so the address stays reserved whatever happens
    // to the object; unless someone else holds it, or the pool may not hand it out.
    let bound = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_some_and(|r| *r.name == *holder.name);
    if let Err(error) = holds::adopt(&pool.key, holder, ip, bound, ctx) {
        if !bound && made_for(existing, claim) && ctx.index.held_by_others(&pool.key, holder, ip) {
            return discard_unpublished(existing, holder, &error, ctx).await;
        }
        let (reason, message) = refusal(&error, &pool.key);
        return Err(Unfulfilled::NotReady { reason, message }.into());
    }
    if existing.metadata.deletion_timestamp.is_some() {
        // Deleted by hand while the claim lives: let it go, then recreate it with the same address.
        if let Some(patch) = finalizers::without_finalizer(existing, PROTECT_ADDRESS_FINALIZER) {
            patch_address(ctx, holder, &patch).await?;
        }
        info!(claim = %holder, %ip, "IPAddress deleted while its claim lives; recreating it with the same address");
        return Err(Unfulfilled::Recreating.into());
    }
    if let Some(patch) = address::adoption_patch(existing, claim, ctx.kube.capi, pool, loaded.cluster_name.as_deref()) {
        patch_address(ctx, holder, &patch).await?;
        info!(claim = %holder, %ip, "adopted an existing IPAddress");
    }
    Ok(ip)
}

/// Whether a provider made `address` for this very claim (it names the claim, by UID, as its
/// controller), rather than someone by hand.
fn made_for(address: &IPAddress, claim: &IPAddressClaim) -> bool {
    let uid = claim.metadata.uid.as_deref();
    address.owner_references().iter().any(|o| o.controller == Some(true) && uid == Some(o.uid.as_str()))
}

/// The claim's `IPAddress`, made for it, records an address another holder has, and the claim's
/// status never named it: no consumer can have read it. It is what a write delayed past the
/// leader's term leaves (a process paused after its fence let a create through, so that the
/// create lands after another replica took over and handed the address out). The object is
/// deleted, that one only (by UID), and the claim is served anew once the watch brings the
/// deletion. An `IPAddress` made by hand is never deleted: it waits with `AddressConflict`.
async fn discard_unpublished(
    existing: &IPAddress,
    holder: &HolderKey,
    conflict: &AllocError,
    ctx: &Context,
) -> Result<IpAddr, Failure> {
    warn!(
        claim = %holder,
        action = "delete IPAddress",
        %conflict,
        "the claim's IPAddress was never named by its status and another holder has its address: deleting it, then allocating anew"
    );
    // Only the object judged here: a newer one of the same name is left alone.
    delete_address(ctx, holder, existing).await?;
    Err(Unfulfilled::Recreating.into())
}

/// A spoke pool's claim whose address lies in a block the hub refused to give back, because
/// another holds it (the spoke was restored from a backup taken before it returned the block):
/// the address is someone else's. Its `IPAddress` goes (that object only), and the claim gets a
/// new address of this spoke's blocks, instead of keeping one that two machines would share.
async fn give_up_lost(
    existing: &IPAddress,
    holder: &HolderKey,
    pool: &crate::index::PoolKey,
    ip: IpAddr,
    block: ipnet::IpNet,
    ctx: &Context,
) -> Result<IpAddr, Failure> {
    warn!(
        claim = %holder,
        %ip,
        %block,
        action = "delete IPAddress",
        "the claim's address lies in a block the hub has leased to another holder (this spoke was restored from an older backup?): deleting its IPAddress, then allocating anew"
    );
    ctx.index.set_hold(pool, holder, crate::index::HoldKind::Claim, None);
    delete_address(ctx, holder, existing).await?;
    Err(Unfulfilled::Recreating.into())
}

/// What became of an `IPAddress` [`delete_address`] was asked to delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// Deleted now, or gone already.
    Gone,
    /// Another object of its name stands in its place (another UID), and is left alone.
    Replaced,
}

/// Unprotects and deletes the claim's `IPAddress`: that object only, the one judged (by UID,
/// and its finalizer patch by resource version), never whatever of its name exists by then.
pub async fn delete_address(ctx: &Context, holder: &HolderKey, existing: &IPAddress) -> Result<Deleted> {
    if let Some(patch) = finalizers::without_finalizer(existing, PROTECT_ADDRESS_FINALIZER) {
        match patch_address(ctx, holder, &patch).await {
            Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => return Ok(Deleted::Gone),
            other => other?,
        }
    }
    let exactly = Preconditions { uid: existing.metadata.uid.clone(), resource_version: None };
    let params = DeleteParams { preconditions: Some(exactly), ..DeleteParams::default() };
    ctx.kube.fence.wait_open().await;
    match ctx.address_api(&holder.namespace).delete(&holder.name, &params).await {
        Ok(_) => Ok(Deleted::Gone),
        Err(e) if status_code(&e) == Some(404) => Ok(Deleted::Gone),
        Err(e) if status_code(&e) == Some(409) => Ok(Deleted::Replaced),
        Err(e) => Err(Error::kube(format!("deleting IPAddress {holder}"), e)),
    }
}

pub fn uid_of(claim: &IPAddressClaim) -> String {
    claim.uid().unwrap_or_default()
}

pub fn version_of(claim: &IPAddressClaim) -> String {
    claim.resource_version().unwrap_or_default()
}

/// Notes that a write replaced version `acted_on` of the claim by `written`.
fn wrote(ctx: &Context, acted_on: &IPAddressClaim, written: &IPAddressClaim) {
    ctx.writes.own.wrote(&uid_of(acted_on), &version_of(acted_on), &version_of(written));
}

/// Patches the claim's finalizers; returns the claim as written.
pub async fn patch_claim(ctx: &Context, claim: &IPAddressClaim, patch: &Value) -> Result<IPAddressClaim> {
    ctx.kube.fence.wait_open().await;
    let name = claim.name_any();
    let written = ctx
        .claim_api(&claim.namespace().unwrap_or_default())
        .patch(&name, &write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating finalizers of IPAddressClaim {name}"), e))?;
    wrote(ctx, claim, &written);
    Ok(written)
}

async fn patch_address(ctx: &Context, holder: &HolderKey, patch: &Value) -> Result<()> {
    ctx.kube.fence.wait_open().await;
    ctx.address_api(&holder.namespace)
        .patch(&holder.name, &write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating IPAddress {holder}"), e))?;
    Ok(())
}

/// Step 4: `status.addressRef` and `Ready`, and an Event when the claim turns not ready.
pub async fn status(ctx: &Context, loaded: &Loaded, address_name: Option<&str>, readiness: &Readiness) -> Result<()> {
    let (claim, cluster) = (loaded.claim.as_ref(), loaded.cluster.as_deref());
    let Some(patch) = status::patch(ctx.kube.capi, claim, address_name, readiness, ctx.kube.clock.now()) else {
        return Ok(());
    };
    let name = claim.name_any();
    ctx.kube.fence.wait_open().await;
    let written = ctx
        .claim_api(&claim.namespace().unwrap_or_default())
        .patch_status(&name, &write_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("writing the status of IPAddressClaim {name}"), e))?;
    wrote(ctx, claim, &written);
    if !readiness.ready {
        let reason = readiness.event_reason.unwrap_or(readiness.reason.as_str());
        ctx.publish(claim, &ctx.kube.claim_resource, true, reason, readiness.message.clone()).await;
        // A purpose claim's shortage concerns its whole Cluster.
        if let (Some(event_reason), Some(cluster), Some(resource)) =
            (readiness.event_reason, cluster, &ctx.kube.cluster_resource)
        {
            let note = format!("IPAddressClaim {}: {}", name, readiness.message);
            ctx.publish(cluster, resource, true, event_reason, note).await;
        }
    }
    Ok(())
}
