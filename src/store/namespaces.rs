//! The labels of every Namespace, as the Namespace watch last saw them, for the namespace
//! selectors of global pools. A Namespace the watch has not listed yet is unknown, never "not
//! selected": its claims wait for it rather than being refused.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

/// The Namespace watch's store. Cheap to clone.
#[derive(Clone)]
pub struct NamespaceLabels {
    store: Store<PartialObjectMeta<Namespace>>,
}

impl NamespaceLabels {
    pub fn new(store: Store<PartialObjectMeta<Namespace>>) -> Self {
        NamespaceLabels { store }
    }

    /// The labels of Namespace `name`; None while the watch has not seen it.
    pub fn of(&self, name: &str) -> Option<BTreeMap<String, String>> {
        let namespace = self.store.get(&ObjectRef::new(name))?;
        Some(namespace.metadata.labels.clone().unwrap_or_default())
    }
}
