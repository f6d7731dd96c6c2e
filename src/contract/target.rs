//! Where a claim's address comes from: the pool its `poolRef` names, or a labelled pool of a
//! purpose (pure).

use kube::ResourceExt;

use crate::api::capi::IPAddressClaim;
use crate::index::{PoolFacts, PoolKey};
use crate::selection::Purpose;

/// Where a claim's address comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The pool its `poolRef` names.
    Pool(PoolKey),
    /// A labelled pool of the purpose its `poolRef` asks for.
    Purpose(Purpose),
}

impl Target {
    /// None when the claim is not for ferro-ipam.
    pub fn of(claim: &IPAddressClaim) -> Option<Target> {
        if let Some(purpose) = Purpose::of_reference(&claim.spec.pool_ref) {
            return Some(Target::Purpose(purpose));
        }
        PoolKey::from_reference(&claim.namespace().unwrap_or_default(), &claim.spec.pool_ref).map(Target::Pool)
    }
}

/// Why a candidate pool of a purpose claim is passed over before an address is asked of it: a
/// global pool while ferro-ipam serves one namespace, or a pool missing, paused or being deleted.
pub fn passed_over(pool: &PoolKey, one_namespace: bool, facts: Option<&PoolFacts>) -> Option<String> {
    if pool.kind.is_global() && one_namespace {
        return Some("this ferro-ipam runs with --namespace and serves no global pool".to_owned());
    }
    match facts {
        None => Some("not found".to_owned()),
        Some(f) if f.paused => Some("paused".to_owned()),
        Some(f) if f.deleting => Some("being deleted".to_owned()),
        Some(_) => None,
    }
}
