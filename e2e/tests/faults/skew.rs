//! e. Clock skew (Debian's libfaketime): a standby whose wall clock runs 10 s ahead must not
//! take a live lease; a leader 60 s ahead must keep a released address for the pool's 60 s
//! grace period of server time, not of its own.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::rig::{Findings, Replica, ReplicaSpec, Rig, seconds};
use crate::storm::{self, Storm};
use crate::{PROMPTLY, SERVED_WITHIN};

/// Starts a replica whose clock runs `ahead` seconds fast, and checks that it does: its first
/// log line is stamped that far ahead of the test's (the server's) clock.
fn skewed(rig: &Rig, name: &'static str, ahead: i64) -> Replica {
    let launched = Timestamp::now();
    let replica = rig.replica(name, ReplicaSpec { clock_ahead: ahead, ..ReplicaSpec::default() });
    let first = replica.provider.log_tail(usize::MAX);
    let stamped = first.split_whitespace().next().and_then(|t| t.parse::<Timestamp>().ok());
    let lead = stamped.map(|t| seconds(launched, t));
    assert!(
        lead.is_some_and(|lead| lead > ahead as f64 - 2.0 && lead < ahead as f64 + 10.0),
        "replica {name} should log {ahead} s ahead (is libfaketime working?): its first line is {lead:?} s ahead"
    );
    replica
}

const CLAIMS: usize = 300;

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_ten_seconds_ahead_never_takes_a_live_lease() {
    let rig = Rig::shared_plane("standby-ahead").await;
    let mut a = rig.replica("a", ReplicaSpec::default());
    assert_eq!(rig.leader(&[&a], PROMPTLY).await, 0);
    let b = skewed(&rig, "b", 10);
    let mut findings = Findings::new("standby-ahead");

    rig.s.pool("pool", json!({"addresses": ["10.94.0.0/22"], "prefix": 22, "gateway": "10.94.0.1"})).await.unwrap();
    let storm = Storm::start(&rig.s, "pool", "c", CLAIMS, 100);
    // Throughout the storm and until every claim is served, the Lease stays with the leader.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut holders = Vec::new();
    while rig.s.ready_claims().await < CLAIMS && Instant::now() < deadline {
        // (None: the Lease could not be read this time.)
        if let Some(holder) = rig.holder().await
            && !a.holds(&holder)
            && holders.last() != Some(&holder)
        {
            holders.push(holder);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    storm.finish().await;
    findings.expect("liveness", storm::all_served(&rig.s, CLAIMS, Instant::now()).await);
    findings.ensure(holders.is_empty(), || format!("the Lease left the live leader for {holders:?}"));
    findings.ensure(b.log().terms.is_empty(), || {
        format!("the standby 10 s ahead led {} times beside a live leader", b.log().terms.len())
    });

    // The skewed standby still takes over from a leader that is gone.
    a.provider.kill();
    let (killed, fault) = (Instant::now(), Timestamp::now());
    for n in 0..20 {
        rig.s.claim(&format!("after-{n}"), "InClusterIPPool", "pool").await.unwrap();
    }
    findings
        .expect("liveness after the leader died", storm::all_served(&rig.s, CLAIMS + 20, killed + SERVED_WITHIN).await);
    let replicas = [&a, &b];
    rig.takeover(&replicas, "the leader was killed", fault, &mut findings);
    rig.check_after_fault(&replicas, &mut findings).await;
    findings.conclude(&replicas);
}

const GRACE_SECONDS: i64 = 60;

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_sixty_seconds_ahead_keeps_a_released_address_for_sixty_seconds_of_server_time() {
    let rig = Rig::shared_plane("leader-ahead").await;
    let a = skewed(&rig, "a", 60);
    assert_eq!(rig.leader(&[&a], PROMPTLY).await, 0);
    let b = rig.replica("b", ReplicaSpec::default());
    let replicas = [&a, &b];
    let s = &rig.s;
    let mut findings = Findings::new("leader-ahead");

    let spec =
        json!({"addresses": ["10.95.0.10-10.95.0.12"], "prefix": 24, "addressReuseGracePeriodSeconds": GRACE_SECONDS});
    s.pool("pool", spec).await.unwrap();
    for n in 0..3 {
        s.claim(&format!("c-{n}"), "InClusterIPPool", "pool").await.unwrap();
    }
    storm::all_served(s, 3, Instant::now() + PROMPTLY).await.unwrap();
    let released = s.address_map().await.unwrap()["c-1"].clone();
    s.delete_claim("c-1").await.unwrap();
    let deleted = s.claims().get("c-1").await.ok().and_then(|c| c.metadata.deletion_timestamp);
    let deleted = deleted.expect("the deleted claim waits for the grace period with its finalizer").0;
    // The pool is full: the next claim can only get the released address, once the grace period is over.
    s.claim("next", "InClusterIPPool", "pool").await.unwrap();
    let patience = Duration::from_secs(GRACE_SECONDS as u64) + SERVED_WITHIN;
    let served = s.wait_allocated("next", patience).await;
    findings.expect("liveness after the grace period", served.as_ref().map(drop).map_err(|e| anyhow::anyhow!("{e:#}")));
    if let Ok(address) = served {
        let created = address.metadata.creation_timestamp.expect("the API server stamps creation").0;
        let after = seconds(deleted, created);
        findings.note(format!("released address handed out again {after:.0} s of server time after the deletion"));
        // Both timestamps are whole seconds.
        findings.ensure(after >= (GRACE_SECONDS - 1) as f64, || {
            format!("{released} was handed out again {after:.0} s after its claim's deletion, within the {GRACE_SECONDS} s grace period")
        });
        findings.ensure(address.spec.address == released, || {
            format!("next got {} instead of {released}", address.spec.address)
        });
    }
    rig.check_after_fault(&replicas, &mut findings).await;
    findings.conclude(&replicas);
}
