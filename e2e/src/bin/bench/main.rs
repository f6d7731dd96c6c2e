//! `ferro-ipam-bench` (`make bench`): the end-to-end benchmark. On one fresh control plane per
//! run, N claims are created at once and timed until every one has its address, for ferro-ipam,
//! the in-cluster provider and the floor (the same writes with no allocation logic), in every
//! configuration (pool kind, claims, pools, pool edits a second); then each provider is started
//! on clusters that already hold many addresses, beside the list floor (a client that only
//! lists what ferro-ipam lists at its start); and a spoke pool, leasing blocks from a hub on a
//! second control plane, against a local pool (`BENCH_SHARED_POOL`). Configuration by
//! environment variables (see
//! config.rs and docs/benchmarks.md); results go to `$BENCH_OUT` (default target/bench):
//! results.json and report.md.

mod config;
mod failures;
mod floor;
mod hub_pair;
mod layout;
mod list_floor;
mod many_pools;
mod measure;
mod records;
mod report;
mod run;
mod shared_pool;
mod startup;
mod storm;
mod subject;

use anyhow::Result;

use config::Config;
use failures::Failure;
use report::{Bench, Skipped};

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("floor") => return floor::main(&args[2..]).await,
        Some("list-floor") => return list_floor::main(&args[2..]).await,
        _ => {}
    }
    let config = Config::from_env()?;
    eprintln!("bench: {config:?}");
    let mut bench = Bench::default();
    // Runs are the outer loop: after the first pass every configuration has a result, and each
    // further pass adds to the medians. The start-up measurement comes after the first pass.
    for run in 0..config.runs {
        for shape in config.shapes() {
            for subject in config::order(&config.subjects, run) {
                if let Some(reason) = config.skip(subject, &shape) {
                    if run == 0 {
                        eprintln!("bench: {} with {}: {reason}", subject.name(), shape.describe());
                        bench.skipped.push(Skipped { subject, shape, reason });
                    }
                    continue;
                }
                eprintln!("bench: {} with {}, run {} ...", subject.name(), shape.describe(), run + 1);
                match run::allocation(&config, subject, shape, run).await {
                    Ok(result) => {
                        eprintln!(
                            "bench:   {:.1} s ({:.1} s creating), {:.0} MiB peak, {:.1} s CPU, {:.2} requests per claim{}",
                            result.seconds,
                            result.create_seconds,
                            result.peak_rss_mib,
                            result.cpu_seconds,
                            report::total(&result.requests) / shape.claims as f64,
                            match result.edits.made {
                                0 => String::new(),
                                made => format!(", {made} pool edits in {:.1} s", result.edits.seconds),
                            }
                        );
                        bench.runs.push(result);
                    }
                    Err(error) => {
                        eprintln!("bench:   FAILED: {error:#}");
                        bench.failures.push(Failure::of_run(subject, &shape, run, &error));
                    }
                }
                report::write(&config, &bench)?;
            }
        }
        if run == 0 && !config.startup_sizes.is_empty() {
            let mut startup = std::mem::take(&mut bench.startup);
            let measured = startup::measure(&config, &mut startup, &mut |progress| {
                bench.startup = progress.clone();
                let _ = report::write(&config, &bench);
            })
            .await;
            bench.startup = startup;
            if let Err(error) = measured {
                eprintln!("bench: start-up measurement FAILED: {error:#}");
                bench.failures.push(Failure::new("start-up".into(), &error));
            }
            report::write(&config, &bench)?;
        }
    }
    if config.shared_pool() {
        let mut shared = std::mem::take(&mut bench.shared_pool);
        let measured = shared_pool::measure(&config, &mut shared, &mut |progress| {
            bench.shared_pool = progress.clone();
            let _ = report::write(&config, &bench);
        })
        .await;
        bench.shared_pool = shared;
        if let Err(error) = measured {
            eprintln!("bench: shared pool FAILED: {error:#}");
            bench.failures.push(Failure::new("shared pool".into(), &error));
        }
        report::write(&config, &bench)?;
    }
    let report = report::write(&config, &bench)?;
    println!("{report}");
    eprintln!("bench: results in {}", config.out_dir.display());
    failures::verdict(&bench.failures)?;
    // Both aims are judged, and both named when both are missed.
    let aims: Vec<String> = [
        many_pools::verdict(&many_pools::ratios(&bench.runs)),
        shared_pool::verdict(shared_pool::summary(&bench.shared_pool.runs).as_ref()),
    ]
    .into_iter()
    .filter_map(|verdict| verdict.err().map(|e| format!("{e:#}")))
    .collect();
    match aims.is_empty() {
        true => Ok(()),
        false => anyhow::bail!("{}", aims.join("; ")),
    }
}
