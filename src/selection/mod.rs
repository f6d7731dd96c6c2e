//! Purpose pools: claims that ask for "a VIP" or "a VM IP" instead of naming a pool, and which
//! labelled pools may serve them, in which order. Pure: the controller supplies the pools and
//! their labels, and tries the pools in the order given here.
//!
//! A claim asks for a purpose with a `poolRef` to one of ours whose name is the purpose label
//! (`cluster-api-vips` or `cluster-api-vm-ips`). No pool may carry those names (a CEL rule of the
//! CRDs refuses them), so the reference cannot be mistaken for a pool of that name.

mod messages;

use std::collections::BTreeMap;

use crate::api::PoolReference;
use crate::api::keys::{
    ALLOW_ALL_PROVIDERS_LABEL, ALLOW_OVERFLOW_VIPS_LABEL, ALLOW_OVERFLOW_VM_IPS_LABEL, PROVIDER_LABEL, VIPS_LABEL,
    VM_IPS_LABEL,
};
use crate::index::{PoolKey, PoolKind};

pub use messages::{exhausted_message, no_pool_message, not_selected_message};

/// What a purpose claim asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    Vip,
    VmIp,
}

impl Purpose {
    /// The purpose a `poolRef` asks for: one of our kinds (either) with a reserved name.
    pub fn of_reference(pool_ref: &PoolReference) -> Option<Purpose> {
        if PoolKind::of_reference(pool_ref)?.is_prefix() {
            return None;
        }
        match pool_ref.name.as_str() {
            VIPS_LABEL => Some(Purpose::Vip),
            VM_IPS_LABEL => Some(Purpose::VmIp),
            _ => None,
        }
    }

    /// The label that makes a pool serve this purpose.
    pub fn label(self) -> &'static str {
        match self {
            Purpose::Vip => VIPS_LABEL,
            Purpose::VmIp => VM_IPS_LABEL,
        }
    }

    /// The label on a namespaced pool that lets claims go on to global pools when it is full.
    pub fn overflow_label(self) -> &'static str {
        match self {
            Purpose::Vip => ALLOW_OVERFLOW_VIPS_LABEL,
            Purpose::VmIp => ALLOW_OVERFLOW_VM_IPS_LABEL,
        }
    }

    pub fn other(self) -> Purpose {
        match self {
            Purpose::Vip => Purpose::VmIp,
            Purpose::VmIp => Purpose::Vip,
        }
    }

    /// What the user calls it, for messages.
    pub fn noun(self) -> &'static str {
        match self {
            Purpose::Vip => "VIP",
            Purpose::VmIp => "VM IP",
        }
    }

    /// The Event reason when no pool of this purpose has room; `other_short` when none of the
    /// other purpose has room either.
    pub fn exhausted_reason(self, other_short: bool) -> &'static str {
        match (self, other_short) {
            (_, true) => "out-of-vips-and-vm-ips",
            (Purpose::Vip, false) => "out-of-vips",
            (Purpose::VmIp, false) => "out-of-vm-ips",
        }
    }
}

fn is_true(labels: &BTreeMap<String, String>, key: &str) -> bool {
    labels.get(key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// A labelled pool that may not serve the claim's provider, for the claim's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub pool: PoolKey,
    /// The pool's `cluster.x-k8s.io/provider` label, if any.
    pub serves: Option<String>,
}

/// The pools that may serve a purpose claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    /// Labelled `InClusterIPPool`s of the claim's namespace that serve its provider, by name.
    pub namespaced: Vec<PoolKey>,
    /// Whether the global pools come after full namespaced ones: one of them allows overflow.
    pub overflow: bool,
    /// Labelled `GlobalInClusterIPPool`s that serve the claim's provider, by name.
    pub global: Vec<PoolKey>,
    /// Labelled pools the claim could have used but for their provider label.
    pub refused: Vec<Refusal>,
}

impl Candidates {
    /// The pools to try, in order: the namespaced ones; the global ones when there is no
    /// namespaced one, or when a namespaced one allows overflow.
    pub fn order(&self) -> Vec<&PoolKey> {
        let global_too = self.namespaced.is_empty() || self.overflow;
        let global = self.global.iter().filter(|_| global_too);
        self.namespaced.iter().chain(global).collect()
    }

    /// The global pools the claim may not use because full namespaced pools allow no overflow.
    pub fn blocked_global(&self) -> &[PoolKey] {
        if self.namespaced.is_empty() || self.overflow { &[] } else { &self.global }
    }
}

/// Whether a labelled pool serves claims of `provider` (None: the claim's provider is unknown).
pub fn serves_provider(labels: &BTreeMap<String, String>, provider: Option<&str>) -> bool {
    is_true(labels, ALLOW_ALL_PROVIDERS_LABEL)
        || provider.is_some_and(|p| labels.get(PROVIDER_LABEL).is_some_and(|l| l.trim() == p))
}

/// The pools that may serve a claim of `namespace` and `provider` asking for `purpose`, out of
/// every known pool and its labels. Order within each kind is by name, so it does not depend
/// on the order the pools were seen in.
pub fn candidates<'a>(
    purpose: Purpose,
    namespace: &str,
    provider: Option<&str>,
    pools: impl IntoIterator<Item = (&'a PoolKey, &'a BTreeMap<String, String>)>,
) -> Candidates {
    let mut found = Candidates::default();
    for (key, labels) in pools {
        let local = match key.kind {
            PoolKind::InCluster => key.namespace.as_deref() == Some(namespace),
            PoolKind::Global => false,
            // Purpose claims ask for an address: prefix pools never serve them.
            PoolKind::InClusterPrefix | PoolKind::GlobalPrefix => continue,
        };
        if !is_true(labels, purpose.label()) || (key.kind == PoolKind::InCluster && !local) {
            continue;
        }
        if !serves_provider(labels, provider) {
            found.refused.push(Refusal { pool: key.clone(), serves: labels.get(PROVIDER_LABEL).cloned() });
            continue;
        }
        if local {
            found.overflow |= is_true(labels, purpose.overflow_label());
            found.namespaced.push(key.clone());
        } else {
            found.global.push(key.clone());
        }
    }
    found.namespaced.sort();
    found.global.sort();
    found.refused.sort_by(|a, b| a.pool.cmp(&b.pool));
    found
}

#[cfg(test)]
mod tests;
