//! Evaluates a pool CRD's CEL rules locally (kube's CEL validator, no API server).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel;
use serde_json::{Value, json};

/// The `v1alpha2` schema of a CRD.
pub fn schema(crd: &CustomResourceDefinition) -> Value {
    let version = crd.spec.versions.iter().find(|v| v.name == "v1alpha2").expect("v1alpha2 is generated");
    serde_json::to_value(version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
        .expect("schema serializes")
}

/// A namespaced pool of `kind` with `spec`.
pub fn pool(kind: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
        "kind": kind,
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec,
    })
}

/// The messages of every rule `object` breaks (updated from `old`, when given).
pub fn messages(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    match cel::Validator::new().validate(schema, object, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.into_vec().into_iter().map(|e| e.to_string()).collect(),
    }
}
