//! b. The leader frozen (SIGSTOP) past its lease in the middle of a storm, until the other
//! replica has taken over and allocated, then thawed (SIGCONT) with its reconciles in flight.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use crate::PROMPTLY;
use crate::rig::{Findings, ReplicaSpec, Rig, seconds};
use crate::storm::{self, Storm};

const CLAIMS: usize = 600;
const PER_SECOND: u32 = 100;
/// The reproduction froze the leader for 8 s: two lease durations.
const FROZEN_AT_LEAST: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread")]
async fn leader_frozen_past_its_lease_mid_storm_then_thawed() {
    let rig = Rig::shared_plane("leader-frozen").await;
    let (a, b) = (rig.replica("a", ReplicaSpec::default()), rig.replica("b", ReplicaSpec::default()));
    let replicas = [&a, &b];
    let leader = rig.leader(&replicas, PROMPTLY).await;
    let (frozen, other) = (replicas[leader], replicas[1 - leader]);
    rig.s.pool("pool", json!({"addresses": ["10.91.0.0/22"], "prefix": 22, "gateway": "10.91.0.1"})).await.unwrap();
    let storm = Storm::start(&rig.s, "pool", "c", CLAIMS, PER_SECOND);
    let before = storm::wait_addresses(&rig.s, CLAIMS / 6, Duration::from_secs(60)).await;

    let mut findings = Findings::new("leader-frozen");
    let (stopped, fault) = (Instant::now(), Timestamp::now());
    frozen.signal(libc::SIGSTOP);
    findings.ensure(before < CLAIMS && frozen.allocations() > 0, || {
        format!("the leader was not frozen mid-storm: {before} addresses, {} by the leader", frozen.allocations())
    });
    let took_over = rig.ride_out(other, stopped, FROZEN_AT_LEAST).await;
    frozen.signal(libc::SIGCONT);
    let (thawed, thawed_at) = (Instant::now(), Timestamp::now());
    if let Err(error) = took_over {
        panic!("the fault did not happen: the other replica never led while the leader was frozen: {error:#}");
    }
    findings.ensure(other.allocations() > 0, || "the new leader allocated nothing while the old one was frozen".into());
    findings.note(format!(
        "replica {} frozen at {before} of {CLAIMS} addresses for {:.1} s",
        frozen.name,
        seconds(fault, thawed_at)
    ));

    rig.conclude_storm(storm, (fault, thawed), "the leader was frozen", &replicas, findings).await;
}
