//! What a purpose claim's `Ready` condition says when no pool serves it: what was looked at,
//! and what to change.

use super::{Candidates, Purpose};
use crate::api::keys::{ALLOW_ALL_PROVIDERS_LABEL, PROVIDER_LABEL};
use crate::index::PoolKey;

fn list(pools: &[&PoolKey]) -> String {
    pools.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
}

fn provider_words(provider: Option<&str>) -> String {
    match provider {
        Some(p) => format!("provider {p}"),
        None => "no known provider (its owner's CRD carries no cluster.x-k8s.io/provider label)".to_owned(),
    }
}

/// No pool may serve the claim at all.
pub fn no_pool_message(purpose: Purpose, namespace: &str, provider: Option<&str>, found: &Candidates) -> String {
    let label = purpose.label();
    let mut message = format!(
        "no pool serves {}s for this claim (namespace {namespace}, {}): label an InClusterIPPool of namespace {namespace} \
         or a GlobalInClusterIPPool {label}: \"true\"",
        purpose.noun(),
        provider_words(provider),
    );
    if !found.refused.is_empty() {
        let refused: Vec<String> = found
            .refused
            .iter()
            .map(|r| match &r.serves {
                Some(p) => format!("{} serves only {p}", r.pool),
                None => format!("{} has no {PROVIDER_LABEL} label", r.pool),
            })
            .collect();
        message.push_str(&format!(
            "; {} carry {label} but not for this provider: set their {PROVIDER_LABEL} label to the claim's provider, \
             or label them {ALLOW_ALL_PROVIDERS_LABEL}: \"true\"",
            refused.join(", ")
        ));
    }
    message
}

/// Every pool the claim may use is full (or cannot hand out what it asks for).
pub fn exhausted_message(purpose: Purpose, found: &Candidates, tried: &[(PoolKey, String)]) -> String {
    let tried: Vec<String> = tried.iter().map(|(pool, why)| format!("{pool}: {why}")).collect();
    let mut message = format!("no {} left: {}", purpose.noun(), tried.join("; "));
    let blocked = found.blocked_global();
    if !blocked.is_empty() {
        let blocked: Vec<&PoolKey> = blocked.iter().collect();
        message.push_str(&format!(
            "; global pools ({}) are not used because no full namespaced pool carries {}: \"true\"",
            list(&blocked),
            purpose.overflow_label()
        ));
    }
    message.push_str("; the claim is served as soon as an address is released or a pool grows");
    message
}

/// Every labelled pool the claim could use has a namespace selector that leaves out its namespace
/// (or was passed over for another reason, said too).
pub fn not_selected_message(purpose: Purpose, namespace: &str, tried: &[(PoolKey, String)]) -> String {
    let tried: Vec<String> = tried.iter().map(|(pool, why)| format!("{pool}: {why}")).collect();
    format!("no {} pool serves namespace {namespace}: {}", purpose.noun(), tried.join("; "))
}
