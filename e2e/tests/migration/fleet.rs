//! The objects a cluster running the in-cluster provider holds: pools of both kinds in two
//! namespaces (same-named pools, a global pool shared by both, IPv6, a grace period, a paused
//! pool, pools stored as `v1alpha1`), several hundred claims, and snapshots to compare.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use ferro_ipam::api::keys::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};
use ferro_ipam::api::{GlobalInClusterIPPool, InClusterIPPool};
use ferro_ipam_e2e::objects::Scope;
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::ListParams;
use kube::core::ApiResource;
use serde_json::{Value, json};

pub const IN_CLUSTER: &str = "InClusterIPPool";
pub const GLOBAL: &str = "GlobalInClusterIPPool";
pub const PREFIX: &str = "InClusterPrefixPool";
pub const GLOBAL_PREFIX: &str = "GlobalInClusterPrefixPool";

/// Whether pools of `kind` are cluster-scoped.
pub fn is_global(kind: &str) -> bool {
    kind == GLOBAL || kind == GLOBAL_PREFIX
}

/// Seconds the `grace` pool keeps an address after its claim is deleted.
pub const GRACE_SECONDS: i64 = 45;

/// One set of claims on one pool: `count` claims named `<prefix>-<n>` in namespace `side`.
pub struct Group {
    pub side: usize,
    pub kind: &'static str,
    pub pool: String,
    pub prefix: &'static str,
    pub count: usize,
}

/// Which pool an address belongs to: kind, namespace (empty for a global pool), name.
pub type PoolId = (String, String, String);

/// What must survive a move, per `IPAddress`.
#[derive(Clone, Debug, PartialEq)]
pub struct AddressRecord {
    pub uid: String,
    pub pool: PoolId,
    pub address: String,
    pub prefix: i32,
    pub gateway: Option<String>,
    pub finalizers: Vec<String>,
    pub owners: Vec<Value>,
    pub labels: BTreeMap<String, String>,
}

/// What must survive a move, per claim.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRecord {
    pub uid: String,
    pub finalizers: Vec<String>,
    pub deleting: bool,
    pub address_ref: Option<String>,
}

/// Everything of the fleet, by (namespace, name).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub addresses: BTreeMap<(String, String), AddressRecord>,
    pub claims: BTreeMap<(String, String), ClaimRecord>,
}

impl Snapshot {
    /// The addresses in use per pool.
    pub fn in_use(&self) -> BTreeMap<PoolId, BTreeSet<String>> {
        let mut used: BTreeMap<PoolId, BTreeSet<String>> = BTreeMap::new();
        for record in self.addresses.values() {
            used.entry(record.pool.clone()).or_default().insert(record.address.clone());
        }
        used
    }
}

pub struct Fleet {
    /// Namespaces `a` and `b`.
    pub sides: [Scope; 2],
    pub groups: Vec<Group>,
    pub shared: String,
    pub legacy_global: String,
    pub shared_prefixes: String,
}

impl Fleet {
    pub async fn new() -> Fleet {
        let a = Scope::new("migration-a").await;
        let b = a.sibling("migration-b").await;
        let shared = a.global_name("shared");
        let legacy_global = a.global_name("legacy");
        let shared_prefixes = a.global_name("shared-prefixes");
        let group = |side, kind, pool: &str, prefix, count| Group { side, kind, pool: pool.to_owned(), prefix, count };
        let groups = vec![
            group(0, IN_CLUSTER, "net", "net", 150),
            group(1, IN_CLUSTER, "net", "net", 100),
            group(0, GLOBAL, &shared, "shared", 60),
            group(1, GLOBAL, &shared, "shared", 60),
            group(0, IN_CLUSTER, "grace", "grace", 30),
            group(0, IN_CLUSTER, "paused", "paused", 20),
            group(1, IN_CLUSTER, "v6", "v6", 30),
            group(0, IN_CLUSTER, "legacy", "legacy", 20),
            group(0, GLOBAL, &legacy_global, "legacy-global", 10),
            group(0, PREFIX, "pfx", "pfx", 40),
            group(0, GLOBAL_PREFIX, &shared_prefixes, "pfx-shared", 8),
            group(1, GLOBAL_PREFIX, &shared_prefixes, "pfx-shared", 8),
        ];
        Fleet { sides: [a, b], groups, shared, legacy_global, shared_prefixes }
    }

    pub fn a(&self) -> &Scope {
        &self.sides[0]
    }

    pub fn b(&self) -> &Scope {
        &self.sides[1]
    }

    pub fn namespaces(&self) -> Vec<&str> {
        self.sides.iter().map(|s| s.ns.as_str()).collect()
    }

    /// Pools stored while `v1alpha1` is the storage version (fields common to both versions).
    pub async fn create_legacy_pools(&self) -> Result<()> {
        let spec = json!({"addresses": ["10.50.0.0/25"], "prefix": 25, "gateway": "10.50.0.1"});
        self.a()
            .create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha1", "kind": IN_CLUSTER,
                "metadata": {"name": "legacy"}, "spec": spec}))
            .await?;
        self.a()
            .create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha1", "kind": GLOBAL,
                "metadata": {"name": self.legacy_global}, "spec": {"addresses": ["10.60.0.0/28"], "prefix": 28}}))
            .await?;
        Ok(())
    }

    /// The `v1alpha2` pools and the workload Clusters the claims name.
    pub async fn create_pools(&self) -> Result<()> {
        let (a, b) = (self.a(), self.b());
        for side in [a, b] {
            side.pool("net", json!({"addresses": ["10.10.0.0/24"], "prefix": 24, "gateway": "10.10.0.1"})).await?;
        }
        a.global_pool(
            &self.shared,
            json!({"addresses": ["10.20.0.10-10.20.0.200"], "prefix": 24, "gateway": "10.20.0.1"}),
        )
        .await?;
        a.pool(
            "grace",
            json!({"addresses": ["10.30.0.0/26"], "prefix": 26, "gateway": "10.30.0.1",
                "addressReuseGracePeriodSeconds": GRACE_SECONDS}),
        )
        .await?;
        a.pool("paused", json!({"addresses": ["10.40.0.10-10.40.0.40"], "prefix": 24})).await?;
        b.pool("v6", json!({"addresses": ["fd00:10::/120"], "prefix": 120, "gateway": "fd00:10::1"})).await?;
        a.prefix_pool(
            "pfx",
            json!({"prefixes": ["fd00:50::/56"], "gateway": "fd00:50::1", "excludedPrefixes": ["fd00:50:0:3::/64"]}),
        )
        .await?;
        a.global_prefix_pool(
            &self.shared_prefixes,
            json!({"prefixes": ["fd00:60::/59"], "allocationPrefixLength": 64}),
        )
        .await?;
        a.cluster("wl-a", false).await?;
        b.cluster("wl-b", false).await?;
        Ok(())
    }

    /// A claim as the infrastructure providers write them: the cluster named by label (CAPV,
    /// CAPMOX) in namespace `a`, by `spec.clusterName` in namespace `b`.
    pub async fn claim(&self, side: usize, kind: &str, pool: &str, name: &str) -> Result<()> {
        let scope = &self.sides[side];
        let mut claim = json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
            "kind": "IPAddressClaim",
            "metadata": {"name": name},
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind, "name": pool}},
        });
        if side == 0 {
            claim["metadata"]["labels"] = json!({"cluster.x-k8s.io/cluster-name": "wl-a"});
        } else {
            claim["spec"]["clusterName"] = json!("wl-b");
        }
        scope.create(claim).await.map(drop)
    }

    /// Creates the claims of every group, 32 requests at a time.
    pub async fn create_claims(&self) -> Result<usize> {
        let all: Vec<(usize, &str, &str, String)> = self
            .groups
            .iter()
            .flat_map(|g| (0..g.count).map(move |n| (g.side, g.kind, g.pool.as_str(), format!("{}-{n}", g.prefix))))
            .collect();
        let total = all.len();
        futures::stream::iter(all)
            .map(|(side, kind, pool, name)| async move { self.claim(side, kind, pool, &name).await })
            .buffer_unordered(32)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(total)
    }

    /// Sets or clears the paused annotation of the `paused` pool.
    pub async fn pause_pool(&self, paused: bool) -> Result<()> {
        let value = if paused { json!("") } else { Value::Null };
        self.a()
            .patch(
                &ApiResource::erase::<InClusterIPPool>(&()),
                true,
                "paused",
                json!({"metadata": {"annotations": {PAUSED_ANNOTATION: value}}}),
            )
            .await
    }

    /// Claims not being deleted, and how many of them have `status.addressRef` / `Ready=True`.
    pub async fn progress(&self) -> Result<(usize, usize, usize)> {
        let (mut live, mut addressed, mut ready) = (0, 0, 0);
        for side in &self.sides {
            for claim in side.claims().list(&ListParams::default()).await?.items {
                if claim.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                live += 1;
                let status = claim.status.unwrap_or_default();
                addressed += usize::from(status.address_ref.is_some_and(|r| !r.name.is_empty()));
                ready += usize::from(status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            }
        }
        Ok((live, addressed, ready))
    }

    pub async fn snapshot(&self) -> Result<Snapshot> {
        let mut snapshot = Snapshot::default();
        for side in &self.sides {
            for address in side.addresses().list(&ListParams::default()).await?.items {
                let pool_ref = &address.spec.pool_ref;
                let pool_ns = if is_global(&pool_ref.kind) { String::new() } else { side.ns.clone() };
                let mut owners: Vec<Value> =
                    address.owner_references().iter().map(|o| serde_json::to_value(o).unwrap_or_default()).collect();
                owners.sort_by_key(|o| o["uid"].as_str().unwrap_or_default().to_owned());
                snapshot.addresses.insert(
                    (side.ns.clone(), address.name_any()),
                    AddressRecord {
                        uid: address.uid().unwrap_or_default(),
                        pool: (pool_ref.kind.clone(), pool_ns, pool_ref.name.clone()),
                        address: address.spec.address.clone(),
                        prefix: address.spec.prefix,
                        gateway: address.spec.gateway.clone(),
                        finalizers: address.finalizers().to_vec(),
                        owners,
                        labels: address.labels().clone(),
                    },
                );
            }
            for claim in side.claims().list(&ListParams::default()).await?.items {
                snapshot.claims.insert(
                    (side.ns.clone(), claim.name_any()),
                    ClaimRecord {
                        uid: claim.uid().unwrap_or_default(),
                        finalizers: claim.finalizers().to_vec(),
                        deleting: claim.metadata.deletion_timestamp.is_some(),
                        address_ref: claim.status.and_then(|s| s.address_ref).map(|r| r.name),
                    },
                );
            }
        }
        Ok(snapshot)
    }

    /// The pool status counts (total, used, free, outOfRange) of every pool of the fleet.
    pub async fn pool_counts(&self) -> Result<BTreeMap<String, Option<(i64, i64, i64, i64)>>> {
        let mut counts = BTreeMap::new();
        let of = |s: Option<ferro_ipam::api::IPPoolStatus>| {
            s.and_then(|s| s.ip_addresses).map(|c| (c.total, c.used, c.free, c.out_of_range))
        };
        for side in &self.sides {
            for pool in side.pools().list(&ListParams::default()).await?.items {
                counts.insert(format!("{}/{}", side.ns, pool.name_any()), of(pool.status));
            }
        }
        for name in [&self.shared, &self.legacy_global] {
            let pool: GlobalInClusterIPPool = self.a().global_pools().get(name).await?;
            counts.insert(name.clone(), of(pool.status));
        }
        for pool in self.a().prefix_pools().list(&ListParams::default()).await?.items {
            counts.insert(format!("{}/{} (prefixes)", self.a().ns, pool.name_any()), of(pool.status));
        }
        let pool = self.a().global_prefix_pools().get(&self.shared_prefixes).await?;
        counts.insert(format!("{} (prefixes)", self.shared_prefixes), of(pool.status));
        Ok(counts)
    }
}

/// The fields of an `IPAddress` that differ between two records. Labels may only gain
/// `cluster.x-k8s.io/cluster-name`: ferro-ipam also sets it when the claim names its cluster in
/// `spec.clusterName`, where the in-cluster provider copies it only from the claim's labels.
fn address_differences(old: &AddressRecord, new: &AddressRecord) -> Vec<String> {
    let mut found = Vec::new();
    let mut field = |name: &str, a: String, b: String| {
        if a != b {
            found.push(format!("{name}: {a} -> {b}"));
        }
    };
    field("uid", old.uid.clone(), new.uid.clone());
    field("pool", format!("{:?}", old.pool), format!("{:?}", new.pool));
    field("address", old.address.clone(), new.address.clone());
    field("prefix", old.prefix.to_string(), new.prefix.to_string());
    field("gateway", format!("{:?}", old.gateway), format!("{:?}", new.gateway));
    field("finalizers", format!("{:?}", old.finalizers), format!("{:?}", new.finalizers));
    field("ownerReferences", Value::from(old.owners.clone()).to_string(), Value::from(new.owners.clone()).to_string());
    let mut labels = new.labels.clone();
    if !old.labels.contains_key(CLUSTER_NAME_LABEL) {
        labels.remove(CLUSTER_NAME_LABEL);
    }
    field("labels", format!("{:?}", old.labels), format!("{labels:?}"));
    found
}

/// Differences between two snapshots over the objects of `before` (objects added since are
/// ignored; `gone` lists the keys expected to have disappeared). At most 20 are spelled out.
pub fn changes(before: &Snapshot, after: &Snapshot, gone: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut found = Vec::new();
    for (key, old) in &before.addresses {
        let name = format!("IPAddress {}/{}", key.0, key.1);
        match (after.addresses.get(key), gone.contains(key)) {
            (None, true) => {}
            (Some(_), true) => found.push(format!("{name} should be gone")),
            (None, false) => found.push(format!("{name} ({}) disappeared", old.address)),
            (Some(new), false) => {
                found.extend(address_differences(old, new).into_iter().map(|d| format!("{name}: {d}")))
            }
        }
    }
    for (key, old) in &before.claims {
        let name = format!("claim {}/{}", key.0, key.1);
        match (after.claims.get(key), gone.contains(key)) {
            (None, true) => {}
            (Some(_), true) => found.push(format!("{name} should be gone")),
            (None, false) => found.push(format!("{name} disappeared")),
            (Some(new), false) if new != old => found.push(format!("{name}: {old:?} -> {new:?}")),
            _ => {}
        }
    }
    if found.len() > 20 {
        let more = found.len() - 20;
        found.truncate(20);
        found.push(format!("... and {more} more"));
    }
    found
}
