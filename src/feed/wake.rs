//! Whether an `IPAddress` watch event concerns the claim of the same name (pure).
//!
//! Most events are the echo of what the claim controller did itself (it created the object after
//! allocating its address, or adopted it): the claim already knows, and reconciling it again
//! would cost a reconcile per claim. The claim is woken only when the object says something it
//! does not know yet.

use std::net::IpAddr;

use kube::ResourceExt;

use crate::api::capi::IPAddress;
use crate::api::keys::PROTECT_ADDRESS_FINALIZER;
use crate::index::PoolKey;

/// What was known of a holder before the event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The pool the feed last saw the object in (None: the object is new to the feed).
    pub pool: Option<PoolKey>,
    /// The address the object held in that pool.
    pub object: Option<IpAddr>,
    /// The address the claim holds in the object's pool.
    pub claim: Option<IpAddr>,
}

/// Whether the claim must look at `address`, which records `ip` in `pool`.
pub fn wakes_claim(address: &IPAddress, pool: &PoolKey, ip: Option<IpAddr>, known: &Known) -> bool {
    // Deleted by hand: the claim lets it go and recreates it.
    address.metadata.deletion_timestamp.is_some()
        // No longer protected: the claim puts its finalizer back.
        || !address.finalizers().iter().any(|f| f == PROTECT_ADDRESS_FINALIZER)
        // Unreadable: the claim says why it is not ready.
        || ip.is_none()
        || match &known.pool {
            // New to the feed: the claim's own creation, unless the claim holds something else
            // (made by hand, left by a previous instance or another provider: adopt or refuse it).
            None => known.claim != ip,
            // Moved to another pool, or records another address.
            Some(before) => before != pool || known.object != ip,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::CapiVersion;
    use crate::api::capi::{AddressSpec, LocalReference, PoolReference};

    fn ip(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    fn address() -> IPAddress {
        let mut a = IPAddress::new(
            "vm-0",
            &CapiVersion::V1Beta2.address_resource(),
            AddressSpec {
                claim_ref: LocalReference { name: "vm-0".into() },
                pool_ref: PoolReference {
                    api_group: Some("ipam.cluster.x-k8s.io".into()),
                    kind: "InClusterIPPool".into(),
                    name: "p".into(),
                },
                address: "10.0.0.1".into(),
                prefix: 24,
                gateway: None,
            },
        );
        a.metadata.namespace = Some("ns".into());
        a.metadata.finalizers = Some(vec![PROTECT_ADDRESS_FINALIZER.into()]);
        a
    }

    fn pool() -> PoolKey {
        PoolKey::in_cluster("ns", "p")
    }

    #[test]
    fn the_echo_of_the_claims_own_creation_wakes_nothing() {
        let known = Known { pool: None, object: None, claim: ip("10.0.0.1") };
        assert!(!wakes_claim(&address(), &pool(), ip("10.0.0.1"), &known));
    }

    #[test]
    fn an_unchanged_object_seen_again_wakes_nothing() {
        let known = Known { pool: Some(pool()), object: ip("10.0.0.1"), claim: ip("10.0.0.1") };
        assert!(!wakes_claim(&address(), &pool(), ip("10.0.0.1"), &known));
        // Nor when the claim has already let go of it (being released).
        let known = Known { claim: None, ..known };
        assert!(!wakes_claim(&address(), &pool(), ip("10.0.0.1"), &known));
    }

    #[test]
    fn an_object_the_claim_does_not_hold_wakes_it() {
        let unheld = Known::default();
        assert!(wakes_claim(&address(), &pool(), ip("10.0.0.1"), &unheld));
        let other = Known { claim: ip("10.0.0.9"), ..Known::default() };
        assert!(wakes_claim(&address(), &pool(), ip("10.0.0.1"), &other));
    }

    #[test]
    fn deletion_lost_protection_and_changes_wake_the_claim() {
        let known = Known { pool: Some(pool()), object: ip("10.0.0.1"), claim: ip("10.0.0.1") };
        let mut deleting = address();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(wakes_claim(&deleting, &pool(), ip("10.0.0.1"), &known));
        let mut unprotected = address();
        unprotected.metadata.finalizers = None;
        assert!(wakes_claim(&unprotected, &pool(), ip("10.0.0.1"), &known));
        assert!(wakes_claim(&address(), &pool(), ip("10.0.0.2"), &known));
        assert!(wakes_claim(&address(), &pool(), None, &known));
        assert!(wakes_claim(&address(), &PoolKey::in_cluster("ns", "q"), ip("10.0.0.1"), &known));
    }
}
