//! The one module of the claim controller that changes the index: taking an address for a
//! claim (in its pool, or in the first labelled pool with room), adopting the one its
//! `IPAddress` records, and giving holds back. No client required; signing up to be woken is
//! `next::after`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use kube::ResourceExt;

use crate::api::capi::IPAddressClaim;
use crate::api::conditions::ClaimReason;
use crate::api::keys::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use crate::contract::status::{self, Readiness};
use crate::contract::{Gate, Target, belongs_to, gate, passed_over, refusal, request_of, tenancy, waiting_for_hub};
use crate::controller::context::Context;
use crate::index::{AllocError, HolderKey, PoolKey};
use crate::metrics::PoolLabels;
use crate::selection::{self, Purpose};

use super::loaded::{Loaded, ReadyPool, Verdict};
use super::next::Unfulfilled;
use super::purpose;

/// The pool `key` if it may serve the claim now. A pool being deleted drops the claim's hold
/// that no `IPAddress` records yet, so that the hold does not keep the pool protected.
pub fn serving(key: PoolKey, loaded: &Loaded, ctx: &Context) -> Result<ReadyPool, Unfulfilled> {
    match Verdict::read(key.clone(), loaded, ctx) {
        Verdict::Serve(pool) => Ok(*pool),
        Verdict::Unprotected => Err(Unfulfilled::Unprotected(key)),
        Verdict::Deleting(message) => {
            ctx.index.drop_unwritten(&key, &loaded.holder);
            Err(Unfulfilled::not_ready(ClaimReason::PoolNotReady, message))
        }
        Verdict::Refused(message) => Err(Unfulfilled::not_ready(ClaimReason::PoolNotReady, message)),
        Verdict::NotSelected(message) => Err(Unfulfilled::not_ready(ClaimReason::NamespaceNotSelected, message)),
        Verdict::NamespaceUnknown => Err(Unfulfilled::NamespaceUnknown),
    }
}

/// Takes an address for the claim in `pool`: its existing hold there, or a new one. Every
/// allocation of the claim controller goes through here. The outer error is a claim that
/// cannot ask (a bad request annotation); the inner one, the pool's refusal.
pub fn try_take(loaded: &Loaded, pool: &ReadyPool, ctx: &Context) -> Result<Result<IpAddr, AllocError>, Unfulfilled> {
    let request = request_of(&loaded.claim, pool.spec.is_dual_stack())
        .map_err(|message| Unfulfilled::not_ready(ClaimReason::AllocationFailed, message))?;
    let taken = ctx.index.allocate(&pool.key, &loaded.holder, request);
    if let Err(AllocError::Exhausted(_)) = &taken {
        ctx.report.metrics.exhaustions.get_or_create(&PoolLabels::of(&pool.key)).inc();
    }
    Ok(taken)
}

/// Like [`try_take`], with the pool's refusal as the claim's `Ready` reason.
pub fn take(loaded: &Loaded, pool: &ReadyPool, ctx: &Context) -> Result<IpAddr, Unfulfilled> {
    try_take(loaded, pool, ctx)?.map_err(|error| {
        let (reason, message) = match (&error, pool.spec.hub()) {
            (AllocError::Exhausted(_), Some(hub)) => {
                waiting_for_hub(&pool.key, hub, ctx.caches.spokes.problem(&pool.key).as_deref())
            }
            _ => refusal(&error, &pool.key),
        };
        Unfulfilled::NotReady { reason, message }
    })
}

/// A purpose claim's pool and the address it holds there now.
pub struct Chosen {
    pub pool: ReadyPool,
    pub ip: IpAddr,
}

/// Takes an address in the first labelled pool, in order, that has one for the claim. Global
/// pools whose namespace selector does not select the claim's namespace are skipped, and named
/// in the claim's message.
pub async fn choose(purpose: Purpose, loaded: &Loaded, ctx: &Context) -> Result<Chosen, Unfulfilled> {
    let (claim, holder, cluster) = (loaded.claim.as_ref(), &loaded.holder, loaded.cluster.as_deref());
    let (found, provider) = purpose::candidates(ctx, purpose, claim, cluster).await;
    let order = found.order();
    if order.is_empty() {
        let message = selection::no_pool_message(purpose, &holder.namespace, provider.as_deref(), &found);
        return Err(Unfulfilled::not_ready(ClaimReason::PoolNotReady, message));
    }
    let labels = ctx.namespace_labels(&holder.namespace);
    let mut tried = Tried::default();
    for pool in order {
        if let Some(why) = skipped(pool, loaded, ctx, labels.as_ref()) {
            tried.skipped(pool, why);
            continue;
        }
        // A pool that just arrived gets its deletion protection within moments: wait for it
        // rather than pass on to a pool later in the order.
        let ready = serving(pool.clone(), loaded, ctx)?;
        match try_take(loaded, &ready, ctx)? {
            Ok(ip) => {
                ctx.index.stop_waiting(&tried.pools(), holder);
                return Ok(Chosen { pool: ready, ip });
            }
            Err(error) => tried.refused(pool, error.to_string()),
        }
    }
    if tried.refused.is_empty() && tried.not_selected {
        let message = selection::not_selected_message(purpose, &holder.namespace, &tried.why);
        return Err(Unfulfilled::not_ready(ClaimReason::NamespaceNotSelected, message));
    }
    let other_short = purpose::other_short(ctx, purpose, claim, cluster).await;
    Err(Unfulfilled::PurposeExhausted {
        message: selection::exhausted_message(purpose, &found, &tried.why),
        event_reason: purpose.exhausted_reason(other_short),
        refused: tried.refused,
    })
}

/// Why a candidate pool is passed over before an address is asked of it, if it is.
fn skipped(pool: &PoolKey, loaded: &Loaded, ctx: &Context, labels: Option<&BTreeMap<String, String>>) -> Option<Skip> {
    let facts = ctx.index.pool_facts(pool);
    if let Some(why) = passed_over(pool, ctx.only_namespace.is_some(), facts.as_ref()) {
        return Some(Skip::Other(why));
    }
    tenancy::not_selected(pool, facts.as_ref(), &loaded.holder.namespace, labels).map(Skip::NotSelected)
}

/// Why a candidate was skipped.
enum Skip {
    NotSelected(String),
    Other(String),
}

/// The candidates of a purpose claim tried so far, and why each did not serve it.
#[derive(Default)]
struct Tried {
    why: Vec<(PoolKey, String)>,
    /// The pools that had no address for the claim.
    refused: Vec<PoolKey>,
    /// Whether a pool was skipped because its namespace selector does not select the claim's.
    not_selected: bool,
}

impl Tried {
    fn skipped(&mut self, pool: &PoolKey, skip: Skip) {
        let why = match skip {
            Skip::NotSelected(message) => {
                self.not_selected = true;
                message
            }
            Skip::Other(why) => why,
        };
        self.why.push((pool.clone(), why));
    }

    fn refused(&mut self, pool: &PoolKey, why: String) {
        self.refused.push(pool.clone());
        self.why.push((pool.clone(), why));
    }

    /// Every pool tried before the one that serves.
    fn pools(&self) -> Vec<PoolKey> {
        self.why.iter().map(|(pool, _)| pool.clone()).collect()
    }
}

/// Makes the address the claim's `IPAddress` records the claim's (see
/// [`crate::index::Index::adopt`]).
pub fn adopt(pool: &PoolKey, holder: &HolderKey, ip: IpAddr, bound: bool, ctx: &Context) -> Result<(), AllocError> {
    ctx.index.adopt(pool, holder, ip, bound)
}

/// Gives back what a claim holds: in its pool, or, for a purpose claim that never got one, in
/// every pool (and its wait for any labelled pool).
pub fn release(pool: Option<&PoolKey>, holder: &HolderKey, ctx: &Context) {
    match pool {
        Some(key) => ctx.index.release_claim(key, holder),
        None => ctx.index.release_claim_everywhere(holder),
    }
}

/// Whether a claim needs no reconcile before new claims are served, and if so makes the index
/// hold its address as the claim's, as the reconcile's adoption would. Settled: not being
/// deleted nor held back by a pause; the finalizer on; its `IPAddress`, of its own name and not
/// being deleted, records an address of the claim's pool, is owned by the claim and protected;
/// the index holds that address for the object; and the claim's status already names the
/// object and says `Ready` with that address. A claim of a purpose, or anything else, is not
/// settled: it is reconciled first.
pub fn settled(claim: Arc<IPAddressClaim>, ctx: &Context) -> bool {
    let Some((holder, target @ Target::Pool(_))) = Loaded::identify(&claim) else { return false };
    if claim.metadata.deletion_timestamp.is_some() || !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER)
    {
        return false;
    }
    let loaded = Loaded::load(claim, holder, target, ctx);
    let Some(pool) = loaded.pool.as_ref() else { return false };
    if gate(&loaded.claim, &loaded.cluster_state(ctx), loaded.pool_facts(ctx).as_ref()) != Gate::Proceed {
        return false;
    }
    let (claim, holder) = (loaded.claim.as_ref(), &loaded.holder);
    let Some(address) = ctx.cached_address(&holder.namespace, &holder.name) else { return false };
    let owned = claim.uid().is_some_and(|uid| address.owner_references().iter().any(|o| o.uid == uid));
    let protected = address.finalizers().iter().any(|f| f == PROTECT_ADDRESS_FINALIZER);
    if address.metadata.deletion_timestamp.is_some() || !owned || !protected || !belongs_to(&address, claim, pool) {
        return false;
    }
    let Ok(ip) = address.spec.address.parse::<IpAddr>() else { return false };
    let says_so = status::patch(
        ctx.kube.capi,
        claim,
        Some(&holder.name),
        &Readiness::allocated(&ip.to_string()),
        ctx.kube.clock.now(),
    )
    .is_none();
    says_so
        && ctx.index.object_hold(pool, holder) == Some(ip)
        && ctx.caches.spokes.lost_block(pool, ip).is_none()
        && adopt(pool, holder, ip, true, ctx).is_ok()
}
