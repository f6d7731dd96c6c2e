//! Purpose claims ("a VIP", "a VM IP"): which labelled pools may serve them, in the order
//! `crate::selection` gives. Reads only (no client required): taking an address in one of them
//! is `holds::choose`.

use kube::ResourceExt;

use crate::api::capi::{Cluster, IPAddressClaim};
use crate::client::providers::provider_kind;
use crate::controller::context::Context;
use crate::index::{HolderKey, PoolKey};
use crate::selection::{self, Candidates, Purpose};

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

/// The labelled pools that may serve the claim, and its owner's infrastructure provider.
pub async fn candidates(
    ctx: &Context,
    purpose: Purpose,
    claim: &IPAddressClaim,
    cluster: Option<&Cluster>,
) -> (Candidates, Option<String>) {
    let provider = match provider_kind(claim, cluster) {
        Some(kind) => ctx.caches.providers.of_kind(&kind).await,
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

/// Whether the pools of the other purpose are short too (then the Event says both are).
pub async fn other_short(ctx: &Context, purpose: Purpose, claim: &IPAddressClaim, cluster: Option<&Cluster>) -> bool {
    let other = candidates(ctx, purpose.other(), claim, cluster).await.0;
    let order = other.order();
    !order.is_empty() && !order.iter().any(|p| ctx.index.has_room(p))
}
