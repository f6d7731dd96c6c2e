//! Step 4 of the contract: the claim's `status.addressRef` and `Ready` condition, written in the
//! shape of the served API version (pure).

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::api::CapiVersion;
use crate::api::capi::{Condition, IPAddressClaim};
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

const READY: &str = "Ready";

/// Whether a list of conditions already says what `readiness` says.
fn says(conditions: &[Condition], readiness: &Readiness) -> bool {
    conditions.iter().any(|c| {
        c.type_ == READY
            && c.status == readiness.status()
            && c.reason.as_deref() == Some(readiness.reason.as_str())
            && c.message.as_deref() == Some(readiness.message.as_str())
    })
}

/// Replaces the `Ready` entry of `existing`, keeping the others and the transition time when
/// the status did not change.
fn upsert(existing: &[Condition], mut condition: Condition) -> Vec<Condition> {
    let mut conditions = existing.to_vec();
    if let Some(old) = conditions.iter().find(|c| c.type_ == READY)
        && old.status == condition.status
        && old.last_transition_time.is_some()
    {
        condition.last_transition_time = old.last_transition_time.clone();
    }
    conditions.retain(|c| c.type_ != READY);
    conditions.push(condition);
    conditions
}

/// The merge patch for the claim's status subresource, or None when the status already says it.
///
/// The conditions of the other shape (`deprecated.v1beta1` on `v1beta2`, `v1beta2` on
/// `v1beta1`) are not cached: their `Ready` entry is written whole each time.
pub fn patch(
    version: CapiVersion,
    claim: &IPAddressClaim,
    address_name: Option<&str>,
    readiness: &Readiness,
    now: Timestamp,
) -> Option<Value> {
    let conditions: &[Condition] = claim.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let current_ref = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).map(|r| r.name.as_str());
    if current_ref == address_name && says(conditions, readiness) {
        return None;
    }
    let ready = Condition {
        type_: READY.to_owned(),
        status: readiness.status().to_owned(),
        reason: Some(readiness.reason.as_str().to_owned()),
        message: Some(readiness.message.clone()),
        last_transition_time: Some(now.to_string()),
        ..Condition::default()
    };
    let metav1 = Condition { observed_generation: claim.metadata.generation, ..ready.clone() };
    let legacy = Condition { severity: (!readiness.ready).then(|| "Warning".to_owned()), ..ready };
    let mut status = match version {
        CapiVersion::V1Beta2 => json!({
            "conditions": upsert(conditions, metav1),
            "deprecated": { "v1beta1": { "conditions": upsert(&[], legacy) } },
        }),
        CapiVersion::V1Beta1 => json!({
            "conditions": upsert(conditions, legacy),
            "v1beta2": { "conditions": upsert(&[], metav1) },
        }),
    };
    if let Some(name) = address_name {
        status["addressRef"] = json!({ "name": name });
    }
    Some(json!({ "status": status }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::claim;

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
