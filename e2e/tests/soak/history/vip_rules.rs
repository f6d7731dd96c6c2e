//! The rules of the control-plane VIPs at one moment of the history (no client required): what
//! a moment holds, and the two ways a VIP goes wrong.
//!
//! - **Lost:** a live Cluster that asks for a VIP has an endpoint, and its own VIP claim's
//!   `IPAddress` (`<cluster>-control-plane-vip`, in the Cluster's namespace) is gone or records
//!   another address. The workload never writes an endpoint, so the endpoint of a Cluster that
//!   asks for a VIP was written by ferro-ipam, from that very `IPAddress`.
//! - **Duplicated:** two live Clusters have one endpoint, or the `IPAddress` of one Cluster's
//!   VIP claim records the endpoint of another live Cluster.
//!
//! Live means created and not being deleted. From its deletionTimestamp on, a Cluster's VIP
//! claim is deleted and its address released while the Cluster waits for its finalizer, and the
//! same address may be handed to another Cluster meanwhile: that is no loss, and no duplicate.
//! Nothing else releases a VIP in the soak (no VIP claim or `IPAddress` is deleted by hand), so
//! a live Cluster's VIP has no other window.

use std::collections::BTreeMap;
use std::net::IpAddr;

/// `namespace/name` of an object.
pub type Key = String;
/// A resourceVersion as a number: etcd's revision.
pub type Revision = u64;

/// How a VIP claim's name, and its `IPAddress`'s, ends: `<cluster>-control-plane-vip`.
pub const VIP_SUFFIX: &str = "-control-plane-vip";

/// A Cluster as the rules read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSeen {
    pub uid: String,
    pub revision: Revision,
    /// Labelled `ferro-ipam.dev/control-plane-vip`.
    pub asks: bool,
    /// `spec.controlPlaneEndpoint.host`, when set.
    pub endpoint: Option<String>,
    /// Its deletionTimestamp is set.
    pub deleting: bool,
}

/// The `IPAddress` of a VIP claim, as the rules read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressSeen {
    pub uid: String,
    pub revision: Revision,
    pub ip: String,
}

/// What the history holds at one moment: every Cluster, and every VIP claim's `IPAddress`.
#[derive(Clone, Debug, Default)]
pub struct Moment {
    pub clusters: BTreeMap<Key, ClusterSeen>,
    pub addresses: BTreeMap<Key, AddressSeen>,
}

/// One thing wrong at a moment. `id` names it across moments, so that it is reported once,
/// at the first moment it is seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    pub id: String,
    pub what: String,
}

/// The key of the `IPAddress` of a Cluster's VIP claim.
pub fn vip_address_of(cluster: &str) -> Key {
    format!("{cluster}{VIP_SUFFIX}")
}

/// The Cluster whose VIP claim an `IPAddress` is, by key; None for any other address.
pub fn cluster_of(address: &str) -> Option<&str> {
    address.strip_suffix(VIP_SUFFIX).filter(|cluster| !cluster.ends_with('/'))
}

/// A host as compared: an address in its canonical spelling (`fd00:0::5` is `fd00::5`), else
/// the name as written.
fn host(text: &str) -> String {
    text.parse::<IpAddr>().map_or_else(|_| text.to_owned(), |ip| ip.to_string())
}

impl Moment {
    /// The live Clusters that have an endpoint, with the endpoint as compared.
    fn live_endpoints(&self) -> impl Iterator<Item = (&Key, &ClusterSeen, String)> {
        self.clusters
            .iter()
            .filter(|(_, c)| !c.deleting)
            .filter_map(|(key, c)| c.endpoint.as_deref().map(|e| (key, c, host(e))))
    }
}

/// The live Clusters asking for a VIP whose endpoint their VIP claim's `IPAddress` does not
/// record.
pub fn lost(moment: &Moment) -> Vec<Breach> {
    let mut lost = Vec::new();
    for (key, cluster, endpoint) in moment.live_endpoints().filter(|(_, c, _)| c.asks) {
        let address_key = vip_address_of(key);
        let held = match moment.addresses.get(&address_key) {
            Some(address) if host(&address.ip) == endpoint => continue,
            Some(address) => format!("records {} (resourceVersion {})", address.ip, address.revision),
            None => "is gone".to_owned(),
        };
        lost.push(Breach {
            id: format!("lost {}", cluster.uid),
            what: format!(
                "Cluster {key}'s endpoint {endpoint} (resourceVersion {}) is not held: its VIP claim's IPAddress {address_key} {held}",
                cluster.revision
            ),
        });
    }
    lost
}

/// Two live Clusters with one endpoint, and `IPAddress`es of one Cluster's VIP claim that
/// record another live Cluster's endpoint.
pub fn duplicated(moment: &Moment) -> Vec<Breach> {
    let live: Vec<(&Key, &ClusterSeen, String)> = moment.live_endpoints().collect();
    let mut duplicated = Vec::new();
    for (n, (key, cluster, endpoint)) in live.iter().enumerate() {
        for (other_key, other, _) in live[n + 1..].iter().filter(|(_, _, e)| e == endpoint) {
            duplicated.push(Breach {
                id: format!("shared {} {}", cluster.uid, other.uid),
                what: format!(
                    "Clusters {key} (resourceVersion {}) and {other_key} (resourceVersion {}) both have the endpoint {endpoint}",
                    cluster.revision, other.revision
                ),
            });
        }
    }
    for (address_key, address) in &moment.addresses {
        let ip = host(&address.ip);
        let owner = cluster_of(address_key);
        for (key, cluster, _) in live.iter().filter(|(k, _, e)| *e == ip && Some(k.as_str()) != owner) {
            duplicated.push(Breach {
                id: format!("held {} {}", address.uid, cluster.uid),
                what: format!(
                    "IPAddress {address_key} (resourceVersion {}) records {ip}, the endpoint of Cluster {key} (resourceVersion {})",
                    address.revision, cluster.revision
                ),
            });
        }
    }
    duplicated
}
