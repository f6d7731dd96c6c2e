//! Adding and dropping a finalizer, as merge patches guarded by the resource version (pure).

use kube::Resource;
use serde_json::{Value, json};

/// The patch that drops one finalizer, guarded by the object's resource version.
pub fn without_finalizer<K: Resource>(object: &K, finalizer: &str) -> Option<Value> {
    let finalizers = object.meta().finalizers.as_deref().unwrap_or_default();
    if !finalizers.iter().any(|f| f == finalizer) {
        return None;
    }
    let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
    Some(json!({ "metadata": { "resourceVersion": object.meta().resource_version, "finalizers": kept } }))
}

/// The patch that adds one finalizer, guarded by the object's resource version.
pub fn with_finalizer<K: Resource>(object: &K, finalizer: &str) -> Option<Value> {
    let finalizers = object.meta().finalizers.as_deref().unwrap_or_default();
    if finalizers.iter().any(|f| f == finalizer) {
        return None;
    }
    let mut all = finalizers.to_vec();
    all.push(finalizer.to_owned());
    Some(json!({ "metadata": { "resourceVersion": object.meta().resource_version, "finalizers": all } }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::claim;

    #[test]
    fn finalizer_patches_are_idempotent() {
        let mut c = claim("vm-0", "pool");
        assert!(with_finalizer(&c, "x/y").is_some());
        c.metadata.finalizers = Some(vec!["x/y".into(), "other".into()]);
        assert!(with_finalizer(&c, "x/y").is_none());
        assert_eq!(without_finalizer(&c, "x/y").unwrap()["metadata"]["finalizers"], json!(["other"]));
        assert!(without_finalizer(&c, "absent").is_none());
    }

    #[test]
    fn patches_do_not_depend_on_managed_fields_which_the_caches_drop() {
        let mut lean = claim("vm-0", "pool");
        lean.metadata.resource_version = Some("42".into());
        let mut full = lean.clone();
        full.metadata.managed_fields =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry::default()]);
        assert_eq!(with_finalizer(&lean, "x/y"), with_finalizer(&full, "x/y"));
        assert_eq!(with_finalizer(&lean, "x/y").unwrap()["metadata"]["resourceVersion"], "42");
        lean.metadata.finalizers = Some(vec!["x/y".into()]);
        full.metadata.finalizers = Some(vec!["x/y".into()]);
        assert_eq!(without_finalizer(&lean, "x/y"), without_finalizer(&full, "x/y"));
    }
}
