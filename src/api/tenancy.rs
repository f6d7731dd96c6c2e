//! `spec.namespaceSelector` of the global pool kinds: which namespaces' claims a global pool
//! serves. A label selector of the usual shape (`matchLabels`, `matchExpressions`), checked
//! against the labels of the claim's Namespace. Pure: the labels are handed in.

use std::collections::BTreeMap;
use std::fmt;

use kube::core::Rule;
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::validation::apply_rules;

/// Most `matchLabels` entries, `matchExpressions` and values of one expression; bounds the cost
/// of the CEL rule on each expression.
const MAX_TERMS: u32 = 32;
/// Longest label key (a 253-character prefix, a slash, a 63-character name).
const MAX_KEY_LENGTH: u32 = 317;
/// Longest label value.
const MAX_VALUE_LENGTH: u32 = 63;

/// The namespaces a global pool serves. Every term must hold; an empty selector selects every
/// namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    /// Labels the Namespace must carry, with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = MAX_TERMS))]
    pub match_labels: Option<BTreeMap<String, String>>,

    /// Requirements on the Namespace's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_TERMS))]
    pub match_expressions: Option<Vec<SelectorRequirement>>,
}

/// One requirement of a selector: a key, an operator and, for `In` and `NotIn`, the values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(transform = requirement_rules)]
pub struct SelectorRequirement {
    /// The label key.
    #[schemars(length(min = 1, max = MAX_KEY_LENGTH))]
    pub key: String,
    pub operator: SelectorOperator,
    /// The values of `In` and `NotIn` (at least one); `Exists` and `DoesNotExist` take none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_TERMS), inner(length(max = MAX_VALUE_LENGTH)))]
    pub values: Option<Vec<String>>,
}

/// How a requirement tests its key.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SelectorOperator {
    /// The label is set to one of the values.
    #[default]
    In,
    /// The label is not set, or set to none of the values.
    NotIn,
    /// The label is set, to any value.
    Exists,
    /// The label is not set.
    DoesNotExist,
}

fn requirement_rules(schema: &mut Schema) {
    apply_rules(
        schema,
        vec![
            Rule::new(
                "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) \
                 : (!has(self.values) || size(self.values) == 0)",
            )
            .message("values: In and NotIn need at least one value; Exists and DoesNotExist take none")
            .field_path(".values"),
        ],
    );
}

impl SelectorRequirement {
    fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or_default()
    }

    fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values().contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values().contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

impl NamespaceSelector {
    /// Whether a Namespace with these labels is selected. An `In` or `NotIn` with no values
    /// (which the CRD refuses) selects nothing, so that a selector that slipped past admission
    /// never widens who is served.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        let expressions = self.match_expressions.as_deref().unwrap_or_default();
        if expressions
            .iter()
            .any(|e| matches!(e.operator, SelectorOperator::In | SelectorOperator::NotIn) && e.values().is_empty())
        {
            return false;
        }
        let labelled = self.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value));
        labelled && expressions.iter().all(|e| e.holds(labels))
    }
}

/// The selector as `kubectl get -l` would take it: `team=a,env in (prod),!legacy`; `{}` when empty.
impl fmt::Display for NamespaceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = self.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
        for e in self.match_expressions.iter().flatten() {
            terms.push(match e.operator {
                SelectorOperator::In => format!("{} in ({})", e.key, e.values().join(",")),
                SelectorOperator::NotIn => format!("{} notin ({})", e.key, e.values().join(",")),
                SelectorOperator::Exists => e.key.clone(),
                SelectorOperator::DoesNotExist => format!("!{}", e.key),
            });
        }
        if terms.is_empty() { f.write_str("{}") } else { f.write_str(&terms.join(",")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn requirement(key: &str, operator: SelectorOperator, values: &[&str]) -> SelectorRequirement {
        let values = (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect());
        SelectorRequirement { key: key.to_owned(), operator, values }
    }

    fn expressions(list: Vec<SelectorRequirement>) -> NamespaceSelector {
        NamespaceSelector { match_labels: None, match_expressions: Some(list) }
    }

    #[test]
    fn an_empty_selector_selects_every_namespace() {
        assert!(NamespaceSelector::default().selects(&labels(&[])));
        assert!(NamespaceSelector::default().selects(&labels(&[("team", "a")])));
        assert_eq!(NamespaceSelector::default().to_string(), "{}");
    }

    #[test]
    fn match_labels_needs_every_label_with_its_value() {
        let selector =
            NamespaceSelector { match_labels: Some(labels(&[("team", "a"), ("tier", "prod")])), ..Default::default() };
        assert!(selector.selects(&labels(&[("team", "a"), ("tier", "prod"), ("other", "x")])));
        assert!(!selector.selects(&labels(&[("team", "a")])));
        assert!(!selector.selects(&labels(&[("team", "b"), ("tier", "prod")])));
        assert_eq!(selector.to_string(), "team=a,tier=prod");
    }

    #[test]
    fn each_operator_tests_its_key() {
        let selector = expressions(vec![
            requirement("team", SelectorOperator::In, &["a", "b"]),
            requirement("env", SelectorOperator::NotIn, &["dev"]),
            requirement("billing", SelectorOperator::Exists, &[]),
            requirement("legacy", SelectorOperator::DoesNotExist, &[]),
        ]);
        assert!(selector.selects(&labels(&[("team", "b"), ("billing", "x")])));
        assert!(selector.selects(&labels(&[("team", "a"), ("env", "prod"), ("billing", "")])));
        assert!(!selector.selects(&labels(&[("team", "c"), ("billing", "x")])), "In");
        assert!(!selector.selects(&labels(&[("team", "a"), ("env", "dev"), ("billing", "x")])), "NotIn");
        assert!(!selector.selects(&labels(&[("team", "a")])), "Exists");
        assert!(!selector.selects(&labels(&[("team", "a"), ("billing", "x"), ("legacy", "")])), "DoesNotExist");
        assert_eq!(selector.to_string(), "team in (a,b),env notin (dev),billing,!legacy");
    }

    #[test]
    fn an_in_without_values_selects_nothing() {
        let selector = expressions(vec![requirement("team", SelectorOperator::NotIn, &[])]);
        assert!(!selector.selects(&labels(&[])));
        assert!(!selector.selects(&labels(&[("team", "a")])));
    }
}
