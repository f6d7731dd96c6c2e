//! spoke-a cut off from the hub in the middle of its storm: its hub kubeconfig (a Secret of its
//! own for this test's pool) names a loopback proxy in front of the hub's API server, which
//! refuses every connection, open or new, for 20 s, then forwards again; spoke-a makes 40 more
//! claims once cut off. spoke-b reaches the hub directly. During the cut spoke-a serves what fits
//! its blocks, the rest waits `WaitingForHub`, and its `ferro_ipam_hub_reachable` for the pool
//! is 0; after it, 1 again.

use std::time::{Duration, Instant};

use ferro_ipam_e2e::proxy::Proxy;

use super::rig::{self, BLOCK_SIZE, HUB_SECRET, TestPool, since};
use super::storm::Storm;
use super::{FAULT_AT, HUB_STORM_CLAIMS, SERVED_WITHIN, STORM_CLAIMS, STORM_RATE, STORM_STARTS_WITHIN, SURGE};
use crate::fleet::{Cluster, PROVIDER_NAMESPACE};
use crate::report::Report;

const POOL: TestPool = TestPool { name: "partition", cidr: "10.43.0.0/22", prefix: 22, gateway: "10.43.0.1" };
/// spoke-a's Secret with a kubeconfig for the hub through the proxy.
const PROXIED_SECRET: &str = "hub-via-proxy";
/// How long the proxy refuses every connection.
const CUT_FOR: Duration = Duration::from_secs(20);
/// The metric goes back to 1 within this of the heal (the session's watch backs off to 30 s at most).
const REACHABLE_AGAIN_WITHIN: Duration = Duration::from_secs(60);

/// `ferro_ipam_hub_reachable` of the pool, as spoke `cluster`'s ferro-ipam serves it now.
fn reachable(cluster: &Cluster) -> Option<f64> {
    let text = cluster.provider.metrics_text()?;
    let label = format!("pool=\"{}\"", POOL.name);
    text.lines()
        .find(|line| line.starts_with("ferro_ipam_hub_reachable{") && line.contains(&label))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

/// Waits until the metric reads `value`; how long it took.
async fn wait_reachable(cluster: &Cluster, value: f64, within: Duration) -> Option<Duration> {
    let from = Instant::now();
    while from.elapsed() < within {
        if reachable(cluster) == Some(value) {
            return Some(from.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spoke_cut_off_from_the_hub_mid_storm_serves_what_fits_waits_for_the_rest_and_serves_all_once_healed() {
    let fleet = rig::lend().await;
    let began = Instant::now();
    let mut report = Report::new("partition");
    let proxy = Proxy::start(fleet.hub.plane.api_address()).expect("the proxy");
    let spoke = &fleet.spokes[0];
    let file = fleet.work.join("spoke-a-via-proxy.kubeconfig");
    let file_arg = file.to_string_lossy().into_owned();
    let secret = std::fs::copy(fleet.work.join("spoke-a.kubeconfig"), &file)
        .map_err(anyhow::Error::from)
        .and_then(|_| {
            spoke.plane.kubectl_ok(&[
                "--kubeconfig",
                &file_arg,
                "config",
                "set-cluster",
                "hub",
                "--server",
                &proxy.server(),
            ])
        })
        .and_then(|_| {
            let from = format!("--from-file=kubeconfig={file_arg}");
            spoke.plane.kubectl_ok(&["-n", PROVIDER_NAMESPACE, "create", "secret", "generic", PROXIED_SECRET, &from])
        });
    if let Err(error) = secret {
        panic!("spoke-a's Secret through the proxy: {error:#}");
    }
    if let Err(error) = POOL.create(&fleet, [PROXIED_SECRET, HUB_SECRET]).await {
        panic!("the pools: {error:#}");
    }
    if wait_reachable(spoke, 1.0, REACHABLE_AGAIN_WITHIN).await.is_none() || proxy.accepted() == 0 {
        panic!(
            "spoke-a's pool never reached the hub through the proxy ({} connections; metric {:?})",
            proxy.accepted(),
            reachable(spoke)
        );
    }
    let hub = fleet.hub.plane.client().await;
    let parts = rig::parts(&fleet, "partition", [HUB_STORM_CLAIMS, STORM_CLAIMS + SURGE, STORM_CLAIMS]).await;
    let mut storms: Vec<Storm> = [HUB_STORM_CLAIMS, STORM_CLAIMS, STORM_CLAIMS]
        .into_iter()
        .zip(&parts)
        .map(|(count, part)| Storm::start(&part.scope, POOL.name, "c", count, STORM_RATE))
        .collect();
    let (a, b) = (&parts[1].scope, &parts[2].scope);
    if let Err(error) = rig::wait_addresses(a, FAULT_AT, STORM_STARTS_WITHIN).await {
        panic!("the storm on spoke-a: {error:#}");
    }
    let room = rig::granted_cidrs(&hub, POOL.name, "spoke-a").await.map(|c| c.len()).unwrap_or(0) * BLOCK_SIZE as usize;
    let (bound_a, bound_b) = (rig::bound(a).await, rig::bound(b).await);
    let (ready_a, ready_b) = (a.ready_claims().await, b.ready_claims().await);

    proxy.refuse();
    let cut = Instant::now();
    // More claims on spoke-a than the room it can hold: some must wait for the hub.
    storms.push(Storm::start(a, POOL.name, "s", SURGE, STORM_RATE));
    let mut unreachable_after = None;
    let mut waiting_seen = 0;
    let mut waiting_message = None;
    let mut waiting_problem = None;
    let (mut ready_a_cut, mut ready_b_cut) = (ready_a, ready_b);
    while cut.elapsed() < CUT_FOR {
        if unreachable_after.is_none() && reachable(spoke) == Some(0.0) {
            unreachable_after = Some(cut.elapsed());
        }
        let (count, message, problem) = rig::waiting_for_hub(a).await;
        if count > waiting_seen {
            waiting_seen = count;
            waiting_message = waiting_message.or(message);
        }
        waiting_problem = waiting_problem.or(problem);
        (ready_a_cut, ready_b_cut) = (a.ready_claims().await, b.ready_claims().await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let still_unreachable = reachable(spoke);
    let moved_cut = rig::moved(&bound_a, &rig::bound(a).await);
    proxy.heal();
    let healed = Instant::now();
    report.note(format!(
        "spoke-a cut off from the hub (every connection refused) at {} of {STORM_CLAIMS} addresses ({room} addresses of granted blocks) for {:.1} s",
        bound_a.len(),
        (healed - cut).as_secs_f64()
    ));
    match unreachable_after {
        Some(after) => report.note(format!(
            "ferro_ipam_hub_reachable{{pool=\"{}\"}} on spoke-a: 0 {:.1} s into the cut ({still_unreachable:?} at its end)",
            POOL.name,
            after.as_secs_f64()
        )),
        None => report.fail(format!(
            "ferro_ipam_hub_reachable{{pool=\"{}\"}} on spoke-a never read 0 during the {CUT_FOR:?} cut (last: {still_unreachable:?})",
            POOL.name
        )),
    }
    report.note(format!(
        "during the cut: spoke-a served {} claims, spoke-b {}; most of spoke-a's claims WaitingForHub at once: {waiting_seen}; e.g. {waiting_message:?}",
        ready_a_cut.saturating_sub(ready_a),
        ready_b_cut.saturating_sub(ready_b)
    ));
    if waiting_seen == 0 {
        report.fail(format!(
            "no claim of spoke-a said WaitingForHub during the cut, though it made {} claims, beyond its room \
             ({room} addresses granted just before the cut)",
            STORM_CLAIMS + SURGE
        ));
    }
    match &waiting_problem {
        Some(message) => report.note(format!("a WaitingForHub message during the cut says what fails: {message}")),
        None => report.note("no WaitingForHub message during the cut said what fails (each still read \"the claim is served as soon as the hub grants one\")"),
    }
    if !moved_cut.is_empty() {
        report.fail(format!("spoke-a's bound addresses changed during the cut: {moved_cut:?}"));
    }
    match wait_reachable(spoke, 1.0, REACHABLE_AGAIN_WITHIN).await {
        Some(after) => report
            .note(format!("ferro_ipam_hub_reachable on spoke-a back to 1 {:.1} s after the heal", after.as_secs_f64())),
        None => report.fail(format!(
            "ferro_ipam_hub_reachable on spoke-a not back to 1 within {REACHABLE_AGAIN_WITHIN:?} of the heal: {:?}",
            reachable(spoke)
        )),
    }

    let last_create = match rig::finish(storms).await {
        Ok(last) => last,
        Err(error) => panic!("{error:#}"),
    };
    match rig::wait_all_ready(&fleet, &parts, &hub, healed.max(last_create) + SERVED_WITHIN, "partition").await {
        Ok(()) => report.note(format!("every claim Ready, {} after the heal", since(healed))),
        Err(error) => report.fail(format!("claims served within {SERVED_WITHIN:?} of the heal: {error:#}")),
    }
    let mut moved = rig::moved(&bound_a, &rig::bound(a).await);
    moved.extend(rig::moved(&bound_b, &rig::bound(b).await));
    if !moved.is_empty() {
        report.fail(format!("bound addresses changed across the cut: {moved:?}"));
    }
    rig::check(&fleet, &parts, &hub, POOL.name, "after the partition", false, &mut report).await;
    rig::no_leak(&fleet, &parts, &hub, &POOL, &mut report).await;
    report.note(format!("the test took {}", since(began)));
    rig::conclude(report, &fleet, &[]);
}
