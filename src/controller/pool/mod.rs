//! The pool controller: protects pools that addresses still reference, and reports their
//! counts and `Ready` condition. Works for both pool kinds.

#[cfg(test)]
mod api_tests;
pub mod other_provider;
mod status;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::Patch;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use crate::api::IPPoolStatus;
use crate::api::conditions::PoolReason;
use crate::api::keys::{PROTECT_POOL_FINALIZER, SKIP_DELETE_PROTECTION_ANNOTATION};
use crate::index::{PoolKey, PoolReport};

use super::context::Context;
use super::error::{Error, Result};
use super::finalizers::{with_finalizer, without_finalizer};

pub use crate::feed::PoolObject;

fn api<K: PoolObject>(ctx: &Context, pool: &K) -> Api<K> {
    K::api(ctx.kube.client.clone(), pool.namespace().as_deref())
}

/// Reconciles one pool of either kind: report, protection, status.
pub async fn reconcile<K: PoolObject>(pool: Arc<K>, ctx: Arc<Context>) -> Result<Action> {
    ctx.index.wait_ready().await;
    let key = pool.key();
    if let Some(wait) = report_throttled(&ctx, pool.as_ref(), &key) {
        return Ok(Action::requeue(wait));
    }
    let report = report_of(&ctx, &key);
    let deleting_with = match protection(pool.as_ref(), &report) {
        Protection::Add(patch) => {
            patch_pool(&ctx, pool.as_ref(), &patch).await?;
            return Ok(Action::await_change());
        }
        Protection::Lift => {
            lift_protection(&ctx, pool.as_ref(), &key).await?;
            return Ok(Action::await_change());
        }
        Protection::Keep { deleting_with } => deleting_with,
    };
    ctx.report.metrics.set_pool(&key, &report);
    let action = write_status(&ctx, pool.as_ref(), &key, &report, deleting_with).await?;
    // A pool being deleted is woken by each reference that goes; it also looks again now and
    // then, so that its deletion never hangs on one wake-up missed.
    Ok(if deleting_with.is_some() && action == Action::await_change() {
        Action::requeue(DELETING_LOOK_AGAIN)
    } else {
        action
    })
}

/// How often a pool being deleted, still referenced, looks again without being woken.
const DELETING_LOOK_AGAIN: Duration = Duration::from_secs(30);

/// How long a protected pool whose status was written just now waits before its report is
/// made. It would wait in [`write_status`] anyway (see WriteThrottle), and its report walks
/// every holder of the pool: every allocation wakes its pool, so making the report each time
/// cost a pool of N claims N x N during a storm.
fn report_throttled<K: PoolObject>(ctx: &Context, pool: &K, key: &PoolKey) -> Option<Duration> {
    let protected = pool.finalizers().iter().any(|f| f == PROTECT_POOL_FINALIZER);
    if protected && pool.meta().deletion_timestamp.is_none() { ctx.writes.pools.wait(key) } else { None }
}

/// The index's report of the pool, with the `IPAddress` objects no claim of their name owns.
fn report_of(ctx: &Context, key: &PoolKey) -> PoolReport {
    let mut report = ctx.index.report(key);
    // Until the claims are listed every address would look unclaimed: say nothing before then.
    let claims_listed = ctx.caches.claims.is_listed();
    if claims_listed {
        report.unclaimed = report
            .object_holders
            .iter()
            .filter(|holder| ctx.cached_claim(&holder.namespace, &holder.name).is_none())
            .cloned()
            .collect();
    }
    report
}

/// What the pool's deletion protection (its finalizer) needs now.
enum Protection {
    /// The pool is not being deleted and lacks the finalizer: this patch adds it.
    Add(serde_json::Value),
    /// The pool is being deleted and nothing references it, or its annotation skips the
    /// protection: the finalizer goes.
    Lift,
    /// The protection stays as it is; `deleting_with` counts what still references a pool
    /// being deleted.
    Keep { deleting_with: Option<usize> },
}

/// What the pool's deletion protection needs, from its object and report (pure).
fn protection<K: PoolObject>(pool: &K, report: &PoolReport) -> Protection {
    if pool.meta().deletion_timestamp.is_none() {
        return match with_finalizer(pool, PROTECT_POOL_FINALIZER) {
            Some(patch) => Protection::Add(patch),
            None => Protection::Keep { deleting_with: None },
        };
    }
    // An allocation in flight counts too: its IPAddress is about to reference the pool.
    let referenced = report.address_objects + report.in_flight;
    if referenced == 0 || pool.annotations().contains_key(SKIP_DELETE_PROTECTION_ANNOTATION) {
        Protection::Lift
    } else {
        Protection::Keep { deleting_with: Some(referenced) }
    }
}

/// Drops the finalizer of a pool being deleted, and its metrics with it.
async fn lift_protection<K: PoolObject>(ctx: &Context, pool: &K, key: &PoolKey) -> Result<()> {
    if let Some(patch) = without_finalizer(pool, PROTECT_POOL_FINALIZER) {
        patch_pool(ctx, pool, &patch).await?;
        info!(pool = %key, "deletion protection lifted");
    }
    ctx.report.metrics.forget_pool(key);
    Ok(())
}

/// Writes the status the report calls for, unless the pool has it already or wrote its status
/// too recently (then it looks again later); a new warning is said as an Event too.
async fn write_status<K: PoolObject>(
    ctx: &Context,
    pool: &K,
    key: &PoolKey,
    report: &PoolReport,
    deleting_with: Option<usize>,
) -> Result<Action> {
    let desired = status::desired(report, pool.status(), pool.meta().generation, deleting_with, ctx.kube.clock.now());
    if pool.status() == Some(&desired) {
        return Ok(Action::await_change());
    }
    // During a storm of allocations the counts change with every address: see WriteThrottle.
    if let Some(wait) = ctx.writes.pools.wait(key) {
        return Ok(Action::requeue(wait));
    }
    api(ctx, pool)
        .patch_status(&pool.name_any(), &super::write_params(), &Patch::Merge(status_patch(&desired)))
        .await
        .inspect(|_| ctx.writes.pools.wrote(key))
        .map_err(|e| Error::kube(format!("writing the status of {key}"), e))?;
    if let Some(ready) = new_warning(pool.status(), &desired) {
        ctx.publish(pool, &(), true, &ready.reason, ready.message.clone()).await;
    }
    Ok(Action::await_change())
}

/// The `Ready` condition of `desired` when it warns (neither valid nor merely exhausted) and
/// the current status does not say so already (pure).
fn new_warning<'a>(current: Option<&IPPoolStatus>, desired: &'a IPPoolStatus) -> Option<&'a Condition> {
    let old_reason = current.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready")).map(|c| c.reason.clone());
    let ready = &desired.conditions[0];
    let warn = ready.reason != PoolReason::Valid.as_str() && ready.reason != PoolReason::Exhausted.as_str();
    (warn && old_reason.as_deref() != Some(ready.reason.as_str())).then_some(ready)
}

async fn patch_pool<K: PoolObject>(ctx: &Context, pool: &K, patch: &serde_json::Value) -> Result<()> {
    api(ctx, pool)
        .patch(&pool.name_any(), &super::write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("updating finalizers of {}", pool.key()), e))?;
    Ok(())
}

/// The merge patch that makes the pool's status exactly `desired`: fields it lacks are cleared.
fn status_patch(desired: &IPPoolStatus) -> serde_json::Value {
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
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use crate::api::InClusterIPPool;

    /// `ns/pool` with its finalizers, a deletion time when `deleting`, and the annotation that
    /// skips deletion protection when `skip`.
    fn pool(finalizers: &[&str], deleting: bool, skip: bool) -> InClusterIPPool {
        let mut metadata = json!({"name": "pool", "namespace": "ns", "finalizers": finalizers});
        if deleting {
            metadata["deletionTimestamp"] = json!("2026-12-03T10:00:00Z");
        }
        if skip {
            metadata["annotations"] = json!({ SKIP_DELETE_PROTECTION_ANNOTATION: "true" });
        }
        serde_json::from_value(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
            "metadata": metadata, "spec": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24}}))
        .expect("a pool")
    }

    fn ready(reason: PoolReason) -> IPPoolStatus {
        let condition = Condition {
            type_: "Ready".to_owned(),
            status: "True".to_owned(),
            reason: reason.as_str().to_owned(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        };
        IPPoolStatus { conditions: vec![condition], ..IPPoolStatus::default() }
    }

    #[test]
    fn a_pool_keeps_its_protection_while_addresses_reference_it() {
        let protected = [PROTECT_POOL_FINALIZER];
        // An allocation in flight references the pool as much as an IPAddress does.
        let referenced = PoolReport { address_objects: 1, in_flight: 1, ..PoolReport::default() };
        assert!(matches!(protection(&pool(&[], false, false), &referenced), Protection::Add(_)));
        let kept = protection(&pool(&protected, false, false), &referenced);
        assert!(matches!(kept, Protection::Keep { deleting_with: None }));
        let deleting = protection(&pool(&protected, true, false), &referenced);
        assert!(matches!(deleting, Protection::Keep { deleting_with: Some(2) }));
        assert!(matches!(protection(&pool(&protected, true, false), &PoolReport::default()), Protection::Lift));
        assert!(matches!(protection(&pool(&protected, true, true), &referenced), Protection::Lift));
    }

    #[test]
    fn a_warning_is_said_once_and_a_valid_or_full_pool_is_no_warning() {
        let conflict = ready(PoolReason::AddressConflict);
        assert!(new_warning(None, &conflict).is_some());
        assert!(new_warning(Some(&ready(PoolReason::Valid)), &conflict).is_some());
        assert!(new_warning(Some(&conflict), &conflict).is_none());
        assert!(new_warning(None, &ready(PoolReason::Valid)).is_none());
        assert!(new_warning(Some(&conflict), &ready(PoolReason::Exhausted)).is_none());
    }

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
