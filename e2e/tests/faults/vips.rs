//! h. Control-plane VIPs through restarts. Clusters ask for VIPs and get their endpoints; their
//! VIP claims sort before 2,000 bound claims, so that a new term lists them well before the
//! last `IPAddress`. Then the provider is killed (SIGKILL) and started again, stopped (SIGTERM)
//! and started again, a stand-by takes over from a killed leader, and an `IPAddress` of a VIP
//! claim is deleted by hand. After each: no VIP claim is deleted or replaced, every endpoint is
//! still held by its own Cluster's `IPAddress`, no replica says it released a VIP, and a new
//! Cluster gets a VIP of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use ferro_ipam_e2e::cluster_writes::{Cadence, ClusterWrites};
use ferro_ipam_e2e::objects::{Scope, capi, cluster_api_version};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

use crate::PROMPTLY;
use crate::rig::{Replica, ReplicaSpec, Rig};
use crate::storm::{self, Storm};

/// Clusters asking for a VIP before the restarts; one more joins after each.
const CLUSTERS: usize = 8;
/// Bound claims beside them: a listing of this many addresses takes a moment.
const BOUND: usize = 2000;
/// How long nothing may change after each restart, counted from the new leader's readiness.
const WATCHED: Duration = Duration::from_secs(10);
/// What the log says when a VIP claim is deleted for any reason but its Cluster's deletion.
const RELEASED: &str = "releasing the control-plane VIP";

/// What holds a Cluster's VIP: its claim and `IPAddress` (by UID), and the address, which is
/// also the Cluster's endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    claim: String,
    address: String,
    ip: String,
}

fn clusters(s: &Scope) -> Api<DynamicObject> {
    Api::namespaced_with(s.client.clone(), &s.ns, &capi().cluster_resource())
}

/// A Cluster that asks for a control-plane VIP.
async fn opt_in(s: &Scope, name: &str) {
    s.create(json!({
        "apiVersion": cluster_api_version(), "kind": "Cluster",
        "metadata": {"name": name, "labels": {"ferro-ipam.dev/control-plane-vip": "true"}},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "VSphereCluster", "name": name}},
    }))
    .await
    .unwrap_or_else(|e| panic!("creating Cluster {name}: {e:#}"));
}

/// The Cluster's endpoint host, once written.
async fn endpoint(s: &Scope, cluster: &str) -> Option<String> {
    let object = clusters(s).get_opt(cluster).await.ok()??;
    object.data["spec"]["controlPlaneEndpoint"]["host"].as_str().filter(|h| !h.is_empty()).map(str::to_owned)
}

/// What holds the Cluster's VIP now: None unless its claim is live, its `IPAddress` exists and
/// is not being deleted, and the Cluster's endpoint is that address.
async fn held(s: &Scope, cluster: &str) -> Option<Held> {
    let name = format!("{cluster}-control-plane-vip");
    let claim = s.claims().get_opt(&name).await.ok()??;
    let address = s.addresses().get_opt(&name).await.ok()??;
    let live = claim.metadata.deletion_timestamp.is_none() && address.metadata.deletion_timestamp.is_none();
    let ours = endpoint(s, cluster).await.as_deref() == Some(address.spec.address.as_str());
    if !(live && ours) {
        return None;
    }
    Some(Held { claim: claim.uid()?, address: address.uid()?, ip: address.spec.address.clone() })
}

/// What holds each of `names`' VIPs, or the first Cluster whose VIP is not held.
async fn all_held(s: &Scope, names: &[String]) -> Result<BTreeMap<String, Held>, String> {
    let mut all = BTreeMap::new();
    for name in names {
        let held = held(s, name).await.ok_or_else(|| name.clone())?;
        all.insert(name.clone(), held);
    }
    Ok(all)
}

/// Creates Cluster `name` and waits until its VIP is held; panics when the VIP is one another
/// Cluster already holds.
async fn joins(s: &Scope, name: &str, others: &BTreeMap<String, Held>) -> Held {
    opt_in(s, name).await;
    s.eventually(&format!("Cluster {name} has its VIP"), PROMPTLY, || async { held(s, name).await.is_some() })
        .await
        .unwrap();
    let new = held(s, name).await.expect("held a moment ago");
    let taken: Vec<&str> = others.values().map(|h| h.ip.as_str()).collect();
    assert!(!taken.contains(&new.ip.as_str()), "Cluster {name} got {}, a VIP another Cluster holds", new.ip);
    new
}

/// After `what`: for [`WATCHED`], every Cluster's VIP is held by the same claim and `IPAddress`
/// as before, no replica logged a release, and then a new Cluster gets a VIP of its own.
async fn kept(s: &Scope, what: &str, before: &mut BTreeMap<String, Held>, replicas: &[&Replica], newcomer: &str) {
    let names: Vec<String> = before.keys().cloned().collect();
    let same = s
        .stays(&format!("after {what}, every VIP is held as before"), WATCHED, || async {
            all_held(s, &names).await.as_ref() == Ok(&*before)
        })
        .await;
    let released: Vec<&str> = replicas.iter().filter(|r| r.provider.logged(&[RELEASED])).map(|r| r.name).collect();
    if same.is_err() || !released.is_empty() {
        let now = all_held(s, &names).await;
        panic!(
            "after {what}: VIPs held as before: {same:?}; replicas that released a VIP: {released:?}\nbefore: {before:?}\nnow: {now:?}\n{}",
            vip_lines(replicas)
        );
    }
    let new = joins(s, newcomer, before).await;
    before.insert(newcomer.to_owned(), new);
}

/// What the replicas logged of VIPs and of their listings, for a failure's report.
fn vip_lines(replicas: &[&Replica]) -> String {
    let mut lines = Vec::new();
    for replica in replicas {
        let log = replica.provider.log_tail(usize::MAX);
        let relevant = log.lines().filter(|l| l.contains("control-plane VIP") || l.contains(" listed"));
        lines.extend(relevant.take(40).map(|line| format!("{}: {line}", replica.name)));
    }
    lines.join("\n")
}

/// The Clusters are written all along, one every 25 ms, as Cluster API's controllers write
/// theirs: a new term then looks at every Cluster at every moment of its start.
const WRITES: Cadence = Cadence { each: Duration::from_millis(25), round: Duration::ZERO };

/// The Clusters with their VIPs, and the bound claims, served by replica `a`.
async fn set_up(rig: &Rig) -> (Replica, BTreeMap<String, Held>) {
    let s = &rig.s;
    let vips = json!({"addresses": ["10.93.8.10-10.93.8.60"], "prefix": 24, "gateway": "10.93.8.1"});
    s.create(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "vips", "labels": {"cluster-api-vips": "true", "cluster-api-allow-all-providers": "true"}},
        "spec": vips,
    }))
    .await
    .unwrap();
    s.pool("bound", json!({"addresses": ["10.93.0.0/21"], "prefix": 21, "gateway": "10.93.0.1"})).await.unwrap();
    let a = rig.replica("a", ReplicaSpec::default());
    let mut held = BTreeMap::new();
    // Named `a…`: their claims sort before the bound claims `c-…`.
    for n in 0..CLUSTERS {
        let name = format!("a{n}");
        let vip = joins(s, &name, &held).await;
        held.insert(name, vip);
    }
    let last = Storm::start(s, "bound", "c", BOUND, 200).finish().await;
    if let Err(error) = storm::all_served(s, BOUND, last + Duration::from_secs(120)).await {
        panic!("the bound claims: {error:#}");
    }
    (a, held)
}

/// How a replica is stopped before the next one starts.
#[derive(Clone, Copy)]
enum Stop {
    Kill,
    Term,
}

/// The restarts, in order: each stops the replica running and starts the one named. The window
/// that released VIPs lasted well under a second (a Cluster reconciled after the first page of
/// claims was filed, before the last page of addresses), and builds that had the bug lost VIPs
/// in about four restarts of ten here: four restarts and a takeover leave little to chance.
const RESTARTS: [(&str, Stop); 4] = [("a2", Stop::Kill), ("a3", Stop::Term), ("a4", Stop::Kill), ("a5", Stop::Term)];

#[tokio::test(flavor = "multi_thread")]
async fn vips_in_use_survive_sigkill_sigterm_a_takeover_and_an_ipaddress_deleted_by_hand() {
    let rig = Rig::shared_plane("vip-restarts").await;
    let s = &rig.s;
    let (mut running, mut before) = set_up(&rig).await;

    for (n, (next, stop)) in RESTARTS.into_iter().enumerate() {
        let _writes = ClusterWrites::start(s, &before.keys().cloned().collect::<Vec<_>>(), WRITES);
        let what = match stop {
            Stop::Kill => {
                running.provider.kill();
                format!("restart {} (SIGKILL)", n + 1)
            }
            Stop::Term => {
                assert!(running.terminate(Duration::from_secs(20)).is_some(), "{} ignored SIGTERM", running.name);
                format!("restart {} (SIGTERM)", n + 1)
            }
        };
        let started = rig.replica(next, ReplicaSpec::default());
        rig.wait_holder(&started, PROMPTLY).await.unwrap();
        kept(s, &what, &mut before, &[&running, &started], &format!("z{n}")).await;
        running = started;
    }

    let b = rig.replica("b", ReplicaSpec::default());
    let writes = ClusterWrites::start(s, &before.keys().cloned().collect::<Vec<_>>(), WRITES);
    running.provider.kill();
    rig.wait_holder(&b, PROMPTLY).await.unwrap();
    b.provider.wait_ready(PROMPTLY).unwrap();
    kept(s, "a takeover by a stand-by", &mut before, &[&running, &b], "y").await;
    drop(writes);

    // Deleted by hand: made again with the same address, by the same claim, the endpoint kept.
    let victim = before["a0"].clone();
    s.addresses().delete("a0-control-plane-vip", &DeleteParams::default()).await.unwrap();
    s.eventually("a0's IPAddress is made again", PROMPTLY, || async {
        held(s, "a0").await.is_some_and(|h| h.address != victim.address)
    })
    .await
    .unwrap();
    let remade = held(s, "a0").await.expect("held a moment ago");
    assert_eq!((&remade.claim, &remade.ip), (&victim.claim, &victim.ip), "a0's VIP changed hands");
    before.insert("a0".into(), remade);
    kept(s, "an IPAddress deleted by hand", &mut before, &[&b], "x").await;
    ferro_ipam_e2e::invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
