//! Objects and checks for the unit tests of the whole crate, in one place.
//!
//! Builders return a plain object in namespace `ns`; a test changes what it needs on it
//! (`pool_spec(..).with_gateway(..)`, `claim.metadata.finalizers = ..`). Nothing here talks to
//! an API server; `controller::mock_api` scripts one.

use std::net::IpAddr;

use kube::core::ObjectMeta;
use serde_json::Value;

use crate::api::capi::{ClaimSpec, Cluster, ClusterSpec, IPAddressClaim, PoolReference};
use crate::api::keys::IPAM_GROUP;
use crate::api::{CapiVersion, IPPoolSpec};
use crate::index::{HolderKey, Index, PoolFacts, PoolKey};

/// `s` as an address; panics on a typo in the test.
pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address parses")
}

/// The holder `ns/name`: a claim and its `IPAddress`.
pub fn holder(name: &str) -> HolderKey {
    HolderKey::new("ns", name)
}

/// A pool spec with `addresses` and prefix 24, nothing else.
pub fn pool_spec(addresses: &[&str]) -> IPPoolSpec {
    IPPoolSpec { addresses: addresses.iter().map(|a| (*a).to_owned()).collect(), prefix: 24, ..IPPoolSpec::default() }
}

impl IPPoolSpec {
    /// The same spec with `gateway`.
    pub fn with_gateway(mut self, gateway: &str) -> Self {
        self.gateway = Some(gateway.to_owned());
        self
    }
}

/// The pool `ns/p` of `pool_spec(addresses)` in `index`, with default facts: ready to allocate.
pub fn ready_pool(index: &Index, addresses: &[&str]) -> PoolKey {
    let key = PoolKey::in_cluster("ns", "p");
    index.upsert_pool(&key, &pool_spec(addresses), PoolFacts::default(), &[]);
    key
}

/// A v1beta2 claim in namespace `ns` on the InClusterIPPool `pool`.
pub fn claim(name: &str, pool: &str) -> IPAddressClaim {
    let mut claim = IPAddressClaim::new(
        name,
        &CapiVersion::V1Beta2.claim_resource(),
        ClaimSpec {
            cluster_name: None,
            pool_ref: PoolReference {
                api_group: Some(IPAM_GROUP.into()),
                kind: "InClusterIPPool".into(),
                name: pool.into(),
            },
        },
    );
    claim.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("{name}-uid")),
        resource_version: Some("1".into()),
        generation: Some(1),
        ..ObjectMeta::default()
    };
    claim
}

/// A running Cluster in namespace `ns`.
pub fn cluster(name: &str) -> Cluster {
    let mut cluster = Cluster::new(name, &CapiVersion::V1Beta2.cluster_resource(), ClusterSpec::default());
    cluster.metadata.namespace = Some("ns".into());
    cluster
}

/// A check of a request body for `mock_api::Expect::body`: `Err(problem)` unless `condition`.
pub fn check(condition: bool, problem: impl Into<String>) -> Result<(), String> {
    if condition { Ok(()) } else { Err(problem.into()) }
}

/// The finalizers of an object as sent to the mock API server (none if it names none).
pub fn finalizers(body: &Value) -> Vec<String> {
    body["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect()
}

/// The ownerReferences of an object as sent to the mock API server (none if it names none).
pub fn owners(body: &Value) -> Vec<Value> {
    body["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default()
}
