//! The CRDs across an upgrade or a rollback: the same objects (uid), serving the schema of the
//! release applied last, their generation moved only when that schema changed.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use crate::paths::chart_crds;
use crate::release::{Release, release};
use crate::{kubectl, kubectl_json};

/// The schema of each version of one CRD, by version name.
type Schemas = BTreeMap<String, Value>;

/// A CRD as the API server serves it.
pub struct ServedCrd {
    uid: String,
    generation: i64,
    schemas: Schemas,
}

/// The schema of each version of a CRD document.
fn schemas(crd: &Value) -> Schemas {
    let versions = crd["spec"]["versions"].as_array().cloned().unwrap_or_default();
    versions.into_iter().map(|v| (v["name"].as_str().unwrap_or_default().to_owned(), v["schema"].clone())).collect()
}

/// The CRDs the chart ships, as served now, by name.
pub fn served() -> BTreeMap<String, ServedCrd> {
    chart_crds()
        .into_iter()
        .map(|name| {
            let crd = kubectl_json(&["get", "crd", &name]);
            let uid = crd["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
            let generation = crd["metadata"]["generation"].as_i64().unwrap_or_default();
            (name, ServedCrd { uid, generation, schemas: schemas(&crd) })
        })
        .collect()
}

/// The schemas `to` ships, by CRD name: the current tree's crds/ for the current release (its
/// install.yaml is made from them), the install.yaml of any other; read by kubectl, as an apply
/// of them reads them.
fn shipped(to: &Release) -> BTreeMap<String, Schemas> {
    // This checkout's crds/ (the harness's repo_root() is the checkout its library was built in).
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let files = if to.version == release().version { tree } else { to.install_yaml() };
    // One JSON object per document, one after the other.
    let read = kubectl(&["create", "--dry-run=client", "-o", "json", "-f", &files.to_string_lossy()]);
    let objects: Vec<Value> = serde_json::Deserializer::from_str(&read)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("kubectl prints JSON objects");
    objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(|crd| (crd["metadata"]["name"].as_str().unwrap_or_default().to_owned(), schemas(crd)))
        .collect()
}

/// Where `served` first differs from `expected`: a JSON path, or None when they are equal.
fn first_difference(path: &str, served: &Value, expected: &Value) -> Option<String> {
    match (served, expected) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let null = Value::Null;
            keys.into_iter().find_map(|k| {
                first_difference(&format!("{path}.{k}"), a.get(k).unwrap_or(&null), b.get(k).unwrap_or(&null))
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y))
        }
        _ => (served != expected).then(|| format!("{path}: served {served}, shipped {expected}")),
    }
}

/// After `step` moved the install to `to`: every CRD of `before` is the same object, serves the
/// schema `to` ships, and its generation moved exactly when its schema changed.
pub fn assert_updated_in_place(step: &str, before: &BTreeMap<String, ServedCrd>, to: &Release) {
    let after = served();
    let shipped = shipped(to);
    for (name, was) in before {
        let now = after.get(name).unwrap_or_else(|| panic!("{step}: the CRD {name} is gone"));
        assert_eq!(now.uid, was.uid, "{step}: the CRD {name} was deleted and made again");
        // A CRD a later release added (AddressBlock) stays, untouched, when an older one that
        // does not ship it is applied over it (helm keeps CRDs; kubectl apply adds only).
        let Some(expected) = shipped.get(name) else {
            assert_eq!(now.generation, was.generation, "{step}: v{} ships no CRD {name}, yet it changed", to.version);
            continue;
        };
        let differs = first_difference("", &json!(now.schemas), &json!(expected));
        assert!(differs.is_none(), "{step}: the CRD {name} does not serve v{}'s schema: {differs:?}", to.version);
        if now.schemas == was.schemas {
            assert_eq!(now.generation, was.generation, "{step}: the CRD {name} changed with its schema the same");
        } else {
            assert!(now.generation > was.generation, "{step}: the CRD {name}'s schema changed, its generation did not");
        }
    }
}
