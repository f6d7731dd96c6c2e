//! Objects for the claim controller's unit tests.

use kube::core::ObjectMeta;

use crate::api::CapiVersion;
use crate::api::capi::{ClaimSpec, Cluster, ClusterSpec, IPAddressClaim, PoolReference};
use crate::api::keys::IPAM_GROUP;

/// A v1beta2 claim in namespace `ns` on the InClusterIPPool `pool`.
pub fn claim(name: &str, pool: &str) -> IPAddressClaim {
    let mut claim = IPAddressClaim::new(
        name,
        &CapiVersion::V1Beta2.claim_resource(),
        ClaimSpec {
            cluster_name: None,
            pool_ref: PoolReference {
                api_group: Some(IPAM_GROUP.into()),
                kind: "InClusterIPPool".into(),
                name: pool.into(),
            },
        },
    );
    claim.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("{name}-uid")),
        resource_version: Some("1".into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    claim
}

/// A running Cluster in namespace `ns`.
pub fn cluster(name: &str) -> Cluster {
    let mut cluster = Cluster::new(name, &CapiVersion::V1Beta2.cluster_resource(), ClusterSpec::default());
    cluster.metadata.namespace = Some("ns".into());
    cluster
}
