//! The pool CRDs, generated from the Rust types: `ferro-ipam crds` prints them and `crds/`
//! holds that output (a test fails when it is stale).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{CustomResourceDefinition, ValidationRule};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;
use std::collections::BTreeMap;

use super::keys::{GLOBAL_IN_CLUSTER_IP_POOL, GLOBAL_IN_CLUSTER_PREFIX_POOL, MOVE_HIERARCHY_LABEL, RESERVED_NAMES};
use super::pool::InClusterIPPool;
use super::prefix_pool::InClusterPrefixPool;

/// The retired `v1alpha1` shape, kept in the CRD (not served) so that the API server accepts the
/// CRD on clusters whose `status.storedVersions` still lists it (upgraded from the in-cluster
/// provider). Nothing reads or writes it.
mod v1alpha1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
    #[kube(
        group = "ipam.cluster.x-k8s.io",
        version = "v1alpha1",
        kind = "InClusterIPPool",
        root = "InClusterIPPoolV1Alpha1",
        namespaced,
        category = "cluster-api",
        status = "crate::api::pool::IPPoolStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct Spec {
        pub addresses: Option<Vec<String>>,
        pub subnet: Option<String>,
        pub start: Option<String>,
        pub end: Option<String>,
        #[schemars(range(max = 128))]
        pub prefix: Option<i32>,
        pub gateway: Option<String>,
    }
}

/// The `InClusterIPPool` CRD: `v1alpha2` served and stored, `v1alpha1` kept but not served.
pub fn in_cluster_ip_pool() -> CustomResourceDefinition {
    let mut crd = ip_pool();
    refuse_namespace_selector(&mut crd, "InClusterIPPool", GLOBAL_IN_CLUSTER_IP_POOL);
    crd
}

/// The IP pool CRD both kinds start from.
fn ip_pool() -> CustomResourceDefinition {
    let mut old = v1alpha1::InClusterIPPoolV1Alpha1::crd();
    for version in &mut old.spec.versions {
        version.served = false;
        version.storage = false;
        version.deprecated = Some(true);
        version.deprecation_warning =
            Some("ipam.cluster.x-k8s.io/v1alpha1 pools are not served; use v1alpha2".to_owned());
    }
    let mut crd =
        merge_crds(vec![old, InClusterIPPool::crd()], "v1alpha2").expect("both versions describe the same kind");
    crd.metadata.labels = Some(BTreeMap::from([(MOVE_HIERARCHY_LABEL.to_owned(), String::new())]));
    reserve_purpose_names(&mut crd);
    crd
}

/// A `poolRef` to `cluster-api-vips` or `cluster-api-vm-ips` asks for any pool labelled for
/// that purpose, so no pool may be called so.
fn reserve_purpose_names(crd: &mut CustomResourceDefinition) {
    let names = RESERVED_NAMES.map(|n| format!("'{n}'")).join(", ");
    let rule = ValidationRule {
        rule: format!("!(self.metadata.name in [{names}])"),
        message: Some(format!(
            "metadata.name: {} are reserved: a claim's poolRef with such a name asks for any pool labelled for that purpose; \
             give the pool another name and label it {}: \"true\" instead",
            RESERVED_NAMES.join(" and "),
            RESERVED_NAMES.join(" or ")
        )),
        ..ValidationRule::default()
    };
    add_root_rule(crd, rule);
}

/// A namespaced pool serves the claims of its own namespace only: `spec.namespaceSelector`,
/// which only the global kinds read, is refused rather than silently ignored.
fn refuse_namespace_selector(crd: &mut CustomResourceDefinition, kind: &str, global: &str) {
    let rule = ValidationRule {
        rule: "!has(self.spec) || !has(self.spec.namespaceSelector)".to_owned(),
        message: Some(format!(
            "spec.namespaceSelector: an {kind} serves the claims of its own namespace only; \
             set the selector on a {global} instead"
        )),
        ..ValidationRule::default()
    };
    add_root_rule(crd, rule);
}

/// Adds a CEL rule on the whole object to every served version.
fn add_root_rule(crd: &mut CustomResourceDefinition, rule: ValidationRule) {
    for version in crd.spec.versions.iter_mut().filter(|v| v.served) {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.x_kubernetes_validations.get_or_insert_with(Vec::new).push(rule.clone());
        }
    }
}

/// The `GlobalInClusterIPPool` CRD: the same schema, cluster-scoped.
pub fn global_in_cluster_ip_pool() -> CustomResourceDefinition {
    let mut crd = ip_pool();
    crd.metadata.name = Some("globalinclusterippools.ipam.cluster.x-k8s.io".to_owned());
    crd.spec.scope = "Cluster".to_owned();
    let names = &mut crd.spec.names;
    names.kind = GLOBAL_IN_CLUSTER_IP_POOL.to_owned();
    names.list_kind = Some(format!("{GLOBAL_IN_CLUSTER_IP_POOL}List"));
    names.plural = "globalinclusterippools".to_owned();
    names.singular = Some("globalinclusterippool".to_owned());
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.description = Some(
                "GlobalInClusterIPPool is a cluster-scoped pool: IPAddressClaims in any namespace may reference it."
                    .to_owned(),
            );
        }
    }
    crd
}

/// The `InClusterPrefixPool` CRD: `v1alpha2` only, as the in-cluster provider serves it.
pub fn in_cluster_prefix_pool() -> CustomResourceDefinition {
    let mut crd = prefix_pool();
    refuse_namespace_selector(&mut crd, "InClusterPrefixPool", GLOBAL_IN_CLUSTER_PREFIX_POOL);
    crd
}

/// The prefix pool CRD both kinds start from.
fn prefix_pool() -> CustomResourceDefinition {
    let mut crd = InClusterPrefixPool::crd();
    crd.metadata.labels = Some(BTreeMap::from([(MOVE_HIERARCHY_LABEL.to_owned(), String::new())]));
    crd
}

/// The `GlobalInClusterPrefixPool` CRD: the same schema, cluster-scoped.
pub fn global_in_cluster_prefix_pool() -> CustomResourceDefinition {
    let mut crd = prefix_pool();
    crd.metadata.name = Some("globalinclusterprefixpools.ipam.cluster.x-k8s.io".to_owned());
    crd.spec.scope = "Cluster".to_owned();
    let names = &mut crd.spec.names;
    names.kind = GLOBAL_IN_CLUSTER_PREFIX_POOL.to_owned();
    names.list_kind = Some(format!("{GLOBAL_IN_CLUSTER_PREFIX_POOL}List"));
    names.plural = "globalinclusterprefixpools".to_owned();
    names.singular = Some("globalinclusterprefixpool".to_owned());
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.description = Some(
                "GlobalInClusterPrefixPool is a cluster-scoped prefix pool: IPAddressClaims in any namespace may \
                 reference it."
                    .to_owned(),
            );
        }
    }
    crd
}

/// The `AddressBlock` CRD a hub keeps its spokes' blocks in.
pub fn address_block() -> CustomResourceDefinition {
    super::hub::AddressBlock::crd()
}

/// Each CRD as a YAML document, with the file name it has under `crds/`.
pub fn files() -> Vec<(String, String)> {
    [
        in_cluster_ip_pool(),
        global_in_cluster_ip_pool(),
        in_cluster_prefix_pool(),
        global_in_cluster_prefix_pool(),
        address_block(),
    ]
    .iter()
    .map(|crd| {
        let name = format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("crd"));
        (name, format!("---\n{}", serde_saphyr::to_string(crd).expect("a CRD serializes to YAML")))
    })
    .collect()
}

/// Every CRD, as the multi-document YAML that `ferro-ipam crds` prints.
pub fn all_yaml() -> String {
    files().into_iter().map(|(_, yaml)| yaml).collect()
}
