//! Which infrastructure provider a claim belongs to: the `cluster.x-k8s.io/provider` label on
//! the CRD of its owner's kind, as clusterctl installs every provider's CRDs. A claim owned by
//! a `Cluster` (its control-plane VIP) belongs to the provider of the Cluster's infrastructure.
//! Looked up on demand through discovery and a metadata read of the CRD, and cached.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::discovery::Discovery;
use kube::{Api, Client, ResourceExt};
use tracing::{debug, warn};

use crate::api::capi::{Cluster, IPAddressClaim};
use crate::api::keys::{CLUSTER_GROUP, PROVIDER_LABEL};
use crate::sync::lock;

/// How long a looked-up provider is trusted; CRD labels change only when a provider is installed.
const FRESH_FOR: Duration = Duration::from_secs(300);
/// How long a failed lookup is remembered before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// A kind by API group and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl GroupKind {
    /// From an `apiVersion` (`group/version`, or `v1` for the core group) and a kind.
    pub fn of_api_version(api_version: &str, kind: &str) -> Self {
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
        GroupKind { group: group.to_owned(), kind: kind.to_owned() }
    }
}

/// The kind whose CRD names a claim's provider: its controlling owner's (else its first
/// owner's), or, for a claim owned by a Cluster, the Cluster's infrastructure kind.
pub fn provider_kind(claim: &IPAddressClaim, cluster: Option<&Cluster>) -> Option<GroupKind> {
    let owners = claim.owner_references();
    let owner = owners.iter().find(|o| o.controller == Some(true)).or_else(|| owners.first())?;
    let kind = GroupKind::of_api_version(&owner.api_version, &owner.kind);
    if kind.group == CLUSTER_GROUP && kind.kind == "Cluster" {
        return cluster.filter(|c| c.name_any() == owner.name).and_then(infrastructure_kind);
    }
    Some(kind)
}

/// The kind of a Cluster's `spec.infrastructureRef` (v1beta2 `apiGroup`, v1beta1 `apiVersion`).
pub fn infrastructure_kind(cluster: &Cluster) -> Option<GroupKind> {
    let reference = cluster.spec.infrastructure_ref.as_ref()?;
    let kind = reference.kind.clone().filter(|k| !k.is_empty())?;
    let group = match (&reference.api_group, &reference.api_version) {
        (Some(group), _) => group.clone(),
        (None, Some(version)) => GroupKind::of_api_version(version, &kind).group,
        (None, None) => return None,
    };
    Some(GroupKind { group, kind })
}

/// Looks providers up and caches them.
pub struct Providers {
    client: Client,
    cache: Mutex<HashMap<GroupKind, (Option<String>, Instant)>>,
}

impl Providers {
    pub fn new(client: Client) -> Self {
        Providers { client, cache: Mutex::default() }
    }

    /// The provider label on the CRD of `kind`; None when the kind is not a CRD, carries no
    /// label, or cannot be looked up (logged).
    pub async fn of_kind(&self, kind: &GroupKind) -> Option<String> {
        if let Some((provider, until)) = lock(&self.cache).get(kind)
            && Instant::now() < *until
        {
            return provider.clone();
        }
        let (provider, fresh_for) = match self.look_up(kind).await {
            Ok(provider) => (provider, FRESH_FOR),
            Err(error) => {
                warn!(group = %kind.group, kind = %kind.kind, %error, "could not look up the provider of a claim's owner kind");
                (None, RETRY_AFTER)
            }
        };
        debug!(group = %kind.group, kind = %kind.kind, ?provider, "provider of a kind");
        lock(&self.cache).insert(kind.clone(), (provider.clone(), Instant::now() + fresh_for));
        provider
    }

    async fn look_up(&self, kind: &GroupKind) -> Result<Option<String>, kube::Error> {
        if kind.group.is_empty() {
            return Ok(None);
        }
        let discovery = Discovery::new(self.client.clone()).filter(&[kind.group.as_str()]).run().await?;
        let Some((resource, _)) = discovery.get(&kind.group).and_then(|g| g.recommended_kind(&kind.kind)) else {
            return Ok(None);
        };
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crd = crds.get_metadata_opt(&format!("{}.{}", resource.plural, kind.group)).await?;
        Ok(crd.and_then(|crd| crd.labels().get(PROVIDER_LABEL).cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{claim, cluster};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owner(api_version: &str, kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("{name}-uid"),
            controller: Some(controller),
            block_owner_deletion: None,
        }
    }

    #[test]
    fn the_controlling_owner_names_the_kind() {
        let mut c = claim("vm-0", "cluster-api-vm-ips");
        assert_eq!(provider_kind(&c, None), None);
        c.metadata.owner_references = Some(vec![
            owner("example.com/v1", "Other", "o", false),
            owner("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", "vm-0", true),
        ]);
        let expected = GroupKind { group: "infrastructure.cluster.x-k8s.io".into(), kind: "VSphereVM".into() };
        assert_eq!(provider_kind(&c, None), Some(expected));
    }

    #[test]
    fn a_claim_owned_by_its_cluster_takes_the_infrastructure_kind() {
        let mut c = claim("wl-control-plane-vip", "cluster-api-vips");
        c.metadata.owner_references = Some(vec![owner("cluster.x-k8s.io/v1beta2", "Cluster", "wl", true)]);
        let mut wl = cluster("wl");
        wl.spec.infrastructure_ref = Some(crate::api::capi::InfrastructureReference {
            api_group: Some("infrastructure.cluster.x-k8s.io".into()),
            api_version: None,
            kind: Some("ProxmoxCluster".into()),
        });
        let expected = GroupKind { group: "infrastructure.cluster.x-k8s.io".into(), kind: "ProxmoxCluster".into() };
        assert_eq!(provider_kind(&c, Some(&wl)), Some(expected.clone()));
        wl.spec.infrastructure_ref = Some(crate::api::capi::InfrastructureReference {
            api_group: None,
            api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha1".into()),
            kind: Some("ProxmoxCluster".into()),
        });
        assert_eq!(provider_kind(&c, Some(&wl)), Some(expected));
        assert_eq!(provider_kind(&c, None), None);
    }
}
