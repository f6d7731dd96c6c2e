//! A spoke's ferro-ipam SIGKILLed while hundreds of its claims are being served, started again 3 s
//! later (a new process, which takes the leader Lease once the dead one's has expired); the
//! other spoke and the hub keep allocating from the same hub pool meanwhile.

use std::time::{Duration, Instant};

use super::rig::{self, HUB_SECRET, TestPool, since};
use super::{FAULT_AT, HUB_STORM_CLAIMS, SERVED_WITHIN, STORM_CLAIMS, STORM_STARTS_WITHIN};
use crate::PROVIDER_READY_WITHIN;
use crate::report::Report;

const POOL: TestPool = TestPool { name: "kill9", cidr: "10.41.0.0/22", prefix: 22, gateway: "10.41.0.1" };
/// How long the spoke has no ferro-ipam.
const DEAD_FOR: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread")]
async fn a_spokes_ferro_ipam_killed_mid_storm_and_started_again_serves_every_claim_without_a_duplicate() {
    let mut fleet = rig::lend().await;
    let began = Instant::now();
    let mut report = Report::new("kill9");
    if let Err(error) = POOL.create(&fleet, [HUB_SECRET; 2]).await {
        panic!("the pools: {error:#}");
    }
    let hub = fleet.hub.plane.client().await;
    let parts = rig::parts(&fleet, "kill9", [HUB_STORM_CLAIMS, STORM_CLAIMS, STORM_CLAIMS]).await;
    let storms = rig::storms(&parts, POOL.name);
    let (a, b) = (&parts[1].scope, &parts[2].scope);
    let at_kill = match rig::wait_addresses(a, FAULT_AT, STORM_STARTS_WITHIN).await {
        Ok(count) => count,
        Err(error) => panic!("the storm on spoke-a: {error:#}"),
    };
    let b_at_kill = rig::addresses(b).await;

    let killed_log = fleet.spokes[0].provider.process.log.clone();
    fleet.spokes[0].provider.kill();
    let killed = Instant::now();
    // A create the dead process had sent may still land in the first moment.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let a_after_kill = rig::addresses(a).await;
    tokio::time::sleep(DEAD_FOR - Duration::from_secs(1)).await;
    let (a_dead, b_dead) = (rig::addresses(a).await, rig::addresses(b).await);
    report.note(format!(
        "spoke-a's ferro-ipam SIGKILLed at {at_kill} of {STORM_CLAIMS} addresses (spoke-b at {b_at_kill}); \
         {DEAD_FOR:?} later spoke-a held {a_dead}, spoke-b {b_dead}"
    ));
    if a_dead != a_after_kill {
        report.fail(format!(
            "spoke-a's addresses grew while its ferro-ipam was dead: {a_after_kill} 1 s after the kill, {a_dead} {DEAD_FOR:?} after"
        ));
    }
    if b_dead <= b_at_kill {
        report.fail(format!("spoke-b allocated nothing while spoke-a's ferro-ipam was dead ({b_at_kill} -> {b_dead})"));
    }

    let relaunched = tokio::task::block_in_place(|| {
        rig::relaunch(&mut fleet.spokes[0]).and_then(|_| fleet.spokes[0].provider.wait_ready(PROVIDER_READY_WITHIN))
    });
    if let Err(error) = relaunched {
        report.fail(format!("starting spoke-a's ferro-ipam again: {error:#}"));
    }
    let restarted = Instant::now();
    let mut allocating_again = None;
    while restarted.elapsed() < SERVED_WITHIN {
        if rig::addresses(a).await > a_dead {
            allocating_again = Some(restarted.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match allocating_again {
        Some(after) => report.note(format!(
            "spoke-a's new ferro-ipam ready {:.1} s after the kill, allocating {:.1} s after it was ready (the dead one's Lease expires first)",
            (restarted - killed).as_secs_f64(),
            after.as_secs_f64()
        )),
        None => report.fail(format!("spoke-a allocated nothing within {SERVED_WITHIN:?} of its ferro-ipam's restart")),
    }

    let last_create = match rig::finish(storms).await {
        Ok(last) => last,
        Err(error) => panic!("{error:#}"),
    };
    let from = restarted.max(last_create);
    match rig::wait_all_ready(&fleet, &parts, &hub, from + SERVED_WITHIN, "kill9").await {
        Ok(()) => report.note(format!(
            "every claim Ready ({HUB_STORM_CLAIMS} on the hub, {STORM_CLAIMS} on each spoke), {} after the restart",
            since(restarted)
        )),
        Err(error) => report.fail(format!("claims served within {SERVED_WITHIN:?} of the restart: {error:#}")),
    }
    rig::check(&fleet, &parts, &hub, POOL.name, "after the kill", false, &mut report).await;
    rig::no_leak(&fleet, &parts, &hub, &POOL, &mut report).await;
    report.note(format!("the test took {}", since(began)));
    rig::conclude(report, &fleet, &[("the killed ferro-ipam of spoke-a".to_owned(), killed_log)]);
}
