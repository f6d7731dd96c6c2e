//! Which claims belong to which Cluster, kept from the claim watch's events, so that a Cluster
//! event wakes its own claims without a scan of every claim (with a Cluster per pool and
//! thousands of pools, that scan at each leader start was quadratic).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::watcher::Event;

use crate::api::capi::IPAddressClaim;

use crate::api::capi::cluster_name;
use crate::intern::Interned;
use crate::sync::lock;

/// (namespace, name) of a Cluster.
type ClusterKey = (Interned, Interned);
/// (namespace, name) of a claim; the name is shared by both maps.
type ClaimKey = (Interned, Arc<str>);

#[derive(Default)]
struct Maps {
    /// The claims of each Cluster.
    claims: HashMap<ClusterKey, BTreeSet<Arc<str>>>,
    /// The Cluster of each claim that names one.
    cluster_of: HashMap<ClaimKey, Interned>,
}

impl Maps {
    fn insert(&mut self, claim: &IPAddressClaim) {
        let namespace = Interned::new(&claim.namespace().unwrap_or_default());
        let key: ClaimKey = (namespace.clone(), Arc::from(claim.name_any()));
        self.remove(&key);
        if let Some(cluster) = cluster_name(claim) {
            let cluster = Interned::new(&cluster);
            self.claims.entry((namespace, cluster.clone())).or_default().insert(key.1.clone());
            self.cluster_of.insert(key, cluster);
        }
    }

    fn remove(&mut self, key: &ClaimKey) {
        if let Some(cluster) = self.cluster_of.remove(key) {
            let cluster_key = (key.0.clone(), cluster);
            if let Some(names) = self.claims.get_mut(&cluster_key) {
                names.remove(&key.1);
                if names.is_empty() {
                    self.claims.remove(&cluster_key);
                }
            }
        }
    }
}

/// Claims by Cluster; cheap to clone, shared by the claim watch (writer) and the Cluster watch.
#[derive(Clone, Default)]
pub struct ClaimsByCluster {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    current: Maps,
    /// A listing in progress: it replaces `current` at its end, so that claims deleted while
    /// the watch was down are forgotten.
    listing: Option<Maps>,
}

impl ClaimsByCluster {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.inner)
    }

    /// Follows one event of the claim watch.
    pub fn apply(&self, event: &Event<IPAddressClaim>) {
        let mut state = self.state();
        match event {
            Event::Apply(claim) => state.current.insert(claim),
            Event::Delete(claim) => state
                .current
                .remove(&(Interned::new(&claim.namespace().unwrap_or_default()), Arc::from(claim.name_any()))),
            Event::Init => state.listing = Some(Maps::default()),
            Event::InitApply(claim) => {
                if let Some(listing) = state.listing.as_mut() {
                    listing.insert(claim);
                }
            }
            Event::InitDone => {
                if let Some(listing) = state.listing.take() {
                    state.current = listing;
                }
            }
        }
    }

    /// The names of the claims in `namespace` that belong to Cluster `cluster`.
    pub fn claims_of(&self, namespace: &str, cluster: &str) -> Vec<String> {
        let state = self.state();
        let key = (Interned::new(namespace), Interned::new(cluster));
        state.current.claims.get(&key).map(|names| names.iter().map(|n| n.to_string()).collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn claim(name: &str, cluster: Option<&str>) -> IPAddressClaim {
        let mut claim = fixtures::claim(name, "pool");
        claim.spec.cluster_name = cluster.map(str::to_owned);
        claim
    }

    #[test]
    fn claims_follow_their_cluster_through_changes_deletions_and_relistings() {
        let index = ClaimsByCluster::default();
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(claim("a", Some("wl"))));
        index.apply(&Event::InitApply(claim("b", Some("wl"))));
        index.apply(&Event::InitApply(claim("lone", None)));
        assert!(index.claims_of("ns", "wl").is_empty(), "nothing before the listing ends");
        index.apply(&Event::InitDone);
        assert_eq!(index.claims_of("ns", "wl"), ["a", "b"]);
        assert!(index.claims_of("other", "wl").is_empty(), "Clusters are per namespace");

        // b moves to another Cluster; a is deleted.
        index.apply(&Event::Apply(claim("b", Some("wl2"))));
        index.apply(&Event::Delete(claim("a", Some("wl"))));
        assert!(index.claims_of("ns", "wl").is_empty());
        assert_eq!(index.claims_of("ns", "wl2"), ["b"]);

        // A relisting without b (deleted while the watch was down) forgets it.
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(claim("c", Some("wl2"))));
        index.apply(&Event::InitDone);
        assert_eq!(index.claims_of("ns", "wl2"), ["c"]);
    }
}
