//! Step 1 of the contract: whether a claim may be worked on now (pure).

use kube::ResourceExt;

use crate::api::capi::{Cluster, IPAddressClaim, cluster_is_paused};
use crate::api::keys::PAUSED_ANNOTATION;
use crate::index::PoolFacts;

/// What is known of the claim's Cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterState {
    /// The claim names no Cluster.
    Unnamed,
    /// The claim names a Cluster that does not exist.
    Missing(String),
    /// The Cluster exists.
    Found { name: String, paused: bool },
}

impl ClusterState {
    pub fn of(name: Option<String>, cluster: Option<&Cluster>) -> Self {
        match (name, cluster) {
            (None, _) => ClusterState::Unnamed,
            (Some(name), None) => ClusterState::Missing(name),
            (Some(name), Some(cluster)) => ClusterState::Found { name, paused: cluster_is_paused(cluster) },
        }
    }
}

/// The verdict of the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Go on.
    Proceed,
    /// Leave the claim alone until something changes; the reason is logged, not written.
    Wait(String),
}

/// Decides whether to work on a claim: paused claims, paused pools, paused Clusters and missing
/// Clusters hold it. A missing Cluster does not hold a claim that is being deleted, so that
/// its address is released.
pub fn gate(claim: &IPAddressClaim, cluster: &ClusterState, pool: Option<&PoolFacts>) -> Gate {
    let deleting = claim.metadata.deletion_timestamp.is_some();
    if claim.annotations().contains_key(PAUSED_ANNOTATION) {
        return Gate::Wait("the claim is paused".into());
    }
    if pool.is_some_and(|p| p.paused) {
        return Gate::Wait("its pool is paused".into());
    }
    match cluster {
        ClusterState::Found { name, paused: true } => Gate::Wait(format!("Cluster {name} is paused")),
        ClusterState::Missing(name) if !deleting => Gate::Wait(format!("Cluster {name} does not exist")),
        _ => Gate::Proceed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::capi::cluster_name;
    use crate::api::keys::CLUSTER_NAME_LABEL;
    use crate::fixtures::{claim, cluster};

    #[test]
    fn claim_names_its_cluster_by_spec_then_label() {
        let mut c = claim("c", "pool");
        assert_eq!(cluster_name(&c), None);
        c.labels_mut().insert(CLUSTER_NAME_LABEL.into(), "from-label".into());
        assert_eq!(cluster_name(&c).as_deref(), Some("from-label"));
        c.spec.cluster_name = Some("from-spec".into());
        assert_eq!(cluster_name(&c).as_deref(), Some("from-spec"));
    }

    #[test]
    fn paused_cluster_holds_the_claim_by_spec_or_annotation() {
        let mut paused = cluster("wl");
        paused.spec.paused = Some(true);
        let state = ClusterState::of(Some("wl".into()), Some(&paused));
        assert!(matches!(gate(&claim("c", "p"), &state, None), Gate::Wait(_)));

        let mut annotated = cluster("wl");
        annotated.annotations_mut().insert(PAUSED_ANNOTATION.into(), String::new());
        let state = ClusterState::of(Some("wl".into()), Some(&annotated));
        assert!(matches!(gate(&claim("c", "p"), &state, None), Gate::Wait(_)));

        let running = ClusterState::of(Some("wl".into()), Some(&cluster("wl")));
        assert_eq!(gate(&claim("c", "p"), &running, None), Gate::Proceed);
    }

    #[test]
    fn missing_cluster_holds_allocation_but_not_release() {
        let state = ClusterState::Missing("gone".into());
        let mut c = claim("c", "p");
        assert!(matches!(gate(&c, &state, None), Gate::Wait(_)));
        c.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(gate(&c, &state, None), Gate::Proceed);
    }

    #[test]
    fn paused_claim_or_pool_holds_the_claim() {
        let mut c = claim("c", "p");
        c.annotations_mut().insert(PAUSED_ANNOTATION.into(), String::new());
        assert!(matches!(gate(&c, &ClusterState::Unnamed, None), Gate::Wait(_)));
        let pool = PoolFacts { paused: true, ..PoolFacts::default() };
        assert!(matches!(gate(&claim("c", "p"), &ClusterState::Unnamed, Some(&pool)), Gate::Wait(_)));
    }
}
