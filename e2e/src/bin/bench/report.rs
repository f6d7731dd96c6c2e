//! Medians over runs, the Markdown tables of docs/benchmarks.md, and results.json (which
//! e2e/tools/bench-plot.py draws).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;

use crate::config::{Config, PoolKind, Shape, Subject};
use crate::failures::{self, Failure};
use crate::layout::MAX_WIDE_POOLS;
use crate::run::RunResult;
use crate::startup::{Starter, Startup, StartupResult};

/// A configuration a subject was not run in, and why (not a failure).
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub subject: Subject,
    #[serde(flatten)]
    pub shape: Shape,
    pub reason: String,
}

/// Everything measured so far.
#[derive(Debug, Default, Serialize)]
pub struct Bench {
    pub runs: Vec<RunResult>,
    pub failures: Vec<Failure>,
    pub skipped: Vec<Skipped>,
    pub startup: Startup,
    /// The shared-pool configuration: a spoke pool against a local pool.
    pub shared_pool: crate::shared_pool::SharedPool,
}

#[derive(Serialize)]
struct Results<'a> {
    setup: BTreeMap<&'static str, String>,
    #[serde(flatten)]
    bench: &'a Bench,
}

/// The sum of request counts (0, not the -0 of an empty `sum`).
pub fn total(requests: &BTreeMap<String, f64>) -> f64 {
    requests.values().fold(0.0, |sum, n| sum + n)
}

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Median figures of one (configuration, subject).
#[derive(Clone, Copy, Debug)]
struct Figures {
    seconds: f64,
    /// Of `seconds`, creating the claims.
    creating: f64,
    min: f64,
    max: f64,
    rss: f64,
    cpu: f64,
    requests_per_claim: f64,
    /// Pool edits made by the storm, and how many a second.
    edits: f64,
    edit_rate: f64,
    /// Writes of pool statuses per pool.
    status_writes: f64,
    runs: usize,
}

/// How many times the subject wrote a pool's status (`PATCH` or `PUT` of `<pools>/status`),
/// per pool of the run.
pub fn status_writes_per_pool(r: &RunResult) -> f64 {
    let resource = format!("{}/status", r.shape.kind.plural());
    let writes = r
        .requests
        .iter()
        .filter(|(key, _)| {
            key.split_once(' ').is_some_and(|(verb, on)| matches!(verb, "PATCH" | "PUT") && on == resource)
        })
        .fold(0.0, |sum, (_, n)| sum + n);
    writes / r.shape.pools as f64
}

fn figures(runs: &[&RunResult]) -> Figures {
    let of = |f: fn(&RunResult) -> f64| median(runs.iter().map(|r| f(r)).collect());
    let seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    Figures {
        seconds: of(|r| r.seconds),
        creating: of(|r| r.create_seconds),
        min: seconds.iter().copied().fold(f64::INFINITY, f64::min),
        max: seconds.iter().copied().fold(0.0, f64::max),
        rss: of(|r| r.peak_rss_mib),
        cpu: of(|r| r.cpu_seconds),
        requests_per_claim: of(|r| total(&r.requests) / r.shape.claims as f64),
        edits: of(|r| r.edits.made as f64),
        edit_rate: of(|r| if r.edits.seconds > 0.0 { r.edits.made as f64 / r.edits.seconds } else { 0.0 }),
        status_writes: of(status_writes_per_pool),
        runs: runs.len(),
    }
}

type Key = (Shape, Subject);

fn grouped(results: &[RunResult]) -> BTreeMap<Key, Figures> {
    let mut groups: BTreeMap<Key, Vec<&RunResult>> = BTreeMap::new();
    for r in results {
        groups.entry((r.shape, r.subject)).or_default().push(r);
    }
    groups.into_iter().map(|(k, v)| (k, figures(&v))).collect()
}

fn ratio(a: Option<&Figures>, b: Option<&Figures>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.seconds / b.seconds),
        _ => "-".into(),
    }
}

const SUBJECTS: [Subject; 3] = [Subject::Floor, Subject::FerroIpam, Subject::InCluster];

/// The order of the report's rows: by kind, plain runs before storms, then pools, then claims.
fn row_order(shape: &Shape) -> (PoolKind, u32, usize, usize) {
    (shape.kind, shape.edits_per_second, shape.pools, shape.claims)
}

/// The Markdown report: failed runs first, then the figures of the others.
pub fn markdown(bench: &Bench) -> String {
    let results = &bench.runs;
    let groups = grouped(results);
    let mut shapes: Vec<Shape> = groups.keys().map(|(shape, _)| *shape).collect();
    shapes.extend(bench.skipped.iter().map(|s| s.shape));
    shapes.sort_by_key(row_order);
    shapes.dedup();
    // The tables of the claim configurations, left out when none ran (the shared pool alone).
    let mut out = String::new();
    let get = |shape: Shape, s: Subject| groups.get(&(shape, s));
    let skipped =
        |shape: Shape, s: Subject| bench.skipped.iter().find(|k| k.shape == shape && k.subject == s).map(|k| &k.reason);
    // The time until every claim had its address, and how much of it creating the claims took.
    let seconds = |shape: Shape, s: Subject| match (get(shape, s), skipped(shape, s)) {
        (Some(f), _) => format!("{:.1} s ({:.1} s creating)", f.seconds, f.creating),
        (None, Some(reason)) => reason.clone(),
        (None, None) => "-".into(),
    };
    let _ = writeln!(out, "### Time until every claim has its address, creating the claims included (median)\n");
    let _ = writeln!(
        out,
        "Rows with edits/s above 0 ran while the benchmark edited the pools' specs at that rate (the pool-edit \
         storm); pools above {MAX_WIDE_POOLS} are /24s with few claims each.\n"
    );
    let _ = writeln!(
        out,
        "| pools of | claims | pools | edits/s | floor | ferro-ipam | in-cluster | ferro-ipam / floor | in-cluster / floor | in-cluster / ferro-ipam |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &shape in &shapes {
        let (fl, fe, ic) = (get(shape, Subject::Floor), get(shape, Subject::FerroIpam), get(shape, Subject::InCluster));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            shape.kind.name(),
            shape.claims,
            shape.pools,
            shape.edits_per_second,
            seconds(shape, Subject::Floor),
            seconds(shape, Subject::FerroIpam),
            seconds(shape, Subject::InCluster),
            ratio(fe, fl),
            ratio(ic, fl),
            ratio(ic, fe)
        );
    }
    let _ = writeln!(out, "\n### Per subject (medians; time range over the runs)\n");
    let _ = writeln!(
        out,
        "Pool status writes per pool: `PATCH` and `PUT` of the pools' `status`, over the pools. The floor \
         writes each pool's status once, after the pool's last claim has its address; a provider that \
         writes as the counts change writes more, ferro-ipam no more often than its per-pool write throttle \
         allows.\n"
    );
    let _ = writeln!(
        out,
        "| pools of | claims | pools | edits/s | subject | runs | time (min-max) | creating | claims/s | peak RSS | CPU | API requests per claim | pool edits made | pool status writes per pool |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &shape in &shapes {
        let Shape { kind, claims, pools, edits_per_second } = shape;
        for s in SUBJECTS {
            if let Some(f) = get(shape, s) {
                let edits = match edits_per_second {
                    0 => "-".to_owned(),
                    _ => format!("{:.0} ({:.1}/s)", f.edits, f.edit_rate),
                };
                let _ = writeln!(
                    out,
                    "| {} | {claims} | {pools} | {edits_per_second} | {} | {} | {:.1} s ({:.1}-{:.1}) | {:.1} s | {:.0} | {:.0} MiB | {:.1} s | {:.2} | {edits} | {:.2} |",
                    kind.name(),
                    s.name(),
                    f.runs,
                    f.seconds,
                    f.min,
                    f.max,
                    f.creating,
                    claims as f64 / f.seconds,
                    f.rss,
                    f.cpu,
                    f.requests_per_claim,
                    f.status_writes,
                );
            } else if let Some(reason) = skipped(shape, s) {
                let _ = writeln!(
                    out,
                    "| {} | {claims} | {pools} | {edits_per_second} | {} | 0 | {reason} | | | | | | | |",
                    kind.name(),
                    s.name(),
                );
            }
        }
    }
    if shapes.is_empty() {
        out.clear();
    }
    let mut out = failures::markdown(&bench.failures) + &out;
    out.push_str(&crate::many_pools::markdown(&crate::many_pools::ratios(results)));
    // Requests by verb: the largest plain configuration of each kind, and every configuration
    // with many pools or a storm.
    let mut detailed: Vec<Shape> = Vec::new();
    let mut kinds: Vec<PoolKind> = shapes.iter().map(|s| s.kind).collect();
    kinds.dedup();
    for kind in kinds {
        let plain = shapes
            .iter()
            .filter(|s| s.kind == kind && s.edits_per_second == 0 && s.pools <= MAX_WIDE_POOLS)
            .max_by_key(|s| (s.claims, std::cmp::Reverse(s.pools)));
        detailed.extend(plain);
    }
    detailed.extend(shapes.iter().filter(|s| s.edits_per_second > 0 || s.pools > MAX_WIDE_POOLS));
    for shape in detailed {
        requests_table(&mut out, results, shape);
    }
    startup_tables(&mut out, &bench.startup);
    out.push_str(&crate::shared_pool::markdown(&bench.shared_pool));
    out
}

/// API requests per claim by verb and resource, for one configuration.
fn requests_table(out: &mut String, results: &[RunResult], shape: Shape) {
    let these: Vec<&RunResult> = results.iter().filter(|r| r.shape == shape).collect();
    if these.is_empty() {
        return;
    }
    let Shape { kind, claims: n, pools: p, edits_per_second } = shape;
    let storm = match edits_per_second {
        0 => String::new(),
        rate => format!(", {rate} pool edits/s (the benchmark's own edits subtracted)"),
    };
    let _ = writeln!(
        out,
        "\n### API requests per claim by verb and resource ({n} claims, {p} pool(s) of {}{storm}, median)\n",
        kind.name()
    );
    let mut keys: Vec<String> = these.iter().flat_map(|r| r.requests.keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    let _ = writeln!(out, "| request | floor | ferro-ipam | in-cluster |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for key in keys {
        let cell = |s: Subject| {
            let values: Vec<f64> = these
                .iter()
                .filter(|r| r.subject == s)
                .map(|r| r.requests.get(&key).copied().unwrap_or(0.0) / n as f64)
                .collect();
            if values.is_empty() { "-".to_owned() } else { format!("{:.3}", median(values)) }
        };
        let _ = writeln!(
            out,
            "| `{key}` | {} | {} | {} |",
            cell(Subject::Floor),
            cell(Subject::FerroIpam),
            cell(Subject::InCluster)
        );
    }
}

/// Median figures of one (size, starter) of the start-up part.
struct StartFigures {
    runs: usize,
    ready: f64,
    first_claim: Option<f64>,
    peak: f64,
    steady: Option<f64>,
    cpu: f64,
    requests: f64,
}

fn start_figures(runs: &[&StartupResult]) -> StartFigures {
    let of = |f: fn(&StartupResult) -> f64| median(runs.iter().map(|r| f(r)).collect());
    let of_some = |f: fn(&StartupResult) -> Option<f64>| {
        let values: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
        (!values.is_empty()).then(|| median(values))
    };
    StartFigures {
        runs: runs.len(),
        ready: of(|r| r.ready_seconds),
        first_claim: of_some(|r| r.first_claim_seconds),
        peak: of(|r| r.peak_rss_mib),
        steady: of_some(|r| r.steady_rss_mib),
        cpu: of(|r| r.cpu_seconds),
        requests: of(|r| total(&r.requests)),
    }
}

/// Bytes of resident memory per claim: (steady RSS − idle RSS) / claims.
pub fn bytes_per_claim(steady_mib: f64, idle_mib: f64, claims: usize) -> f64 {
    (steady_mib - idle_mib) * 1024.0 * 1024.0 / claims as f64
}

fn startup_tables(out: &mut String, startup: &Startup) {
    if startup.results.is_empty() && startup.skipped.is_empty() {
        return;
    }
    let mut sizes: Vec<usize> = startup.results.iter().map(|r| r.addresses).collect();
    sizes.extend(startup.skipped.iter().map(|s| s.addresses));
    sizes.sort_unstable();
    sizes.dedup();
    let _ = writeln!(
        out,
        "\n### Start-up on a cluster holding N IPAddress objects and their claims, over 100 pools (median)\n"
    );
    let _ = writeln!(
        out,
        "Ready: ferro-ipam's /readyz, the in-cluster provider's controllers all running, the list floor's exit \
         (process start to the end of its lists of everything ferro-ipam lists). First claim: a claim created at \
         ready has its address. Steady RSS: once the API is quiet after that claim. Bytes per claim: (steady RSS \
         − ferro-ipam's idle RSS) / N.\n"
    );
    let _ = writeln!(
        out,
        "| addresses | subject | runs | ready | ready / list floor | first new claim served | first claim − ready | peak RSS | steady RSS | peak / steady | bytes per claim | CPU | API requests |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for size in sizes {
        let of = |starter: Starter| {
            let runs: Vec<&StartupResult> =
                startup.results.iter().filter(|r| r.addresses == size && r.subject == starter).collect();
            (!runs.is_empty()).then(|| start_figures(&runs))
        };
        let floor = of(Starter::ListFloor);
        for starter in Starter::ALL {
            let Some(f) = of(starter) else {
                if let Some(skip) = startup.skipped.iter().find(|s| s.addresses == size && s.subject == starter) {
                    let _ = writeln!(out, "| {size} | {} | 0 | {} | | | | | | | | | |", starter.name(), skip.reason);
                }
                continue;
            };
            let provider = matches!(starter, Starter::FerroIpam | Starter::InCluster);
            let against_floor = match (&floor, provider) {
                (Some(floor), true) => format!("{:.2}", f.ready / floor.ready),
                _ => "-".into(),
            };
            let seconds = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} s"));
            let mib = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0} MiB"));
            let per_claim = match (starter, f.steady, startup.idle_rss_mib) {
                (Starter::FerroIpam, Some(steady), Some(idle)) => {
                    format!("{:.0} B", bytes_per_claim(steady, idle, size))
                }
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "| {size} | {} | {} | {:.2} s | {against_floor} | {} | {} | {:.0} MiB | {} | {} | {per_claim} | {:.1} s | {:.0} |",
                starter.name(),
                f.runs,
                f.ready,
                seconds(f.first_claim),
                seconds(f.first_claim.map(|c| c - f.ready)),
                f.peak,
                mib(f.steady),
                f.steady.map_or("-".into(), |s| format!("{:.2}", f.peak / s)),
                f.cpu,
                f.requests,
            );
        }
    }
    let _ = writeln!(out);
    if let Some(idle) = startup.idle_rss_mib {
        let _ = writeln!(out, "ferro-ipam's idle RSS (100 pools, no claims, 2 s after /readyz): {idle:.1} MiB.");
    }
    for fill in &startup.fills {
        let _ = writeln!(
            out,
            "Filling from {} to {} claims (the benchmark writes each claim, its address and its status directly) took {:.0} s.",
            fill.from, fill.claims, fill.seconds
        );
    }
}

/// The machine and versions, for the report.
pub fn setup(config: &Config) -> BTreeMap<&'static str, String> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let memory = read("/proc/meminfo").lines().next().unwrap_or_default().to_owned();
    let mut setup = BTreeMap::new();
    setup.insert("cpus", std::thread::available_parallelism().map(|n| n.to_string()).unwrap_or_default());
    setup.insert("cpu", cpu);
    setup.insert("memory", memory);
    setup.insert("kernel", read("/proc/sys/kernel/osrelease").trim().to_owned());
    setup.insert("ferro_ipam_bin", config.ferro_bin.display().to_string());
    setup.insert("ferro_ipam_args", config.ferro_args.join(" "));
    setup.insert("create_concurrency", config.create_concurrency.to_string());
    setup.insert("floor_concurrency", config.floor_concurrency.to_string());
    setup.insert("peer_max_claims", config.peer_max_claims.to_string());
    setup.insert("peer_max_startup", config.peer_max_startup.to_string());
    setup.insert("list_page_size", config.list_page_size.to_string());
    setup.insert("shared_pool_block_size", config.shared_block_size.to_string());
    setup
}

/// Writes results.json and report.md into the output directory.
pub fn write(config: &Config, bench: &Bench) -> Result<String> {
    std::fs::create_dir_all(&config.out_dir)?;
    let results = Results { setup: setup(config), bench };
    std::fs::write(config.out_dir.join("results.json"), serde_json::to_string_pretty(&results)?)?;
    let report = markdown(bench);
    std::fs::write(config.out_dir.join("report.md"), &report)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::startup::{FillResult, StartupSkip};
    use crate::storm::Edits;

    fn shape(claims: usize, pools: usize, edits_per_second: u32) -> Shape {
        Shape { kind: PoolKind::Addresses, claims, pools, edits_per_second }
    }

    fn result(subject: Subject, seconds: f64, create_seconds: f64) -> RunResult {
        RunResult {
            subject,
            shape: shape(200, 1, 0),
            run: 0,
            seconds,
            create_seconds,
            peak_rss_mib: 30.0,
            cpu_seconds: 1.0,
            requests: BTreeMap::from([("POST ipaddresses".to_owned(), 200.0)]),
            pools_touched: 0,
            edits: Edits::default(),
            load: (1.0, 1.0),
        }
    }

    #[test]
    fn failed_runs_come_first_and_creation_time_stands_beside_every_total() {
        let runs = vec![result(Subject::FerroIpam, 10.0, 4.0), result(Subject::Floor, 5.0, 3.9)];
        let failures =
            vec![Failure::new("in-cluster 200 claims / 1 pools, run 1".into(), &anyhow::anyhow!("timed out"))];
        let bench = Bench { runs, failures, ..Bench::default() };
        let report = markdown(&bench);
        assert!(report.starts_with("### FAILED: 1 run(s)"), "{report}");
        assert!(
            report
                .contains("| addresses | 200 | 1 | 0 | 5.0 s (3.9 s creating) | 10.0 s (4.0 s creating) | - | 2.00 |"),
            "{report}"
        );
        assert!(
            report.contains(
                "| addresses | 200 | 1 | 0 | ferro-ipam | 1 | 10.0 s (10.0-10.0) | 4.0 s | 20 | 30 MiB | 1.0 s | 1.00 | - | 0.00 |"
            ),
            "{report}"
        );
        let passed = Bench { failures: Vec::new(), ..bench };
        assert!(!markdown(&passed).contains("FAILED"));
    }

    #[test]
    fn storm_rows_show_their_rate_and_edits_and_a_skipped_peer_is_not_a_failure() {
        let storm = shape(1000, 10, 20);
        let mut run = result(Subject::FerroIpam, 8.0, 3.0);
        run.shape = storm;
        run.edits = Edits { made: 160, seconds: 8.0 };
        let skipped = vec![Skipped {
            subject: Subject::InCluster,
            shape: storm,
            reason: "not run: above BENCH_PEER_MAX_CLAIMS (500)".into(),
        }];
        let bench = Bench { runs: vec![run], skipped, ..Bench::default() };
        let report = markdown(&bench);
        assert!(!report.contains("FAILED"), "{report}");
        assert!(
            report.contains("| addresses | 1000 | 10 | 20 | - | 8.0 s (3.0 s creating) | not run: above BENCH_PEER_MAX_CLAIMS (500) | - | - | - |"),
            "{report}"
        );
        assert!(report.contains("| 160 (20.0/s) |"), "{report}");
        assert!(
            report.contains(
                "| addresses | 1000 | 10 | 20 | in-cluster | 0 | not run: above BENCH_PEER_MAX_CLAIMS (500) |"
            ),
            "{report}"
        );
        assert!(report.contains("(1000 claims, 10 pool(s) of addresses, 20 pool edits/s"), "{report}");
    }

    #[test]
    fn pool_status_writes_are_counted_per_pool_for_every_subject() {
        let many = shape(300, 300, 0);
        let mut floor = result(Subject::Floor, 5.0, 2.0);
        floor.shape = many;
        floor.requests.insert("PATCH inclusterippools/status".into(), 300.0);
        let mut ferro = result(Subject::FerroIpam, 6.0, 2.0);
        ferro.shape = many;
        ferro.requests.insert("PATCH inclusterippools/status".into(), 450.0);
        // The finalizer patch of a pool is no status write.
        ferro.requests.insert("PATCH inclusterippools".into(), 300.0);
        let report = markdown(&Bench { runs: vec![floor, ferro], ..Bench::default() });
        assert!(
            report.contains("| API requests per claim | pool edits made | pool status writes per pool |"),
            "{report}"
        );
        assert!(report.contains("| addresses | 300 | 300 | 0 | floor | 1 | 5.0 s (5.0-5.0) | 2.0 s | 60 | 30 MiB | 1.0 s | 1.67 | - | 1.00 |"), "{report}");
        assert!(report.contains("| addresses | 300 | 300 | 0 | ferro-ipam | 1 | 6.0 s (6.0-6.0) | 2.0 s | 50 | 30 MiB | 1.0 s | 3.17 | - | 1.50 |"), "{report}");
        assert!(report.contains("| `PATCH inclusterippools/status` | 1.000 | 1.500 | - |"), "{report}");
    }

    fn start(
        subject: Starter,
        addresses: usize,
        ready: f64,
        first: Option<f64>,
        peak: f64,
        steady: Option<f64>,
    ) -> StartupResult {
        StartupResult {
            subject,
            addresses,
            run: 0,
            ready_seconds: ready,
            first_claim_seconds: first,
            peak_rss_mib: peak,
            steady_rss_mib: steady,
            cpu_seconds: 1.0,
            requests: BTreeMap::new(),
            page_size: None,
            listed: None,
        }
    }

    #[test]
    fn startup_rows_give_the_ratio_to_the_list_floor_and_bytes_per_claim() {
        let startup = Startup {
            idle_rss_mib: Some(10.0),
            fills: vec![FillResult { from: 0, claims: 2000, seconds: 12.0 }],
            results: vec![
                start(Starter::ListFloor, 2000, 0.5, None, 20.0, None),
                start(Starter::ListFloorUnpaged, 2000, 0.4, None, 25.0, None),
                start(Starter::FerroIpam, 2000, 1.0, Some(1.5), 40.0, Some(20.0)),
            ],
            skipped: vec![StartupSkip {
                subject: Starter::InCluster,
                addresses: 2000,
                reason: "not run: above BENCH_PEER_MAX_STARTUP (1000)".into(),
            }],
        };
        let report = markdown(&Bench { startup, ..Bench::default() });
        // (20 − 10) MiB over 2000 claims: 5243 bytes each.
        assert!(
            report.contains("| 2000 | ferro-ipam | 1 | 1.00 s | 2.00 | 1.5 s | 0.5 s | 40 MiB | 20 MiB | 2.00 | 5243 B | 1.0 s | 0 |"),
            "{report}"
        );
        assert!(report.contains("| 2000 | list floor | 1 | 0.50 s | - | - | - | 20 MiB | - | - | - |"), "{report}");
        assert!(report.contains("| 2000 | list floor (unpaged) | 1 | 0.40 s |"), "{report}");
        assert!(
            report.contains("| 2000 | in-cluster | 0 | not run: above BENCH_PEER_MAX_STARTUP (1000) |"),
            "{report}"
        );
        assert!(report.contains("idle RSS (100 pools, no claims, 2 s after /readyz): 10.0 MiB"), "{report}");
        assert!(!report.contains("FAILED"));
    }
}
