//! Medians over runs, the Markdown tables of docs/benchmarks.md, and results.json (which
//! e2e/tools/bench-plot.py draws).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use serde::Serialize;

use crate::config::{Config, PoolKind, Subject};
use crate::failures::{self, Failure};
use crate::run::RunResult;
use crate::startup::{FillResult, StartupResult};

#[derive(Serialize)]
struct Results<'a> {
    setup: BTreeMap<&'static str, String>,
    runs: &'a [RunResult],
    failures: &'a [Failure],
    fill: Option<&'a FillResult>,
    startup: &'a [StartupResult],
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Median figures of one (claims, pools, subject).
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
    runs: usize,
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
        requests_per_claim: of(|r| r.requests.values().sum::<f64>() / r.claims as f64),
        runs: runs.len(),
    }
}

type Key = (PoolKind, usize, usize, Subject);

fn grouped(results: &[RunResult]) -> BTreeMap<Key, Figures> {
    let mut groups: BTreeMap<Key, Vec<&RunResult>> = BTreeMap::new();
    for r in results {
        groups.entry((r.kind, r.claims, r.pools, r.subject)).or_default().push(r);
    }
    groups.into_iter().map(|(k, v)| (k, figures(&v))).collect()
}

fn ratio(a: Option<&Figures>, b: Option<&Figures>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a.seconds / b.seconds),
        _ => "-".into(),
    }
}

/// The time until every claim had its address, and how much of it creating the claims took.
fn seconds(f: Option<&Figures>) -> String {
    f.map_or("-".into(), |f| format!("{:.1} s ({:.1} s creating)", f.seconds, f.creating))
}

/// The Markdown report: failed runs first, then the figures of the others.
pub fn markdown(
    results: &[RunResult],
    failed: &[Failure],
    fill: Option<&FillResult>,
    startup: &[StartupResult],
) -> String {
    let groups = grouped(results);
    let mut shapes: Vec<(PoolKind, usize, usize)> = groups.keys().map(|(k, n, p, _)| (*k, *n, *p)).collect();
    shapes.dedup();
    shapes.sort_by_key(|(k, n, p)| (*k, *p, *n));
    let mut out = failures::markdown(failed);
    let get = |k, n, p, s| groups.get(&(k, n, p, s));
    let _ = writeln!(out, "### Time until every claim has its address, creating the claims included (median)\n");
    let _ = writeln!(
        out,
        "| pools of | claims | pools | floor | ferro-ipam | in-cluster | ferro-ipam / floor | in-cluster / floor | in-cluster / ferro-ipam |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &(k, n, p) in &shapes {
        let (fl, fe, ic) =
            (get(k, n, p, Subject::Floor), get(k, n, p, Subject::FerroIpam), get(k, n, p, Subject::InCluster));
        let _ = writeln!(
            out,
            "| {} | {n} | {p} | {} | {} | {} | {} | {} | {} |",
            k.name(),
            seconds(fl),
            seconds(fe),
            seconds(ic),
            ratio(fe, fl),
            ratio(ic, fl),
            ratio(ic, fe)
        );
    }
    let _ = writeln!(out, "\n### Per subject (medians; time range over the runs)\n");
    let _ = writeln!(
        out,
        "| pools of | claims | pools | subject | runs | time (min-max) | creating | claims/s | peak RSS | CPU | API requests per claim |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for &(k, n, p) in &shapes {
        for s in [Subject::Floor, Subject::FerroIpam, Subject::InCluster] {
            if let Some(f) = get(k, n, p, s) {
                let _ = writeln!(
                    out,
                    "| {} | {n} | {p} | {} | {} | {:.1} s ({:.1}-{:.1}) | {:.1} s | {:.0} | {:.0} MiB | {:.1} s | {:.2} |",
                    k.name(),
                    s.name(),
                    f.runs,
                    f.seconds,
                    f.min,
                    f.max,
                    f.creating,
                    n as f64 / f.seconds,
                    f.rss,
                    f.cpu,
                    f.requests_per_claim
                );
            }
        }
    }
    let mut kinds: Vec<PoolKind> = shapes.iter().map(|(k, _, _)| *k).collect();
    kinds.dedup();
    for kind in kinds {
        let largest = shapes.iter().filter(|(k, _, _)| *k == kind).max_by_key(|(_, n, p)| (*n, std::cmp::Reverse(*p)));
        if let Some(&(_, n, p)) = largest {
            requests_table(&mut out, results, kind, n, p);
        }
    }
    if !startup.is_empty() {
        let total = startup[0].addresses;
        let _ =
            writeln!(out, "\n### Start-up on a cluster holding {total} IPAddress objects (and their claims; median)\n");
        let _ = writeln!(out, "| subject | runs | ready | first new claim served | peak RSS | CPU | API requests |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
        for s in [Subject::FerroIpam, Subject::InCluster] {
            let runs: Vec<&StartupResult> = startup.iter().filter(|r| r.subject == s).collect();
            if runs.is_empty() {
                continue;
            }
            let of = |f: fn(&StartupResult) -> f64| median(runs.iter().map(|r| f(r)).collect());
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} s | {:.1} s | {:.0} MiB | {:.1} s | {:.0} |",
                s.name(),
                runs.len(),
                of(|r| r.ready_seconds),
                of(|r| r.first_claim_seconds),
                of(|r| r.peak_rss_mib),
                of(|r| r.cpu_seconds),
                of(|r| r.requests.values().sum())
            );
        }
        if let Some(fill) = fill {
            let _ = writeln!(
                out,
                "\nFilling that cluster (the benchmark writes each claim, its address and its status directly) took {:.0} s for {} claims.",
                fill.seconds, fill.claims
            );
        }
    }
    out
}

/// API requests per claim by verb and resource, for one configuration.
fn requests_table(out: &mut String, results: &[RunResult], kind: PoolKind, n: usize, p: usize) {
    let _ = writeln!(
        out,
        "\n### API requests per claim by verb and resource ({n} claims, {p} pool(s) of {}, median)\n",
        kind.name()
    );
    let these = |r: &&RunResult| r.kind == kind && r.claims == n && r.pools == p;
    let mut keys: Vec<String> = results.iter().filter(these).flat_map(|r| r.requests.keys().cloned()).collect();
    keys.sort();
    keys.dedup();
    let _ = writeln!(out, "| request | floor | ferro-ipam | in-cluster |");
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for key in keys {
        let cell = |s: Subject| {
            let values: Vec<f64> = results
                .iter()
                .filter(these)
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
    setup
}

/// Writes results.json and report.md into the output directory.
pub fn write(
    config: &Config,
    runs: &[RunResult],
    failures: &[Failure],
    fill: Option<&FillResult>,
    startup: &[StartupResult],
) -> Result<String> {
    std::fs::create_dir_all(&config.out_dir)?;
    let results = Results { setup: setup(config), runs, failures, fill, startup };
    std::fs::write(config.out_dir.join("results.json"), serde_json::to_string_pretty(&results)?)?;
    let report = markdown(runs, failures, fill, startup);
    std::fs::write(config.out_dir.join("report.md"), &report)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(subject: Subject, seconds: f64, create_seconds: f64) -> RunResult {
        RunResult {
            subject,
            kind: PoolKind::Addresses,
            claims: 200,
            pools: 1,
            run: 0,
            seconds,
            create_seconds,
            peak_rss_mib: 30.0,
            cpu_seconds: 1.0,
            requests: BTreeMap::from([("POST ipaddresses".to_owned(), 200.0)]),
            pools_touched: 0,
            load: (1.0, 1.0),
        }
    }

    #[test]
    fn failed_runs_come_first_and_creation_time_stands_beside_every_total() {
        let runs = [result(Subject::FerroIpam, 10.0, 4.0), result(Subject::Floor, 5.0, 3.9)];
        let failed = [Failure::new("in-cluster 200 claims / 1 pools, run 1".into(), &anyhow::anyhow!("timed out"))];
        let report = markdown(&runs, &failed, None, &[]);
        assert!(report.starts_with("### FAILED: 1 run(s)"), "{report}");
        assert!(
            report.contains("| addresses | 200 | 1 | 5.0 s (3.9 s creating) | 10.0 s (4.0 s creating) | - | 2.00 |"),
            "{report}"
        );
        assert!(
            report.contains("| addresses | 200 | 1 | ferro-ipam | 1 | 10.0 s (10.0-10.0) | 4.0 s | 20 |"),
            "{report}"
        );
        assert!(!markdown(&runs, &[], None, &[]).contains("FAILED"));
    }
}
