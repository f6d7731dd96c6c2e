//! d. A forced relist (410 Gone): the leader is cut off (blackholed) while hand-made
//! `IPAddress`es are created and others deleted, and etcd compacts past everything it has seen.
//! After healing, its watches must relist: no new claim gets a hand-made address, and the freed
//! ones are allocatable again.
//!
//! The API server runs without its watch cache, so that a watch from a compacted
//! resourceVersion really is refused with 410 (the cache would serve it from its own history).
//! The lease is long here: the leader must keep it through the cut, or a fresh leader with a
//! fresh index would hide what this test is about.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::proxy::Proxy;
use k8s_openapi::jiff::Timestamp;
use kube::api::DeleteParams;
use serde_json::json;

use crate::rig::{Findings, ReplicaSpec, Rig, seconds};
use crate::storm;
use crate::{PROMPTLY, SERVED_WITHIN};

const LEASE: Duration = Duration::from_secs(30);
const RENEW_MARGIN: Duration = Duration::from_secs(10);
/// Long enough to create, delete and compact; far shorter than the lease.
const CUT: Duration = Duration::from_secs(3);

fn ip(last: u8) -> String {
    format!("10.93.0.{last}")
}

#[tokio::test(flavor = "multi_thread")]
async fn relist_after_compaction_forgets_deleted_and_learns_hand_made_addresses() {
    let rig = Rig::own_plane("forced-relist", &["--watch-cache=false".to_owned()]).await;
    let s = &rig.s;
    let plane = rig.plane();
    let proxy = Proxy::start(plane.api_address()).unwrap();
    let through_proxy = plane.kubeconfig_for("forced-relist-proxied", &proxy.server()).unwrap();
    let long = ReplicaSpec { lease: LEASE, renew_margin: RENEW_MARGIN, ..ReplicaSpec::default() };
    let a = rig.replica("a", ReplicaSpec { kubeconfig: Some(through_proxy), ..long.clone() });
    assert_eq!(rig.leader(&[&a], PROMPTLY).await, 0);
    let b = rig.replica("b", long);
    let replicas = [&a, &b];

    // 50 addresses: .10-.39 for 30 claims, .40-.44 hand-made before the cut, .45-.49 hand-made
    // during it, .50-.59 free.
    s.pool("pool", json!({"addresses": [format!("{}-{}", ip(10), ip(59))], "prefix": 24, "gateway": ip(1)}))
        .await
        .unwrap();
    for n in 0..30 {
        s.claim(&format!("before-{n}"), "InClusterIPPool", "pool").await.unwrap();
    }
    storm::all_served(s, 30, Instant::now() + Duration::from_secs(60)).await.unwrap();
    for n in 0..5 {
        s.hand_made_address(&format!("hand-old-{n}"), "pool", &ip(40 + n), 24).await.unwrap();
    }
    s.eventually("the leader counts the hand-made addresses", PROMPTLY, || async {
        s.pool_used("pool").await == Some(35)
    })
    .await
    .unwrap();

    let mut findings = Findings::new("forced-relist");
    let seen_at_most = plane.etcd_revision().unwrap();
    let (cut, fault) = (Instant::now(), Timestamp::now());
    proxy.blackhole();
    for n in 0..5 {
        s.hand_made_address(&format!("hand-new-{n}"), "pool", &ip(45 + n), 24).await.unwrap();
        s.addresses().delete(&format!("hand-old-{n}"), &DeleteParams::default()).await.unwrap();
    }
    for n in 0..10 {
        s.claim(&format!("during-{n}"), "InClusterIPPool", "pool").await.unwrap();
    }
    tokio::time::sleep(CUT.saturating_sub(cut.elapsed())).await;
    let compacted = plane.etcd_revision().unwrap();
    plane.compact_etcd(compacted).unwrap();
    assert!(
        compacted > seen_at_most,
        "etcd compacted at {compacted}, not past {seen_at_most}, the newest revision the leader could have seen"
    );
    proxy.heal();
    let healed = Instant::now();
    findings.note(format!(
        "leader cut off for {:.1} s; etcd compacted at revision {compacted} > {seen_at_most} (the newest it could have seen)",
        seconds(fault, Timestamp::now())
    ));
    for n in 0..5 {
        s.claim(&format!("after-{n}"), "InClusterIPPool", "pool").await.unwrap();
    }

    findings.expect("liveness", storm::all_served(s, 45, healed + SERVED_WITHIN).await);
    let held: BTreeSet<String> = s
        .address_map()
        .await
        .unwrap()
        .into_iter()
        .filter(|(name, _)| name.starts_with("during-") || name.starts_with("after-"))
        .map(|(_, address)| address)
        .collect();
    let hand_made: BTreeSet<String> = (45..50).map(ip).collect();
    let freed: BTreeSet<String> = (40..45).map(ip).collect();
    let stolen: Vec<&String> = held.intersection(&hand_made).collect();
    findings.ensure(stolen.is_empty(), || format!("new claims got hand-made addresses: {stolen:?}"));
    let missing: Vec<&String> = freed.difference(&held).collect();
    findings.ensure(missing.is_empty(), || format!("freed addresses never handed out again: {missing:?}"));
    let relisted = a.provider.log_tail(usize::MAX).contains("too old");
    findings.note(format!("the leader's log shows a watch refused with 410: {relisted}"));
    let holder = rig.holder().await;
    findings.ensure(holder.as_deref().is_some_and(|h| a.holds(h)) && b.log().terms.is_empty(), || {
        format!("the leader did not keep its {LEASE:?} lease through a {CUT:?} cut; the holder is {holder:?}")
    });
    rig.check_after_fault(&replicas, &mut findings).await;
    findings.conclude(&replicas);
}
