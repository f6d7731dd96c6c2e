//! c. The leader alone partitioned from the API server in the middle of a storm: it reaches the
//! API server only through a proxy, which cuts it off until the other replica has taken over
//! and allocated, then heals. Two kinds of partition: a blackhole (silence: requests hang), and
//! refused connections (errors at once: the leader's lease loop backs off while its reconciles
//! retry sooner).

use std::time::{Duration, Instant};

use ferro_ipam_e2e::proxy::Proxy;
use k8s_openapi::jiff::Timestamp;

use crate::PROMPTLY;
use crate::rig::{Findings, ReplicaSpec, Rig, seconds};

const CLAIMS: usize = 600;
/// Longer than the lease, and than TCP's first retransmissions: a real partition.
const PARTITIONED_AT_LEAST: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
enum Partition {
    Blackhole,
    Refused,
}

async fn partitioned_mid_storm(test: &'static str, partition: Partition) {
    let rig = Rig::shared_plane(test).await;
    let proxy = Proxy::start(rig.plane().api_address()).unwrap();
    let through_proxy = rig.plane().kubeconfig_for(&format!("{}-proxied", rig.s.ns), &proxy.server()).unwrap();
    // The proxied replica starts alone, so that it is the leader the partition cuts off.
    let a = rig.replica("a", ReplicaSpec { kubeconfig: Some(through_proxy), ..ReplicaSpec::default() });
    assert_eq!(rig.leader(&[&a], PROMPTLY).await, 0);
    let b = rig.replica("b", ReplicaSpec::default());
    let replicas = [&a, &b];
    assert!(proxy.accepted() > 0, "replica a does not reach the API server through the proxy");
    let (storm, before) = rig.busy_storm(92, CLAIMS).await;

    let mut findings = Findings::new(test);
    let (cut, fault) = (Instant::now(), Timestamp::now());
    match partition {
        Partition::Blackhole => proxy.blackhole(),
        Partition::Refused => proxy.refuse(),
    }
    findings.mid_storm(&storm, before, &a);
    let (healed, healed_at) = rig.ride_out(&b, cut, PARTITIONED_AT_LEAST, || proxy.heal()).await;
    findings.ensure(b.allocations() > 0, || "the new leader allocated nothing during the partition".into());
    findings.note(format!(
        "replica a partitioned ({partition:?}) at {before} of {CLAIMS} addresses for {:.1} s",
        seconds(fault, healed_at)
    ));

    rig.conclude_storm(storm, (fault, healed), "the partition began", &replicas, findings).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_partitioned_by_a_blackhole_mid_storm_then_healed() {
    partitioned_mid_storm("leader-blackholed", Partition::Blackhole).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_partitioned_by_refused_connections_mid_storm_then_healed() {
    partitioned_mid_storm("leader-refused", Partition::Refused).await;
}
