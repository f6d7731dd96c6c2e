//! What a benchmark invocation measures, from environment variables.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

/// Who fulfils the claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A plain client doing ferro-ipam's writes with no allocation logic: the lower bound.
    Floor,
    FerroIpam,
    InCluster,
}

impl Subject {
    pub fn name(self) -> &'static str {
        match self {
            Subject::Floor => "floor",
            Subject::FerroIpam => "ferro-ipam",
            Subject::InCluster => "in-cluster",
        }
    }

    fn parse(name: &str) -> Result<Subject> {
        Ok(match name.trim() {
            "floor" => Subject::Floor,
            "ferro-ipam" => Subject::FerroIpam,
            "in-cluster" => Subject::InCluster,
            other => bail!("unknown subject {other:?}: floor, ferro-ipam or in-cluster"),
        })
    }
}

/// What the pools hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKind {
    /// `InClusterIPPool`s `pool-<i>` handing out addresses (see layout.rs).
    Addresses,
    /// `InClusterPrefixPool`s `pool-<i>` handing out /64 sub-prefixes (see layout.rs).
    Prefixes,
}

impl PoolKind {
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Addresses => "addresses",
            PoolKind::Prefixes => "prefixes",
        }
    }

    /// The pool kind the claims name.
    pub fn kind(self) -> &'static str {
        match self {
            PoolKind::Addresses => "InClusterIPPool",
            PoolKind::Prefixes => "InClusterPrefixPool",
        }
    }

    fn parse(name: &str) -> Result<PoolKind> {
        Ok(match name.trim() {
            "addresses" => PoolKind::Addresses,
            "prefixes" => PoolKind::Prefixes,
            other => bail!("unknown pool kind {other:?}: addresses or prefixes"),
        })
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    /// What the pools hand out, each a configuration of its own.
    pub kinds: Vec<PoolKind>,
    /// Claims created at once per run.
    pub sizes: Vec<usize>,
    /// Over how many pools the claims are spread.
    pub pool_counts: Vec<usize>,
    /// Runs per (subject, size, pools); the report gives medians.
    pub runs: usize,
    pub subjects: Vec<Subject>,
    /// `IPAddress` objects on the cluster of the start-up measurement (0: skip it).
    pub startup_addresses: usize,
    pub startup_runs: usize,
    /// The ferro-ipam binary (a release build) and extra flags for it.
    pub ferro_bin: PathBuf,
    pub ferro_args: Vec<String>,
    /// Claim creations in flight at once.
    pub create_concurrency: usize,
    /// Claims the floor client works on at once (ferro-ipam's default `--claim-concurrency`).
    pub floor_concurrency: usize,
    /// Where results.json and report.md go.
    pub out_dir: PathBuf,
    /// Longest wait for one run's claims.
    pub timeout: Duration,
}

fn list<T>(name: &str, default: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let value = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    value.split(',').filter(|s| !s.trim().is_empty()).map(|s| parse(s.trim())).collect()
}

fn number(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => v.trim().replace('_', "").parse().with_context(|| format!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

impl Config {
    /// BENCH_QUICK=1 gives a smoke run (small sizes, one run); every other variable overrides.
    pub fn from_env() -> Result<Config> {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
        let (sizes, runs, startup) = if quick { ("200,1000", 1, 5_000) } else { ("1000,5000,10000", 3, 100_000) };
        let parse_usize = |s: &str| s.replace('_', "").parse::<usize>().with_context(|| format!("{s:?}"));
        let ferro_bin: PathBuf = std::env::var_os("FERRO_IPAM_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| ferro_ipam_e2e::plane::repo_root().join("target/release/ferro-ipam"));
        if !ferro_bin.exists() {
            bail!(
                "{} does not exist: cargo build --release --bin ferro-ipam, or set FERRO_IPAM_BIN",
                ferro_bin.display()
            );
        }
        Ok(Config {
            kinds: list("BENCH_KINDS", "addresses,prefixes", PoolKind::parse)?,
            sizes: list("BENCH_N", sizes, parse_usize)?,
            pool_counts: list("BENCH_POOLS", "1,100", parse_usize)?,
            runs: number("BENCH_RUNS", runs)?,
            subjects: list("BENCH_SUBJECTS", "floor,ferro-ipam,in-cluster", Subject::parse)?,
            startup_addresses: number("BENCH_STARTUP_ADDRESSES", startup)?,
            startup_runs: number("BENCH_STARTUP_RUNS", runs)?,
            ferro_bin,
            ferro_args: std::env::var("BENCH_FERRO_ARGS")
                .map(|a| a.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            create_concurrency: number("BENCH_CREATE_CONCURRENCY", 100)?,
            floor_concurrency: number("BENCH_FLOOR_CONCURRENCY", 64)?,
            out_dir: std::env::var_os("BENCH_OUT")
                .map(PathBuf::from)
                .unwrap_or_else(|| ferro_ipam_e2e::plane::repo_root().join("target/bench")),
            timeout: Duration::from_secs(number("BENCH_TIMEOUT_SECONDS", 3600)? as u64),
        })
    }
}

/// The subjects in the order of pass `pass`: as configured in even passes, reversed in odd ones,
/// so that neither goes first on a warmer or busier machine in every pass.
pub fn order(subjects: &[Subject], pass: usize) -> Vec<Subject> {
    let mut ordered = subjects.to_vec();
    if pass % 2 == 1 {
        ordered.reverse();
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_alternate_the_order_of_the_subjects() {
        let all = [Subject::Floor, Subject::FerroIpam, Subject::InCluster];
        assert_eq!(order(&all, 0), all);
        assert_eq!(order(&all, 1), [Subject::InCluster, Subject::FerroIpam, Subject::Floor]);
        assert_eq!(order(&all, 2), all);
    }
}
