//! Cluster API's `IPAddressClaim`, `IPAddress` and `Cluster`, as typed objects whose API
//! version is chosen at start-up by discovery (`v1beta2` since CAPI 1.11, `v1beta1` before).
//!
//! Only the fields ferro-ipam reads or writes are typed; CAPI owns these CRDs.

use kube::core::{ApiResource, GroupVersionKind, Object};
use serde::{Deserialize, Serialize};

use kube::ResourceExt;

use super::keys::{CLUSTER_GROUP, CLUSTER_NAME_LABEL, IPAM_GROUP, PAUSED_ANNOTATION};

/// The CAPI API version the claims, addresses and clusters are served at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapiVersion {
    /// CAPI 1.6 - 1.10: conditions in CAPI's own shape, metav1 conditions under `status.v1beta2`.
    V1Beta1,
    /// CAPI 1.11 and later: metav1 conditions, all of `poolRef` required.
    V1Beta2,
}

impl CapiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            CapiVersion::V1Beta1 => "v1beta1",
            CapiVersion::V1Beta2 => "v1beta2",
        }
    }

    /// The newest version ferro-ipam speaks among those the API server serves.
    pub fn choose(served: &[String]) -> Option<CapiVersion> {
        [CapiVersion::V1Beta2, CapiVersion::V1Beta1].into_iter().find(|v| served.iter().any(|s| s == v.as_str()))
    }

    fn resource(self, group: &str, kind: &str, plural: &str) -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, self.as_str(), kind), plural)
    }

    pub fn claim_resource(self) -> ApiResource {
        self.resource(IPAM_GROUP, "IPAddressClaim", "ipaddressclaims")
    }

    pub fn address_resource(self) -> ApiResource {
        self.resource(IPAM_GROUP, "IPAddress", "ipaddresses")
    }

    pub fn cluster_resource(self) -> ApiResource {
        self.resource(CLUSTER_GROUP, "Cluster", "clusters")
    }
}

/// `spec.poolRef` of a claim or address. `apiGroup` may be missing on `v1beta1` objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct PoolReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    pub kind: String,
    pub name: String,
}

/// A reference by name to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalReference {
    #[serde(default)]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    pub pool_ref: PoolReference,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<LocalReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A condition in either of the shapes a claim's `status.conditions` takes: metav1's
/// (`observedGeneration`, on `v1beta2`) or Cluster API's own (`severity`, on `v1beta1`). Every
/// field of both is kept, so a list read and written back loses nothing; a field missing on the
/// server stays missing. Typed rather than kept as JSON: a JSON map costs about three times the
/// memory in every cached claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AddressSpec {
    pub claim_ref: LocalReference,
    pub pool_ref: PoolReference,
    pub address: String,
    pub prefix: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// `IPAddress` has no status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NoStatus {}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<InfrastructureReference>,
}

/// A Cluster's `spec.infrastructureRef`: `apiGroup` in v1beta2, `apiVersion` in v1beta1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ApiEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

pub type IPAddressClaim = Object<ClaimSpec, ClaimStatus>;
pub type IPAddress = Object<AddressSpec, NoStatus>;
pub type Cluster = Object<ClusterSpec, serde_json::Value>;

/// Whether a Cluster is paused, by `spec.paused` or the annotation.
pub fn cluster_is_paused(cluster: &Cluster) -> bool {
    cluster.spec.paused.unwrap_or(false) || cluster.annotations().contains_key(PAUSED_ANNOTATION)
}

/// The Cluster a claim belongs to: `spec.clusterName`, else the cluster-name label.
pub fn cluster_name(claim: &IPAddressClaim) -> Option<String> {
    claim
        .spec
        .cluster_name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| claim.labels().get(CLUSTER_NAME_LABEL).cloned().filter(|n| !n.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_served_version_is_chosen() {
        let both = vec!["v1alpha1".to_owned(), "v1beta1".to_owned(), "v1beta2".to_owned()];
        assert_eq!(CapiVersion::choose(&both), Some(CapiVersion::V1Beta2));
        let old = vec!["v1alpha1".to_owned(), "v1beta1".to_owned()];
        assert_eq!(CapiVersion::choose(&old), Some(CapiVersion::V1Beta1));
        assert_eq!(CapiVersion::choose(&["v1alpha1".to_owned()]), None);
    }

    #[test]
    fn v1beta1_claim_without_api_group_parses() {
        let claim: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta1",
            "kind": "IPAddressClaim",
            "metadata": {"name": "vm-0-0", "namespace": "default"},
            "spec": {"poolRef": {"kind": "InClusterIPPool", "name": "pool"}}
        }))
        .expect("a v1beta1 claim parses");
        assert_eq!(claim.spec.pool_ref.api_group, None);
        assert_eq!(claim.spec.pool_ref.name, "pool");
    }

    #[test]
    fn conditions_of_either_shape_are_read_and_written_back_whole() {
        let status = serde_json::json!({
            "addressRef": {"name": "vm-0"},
            "conditions": [
                {"type": "Ready", "status": "False", "severity": "Warning", "reason": "PoolExhausted",
                 "message": "full", "lastTransitionTime": "2020-01-01T00:00:00Z"},
                {"type": "Other", "status": "True", "reason": "X", "message": "",
                 "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": 3},
                {"type": "Odd"},
            ]
        });
        let read: ClaimStatus = serde_json::from_value(status.clone()).expect("every shape parses");
        assert_eq!(read.conditions[0].severity.as_deref(), Some("Warning"));
        assert_eq!(read.conditions[1].observed_generation, Some(3));
        assert_eq!(read.conditions[2].status, "", "a condition missing its status does not fail the claim");
        let written = serde_json::to_value(&read).expect("serialises");
        for n in 0..2 {
            assert_eq!(written["conditions"][n], status["conditions"][n], "nothing is lost or added on the way back");
        }
        assert_eq!(written["conditions"][2], serde_json::json!({"type": "Odd", "status": ""}));
    }
}
