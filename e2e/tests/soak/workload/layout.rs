//! The pools of the soak (client required to create them), in two namespaces of one watch
//! filter:
//!
//! | pool | addresses | what it is for |
//! |---|---|---|
//! | `a/churn`, `b/churn` | one range in both namespaces (legal: two namespaces may be two networks) | claims come and go; grown, shrunk, excluded from, paused |
//! | global `<a>-global` | its own range | claims of both namespaces; edited like the churn pools |
//! | `b/edge` | overlaps the global pool's grown range | a namespaced pool beside a global one: no address in both |
//! | `a/sticky` | | claims asking for one address, and claims deleted and made again under their name |
//! | `a/manual` | | `IPAddress`es made by hand, and claims beside them |
//! | `a/vips` | labelled `cluster-api-vips` (every provider) | purpose claims ("a VIP"), and the control-plane VIPs of the Clusters that ask for one |
//! | `a/probe` | a /22 | the probe's claims, which time how long a claim waits |

use ferro_ipam::api::keys::{ALLOW_ALL_PROVIDERS_LABEL, VIPS_LABEL};
use ferro_ipam_e2e::objects::Scope;
use serde_json::{Value, json};

/// The ranges an editable pool moves between.
#[derive(Clone, Copy, Debug)]
pub struct Ranges {
    pub network: &'static str,
    /// Last octet of the first address, of the last when shrunk, as made, and when grown.
    pub first: u8,
    pub last: [u8; 3],
}

impl Ranges {
    pub fn range(&self, last: u8) -> String {
        format!("{n}.{}-{n}.{last}", self.first, n = self.network)
    }

    pub fn base(&self) -> String {
        self.range(self.last[1])
    }

    /// The widest range, which every pool is given back once the chaos ends, so that every
    /// address it handed out lies in it again.
    pub fn widest(&self) -> String {
        self.range(self.last[2])
    }
}

pub const CHURN: Ranges = Ranges { network: "10.50.0", first: 10, last: [39, 69, 99] };
pub const GLOBAL: Ranges = Ranges { network: "10.60.0", first: 10, last: [39, 69, 99] };
pub const EDGE: &str = "10.60.0.90-10.60.0.119";
pub const STICKY: (&str, u8, u8) = ("10.51.0", 10, 49);
pub const MANUAL: (&str, u8, u8) = ("10.52.0", 10, 29);
/// 50 VIPs: the churn's purpose claims (about a tenth of its 150 at most) and six Clusters.
pub const VIPS: &str = "10.53.0.10-10.53.0.59";
pub const PROBE: &str = "10.70.0.0/22";

/// A pool the workload edits: its namespace's scope (None: the global pool) and name.
#[derive(Clone, Debug)]
pub struct Editable {
    pub namespace: Option<String>,
    pub name: String,
    pub ranges: Ranges,
}

/// What the workload knows of the pools it made.
#[derive(Clone)]
pub struct Layout {
    pub global: String,
    pub editable: Vec<Editable>,
}

fn spec(addresses: &str, gateway: &str, prefix: u8) -> Value {
    json!({"addresses": [addresses], "prefix": prefix, "gateway": gateway})
}

/// Creates every pool, and the infrastructure kind of the Clusters that ask for a VIP.
pub async fn create(a: &Scope, b: &Scope) -> Layout {
    super::clusters::install_infrastructure(a).await;
    let global = a.global_name("global");
    let gateway = |network: &str| format!("{network}.1");
    for s in [a, b] {
        s.pool("churn", spec(&CHURN.base(), &gateway(CHURN.network), 24)).await.unwrap();
    }
    a.global_pool(&global, spec(&GLOBAL.base(), &gateway(GLOBAL.network), 24)).await.unwrap();
    b.pool("edge", spec(EDGE, &gateway(GLOBAL.network), 24)).await.unwrap();
    let (net, first, last) = STICKY;
    a.pool("sticky", spec(&format!("{net}.{first}-{net}.{last}"), &gateway(net), 24)).await.unwrap();
    let (net, first, last) = MANUAL;
    a.pool("manual", spec(&format!("{net}.{first}-{net}.{last}"), &gateway(net), 24)).await.unwrap();
    a.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "vips", "labels": {VIPS_LABEL: "true", ALLOW_ALL_PROVIDERS_LABEL: "true"}},
        "spec": spec(VIPS, "10.53.0.1", 24),
    }))
    .await
    .unwrap();
    a.pool("probe", json!({"addresses": [PROBE], "prefix": 22, "gateway": "10.70.0.1"})).await.unwrap();
    let editable = vec![
        Editable { namespace: Some(a.ns.clone()), name: "churn".into(), ranges: CHURN },
        Editable { namespace: Some(b.ns.clone()), name: "churn".into(), ranges: CHURN },
        Editable { namespace: None, name: global.clone(), ranges: GLOBAL },
    ];
    Layout { global, editable }
}
