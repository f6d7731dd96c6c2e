//! Purpose claims ("a VIP", "a VM IP"): finding the pool that serves them among the labelled
//! pools, in the order `crate::selection` gives, and holding an address there.

use std::net::IpAddr;

use kube::ResourceExt;

use crate::api::capi::{Cluster, IPAddressClaim};
use crate::api::conditions::ClaimReason;
use crate::index::{HolderKey, PoolFacts, PoolKey};
use crate::selection::{self, Candidates, Purpose};

use super::Failure;
use super::loaded::{Loaded, Serving};
use crate::controller::context::Context;
use crate::controller::provider::provider_kind;

/// Where a claim's address comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The pool its `poolRef` names.
    Pool(PoolKey),
    /// A labelled pool of the purpose its `poolRef` asks for.
    Purpose(Purpose),
}

impl Target {
    /// None when the claim is not for ferro-ipam.
    pub fn of(claim: &IPAddressClaim) -> Option<Target> {
        if let Some(purpose) = Purpose::of_reference(&claim.spec.pool_ref) {
            return Some(Target::Purpose(purpose));
        }
        PoolKey::from_reference(&claim.namespace().unwrap_or_default(), &claim.spec.pool_ref).map(Target::Pool)
    }
}

/// The pool a purpose claim already uses: the one its `IPAddress` records, or the one where
/// the index holds an address for it.
pub fn known_pool(ctx: &Context, purpose: Purpose, holder: &HolderKey) -> Option<PoolKey> {
    if let Some(address) = ctx.cached_address(&holder.namespace, &holder.name)
        && let Some(pool) = PoolKey::of_address(&holder.namespace, &address.spec.pool_ref, address.annotations())
        && Purpose::of_reference(&address.spec.pool_ref) == Some(purpose)
    {
        return Some(pool);
    }
    ctx.index
        .pools_labelled(purpose.label())
        .into_iter()
        .map(|(pool, _)| pool)
        .find(|pool| ctx.index.claim_hold(pool, holder).is_some())
}

/// What looking for a pool came to.
pub enum Choice {
    /// The claim holds this address of this pool now.
    Chosen(PoolKey, IpAddr),
    /// A pool that would do is not yet protected against deletion; try again shortly.
    Pending,
}

async fn candidates(
    ctx: &Context,
    purpose: Purpose,
    claim: &IPAddressClaim,
    cluster: Option<&Cluster>,
) -> (Candidates, Option<String>) {
    let provider = match provider_kind(claim, cluster) {
        Some(kind) => ctx.providers.of_kind(&kind).await,
        None => None,
    };
    let pools = ctx.index.pools_labelled(purpose.label());
    let found = selection::candidates(
        purpose,
        &claim.namespace().unwrap_or_default(),
        provider.as_deref(),
        pools.iter().map(|(k, l)| (k, l)),
    );
    (found, provider)
}

/// Why a pool cannot serve now, or None when it may be tried.
fn unusable(ctx: &Context, pool: &PoolKey) -> Option<String> {
    passed_over(pool, ctx.only_namespace.is_some(), ctx.index.pool_facts(pool).as_ref())
}

/// Why a candidate pool is passed over before an address is asked of it (pure): a global pool
/// while ferro-ipam serves one namespace, or a pool missing, paused or being deleted.
pub fn passed_over(pool: &PoolKey, one_namespace: bool, facts: Option<&PoolFacts>) -> Option<String> {
    if pool.kind.is_global() && one_namespace {
        return Some("this ferro-ipam runs with --namespace and serves no global pool".to_owned());
    }
    match facts {
        None => Some("not found".to_owned()),
        Some(f) if f.paused => Some("paused".to_owned()),
        Some(f) if f.deleting => Some("being deleted".to_owned()),
        Some(_) => None,
    }
}

/// Finds the first pool, in order, that holds an address for the claim.
pub async fn choose(ctx: &Context, purpose: Purpose, loaded: &Loaded) -> Result<Choice, Failure> {
    let (claim, holder, cluster) = (loaded.claim.as_ref(), &loaded.holder, loaded.cluster.as_deref());
    let (found, provider) = candidates(ctx, purpose, claim, cluster).await;
    // Any pool that appears or changes may be the one this claim needs.
    ctx.index.wait_for_purpose_pools(holder);
    let order = found.order();
    if order.is_empty() {
        let message = selection::no_pool_message(purpose, &holder.namespace, provider.as_deref(), &found);
        return Err(Failure::NotReady(ClaimReason::PoolNotReady, message));
    }
    let mut tried = Vec::new();
    for pool in order {
        if let Some(why) = unusable(ctx, pool) {
            tried.push((pool.clone(), why));
            continue;
        }
        // A pool that just arrived gets its deletion protection within moments: wait for it
        // rather than pass on to a pool later in the order.
        let Some(serving) = Serving::check(pool.clone(), loaded.via(), loaded, ctx)? else {
            return Ok(Choice::Pending);
        };
        match loaded.take_address(&serving, ctx)? {
            Ok(ip) => {
                let others: Vec<PoolKey> = tried.into_iter().map(|(p, _)| p).collect();
                ctx.index.stop_waiting(&others, holder);
                return Ok(Choice::Chosen(serving.key, ip));
            }
            Err(error) => {
                ctx.index.wait_for_pool(pool, holder);
                tried.push((pool.clone(), error.to_string()));
            }
        }
    }
    let other = candidates(ctx, purpose.other(), claim, cluster).await.0;
    let other_order = other.order();
    let other_short = !other_order.is_empty() && !other_order.iter().any(|p| ctx.index.has_room(p));
    Err(Failure::PurposeExhausted {
        message: selection::exhausted_message(purpose, &found, &tried),
        event_reason: purpose.exhausted_reason(other_short),
    })
}
