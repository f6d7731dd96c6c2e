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
mod verdict;
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ferro_ipam_e2e::objects::Scope;

use cast::Cast;
use history::History;
use nemesis::Nemesis;
use report::Report;
use rig::Rig;
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

    let stage = Stage::set(settings.replicas, &timeline).await;
    let mut workload = Workload::start(&stage.a, &stage.b, stage.layout.clone(), &mut rng.fork(), &timeline);
    let tally = Nemesis::play(stage.cast.clone(), plan, settings.chaos, &mut rng.fork(), &timeline).await;
    let quiet = Instant::now();
    report.faults(&tally.injected);
    timeline.note("the faults have ended; the workload stops");
    for line in stage.cast.restore().await {
        timeline.note(line);
    }
    workload.stop().await;

    let verdict = verdict::Verdict { a: &stage.a, b: &stage.b, cast: &stage.cast, quiet, tally: &tally };
    verdict.judge(workload, stage.history, &settings, report, &timeline).await;
}

/// What the soak runs on: its own control plane (restarted by the faults), two namespaces of
/// one watch filter, the history recording, the pools made, the replicas ready.
struct Stage {
    a: Scope,
    b: Scope,
    cast: Arc<Cast>,
    history: History,
    layout: workload::layout::Layout,
}

impl Stage {
    async fn set(replicas: usize, timeline: &Timeline) -> Stage {
        // Without its watch cache, the API server serves watches from etcd: a compaction makes
        // every watch that reconnects from before it relist (410 Gone).
        let mut rig = Rig::own_plane("soak", &["--watch-cache=false".to_owned()]).await;
        rig.s.filter = Some(rig.s.ns.clone());
        let plane = rig.plane();
        let a = Scope { plane, client: rig.s.client.clone(), ns: rig.s.ns.clone(), filter: rig.s.filter.clone() };
        let mut b = Scope::on(plane, "soak-b").await;
        b.filter = a.filter.clone();
        let history = History::record(a.client.clone(), timeline.clone()).await;
        let layout = workload::layout::create(&a, &b).await;
        let rig = Arc::new(rig);
        let cast = Arc::new(tokio::task::block_in_place(|| Cast::start(rig, replicas)));
        timeline.note(format!("{replicas} replicas ready; the workload and the faults begin"));
        Stage { a, b, cast, history, layout }
    }
}
