//! What the checker looks at, and which pool each `IPAddress` is in, read from the objects alone
//! (the CAPI contract and ferro-ipam's documented annotation), not with ferro-ipam's own keys.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ferro_ipam::api::capi::{IPAddress, IPAddressClaim, PoolReference};
use ferro_ipam::api::{IPPoolSpec, IPPoolStatus};
use kube::ResourceExt;

use super::HAND_MADE_LABEL;

const GROUP: &str = "ipam.cluster.x-k8s.io";
const NAMESPACED_KIND: &str = "InClusterIPPool";
const GLOBAL_KIND: &str = "GlobalInClusterIPPool";
/// On the `IPAddress` of a purpose claim: `<kind>/<name>` of the pool its address is from.
const ALLOCATED_FROM: &str = "ferro-ipam.dev/allocated-from";
/// The pool names a purpose claim refers to, which are also the labels of the pools serving it.
const PURPOSES: [&str; 2] = ["cluster-api-vips", "cluster-api-vm-ips"];

/// A pool, by kind, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolId {
    Namespaced { namespace: String, name: String },
    Global { name: String },
}

impl PoolId {
    /// Whether one address must never be in both pools: the same pool, two pools of one
    /// namespace, or a global pool and any other (claims of all of them can meet on one network).
    pub fn shares_addresses_with(&self, other: &PoolId) -> bool {
        match (self, other) {
            (PoolId::Namespaced { namespace: a, .. }, PoolId::Namespaced { namespace: b, .. }) => a == b,
            _ => true,
        }
    }
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolId::Namespaced { namespace, name } => write!(f, "{NAMESPACED_KIND} {namespace}/{name}"),
            PoolId::Global { name } => write!(f, "{GLOBAL_KIND} {name}"),
        }
    }
}

/// A pool object of either kind.
#[derive(Clone, Debug)]
pub struct Pool {
    pub labels: BTreeMap<String, String>,
    pub deleting: bool,
    pub spec: IPPoolSpec,
    pub status: Option<IPPoolStatus>,
}

/// The objects of one look.
#[derive(Clone, Debug, Default)]
pub struct World {
    /// The namespaces checked: their claims are all listed, so an address there without a
    /// claim is an orphan.
    pub namespaces: BTreeSet<String>,
    pub claims: Vec<IPAddressClaim>,
    /// The addresses of the namespaces, and those of other namespaces in the global pools checked.
    pub addresses: Vec<IPAddress>,
    pub pools: BTreeMap<PoolId, Pool>,
}

/// The pool a `poolRef` in `namespace` names, when it is one of the two kinds ferro-ipam serves
/// (a `v1beta1` reference may lack `apiGroup`).
pub fn referenced(namespace: &str, pool_ref: &PoolReference) -> Option<PoolId> {
    if !pool_ref.api_group.as_deref().is_none_or(|g| g.is_empty() || g == GROUP) {
        return None;
    }
    pool_id(namespace, &pool_ref.kind, &pool_ref.name)
}

fn pool_id(namespace: &str, kind: &str, name: &str) -> Option<PoolId> {
    match kind {
        NAMESPACED_KIND => Some(PoolId::Namespaced { namespace: namespace.to_owned(), name: name.to_owned() }),
        GLOBAL_KIND => Some(PoolId::Global { name: name.to_owned() }),
        _ => None,
    }
}

/// The purpose (label name) a claim's `poolRef` asks for, if it asks for one.
pub fn purpose(pool_ref: &PoolReference) -> Option<&'static str> {
    referenced("", pool_ref)?;
    PURPOSES.into_iter().find(|p| *p == pool_ref.name)
}

/// The pool an `IPAddress` records: the one its allocated-from annotation names, else its
/// `poolRef`'s. `Ok(None)` when neither is one of ours; `Err` when the annotation names nothing.
pub fn attribution(address: &IPAddress) -> Result<Option<PoolId>, String> {
    let namespace = address.namespace().unwrap_or_default();
    match address.annotations().get(ALLOCATED_FROM) {
        Some(value) => value
            .split_once('/')
            .filter(|(_, name)| !name.is_empty())
            .and_then(|(kind, name)| pool_id(&namespace, kind, name))
            .map(Some)
            .ok_or_else(|| format!("its {ALLOCATED_FROM} annotation {value:?} names no pool of ours")),
        None => Ok(referenced(&namespace, &address.spec.pool_ref)),
    }
}

/// The pool an address's annotation names, if it has the annotation.
pub fn allocated_from(address: &IPAddress) -> Option<&String> {
    address.annotations().get(ALLOCATED_FROM)
}

pub fn is_ready(claim: &IPAddressClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// An `IPAddress` of one of our pools, as the rules read it.
#[derive(Clone, Debug)]
pub struct Held<'a> {
    pub object: &'a IPAddress,
    pub namespace: String,
    pub name: String,
    pub ip: IpAddr,
    pub pool: PoolId,
    /// Made by a scenario by hand: no claim behind it, and its address is the operator's choice.
    pub hand_made: bool,
}

impl Held<'_> {
    pub fn label(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn claim_name(&self) -> &str {
        &self.object.spec.claim_ref.name
    }
}

/// The addresses of our pools, and what is wrong with those that cannot be read.
pub fn held(world: &World) -> (Vec<Held<'_>>, Vec<String>) {
    let (mut held, mut broken) = (Vec::new(), Vec::new());
    for object in &world.addresses {
        let (namespace, name) = (object.namespace().unwrap_or_default(), object.name_any());
        let pool = match attribution(object) {
            Ok(Some(pool)) => pool,
            Ok(None) => continue,
            Err(why) => {
                broken.push(format!("IPAddress {namespace}/{name}: {why}"));
                continue;
            }
        };
        let Ok(ip) = object.spec.address.parse::<IpAddr>() else {
            broken.push(format!("IPAddress {namespace}/{name}: {:?} is not an IP address", object.spec.address));
            continue;
        };
        let hand_made = object.labels().contains_key(HAND_MADE_LABEL);
        held.push(Held { object, namespace, name, ip, pool, hand_made });
    }
    (held, broken)
}
