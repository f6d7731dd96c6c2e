//! The pool controller: protects pools that addresses still reference, and reports their
//! counts and `Ready` condition. Works for both pool kinds.

#[cfg(test)]
mod api_tests;
mod kind;
pub mod other_provider;
mod status;

use std::sync::Arc;

use kube::api::Patch;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use crate::api::conditions::PoolReason;
use crate::api::keys::{PROTECT_POOL_FINALIZER, SKIP_DELETE_PROTECTION_ANNOTATION};

use super::context::Context;
use super::error::{Error, Result};
use super::finalizers::{with_finalizer, without_finalizer};

pub use kind::PoolObject;

fn api<K: PoolObject>(ctx: &Context, pool: &K) -> Api<K> {
    K::api(ctx.kube.client.clone(), pool.namespace().as_deref())
}

/// Reconciles one pool of either kind.
pub async fn reconcile<K: PoolObject>(pool: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    ctx.index.wait_ready().await;
    let key = pool.key();
    let protected = pool.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER);
    // A pool whose status was written just now would wait below anyway (see WriteThrottle):
    // its report, which walks every holder of the pool, waits with it. Every allocation wakes
    // its pool, so computing it each time cost a pool of N claims N x N during a storm.
    if protected
        && pool.meta().deletion_timestamp.is_none()
        && let Some(wait) = ctx.writes.pools.wait(&key)
    {
        return Ok(Action::requeue(wait));
    }
    let mut report = ctx.index.report(&key);
    // Until the claims are listed every address would look unclaimed: say nothing before then.
    let claims_listed =
        futures::FutureExt::now_or_never(ctx.caches.claims.wait_until_ready()).is_some_and(|r| r.is_ok());
    if claims_listed {
        report.unclaimed = report
            .object_holders
            .iter()
            .filter(|holder| ctx.cached_claim(&holder.namespace, &holder.name).is_none())
            .cloned()
            .collect();
    }
    let name = pool.name_any();
    let deleting = pool.meta().deletion_timestamp.is_some();
    let skip_protection = pool.annotations().contains_key(SKIP_DELETE_PROTECTION_ANNOTATION);
    // An allocation in flight counts too: its IPAddress is about to reference the pool.
    let referenced = report.address_objects + report.in_flight;

    let deleting_with = if deleting {
        if referenced == 0 || skip_protection {
            if let Some(patch) = without_finalizer(pool.as_ref(), PROTECT_POOL_FINALIZER) {
                patch_pool(&ctx, pool.as_ref(), &patch).await?;
                info!(pool = %key, "deletion protection lifted");
            }
            ctx.report.metrics.forget_pool(&key);
            return Ok(Action::await_change());
        }
        Some(referenced)
    } else {
        if let Some(patch) = with_finalizer(pool.as_ref(), PROTECT_POOL_FINALIZER) {
            patch_pool(&ctx, pool.as_ref(), &patch).await?;
            return Ok(Action::await_change());
        }
        None
    };

    ctx.report.metrics.set_pool(&key, &report);
    let desired = status::desired(&report, pool.status(), pool.meta().generation, deleting_with, ctx.kube.clock.now());
    if pool.status() != Some(&desired) {
        // During a storm of allocations the counts change with every address: see WriteThrottle.
        if let Some(wait) = ctx.writes.pools.wait(&key) {
            return Ok(Action::requeue(wait));
        }
        api(&ctx, pool.as_ref())
            .patch_status(&name, &super::write_params(), &Patch::Merge(status_patch(&desired)))
            .await
            .inspect(|_| ctx.writes.pools.wrote(&key))
            .map_err(|e| Error::kube(format!("writing the status of {key}"), e))?;
        let old_reason =
            pool.status().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready")).map(|c| c.reason.clone());
        let ready = &desired.conditions[0];
        let warn = ready.reason != PoolReason::Valid.as_str() && ready.reason != PoolReason::Exhausted.as_str();
        if warn && old_reason.as_deref() != Some(ready.reason.as_str()) {
            ctx.publish(pool.as_ref(), &(), true, &ready.reason, ready.message.clone()).await;
        }
    }
    Ok(Action::await_change())
}

async fn patch_pool<K: PoolObject>(ctx: &Context, pool: &K, patch: &serde_json::Value) -> Result<()> {
    api(ctx, pool)
        .patch(&pool.name_any(), &super::write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating finalizers of {}", pool.key()), e))?;
    Ok(())
}

/// The merge patch that makes the pool's status exactly `desired`: fields it lacks are cleared.
fn status_patch(desired: &crate::api::IPPoolStatus) -> serde_json::Value {
    // A merge patch keeps the fields of an object it leaves out: clear a stale reserved count.
    let mut counts = json!(desired.ip_addresses);
    if let Some(fields) = counts.as_object_mut() {
        fields.entry("reserved").or_insert(serde_json::Value::Null);
    }
    json!({ "status": {
        "ipAddresses": counts,
        "families": if desired.families.is_empty() { serde_json::Value::Null } else { json!(desired.families) },
        "recentlyReleased": if desired.recently_released.is_empty() { serde_json::Value::Null } else { json!(desired.recently_released) },
        "conditions": desired.conditions,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_patch_clears_counts_the_desired_status_lacks() {
        let patch = status_patch(&crate::api::IPPoolStatus::default());
        assert!(patch["status"]["ipAddresses"].is_null());
        assert!(patch["status"]["families"].is_null());
        assert!(
            patch["status"].as_object().is_some_and(|o| o.contains_key("ipAddresses") && o.contains_key("families"))
        );
    }

    #[test]
    fn status_patch_clears_a_reserved_count_once_nothing_is_set_aside() {
        let counts = crate::api::pool::IPAddressCounts { total: 3, used: 3, free: 0, out_of_range: 0, reserved: None };
        let status = crate::api::IPPoolStatus { ip_addresses: Some(counts), ..Default::default() };
        let patch = status_patch(&status);
        assert!(patch["status"]["ipAddresses"].as_object().is_some_and(|o| o["reserved"].is_null()), "{patch}");
        assert_eq!(patch["status"]["ipAddresses"]["total"], 3);
    }
}
