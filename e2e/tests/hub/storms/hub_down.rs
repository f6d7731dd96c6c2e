//! The hub's kube-apiserver SIGKILLed in the middle of the spokes' storms, started again 15 s
//! later on the same port and flags. Meanwhile the spokes' API servers are up and their storms go
//! on, and each spoke makes 40 more claims once the hub is down: each spoke serves the claims
//! that fit the free addresses of its blocks, the others wait `WaitingForHub`, and no address
//! already handed out changes.

use std::time::{Duration, Instant};

use super::rig::{self, BLOCK_SIZE, HUB_SECRET, TestPool, since};
use super::storm::Storm;
use super::{FAULT_AT, HUB_STORM_CLAIMS, SERVED_WITHIN, STORM_CLAIMS, STORM_RATE, STORM_STARTS_WITHIN, SURGE};
use crate::report::Report;

const POOL: TestPool = TestPool { name: "hubdown", cidr: "10.42.0.0/22", prefix: 22, gateway: "10.42.0.1" };
/// How long the hub's API server is away.
const DOWN: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread")]
async fn the_hubs_api_server_stopped_mid_storm_spokes_serve_what_fits_and_every_claim_is_served_once_it_is_back() {
    let fleet = rig::lend().await;
    let began = Instant::now();
    let mut report = Report::new("hub-down");
    if let Err(error) = POOL.create(&fleet, [HUB_SECRET; 2]).await {
        panic!("the pools: {error:#}");
    }
    let hub = fleet.hub.plane.client().await;
    let parts = rig::parts(&fleet, "hubdown", [HUB_STORM_CLAIMS, STORM_CLAIMS + SURGE, STORM_CLAIMS + SURGE]).await;
    let mut storms: Vec<Storm> = [HUB_STORM_CLAIMS, STORM_CLAIMS, STORM_CLAIMS]
        .into_iter()
        .zip(&parts)
        .map(|(count, part)| Storm::start(&part.scope, POOL.name, "c", count, STORM_RATE))
        .collect();
    let spokes = [&parts[1].scope, &parts[2].scope];
    if let Err(error) = rig::wait_addresses(spokes[0], FAULT_AT, STORM_STARTS_WITHIN).await {
        panic!("the storm on spoke-a: {error:#}");
    }
    // The room each spoke has from the hub as the hub goes: its granted blocks.
    let mut room = [0usize; 2];
    for (i, spoke) in fleet.spokes.iter().enumerate() {
        let namespace = spoke.hub_namespace.expect("a spoke's hub namespace");
        room[i] =
            rig::granted_cidrs(&hub, POOL.name, namespace).await.map(|c| c.len()).unwrap_or(0) * BLOCK_SIZE as usize;
    }
    let mut bound_before = Vec::new();
    let mut ready_before = Vec::new();
    for s in spokes {
        bound_before.push(rig::bound(s).await);
        ready_before.push(s.ready_claims().await);
    }

    fleet.hub.plane.kill_apiserver();
    let down = Instant::now();
    // More claims on each spoke than the room it can hold: some must wait for the hub.
    storms.extend(parts[1..].iter().map(|part| Storm::start(&part.scope, POOL.name, "s", SURGE, STORM_RATE)));
    let mut waiting_seen = [0usize; 2];
    let mut waiting_message = None;
    let mut waiting_problem = None;
    let mut ready_down = ready_before.clone();
    let mut readyz_failed = false;
    while down.elapsed() < DOWN {
        for (i, s) in spokes.iter().enumerate() {
            let (count, message, problem) = rig::waiting_for_hub(s).await;
            if count > waiting_seen[i] {
                waiting_seen[i] = count;
                waiting_message = waiting_message.or(message);
            }
            waiting_problem = waiting_problem.or(problem);
            ready_down[i] = s.ready_claims().await;
        }
        readyz_failed |= !fleet.hub.plane.kubectl(&["get", "--raw", "/readyz"]).is_ok_and(|o| o.status.success());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let moved_down: Vec<String> = futures::future::join_all(
        spokes.iter().zip(&bound_before).map(|(s, before)| async move { rig::moved(before, &rig::bound(s).await) }),
    )
    .await
    .concat();
    let restarted = tokio::task::block_in_place(|| fleet.hub.plane.restart_apiserver());
    let back = Instant::now();
    if let Err(error) = restarted {
        report.fail(format!("starting the hub's API server again: {error:#}"));
        return rig::conclude(report, &fleet, &[]);
    }
    report.note(format!(
        "the hub's kube-apiserver SIGKILLed when the spokes held {} and {} addresses ({:?} addresses of granted blocks), \
         ready again {:.1} s later",
        bound_before[0].len(),
        bound_before[1].len(),
        room,
        (back - down).as_secs_f64()
    ));
    if !readyz_failed {
        report.fail("the hub's /readyz answered while its API server was killed: the fault did not happen");
    }
    let served: Vec<usize> = ready_down.iter().zip(&ready_before).map(|(d, b)| d.saturating_sub(*b)).collect();
    report.note(format!(
        "while the hub was down: claims served on spoke-a {}, spoke-b {}; most WaitingForHub at once: {waiting_seen:?}; e.g. {:?}",
        served[0], served[1], waiting_message
    ));
    if served.iter().all(|s| *s == 0) {
        report.fail("no spoke served a claim while the hub was down, though they held free addresses of their blocks");
    }
    if waiting_seen.iter().all(|w| *w == 0) {
        report.fail(format!(
            "no claim said WaitingForHub while the hub was down, though each spoke made {} claims, beyond its room \
             ({room:?} addresses granted just before the outage)",
            STORM_CLAIMS + SURGE
        ));
    }
    // The page promises a message that "says what fails"; noted, not failed: the issue asks for
    // the reason.
    match &waiting_problem {
        Some(message) => report.note(format!("a WaitingForHub message during the outage says what fails: {message}")),
        None => report.note("no WaitingForHub message during the outage said what fails (each still read \"the claim is served as soon as the hub grants one\")"),
    }
    if !moved_down.is_empty() {
        report.fail(format!("bound addresses changed while the hub was down: {moved_down:?}"));
    }

    let last_create = match rig::finish(storms).await {
        Ok(last) => last,
        Err(error) => panic!("{error:#}"),
    };
    match rig::wait_all_ready(&fleet, &parts, &hub, back.max(last_create) + SERVED_WITHIN, "hub-down").await {
        Ok(()) => report.note(format!("every claim Ready, {} after the hub came back", since(back))),
        Err(error) => report.fail(format!("claims served within {SERVED_WITHIN:?} of the hub's return: {error:#}")),
    }
    let mut moved = Vec::new();
    for (s, before) in spokes.iter().zip(&bound_before) {
        moved.extend(rig::moved(before, &rig::bound(s).await));
    }
    if moved.is_empty() {
        report.note(format!(
            "the {} addresses bound before the outage are the same after it",
            bound_before.iter().map(|b| b.len()).sum::<usize>()
        ));
    } else {
        report.fail(format!("bound addresses changed across the outage: {moved:?}"));
    }
    rig::check(&fleet, &parts, &hub, POOL.name, "after the hub's outage", false, &mut report).await;
    rig::no_leak(&fleet, &parts, &hub, &POOL, &mut report).await;
    report.note(format!("the test took {}", since(began)));
    rig::conclude(report, &fleet, &[]);
}
