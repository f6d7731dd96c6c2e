//! Whether a pool serves the claims of a namespace: a global pool's `spec.namespaceSelector`
//! against the labels of the claim's Namespace (pure). The claim controller, preflight and
//! `explain` all ask here.

use std::collections::BTreeMap;

use crate::index::{PoolFacts, PoolKey};

/// Whether a pool serves a namespace's claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It does: no selector, a namespaced pool, or a selector that selects the namespace.
    Admitted,
    /// Its selector does not select the namespace: why, and what to change (the pool not named).
    NotSelected(String),
    /// The pool has a selector and the Namespace's labels are not known yet: wait, never refuse.
    Unknown,
}

/// Whether `pool` serves claims of `namespace`, whose labels are `labels` (None: not known yet).
/// Only a global pool's selector counts: a namespaced pool serves its own namespace.
pub fn admission(
    pool: &PoolKey,
    facts: &PoolFacts,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Admission {
    let Some(selector) = facts.namespace_selector.as_ref().filter(|_| pool.kind.is_global()) else {
        return Admission::Admitted;
    };
    match labels {
        None => Admission::Unknown,
        Some(labels) if selector.selects(labels) => Admission::Admitted,
        Some(_) => Admission::NotSelected(format!(
            "its spec.namespaceSelector ({selector}) does not select namespace {namespace}; \
             label namespace {namespace} to match it, or widen the pool's selector"
        )),
    }
}

/// Why a pool of a purpose claim is skipped for the claim's namespace, if it is.
pub fn not_selected(
    pool: &PoolKey,
    facts: Option<&PoolFacts>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Option<String> {
    match admission(pool, facts?, namespace, labels) {
        Admission::NotSelected(message) => Some(message),
        Admission::Admitted | Admission::Unknown => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NamespaceSelector;

    fn selecting(team: &str) -> PoolFacts {
        let labels = BTreeMap::from([("team".to_owned(), team.to_owned())]);
        PoolFacts {
            namespace_selector: Some(NamespaceSelector { match_labels: Some(labels), ..Default::default() }),
            ..PoolFacts::default()
        }
    }

    fn team(name: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("team".to_owned(), name.to_owned())])
    }

    #[test]
    fn a_global_pool_serves_only_the_namespaces_its_selector_selects() {
        let pool = PoolKey::global("shared");
        assert_eq!(admission(&pool, &selecting("a"), "ns-a", Some(&team("a"))), Admission::Admitted);
        let Admission::NotSelected(message) = admission(&pool, &selecting("a"), "ns-b", Some(&team("b"))) else {
            panic!("namespace ns-b is not selected");
        };
        assert!(message.contains("team=a") && message.contains("ns-b"), "{message}");
    }

    #[test]
    fn unknown_labels_wait_and_are_never_refused() {
        let pool = PoolKey::global("shared");
        assert_eq!(admission(&pool, &selecting("a"), "ns-new", None), Admission::Unknown);
        assert_eq!(not_selected(&pool, Some(&selecting("a")), "ns-new", None), None);
    }

    #[test]
    fn no_selector_or_a_namespaced_pool_serves_every_claim_it_may() {
        assert_eq!(admission(&PoolKey::global("g"), &PoolFacts::default(), "ns", None), Admission::Admitted);
        let local = PoolKey::in_cluster("ns", "p");
        assert_eq!(admission(&local, &selecting("a"), "ns", Some(&team("b"))), Admission::Admitted);
    }
}
