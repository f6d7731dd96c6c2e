//! The Cluster API contract under test, chosen once per process from the environment. The plane
//! installs its CRDs, and the scenarios and the checker read and write objects at its version.

use ferro_ipam::api::CapiVersion;

/// The Cluster API contract the e2e control plane installs: `v1beta2` (Cluster API 1.14's CRDs),
/// or `v1beta1` with `FERRO_IPAM_E2E_CAPI=v1beta1` (Cluster API 1.10's, where `IPAddressClaim`,
/// `IPAddress` and `Cluster` are served and stored as `v1beta1` only). Scenarios write their
/// claims, addresses and Clusters at this version.
pub fn capi() -> CapiVersion {
    static CHOSEN: std::sync::OnceLock<CapiVersion> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| match std::env::var("FERRO_IPAM_E2E_CAPI").as_deref() {
        Err(_) | Ok("" | "v1beta2") => CapiVersion::V1Beta2,
        Ok("v1beta1") => CapiVersion::V1Beta1,
        Ok(other) => panic!("FERRO_IPAM_E2E_CAPI={other}: the e2e suite runs the v1beta2 or the v1beta1 contract"),
    })
}

/// `ipam.cluster.x-k8s.io/<version>` of the contract under test.
pub fn ipam_api_version() -> String {
    capi().claim_resource().api_version
}

/// `cluster.x-k8s.io/<version>` of the contract under test.
pub fn cluster_api_version() -> String {
    capi().cluster_resource().api_version
}
