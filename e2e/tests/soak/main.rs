//! The soak: a nemesis playing a seeded plan of faults, alone and overlapping, on replicas of
//! the real binary competing for one Lease, under a workload that never stops, while a history
//! checker watches every `IPAddress`. It fails when one address was held twice at any moment of
//! the history, when a claim is neither served nor truly waiting 30 s after the faults stop,
//! or when the invariants of the objects or the replicas' allocation windows are broken; it
//! prints its seed and timeline either way (`make soak`, docs/soak.md).
//!
//! It stands on the fault suite's rig (replicas, Lease, findings) and storm module, shared
//! with it, not copied.

#[path = "../faults/rig.rs"]
#[expect(dead_code, reason = "the soak uses part of the fault suite's rig")]
mod rig;
#[path = "../faults/storm.rs"]
mod storm;

mod cast;
mod history;
mod liveness;
mod nemesis;
mod report;
mod rng;
mod schedule;
mod settings;
mod timeline;
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{invariants, leadership};

use cast::Cast;
use history::History;
use nemesis::Nemesis;
use report::Report;
use rig::{Findings, Rig};
use rng::Rng;
use settings::Settings;
use timeline::Timeline;
use workload::Workload;

/// Liveness: once the faults stop, every claim is served (or truly waiting) within this.
pub const SERVED_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_seeded_nemesis_under_a_changing_workload_never_hands_out_an_address_twice() {
    let settings = Settings::from_env();
    eprintln!("soak: seed {} (replay: {})", settings.seed, settings.replay());
    let mut rng = Rng::seeded(settings.seed);
    let plan = schedule::plan(&mut rng.fork(), settings.chaos);
    let mut report = Report::new(&settings, &plan);
    let timeline = Timeline::new();

    // Without its watch cache, the API server serves watches from etcd: a compaction makes
    // every watch that reconnects from before it relist (410 Gone).
    let mut rig = Rig::own_plane("soak", &["--watch-cache=false".to_owned()]).await;
    rig.s.filter = Some(rig.s.ns.clone());
    let rig = Arc::new(rig);
    let mut b = Scope::on(rig.plane(), "soak-b").await;
    b.filter = rig.s.filter.clone();
    let history = History::record(rig.s.client.clone(), timeline.clone()).await;
    let layout = workload::layout::create(&rig.s, &b).await;
    let cast = Arc::new(tokio::task::block_in_place(|| Cast::start(rig.clone(), settings.replicas)));
    timeline.note(format!("{} replicas ready; the workload and the faults begin", settings.replicas));

    let mut workload = Workload::start(&rig.s, &b, layout, &mut rng.fork(), &timeline);
    let tally = Nemesis::play(cast.clone(), plan, settings.chaos, &mut rng.fork(), &timeline).await;
    let quiet = Instant::now();
    report.faults(&tally.injected);
    timeline.note("the faults have ended; the workload stops");
    for line in cast.restore().await {
        timeline.note(line);
    }
    workload.stop().await;

    let mut findings = Findings::new("soak");
    let served = liveness::served_or_truly_waiting(&[&rig.s, &b], quiet, quiet + SERVED_WITHIN).await;
    match &served {
        Ok(after) => report.line(format!(
            "liveness: every claim served or truly waiting {:.1} s after the faults stopped",
            after.as_secs_f64()
        )),
        Err(error) => report.line(format!("liveness: FAILED: {error:#}")),
    }
    findings.expect("liveness", served.map(drop));
    let counters = workload.counters.clone();
    let waits = workload.finish().await;
    findings.expect("invariants", invariants::check(&rig.s.client, &[&rig.s.ns, &b.ns]).await);
    let differences = history::compare_with_list(&rig.s.client, &history.ledger).await;
    findings.ensure(differences.is_empty(), || {
        format!("the history does not match a fresh list at the end: {differences:#?}")
    });
    let ledger = history.stop().await;
    {
        let ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
        let duplicates = &ledger.duplicates;
        findings.ensure(duplicates.is_empty(), || format!("addresses held twice in the history: {duplicates:#?}"));
        report.history(&ledger);
    }
    for failure in &tally.failures {
        findings.expect("nemesis", Err(anyhow!("{failure}")));
    }
    let windows = cast.all_replicas(|all| {
        let logs: Vec<_> = all.iter().map(|r| r.log()).collect();
        (all.len(), leadership::check_windows(&logs))
    });
    let (processes, windows) = windows.await;
    findings.expect("allocation windows", windows);

    report.line(format!("workload: {}; {}", counters.summary(), claims_left(&rig.s, &b).await));
    report.waits(&waits.lock().unwrap_or_else(|e| e.into_inner()));
    report.line(format!("replica processes started over the run: {processes}"));
    let file = report.publish(&settings, &timeline.lines());
    findings.detail(format!("seed {}; replay with: {}", settings.seed, settings.replay()));
    findings.detail(format!("report and fault timeline: {}", file.display()));
    findings.detail(format!("control plane and replica logs: {}", rig.plane().dir.display()));
    cast.all_replicas(|all| findings.conclude(all)).await;
}

/// How many claims are left at the end.
async fn claims_left(a: &Scope, b: &Scope) -> String {
    let mut left = 0;
    for s in [a, b] {
        left += s.claims().list(&Default::default()).await.map(|l| l.items.len()).unwrap_or(0);
    }
    format!("{left} claims at the end")
}
