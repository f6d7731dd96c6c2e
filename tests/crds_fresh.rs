//! `crds/` must hold exactly what `ferro-ipam crds` prints: run `make crds` after changing an API type.

use ferro_ipam::api::crdgen;

#[test]
fn committed_crds_match_the_rust_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    for (name, yaml) in crdgen::files() {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        assert!(committed == yaml, "crds/{name} is stale: run `make crds` and commit the result");
    }
}

#[test]
fn both_pool_kinds_keep_v1alpha1_unserved_and_store_v1alpha2() {
    for crd in [crdgen::in_cluster_ip_pool(), crdgen::global_in_cluster_ip_pool()] {
        let versions: Vec<(&str, bool, bool)> =
            crd.spec.versions.iter().map(|v| (v.name.as_str(), v.served, v.storage)).collect();
        assert!(versions.contains(&("v1alpha1", false, false)), "{versions:?}");
        assert!(versions.contains(&("v1alpha2", true, true)), "{versions:?}");
        assert_eq!(crd.spec.names.categories.as_deref(), Some(&["cluster-api".to_owned()][..]));
    }
    assert_eq!(crdgen::global_in_cluster_ip_pool().spec.scope, "Cluster");
}
