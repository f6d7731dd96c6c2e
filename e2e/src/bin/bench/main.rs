//! `ferro-ipam-bench` (`make bench`): the end-to-end benchmark. On one fresh control plane per
//! run, N claims are created at once and timed until every one has its address, for ferro-ipam,
//! the in-cluster provider and the floor (the same writes with no allocation logic); then each
//! provider is started on a cluster that already holds many addresses. Configuration by
//! environment variables (see config.rs and docs/benchmarks.md); results go to
//! `$BENCH_OUT` (default target/bench): results.json and report.md.

mod config;
mod failures;
mod floor;
mod layout;
mod measure;
mod report;
mod run;
mod startup;
mod subject;

use anyhow::Result;

use config::{Config, PoolKind};
use failures::Failure;

/// Every configuration: pool kind, claims, pools.
fn shapes(config: &Config) -> Vec<(PoolKind, usize, usize)> {
    let mut all = Vec::new();
    for &kind in &config.kinds {
        for &claims in &config.sizes {
            for &pools in &config.pool_counts {
                all.push((kind, claims, pools));
            }
        }
    }
    all
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("floor") {
        return floor::main(&args[2..]).await;
    }
    let config = Config::from_env()?;
    eprintln!("bench: {config:?}");
    let mut runs = Vec::new();
    let mut failed: Vec<Failure> = Vec::new();
    let (mut fill, mut startup) = (None, Vec::new());
    // Runs are the outer loop: after the first pass every configuration has a result, and each
    // further pass adds to the medians. The start-up measurement comes after the first pass.
    for run in 0..config.runs {
        for (kind, claims, pools) in shapes(&config) {
            for subject in config::order(&config.subjects, run) {
                eprintln!(
                    "bench: {} with {claims} claims over {pools} pool(s) of {}, run {} ...",
                    subject.name(),
                    kind.name(),
                    run + 1
                );
                match run::allocation(&config, subject, kind, claims, pools, run).await {
                    Ok(result) => {
                        eprintln!(
                            "bench:   {:.1} s ({:.1} s creating), {:.0} MiB peak, {:.1} s CPU, {:.2} requests per claim",
                            result.seconds,
                            result.create_seconds,
                            result.peak_rss_mib,
                            result.cpu_seconds,
                            result.requests.values().sum::<f64>() / claims as f64
                        );
                        runs.push(result);
                    }
                    Err(error) => {
                        eprintln!("bench:   FAILED: {error:#}");
                        failed.push(Failure::of_run(subject, kind, claims, pools, run, &error));
                    }
                }
                report::write(&config, &runs, &failed, fill.as_ref(), &startup)?;
            }
        }
        if run == 0 && config.startup_addresses > 0 {
            match startup::measure(&config).await {
                Ok((f, s)) => (fill, startup) = (Some(f), s),
                Err(error) => {
                    eprintln!("bench: start-up measurement FAILED: {error:#}");
                    failed.push(Failure::new("start-up".into(), &error));
                }
            }
            report::write(&config, &runs, &failed, fill.as_ref(), &startup)?;
        }
    }
    let report = report::write(&config, &runs, &failed, fill.as_ref(), &startup)?;
    println!("{report}");
    eprintln!("bench: results in {}", config.out_dir.display());
    failures::verdict(&failed)
}
