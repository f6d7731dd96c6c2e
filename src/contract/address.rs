//! Step 3 of the contract: the `IPAddress` a claim should have, and what adopting an existing
//! one takes (pure).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::api::CapiVersion;
use crate::api::capi::{AddressSpec, IPAddress, IPAddressClaim, LocalReference, PoolReference};
use crate::api::keys::{ALLOCATED_FROM_ANNOTATION, CLUSTER_NAME_LABEL, IPAM_GROUP, PROTECT_ADDRESS_FINALIZER};
use crate::index::PoolKey;

/// What the pool contributes to an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSide {
    pub key: PoolKey,
    /// The purpose reference of the claim, when the pool was chosen by its labels: the
    /// address's `poolRef` repeats it (CAPI requires the claim's), and an annotation names the pool.
    pub via: Option<PoolReference>,
    pub uid: String,
    pub prefix: i32,
    pub gateway: Option<String>,
}

fn claim_owner(claim: &IPAddressClaim, capi: CapiVersion) -> OwnerReference {
    let claim_resource = capi.claim_resource();
    OwnerReference {
        api_version: claim_resource.api_version.clone(),
        kind: claim_resource.kind.clone(),
        name: claim.name_any(),
        uid: claim.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn pool_owner(pool: &PoolSide) -> OwnerReference {
    OwnerReference {
        api_version: format!("{IPAM_GROUP}/v1alpha2"),
        kind: pool.key.kind.as_str().to_owned(),
        name: pool.key.name.clone(),
        uid: pool.uid.clone(),
        controller: Some(false),
        block_owner_deletion: Some(true),
    }
}

/// The `IPAddress` to create for a claim: same name and namespace, both owner references, the
/// protecting finalizer and the cluster-name label.
pub fn desired(
    claim: &IPAddressClaim,
    capi: CapiVersion,
    pool: &PoolSide,
    ip: IpAddr,
    cluster: Option<&str>,
) -> IPAddress {
    let mut address = IPAddress::new(
        &claim.name_any(),
        &capi.address_resource(),
        AddressSpec {
            claim_ref: LocalReference { name: claim.name_any() },
            pool_ref: match &pool.via {
                Some(via) => PoolReference { api_group: Some(IPAM_GROUP.to_owned()), ..via.clone() },
                None => PoolReference {
                    api_group: Some(IPAM_GROUP.to_owned()),
                    kind: pool.key.kind.as_str().to_owned(),
                    name: pool.key.name.clone(),
                },
            },
            address: ip.to_string(),
            prefix: pool.prefix,
            gateway: pool.gateway.clone(),
        },
    );
    address.metadata = ObjectMeta {
        name: Some(claim.name_any()),
        namespace: claim.namespace(),
        labels: cluster.map(|c| BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), c.to_owned())])),
        annotations: pool
            .via
            .as_ref()
            .map(|_| BTreeMap::from([(ALLOCATED_FROM_ANNOTATION.to_owned(), pool.key.annotation_value())])),
        finalizers: Some(vec![PROTECT_ADDRESS_FINALIZER.to_owned()]),
        owner_references: Some(vec![claim_owner(claim, capi), pool_owner(pool)]),
        ..ObjectMeta::default()
    };
    address
}

/// Whether an `IPAddress` names the claim in its `claimRef`.
pub fn names(address: &IPAddress, claim: &IPAddressClaim) -> bool {
    address.spec.claim_ref.name == claim.name_any()
}

/// Whether an existing `IPAddress` of the claim's name records an address of the claim's pool.
pub fn belongs_to(address: &IPAddress, claim: &IPAddressClaim, pool: &PoolKey) -> bool {
    names(address, claim)
        && PoolKey::of_address(&address.namespace().unwrap_or_default(), &address.spec.pool_ref, address.annotations())
            .as_ref()
            == Some(pool)
}

/// The metadata patch that adopts an existing `IPAddress`: owner references to the claim and the
/// pool, the protecting finalizer, the cluster-name label. Foreign owner references are kept; the
/// claim becomes the controller unless another owner already is. None when nothing is missing.
pub fn adoption_patch(
    address: &IPAddress,
    claim: &IPAddressClaim,
    capi: CapiVersion,
    pool: &PoolSide,
    cluster: Option<&str>,
) -> Option<Value> {
    let mut owners = address.owner_references().to_vec();
    let mut changed = false;
    let claim_uid = claim.uid().unwrap_or_default();
    if !owners.iter().any(|o| o.uid == claim_uid) {
        let mut owner = claim_owner(claim, capi);
        if owners.iter().any(|o| o.controller == Some(true)) {
            owner.controller = Some(false);
        }
        owners.push(owner);
        changed = true;
    }
    if !pool.uid.is_empty() && !owners.iter().any(|o| o.uid == pool.uid) {
        owners.push(pool_owner(pool));
        changed = true;
    }
    let mut finalizers = address.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == PROTECT_ADDRESS_FINALIZER) {
        finalizers.push(PROTECT_ADDRESS_FINALIZER.to_owned());
        changed = true;
    }
    let mut metadata = json!({
        "resourceVersion": address.resource_version(),
        "ownerReferences": owners,
        "finalizers": finalizers,
    });
    if let Some(cluster) = cluster
        && address.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) != Some(cluster)
    {
        metadata["labels"] = json!({ CLUSTER_NAME_LABEL: cluster });
        changed = true;
    }
    changed.then(|| json!({ "metadata": metadata }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CapiVersion;
    use crate::fixtures::claim;

    fn pool() -> PoolSide {
        PoolSide {
            key: PoolKey::in_cluster("ns", "pool"),
            via: None,
            uid: "pool-uid".into(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
        }
    }

    #[test]
    fn address_is_named_after_the_claim_and_owned_by_claim_and_pool() {
        let v = CapiVersion::V1Beta2;
        let c = claim("vm-0", "pool");
        let a = desired(&c, v, &pool(), "10.0.0.7".parse().unwrap(), Some("wl"));
        assert_eq!(a.name_any(), "vm-0");
        assert_eq!(a.namespace().as_deref(), Some("ns"));
        assert_eq!(a.spec.address, "10.0.0.7");
        assert_eq!(a.spec.prefix, 24);
        assert_eq!(a.spec.gateway.as_deref(), Some("10.0.0.1"));
        assert_eq!(a.spec.pool_ref.api_group.as_deref(), Some(IPAM_GROUP));
        assert_eq!(a.finalizers(), [PROTECT_ADDRESS_FINALIZER]);
        assert_eq!(a.labels().get(CLUSTER_NAME_LABEL).map(String::as_str), Some("wl"));
        let owners = a.owner_references();
        assert_eq!(owners.len(), 2);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].controller, owners[0].block_owner_deletion),
            ("IPAddressClaim", Some(true), Some(true))
        );
        assert_eq!(
            (owners[1].kind.as_str(), owners[1].controller, owners[1].block_owner_deletion),
            ("InClusterIPPool", Some(false), Some(true))
        );
    }

    #[test]
    fn adopting_a_bare_address_adds_owners_finalizer_and_label() {
        let v = CapiVersion::V1Beta2;
        let c = claim("vm-0", "pool");
        let mut bare = desired(&c, v, &pool(), "10.0.0.7".parse().unwrap(), None);
        bare.metadata.owner_references = None;
        bare.metadata.finalizers = None;
        let patch = adoption_patch(&bare, &c, v, &pool(), Some("wl")).expect("something to adopt");
        assert_eq!(patch["metadata"]["ownerReferences"].as_array().map(Vec::len), Some(2));
        assert_eq!(patch["metadata"]["finalizers"], json!([PROTECT_ADDRESS_FINALIZER]));
        assert_eq!(patch["metadata"]["labels"][CLUSTER_NAME_LABEL], "wl");
    }

    #[test]
    fn adopting_keeps_a_foreign_controller_and_adds_the_claim_as_plain_owner() {
        let v = CapiVersion::V1Beta2;
        let c = claim("vm-0", "pool");
        let mut foreign = desired(&c, v, &pool(), "10.0.0.7".parse().unwrap(), None);
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Other".into(),
            name: "o".into(),
            uid: "other-uid".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        let patch = adoption_patch(&foreign, &c, v, &pool(), None).expect("something to adopt");
        let owners = patch["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
        assert_eq!(owners.len(), 3);
        assert_eq!(owners[0]["uid"], "other-uid");
        assert_eq!(owners[1]["controller"], false);
    }

    #[test]
    fn an_address_that_is_already_ours_needs_no_patch() {
        let v = CapiVersion::V1Beta2;
        let c = claim("vm-0", "pool");
        let a = desired(&c, v, &pool(), "10.0.0.7".parse().unwrap(), Some("wl"));
        assert_eq!(adoption_patch(&a, &c, v, &pool(), Some("wl")), None);
    }
}
