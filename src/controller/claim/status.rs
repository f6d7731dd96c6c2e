//! Step 4 of the contract: the claim's `status.addressRef` and `Ready` condition, written in the
//! shape of the served API version (pure).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::CapiVersion;
use crate::api::capi::IPAddressClaim;
use crate::api::conditions::ClaimReason;

/// The `Ready` condition a claim should carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub reason: ClaimReason,
    pub message: String,
    /// The reason of the Event when it differs from the condition's (`out-of-vips` and kin).
    pub event_reason: Option<&'static str>,
}

impl Readiness {
    pub fn allocated(address: &str) -> Self {
        Readiness {
            ready: true,
            reason: ClaimReason::Allocated,
            message: format!("allocated {address}"),
            event_reason: None,
        }
    }

    pub fn failed(reason: ClaimReason, message: impl Into<String>) -> Self {
        let message = crate::api::bounded::truncate(&message.into(), crate::api::bounded::CONDITION_MESSAGE);
        Readiness { ready: false, reason, message, event_reason: None }
    }

    pub fn with_event(self, reason: &'static str) -> Self {
        Readiness { event_reason: Some(reason), ..self }
    }

    fn status(&self) -> &'static str {
        if self.ready { "True" } else { "False" }
    }
}

fn is_ready_condition(c: &Value) -> bool {
    c.get("type").and_then(Value::as_str) == Some("Ready")
}

/// Whether a list of conditions already says what `readiness` says.
fn says(conditions: Option<&Vec<Value>>, readiness: &Readiness) -> bool {
    conditions.into_iter().flatten().any(|c| {
        is_ready_condition(c)
            && c.get("status").and_then(Value::as_str) == Some(readiness.status())
            && c.get("reason").and_then(Value::as_str) == Some(readiness.reason.as_str())
            && c.get("message").and_then(Value::as_str) == Some(readiness.message.as_str())
    })
}

/// Replaces the `Ready` entry of `existing`, keeping the others and the transition time when
/// the status did not change.
fn upsert(existing: Option<&Vec<Value>>, mut condition: Value) -> Vec<Value> {
    let mut conditions: Vec<Value> = existing.cloned().unwrap_or_default();
    if let Some(old) = conditions.iter().find(|c| is_ready_condition(c))
        && old.get("status") == condition.get("status")
        && let Some(time) = old.get("lastTransitionTime")
    {
        condition["lastTransitionTime"] = time.clone();
    }
    conditions.retain(|c| !is_ready_condition(c));
    conditions.push(condition);
    conditions
}

/// The merge patch for the claim's status subresource, or None when the status already says it.
pub fn patch(
    version: CapiVersion,
    claim: &IPAddressClaim,
    address_name: Option<&str>,
    readiness: &Readiness,
    now: Timestamp,
) -> Option<Value> {
    let raw = serde_json::to_value(&claim.status).unwrap_or(Value::Null);
    let current_ref = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).map(|r| r.name.as_str());
    let metav1 = json!({
        "type": "Ready",
        "status": readiness.status(),
        "reason": readiness.reason.as_str(),
        "message": readiness.message,
        "lastTransitionTime": now.to_string(),
        "observedGeneration": claim.metadata.generation,
    });
    let mut legacy = json!({
        "type": "Ready",
        "status": readiness.status(),
        "reason": readiness.reason.as_str(),
        "message": readiness.message,
        "lastTransitionTime": now.to_string(),
    });
    if !readiness.ready {
        legacy["severity"] = json!("Warning");
    }
    let mut status = match version {
        CapiVersion::V1Beta2 => {
            let conditions = raw.get("conditions").and_then(Value::as_array);
            if current_ref == address_name && says(conditions, readiness) {
                return None;
            }
            let old = raw.pointer("/deprecated/v1beta1/conditions").and_then(Value::as_array);
            json!({
                "conditions": upsert(conditions, metav1),
                "deprecated": { "v1beta1": { "conditions": upsert(old, legacy) } },
            })
        }
        CapiVersion::V1Beta1 => {
            let conditions = raw.get("conditions").and_then(Value::as_array);
            if current_ref == address_name && says(conditions, readiness) {
                return None;
            }
            let newer = raw.pointer("/v1beta2/conditions").and_then(Value::as_array);
            json!({
                "conditions": upsert(conditions, legacy),
                "v1beta2": { "conditions": upsert(newer, metav1) },
            })
        }
    };
    if let Some(name) = address_name {
        status["addressRef"] = json!({ "name": name });
    }
    Some(json!({ "status": status }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::claim::fixtures::claim;

    fn now() -> Timestamp {
        Timestamp::from_second(1_700_000_000).expect("valid")
    }

    #[test]
    fn v1beta2_status_carries_address_ref_and_metav1_ready() {
        let c = claim("vm-0", "pool");
        let p =
            patch(CapiVersion::V1Beta2, &c, Some("vm-0"), &Readiness::allocated("10.0.0.2"), now()).expect("a patch");
        assert_eq!(p["status"]["addressRef"]["name"], "vm-0");
        let ready = &p["status"]["conditions"][0];
        assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("Ready"), Some("True")));
        assert!(ready.get("severity").is_none());
    }

    #[test]
    fn v1beta1_status_uses_capi_conditions_and_mirrors_metav1_ones() {
        let c = claim("vm-0", "pool");
        let failed = Readiness::failed(ClaimReason::PoolExhausted, "pool is full");
        let p = patch(CapiVersion::V1Beta1, &c, None, &failed, now()).expect("a patch");
        assert_eq!(p["status"]["conditions"][0]["severity"], "Warning");
        assert_eq!(p["status"]["conditions"][0]["reason"], "PoolExhausted");
        assert_eq!(p["status"]["v1beta2"]["conditions"][0]["status"], "False");
        assert!(p["status"].get("addressRef").is_none());
    }

    #[test]
    fn unchanged_status_is_not_written_again() {
        let mut c = claim("vm-0", "pool");
        let readiness = Readiness::allocated("10.0.0.2");
        let p = patch(CapiVersion::V1Beta2, &c, Some("vm-0"), &readiness, now()).expect("a patch");
        c.status = serde_json::from_value(p["status"].clone()).expect("status parses");
        assert_eq!(patch(CapiVersion::V1Beta2, &c, Some("vm-0"), &readiness, now()), None);
        let other = Readiness::failed(ClaimReason::PoolNotReady, "gone");
        assert!(patch(CapiVersion::V1Beta2, &c, Some("vm-0"), &other, now()).is_some());
    }

    #[test]
    fn other_conditions_are_kept_and_transition_time_survives_same_status() {
        let mut c = claim("vm-0", "pool");
        c.status = serde_json::from_value(json!({
            "conditions": [
                {"type": "Other", "status": "True", "reason": "X", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "PoolExhausted", "message": "full", "lastTransitionTime": "2020-01-01T00:00:00Z"}
            ]
        }))
        .expect("status parses");
        let p =
            patch(CapiVersion::V1Beta2, &c, None, &Readiness::failed(ClaimReason::PoolExhausted, "still full"), now())
                .expect("a patch");
        let conditions = p["status"]["conditions"].as_array().cloned().unwrap_or_default();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0]["type"], "Other");
        assert_eq!(conditions[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    }
}
