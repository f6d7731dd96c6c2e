//! b. The leader frozen (SIGSTOP) past its lease in the middle of a storm, until the other
//! replica has taken over and allocated, then thawed (SIGCONT) with its reconciles in flight.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use crate::PROMPTLY;
use crate::rig::{Findings, ReplicaSpec, Rig, seconds};

const CLAIMS: usize = 600;
/// The reproduction froze the leader for 8 s: two lease durations.
const FROZEN_AT_LEAST: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread")]
async fn leader_frozen_past_its_lease_mid_storm_then_thawed() {
    let rig = Rig::shared_plane("leader-frozen").await;
    let (a, b) = (rig.replica("a", ReplicaSpec::default()), rig.replica("b", ReplicaSpec::default()));
    let replicas = [&a, &b];
    let leader = rig.leader(&replicas, PROMPTLY).await;
    let (frozen, other) = (replicas[leader], replicas[1 - leader]);
    let (storm, before) = rig.busy_storm(91, CLAIMS).await;

    let mut findings = Findings::new("leader-frozen");
    let (stopped, fault) = (Instant::now(), Timestamp::now());
    frozen.signal(libc::SIGSTOP);
    findings.mid_storm(&storm, before, frozen);
    let (thawed, thawed_at) = rig.ride_out(other, stopped, FROZEN_AT_LEAST, || frozen.signal(libc::SIGCONT)).await;
    findings.ensure(other.allocations() > 0, || "the new leader allocated nothing while the old one was frozen".into());
    findings.note(format!(
        "replica {} frozen at {before} of {CLAIMS} addresses for {:.1} s",
        frozen.name,
        seconds(fault, thawed_at)
    ));

    rig.conclude_storm(storm, (fault, thawed), "the leader was frozen", &replicas, findings).await;
}
