//! The claim controller: fulfils `IPAddressClaim`s that reference our pools, in the order the
//! CAPI IPAM contract gives: gate (pause rules) -> finalizer -> address -> status; and on
//! deletion: grace period -> delete the address -> free it -> drop the finalizer.
//!
//! Each step's decision is a pure function in its own module; this file only loads, calls and
//! writes.

mod address;
#[cfg(test)]
mod api_tests;
mod gate;
mod loaded;
mod purpose;
mod release;
mod request;
mod status;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, Preconditions};
use kube::runtime::controller::Action;
use serde_json::Value;
use tracing::{debug, info, warn};

use crate::api::capi::{IPAddress, IPAddressClaim};
use crate::api::conditions::ClaimReason;
use crate::api::keys::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use crate::index::{AllocError, HolderKey, PoolKey};
use crate::metrics::PoolLabels;

use super::context::Context;
use super::error::{Error, Result, status_code};
use super::finalizers;

pub use address::belongs_to;
pub use gate::{ClusterState, Gate, gate};
use loaded::{Loaded, Serving};
use purpose::Choice;
pub use purpose::{Target, passed_over};
pub use request::of as request_of;
use status::Readiness;

/// How long a claim that waits for something the watches will announce sleeps at most anyway.
const RECHECK: Duration = Duration::from_secs(600);

/// Reconciles one claim: load it once, then gate -> finalizer -> address -> status, or release.
pub async fn reconcile(claim: Arc<IPAddressClaim>, ctx: Arc<Context>) -> Result<Action> {
    let Some((holder, target)) = Loaded::identify(&claim) else {
        return Ok(Action::await_change());
    };
    // A deletion is a new version, so it is never waited for; this only spares repeating a write.
    if claim.metadata.deletion_timestamp.is_none() && ctx.own_writes.outdated(&uid_of(&claim), &version_of(&claim)) {
        debug!(claim = %holder, "the cached claim predates our last write to it; waiting for the watch to bring it");
        return Ok(Action::await_change());
    }
    ctx.index.wait_ready().await;
    let loaded = Loaded::load(claim, holder, target, &ctx);
    if let Gate::Wait(why) = gate::gate(&loaded.claim, &loaded.cluster_state(&ctx), loaded.pool_facts(&ctx).as_ref()) {
        debug!(claim = %loaded.holder, %why, "leaving the claim alone for now");
        match &loaded.pool {
            Some(key) => ctx.index.wait_for_pool(key, &loaded.holder),
            None => ctx.index.wait_for_purpose_pools(&loaded.holder),
        }
        return Ok(Action::await_change());
    }
    if let Some(deleted_at) = &loaded.claim.metadata.deletion_timestamp {
        let deleted_at = deleted_at.0;
        return release(&loaded, deleted_at, &ctx).await;
    }
    // Step 2, then straight on with the claim as the API server returned it.
    let loaded = match finalizers::with_finalizer(loaded.claim.as_ref(), RELEASE_ADDRESS_FINALIZER) {
        Some(patch) => {
            let written = patch_claim(&ctx, &loaded.claim, &patch).await?;
            loaded.with_claim(written)
        }
        None => loaded,
    };
    let (readiness, address_name, action) = match serve(&loaded, &ctx).await {
        Ok(Fulfilled::Written(ip)) => {
            (Readiness::allocated(&ip.to_string()), Some(loaded.holder.name.as_str()), Action::await_change())
        }
        Ok(Fulfilled::Pending) => return Ok(Action::requeue(Duration::from_secs(2))),
        Err(Failure::NotReady(reason, message)) => {
            if let Target::Pool(key) = &loaded.target {
                ctx.index.wait_for_pool(key, &loaded.holder);
            }
            (Readiness::failed(reason, message), None, Action::requeue(RECHECK))
        }
        Err(Failure::PurposeExhausted { message, event_reason }) => {
            let readiness = Readiness::failed(ClaimReason::PoolExhausted, message).with_event(event_reason);
            (readiness, None, Action::requeue(RECHECK))
        }
        Err(Failure::Api(error)) => {
            let readiness = Readiness::failed(ClaimReason::AllocationFailed, error.to_string());
            write_status(&ctx, &loaded, None, &readiness).await?;
            return Err(error);
        }
    };
    match write_status(&ctx, &loaded, address_name, &readiness).await {
        Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) && address_name.is_some() => {
            forsake(&loaded, &ctx).await
        }
        written => written.map(|()| action),
    }
}

/// The claim was gone before its status could name its new address: a term that began with a
/// stale cache served a claim deleted meanwhile. Nothing would ever release that address (the
/// claim's deletion has come and gone), so its `IPAddress` goes now, and the hold with it.
async fn forsake(loaded: &Loaded, ctx: &Context) -> Result<Action> {
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
    ctx.waited(holder);
    ctx.index.release_claim_everywhere(holder);
    Ok(Action::await_change())
}

/// Unprotects and deletes the claim's `IPAddress` (gone already is fine, and so is another
/// object of its name when `preconditions` name this one).
async fn delete_address(
    ctx: &Context,
    holder: &HolderKey,
    existing: &IPAddress,
    preconditions: Option<Preconditions>,
) -> Result<()> {
    if let Some(patch) = finalizers::without_finalizer(existing, PROTECT_ADDRESS_FINALIZER) {
        patch_address(ctx, holder, &patch).await?;
    }
    let exact = preconditions.is_some();
    let params = DeleteParams { preconditions, ..DeleteParams::default() };
    match ctx.address_api(&holder.namespace).delete(&holder.name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) || (exact && status_code(&e) == Some(409)) => Ok(()),
        Err(e) => Err(Error::kube(format!("deleting IPAddress {holder}"), e)),
    }
}

/// Step 3: the pool (a purpose claim's is chosen now, unless it has one), then the address:
/// the existing `IPAddress` kept, or a new one written.
async fn serve(loaded: &Loaded, ctx: &Context) -> Result<Fulfilled, Failure> {
    let (key, taken) = match (&loaded.target, &loaded.pool) {
        (_, Some(key)) => (key.clone(), None),
        (Target::Purpose(purpose), None) => match purpose::choose(ctx, *purpose, loaded).await? {
            Choice::Chosen(key, ip) => (key, Some(ip)),
            Choice::Pending => return Ok(Fulfilled::Pending),
        },
        // A named pool is always known.
        (Target::Pool(key), None) => (key.clone(), None),
    };
    let Some(pool) = Serving::check(key, loaded.via(), loaded, ctx)? else {
        return Ok(Fulfilled::Pending);
    };
    if let Some(existing) = ctx.cached_address(&loaded.holder.namespace, &loaded.holder.name) {
        return keep(loaded, &existing, &pool.side(), ctx).await;
    }
    ctx.seen(&loaded.holder);
    let ip = match taken {
        Some(ip) => ip,
        None => loaded.take_address(&pool, ctx)?.map_err(|e| not_ready(e, &pool.key))?,
    };
    create_address(loaded, &pool, ip, ctx).await
}

/// What fulfilling a claim came to.
enum Fulfilled {
    /// The claim's `IPAddress` exists with this address.
    Written(IpAddr),
    /// Waiting for something the watches announce: the old `IPAddress` to be gone (then it is
    /// recreated), or the pool's deletion protection to be in place.
    Pending,
}

enum Failure {
    /// The claim cannot be served now: reason and message for its `Ready` condition.
    NotReady(ClaimReason, String),
    /// No labelled pool of a purpose claim has room: `PoolExhausted`, and an Event of this
    /// reason on the claim and its Cluster.
    PurposeExhausted { message: String, event_reason: &'static str },
    /// The API server failed a request.
    Api(Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure::Api(error)
    }
}

/// The reason a claim's `Ready` condition gives for an allocation error.
pub fn reason_of(error: &AllocError) -> ClaimReason {
    match error {
        AllocError::Exhausted(_) => ClaimReason::PoolExhausted,
        AllocError::PoolMissing | AllocError::PoolInvalid(_) => ClaimReason::PoolNotReady,
        AllocError::FamilyNotInPool(_) | AllocError::Requested { .. } => ClaimReason::AllocationFailed,
        AllocError::Conflict { .. } => ClaimReason::AddressConflict,
    }
}

fn not_ready(error: AllocError, pool: &PoolKey) -> Failure {
    let reason = reason_of(&error);
    let mut message = format!("{pool}: {error}");
    if reason == ClaimReason::AddressConflict {
        message.push_str("; the claim stays unserved until the other holder is gone or its IPAddress is deleted");
    }
    if reason == ClaimReason::PoolExhausted {
        message.push_str("; the claim is served as soon as an address is released or the pool grows");
    }
    Failure::NotReady(reason, message)
}

/// Writes the claim's `IPAddress` with `ip`; adopts the one that exists already (409).
async fn create_address(loaded: &Loaded, pool: &Serving, ip: IpAddr, ctx: &Context) -> Result<Fulfilled, Failure> {
    let holder = &loaded.holder;
    let side = pool.side_for(ip);
    let desired = address::desired(&loaded.claim, ctx.capi, &side, ip, loaded.cluster_name.as_deref());
    // When the create left (local clock): the fence allowed it then, whenever the answer comes.
    ctx.fence.wait_open().await;
    let sent = Timestamp::now();
    match ctx.address_api(&holder.namespace).create(&super::create_params(), &desired).await {
        Ok(_) => {
            ctx.metrics.allocations.get_or_create(&PoolLabels::of(&pool.key)).inc();
            if let Some(latency) = ctx.waited(holder) {
                ctx.metrics.allocation_latency.observe(latency.as_secs_f64());
            }
            info!(claim = %holder, %ip, pool = %pool.key, %sent, "allocated");
            Ok(Fulfilled::Written(ip))
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
async fn keep(
    loaded: &Loaded,
    existing: &IPAddress,
    pool: &address::PoolSide,
    ctx: &Context,
) -> Result<Fulfilled, Failure> {
    let (claim, holder) = (loaded.claim.as_ref(), &loaded.holder);
    if !address::belongs_to(existing, claim, &pool.key) {
        return Err(Failure::NotReady(
            ClaimReason::AllocationFailed,
            format!(
                "IPAddress {holder} already exists for claim {:?} of {} {:?}; delete it or give the claim another name",
                existing.spec.claim_ref.name, existing.spec.pool_ref.kind, existing.spec.pool_ref.name
            ),
        ));
    }
    let ip: IpAddr = existing.spec.address.parse().map_err(|_| {
        Failure::NotReady(
            ClaimReason::AllocationFailed,
            format!("IPAddress {holder} records {:?}, which is not an IP address", existing.spec.address),
        )
    })?;
    // The claim takes over the object's hold, so the address stays reserved whatever happens
    // to the object; unless someone else holds it, or the pool may not hand it out.
    let bound = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_some_and(|r| r.name == holder.name);
    if let Err(error) = ctx.index.adopt(&pool.key, holder, ip, bound) {
        if !bound && made_for(existing, claim) && ctx.index.held_by_others(&pool.key, holder, ip) {
            return discard_unpublished(existing, holder, &error, ctx).await;
        }
        return Err(not_ready(error, &pool.key));
    }
    if existing.metadata.deletion_timestamp.is_some() {
        // Deleted by hand while the claim lives: let it go, then recreate it with the same address.
        if let Some(patch) = finalizers::without_finalizer(existing, PROTECT_ADDRESS_FINALIZER) {
            patch_address(ctx, holder, &patch).await?;
        }
        info!(claim = %holder, %ip, "IPAddress deleted while its claim lives; recreating it with the same address");
        return Ok(Fulfilled::Pending);
    }
    if let Some(patch) = address::adoption_patch(existing, claim, ctx.capi, pool, loaded.cluster_name.as_deref()) {
        patch_address(ctx, holder, &patch).await?;
        info!(claim = %holder, %ip, "adopted an existing IPAddress");
    }
    Ok(Fulfilled::Written(ip))
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
) -> Result<Fulfilled, Failure> {
    warn!(
        claim = %holder,
        action = "delete IPAddress",
        %conflict,
        "the claim's IPAddress was never named by its status and another holder has its address: deleting it, then allocating anew"
    );
    // Only the object judged here: a newer one of the same name is left alone (409).
    let exactly = Preconditions { uid: existing.metadata.uid.clone(), resource_version: None };
    delete_address(ctx, holder, existing, Some(exactly)).await?;
    Ok(Fulfilled::Pending)
}

/// Step 5: a deleted claim gives its address back.
async fn release(loaded: &Loaded, deleted_at: Timestamp, ctx: &Context) -> Result<Action> {
    let (claim, holder, pool_key) = (loaded.claim.as_ref(), &loaded.holder, loaded.pool.as_ref());
    if !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let release::Release::WaitGracePeriod(left) =
        release::plan(deleted_at, loaded.pool_facts(ctx).as_ref(), ctx.clock.now())
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
            ctx.metrics.releases.get_or_create(&PoolLabels::of(key)).inc();
        }
        info!(claim = %holder, address = %existing.spec.address, "released");
    }
    ctx.waited(holder);
    match pool_key {
        Some(key) => ctx.index.release_claim(key, holder),
        // A purpose claim that never got a pool may still wait for one.
        None => ctx.index.release_claim_everywhere(holder),
    }
    if let Some(patch) = finalizers::without_finalizer(claim, RELEASE_ADDRESS_FINALIZER) {
        match patch_claim(ctx, claim, &patch).await {
            Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => {}
            other => drop(other?),
        }
    }
    ctx.own_writes.forget(&uid_of(claim));
    Ok(Action::await_change())
}

fn uid_of(claim: &IPAddressClaim) -> String {
    claim.uid().unwrap_or_default()
}

fn version_of(claim: &IPAddressClaim) -> String {
    claim.resource_version().unwrap_or_default()
}

/// Notes that a write replaced version `acted_on` of the claim by `written`.
fn wrote(ctx: &Context, acted_on: &IPAddressClaim, written: &IPAddressClaim) {
    ctx.own_writes.wrote(&uid_of(acted_on), &version_of(acted_on), &version_of(written));
}

async fn patch_claim(ctx: &Context, claim: &IPAddressClaim, patch: &Value) -> Result<IPAddressClaim> {
    ctx.fence.wait_open().await;
    let name = claim.name_any();
    let written = ctx
        .claim_api(&claim.namespace().unwrap_or_default())
        .patch(&name, &super::write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating finalizers of IPAddressClaim {name}"), e))?;
    wrote(ctx, claim, &written);
    Ok(written)
}

async fn patch_address(ctx: &Context, holder: &HolderKey, patch: &Value) -> Result<()> {
    ctx.fence.wait_open().await;
    ctx.address_api(&holder.namespace)
        .patch(&holder.name, &super::write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating IPAddress {holder}"), e))?;
    Ok(())
}

/// Step 4: `status.addressRef` and `Ready`, and an Event when the claim turns not ready.
async fn write_status(ctx: &Context, loaded: &Loaded, address_name: Option<&str>, readiness: &Readiness) -> Result<()> {
    let (claim, cluster) = (loaded.claim.as_ref(), loaded.cluster.as_deref());
    let Some(patch) = status::patch(ctx.capi, claim, address_name, readiness, ctx.clock.now()) else {
        return Ok(());
    };
    let name = claim.name_any();
    ctx.fence.wait_open().await;
    let written = ctx
        .claim_api(&claim.namespace().unwrap_or_default())
        .patch_status(&name, &super::write_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("writing the status of IPAddressClaim {name}"), e))?;
    wrote(ctx, claim, &written);
    if !readiness.ready {
        let reason = readiness.event_reason.unwrap_or(readiness.reason.as_str());
        ctx.publish(claim, &ctx.claim_resource, true, reason, readiness.message.clone()).await;
        // A purpose claim's shortage concerns its whole Cluster.
        if let (Some(event_reason), Some(cluster), Some(resource)) =
            (readiness.event_reason, cluster, &ctx.cluster_resource)
        {
            let note = format!("IPAddressClaim {}: {}", name, readiness.message);
            ctx.publish(cluster, resource, true, event_reason, note).await;
        }
    }
    Ok(())
}
