//! Says on every pool that another IPAM provider is active (client required): each pool's
//! `Ready` condition becomes `False`, reason `OtherProviderActive`, naming the other provider's
//! Lease and holder, and each pool gets a Warning Event of that reason. Written by the replica
//! that holds ferro-ipam's Lease while it allocates nothing; the pool controller writes the
//! pool's own condition again when its term starts. A running in-cluster provider rewrites the
//! status of the pools it serves without this condition: the Event stays.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use crate::api::conditions::PoolReason;
use crate::api::{GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use crate::controller::error::{describe, status_code};

use super::PoolObject;

/// The condition's message.
pub fn message(lease: &str, holder: &str) -> String {
    format!(
        "another IPAM provider holds and renews {lease} (holder {holder}): ferro-ipam allocates nothing from any pool until it stops (see docs/migration.md) or ferro-ipam runs with --other-provider-check=false"
    )
}

/// Marks the pools while another provider is active: the condition on every round (the other
/// provider may rewrite a pool's status without it), a Warning Event once per pool and activity.
pub struct PoolMarker {
    client: Client,
    /// The namespaced kinds are marked in this namespace only (`--namespace`).
    namespace: Option<String>,
    recorder: Recorder,
    /// The pools that got their Event since another provider became active.
    told: HashSet<String>,
}

impl PoolMarker {
    pub fn new(client: Client, namespace: Option<String>, instance: Option<String>) -> Self {
        let reporter = Reporter { controller: "ferro-ipam".into(), instance };
        PoolMarker { recorder: Recorder::new(client.clone(), reporter), client, namespace, told: HashSet::new() }
    }

    /// The other provider is gone: the next activity tells every pool again.
    pub fn reset(&mut self) {
        self.told.clear();
    }

    /// Marks every pool of every kind. Failures are logged and skipped: the ERROR line and the
    /// metric already say the same thing.
    pub async fn mark_all(&mut self, lease: &str, holder: &str, now: Timestamp) {
        let message = message(lease, holder);
        let marked = self.mark::<InClusterIPPool>(&message, now).await
            + self.mark::<GlobalInClusterIPPool>(&message, now).await
            + self.mark::<InClusterPrefixPool>(&message, now).await
            + self.mark::<GlobalInClusterPrefixPool>(&message, now).await;
        if marked > 0 {
            info!(pools = marked, lease, "marked the pools: another IPAM provider is active");
        }
    }

    /// Marks the pools of kind `K`; returns how many conditions were written.
    async fn mark<K: PoolObject>(&mut self, message: &str, now: Timestamp) -> usize {
        let kind = K::kind(&());
        let pools = match K::api(self.client.clone(), self.namespace.as_deref()).list(&ListParams::default()).await {
            Ok(pools) => pools,
            Err(error) => {
                // A kind whose CRD is not installed has no pools to mark.
                if status_code(&error) == Some(404) {
                    debug!(%kind, "not served: no pools to mark");
                } else {
                    warn!(%kind, action = "list", error = %describe(&error), "cannot mark the pools: another IPAM provider is active");
                }
                return 0;
            }
        };
        let mut marked = 0;
        for pool in pools {
            if self.told.insert(pool.key().to_string()) {
                let event = Event {
                    type_: EventType::Warning,
                    reason: PoolReason::OtherProviderActive.as_str().to_owned(),
                    note: Some(crate::api::bounded::truncate(message, crate::api::bounded::EVENT_NOTE)),
                    action: "Reconcile".to_owned(),
                    secondary: None,
                };
                if let Err(error) = self.recorder.publish(&event, &pool.object_ref(&())).await {
                    warn!(pool = %pool.key(), error = %crate::controller::error::describe(&error), "could not record an event");
                }
            }
            marked += usize::from(self.write_condition(&pool, message, now).await);
        }
        marked
    }

    /// Writes the condition unless the pool has it; whether it was written.
    async fn write_condition<K: PoolObject>(&self, pool: &K, message: &str, now: Timestamp) -> bool {
        let previous = pool.status().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
        if previous.is_some_and(|p| p.reason == PoolReason::OtherProviderActive.as_str() && p.message == message) {
            return false;
        }
        let ready = condition(previous, message, now, pool.meta().generation);
        let patch =
            json!({ "metadata": { "resourceVersion": pool.resource_version() }, "status": { "conditions": [ready] } });
        let api = K::api(self.client.clone(), pool.namespace().as_deref());
        match api.patch_status(&pool.name_any(), &crate::controller::write_params(), &Patch::Merge(&patch)).await {
            Ok(_) => true,
            // Changed meanwhile: the next round marks it.
            Err(error) if status_code(&error) == Some(409) => {
                debug!(pool = %pool.key(), "changed while marked");
                false
            }
            Err(error) => {
                warn!(pool = %pool.key(), action = "patch status", error = %describe(&error), "cannot mark the pool: another IPAM provider is active");
                false
            }
        }
    }
}

/// The `Ready` condition that says so, keeping the previous transition time when it was already
/// false.
pub fn condition(previous: Option<&Condition>, message: &str, now: Timestamp, generation: Option<i64>) -> Condition {
    let since = match previous {
        Some(p) if p.status == "False" => p.last_transition_time.clone(),
        _ => Time(now),
    };
    Condition {
        type_: "Ready".to_owned(),
        status: "False".to_owned(),
        reason: PoolReason::OtherProviderActive.as_str().to_owned(),
        message: crate::api::bounded::truncate(message, crate::api::bounded::CONDITION_MESSAGE),
        last_transition_time: since,
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn the_condition_is_false_names_the_lease_and_keeps_an_earlier_transition_to_false() {
        let message = message("Lease ns/l", "pod-a");
        let fresh = condition(None, &message, at(100), Some(3));
        assert_eq!((fresh.status.as_str(), fresh.reason.as_str()), ("False", "OtherProviderActive"));
        assert!(fresh.message.contains("Lease ns/l") && fresh.message.contains("pod-a"), "{}", fresh.message);
        assert_eq!((fresh.last_transition_time.clone(), fresh.observed_generation), (Time(at(100)), Some(3)));

        let was_false = condition(Some(&fresh), &message, at(200), Some(3));
        assert_eq!(was_false.last_transition_time, Time(at(100)), "still false: the transition stays");
        let mut was_true = fresh.clone();
        was_true.status = "True".into();
        assert_eq!(condition(Some(&was_true), &message, at(300), Some(4)).last_transition_time, Time(at(300)));
    }
}
