//! a. The API server stopped for longer than the lease in the middle of a claim storm, then
//! started again on the same port; the same with etcd (same port, same data directory).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use crate::PROMPTLY;
use crate::rig::{Findings, ReplicaSpec, Rig, seconds};

/// Eight seconds of storm: it pauses while the server is away and goes on once it is back,
/// while a new leader takes over.
const CLAIMS: usize = 800;
/// Three lease durations: every replica's lease has expired when the server comes back.
const DOWN: Duration = Duration::from_secs(12);

#[derive(Clone, Copy, Debug)]
enum Stopped {
    ApiServer,
    Etcd,
}

async fn stopped_mid_storm(test: &'static str, stopped: Stopped) {
    let rig = Rig::own_plane(test, &[]).await;
    let (a, b) = (rig.replica("a", ReplicaSpec::default()), rig.replica("b", ReplicaSpec::default()));
    let replicas = [&a, &b];
    let leader = rig.leader(&replicas, PROMPTLY).await;
    let (storm, before) = rig.busy_storm(90, CLAIMS).await;

    let mut findings = Findings::new(test);
    let fault = Timestamp::now();
    let plane = rig.plane();
    match stopped {
        Stopped::ApiServer => plane.kill_apiserver(),
        Stopped::Etcd => plane.kill_etcd(),
    }
    findings.mid_storm(&storm, before, replicas[leader]);
    tokio::time::sleep(DOWN).await;
    let visible = !plane.kubectl(&["get", "--raw", "/readyz"]).is_ok_and(|o| o.status.success());
    findings.ensure(visible, || format!("the API server was ready with {stopped:?} stopped"));
    let restarted = match stopped {
        Stopped::ApiServer => plane.restart_apiserver(),
        Stopped::Etcd => plane.restart_etcd(),
    };
    if let Err(error) = restarted {
        panic!("starting {stopped:?} again: {error:#}");
    }
    let (back, back_at) = (Instant::now(), Timestamp::now());
    findings.note(format!(
        "{stopped:?} killed at {before} of {CLAIMS} addresses, replica {} leading; ready again after {:.1} s",
        replicas[leader].name,
        seconds(fault, back_at)
    ));

    rig.conclude_storm(storm, (fault, back), "the fault began", &replicas, findings).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn api_server_stopped_past_the_lease_mid_storm_then_started_again() {
    stopped_mid_storm("api-server-restart", Stopped::ApiServer).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_stopped_past_the_lease_mid_storm_then_started_again() {
    stopped_mid_storm("etcd-restart", Stopped::Etcd).await;
}
