//! The CEL rules of ferro-ipam's pool CRDs, evaluated here against pools already stored, for
//! example under the in-cluster provider's CRDs: what the API server would refuse once
//! ferro-ipam's CRDs are installed and the pool is written again.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::{CompiledSchema, Validator, compile_schema};
use serde_json::Value;

use crate::api::crdgen;
use crate::index::PoolKind;

/// The `v1alpha2` schemas of the four pool CRDs, generated from the Rust types as `crds/` is.
pub(crate) struct PoolRules {
    validator: Validator,
    in_cluster: CompiledSchema,
    global: CompiledSchema,
    in_cluster_prefix: CompiledSchema,
    global_prefix: CompiledSchema,
}

fn served_schema(crd: &CustomResourceDefinition) -> Value {
    crd.spec
        .versions
        .iter()
        .find(|v| v.name == "v1alpha2")
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|schema| serde_json::to_value(schema).ok())
        .unwrap_or(Value::Null)
}

impl PoolRules {
    pub(crate) fn new() -> Self {
        PoolRules {
            validator: Validator::new(),
            in_cluster: compile_schema(&served_schema(&crdgen::in_cluster_ip_pool())),
            global: compile_schema(&served_schema(&crdgen::global_in_cluster_ip_pool())),
            in_cluster_prefix: compile_schema(&served_schema(&crdgen::in_cluster_prefix_pool())),
            global_prefix: compile_schema(&served_schema(&crdgen::global_in_cluster_prefix_pool())),
        }
    }

    /// The messages of every rule `pool` (a whole object, as JSON) breaks; empty when it passes.
    pub(crate) fn refusals(&self, kind: PoolKind, pool: &Value) -> Vec<String> {
        let schema = match kind {
            PoolKind::InCluster => &self.in_cluster,
            PoolKind::Global => &self.global,
            PoolKind::InClusterPrefix => &self.in_cluster_prefix,
            PoolKind::GlobalPrefix => &self.global_prefix,
        };
        match self.validator.validate_compiled(schema, pool, None) {
            Ok(()) => Vec::new(),
            Err(errors) => errors.into_vec().into_iter().map(|e| e.to_string()).collect(),
        }
    }
}
