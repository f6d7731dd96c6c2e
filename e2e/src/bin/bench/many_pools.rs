//! The many-pools aim: N claims served from N pools of one claim each may cost ferro-ipam's
//! process at most [`MAX_CPU_RATIO`] times the CPU time (utime + stime) of the same N claims
//! served from one pool. Each `BENCH_MANY_POOLS` configuration brings its one-pool run along
//! (see config.rs), so the two are measured in the same invocation, on the same machine.
//!
//! Pure: it reads the runs' results and writes nothing.

use std::fmt::Write as _;

use anyhow::{Result, bail};

use crate::config::{PoolKind, Shape, Subject};
use crate::report::median;
use crate::run::RunResult;

/// The most the many-pools run may cost, as a multiple of the one-pool run's CPU time.
pub const MAX_CPU_RATIO: f64 = 2.0;

/// Whether `shape` is a many-pools configuration: one claim per pool, no storm, more than one pool.
pub fn is_many_pools(shape: &Shape) -> bool {
    shape.pools > 1 && shape.pools == shape.claims && shape.edits_per_second == 0
}

/// The configuration a many-pools one is compared with: its claims from one pool.
pub fn one_pool(shape: &Shape) -> Shape {
    Shape { pools: 1, ..*shape }
}

/// ferro-ipam's median CPU time over N pools against over one pool, for N claims of one kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuRatio {
    pub kind: PoolKind,
    pub claims: usize,
    /// Median CPU seconds over N pools, and the runs behind it.
    pub many: f64,
    pub many_runs: usize,
    /// Median CPU seconds over one pool, and the runs behind it.
    pub one: f64,
    pub one_runs: usize,
}

impl CpuRatio {
    pub fn ratio(&self) -> f64 {
        self.many / self.one
    }

    pub fn met(&self) -> bool {
        self.ratio() <= MAX_CPU_RATIO
    }
}

/// ferro-ipam's median CPU time in the runs of `shape`, and how many runs there were.
fn cpu_of(runs: &[RunResult], shape: Shape) -> Option<(f64, usize)> {
    let cpu: Vec<f64> =
        runs.iter().filter(|r| r.subject == Subject::FerroIpam && r.shape == shape).map(|r| r.cpu_seconds).collect();
    let runs = cpu.len();
    (runs > 0).then(|| (median(cpu), runs))
}

/// The ratio of every many-pools configuration whose one-pool run was measured too.
pub fn ratios(runs: &[RunResult]) -> Vec<CpuRatio> {
    let mut shapes: Vec<Shape> = runs.iter().map(|r| r.shape).filter(is_many_pools).collect();
    shapes.sort();
    shapes.dedup();
    shapes
        .into_iter()
        .filter_map(|shape| {
            let (many, many_runs) = cpu_of(runs, shape)?;
            let (one, one_runs) = cpu_of(runs, one_pool(&shape))?;
            Some(CpuRatio { kind: shape.kind, claims: shape.claims, many, many_runs, one, one_runs })
        })
        .collect()
}

/// The report's section on the aim (empty when no many-pools configuration has both runs).
pub fn markdown(ratios: &[CpuRatio]) -> String {
    let mut out = String::new();
    if ratios.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n### Many pools: ferro-ipam's CPU time against one pool (median)\n");
    let _ = writeln!(
        out,
        "N claims from N pools of one claim each, against the same N claims from one pool: the CPU time \
         (utime + stime) of ferro-ipam's process. The aim is at most {MAX_CPU_RATIO:.1}; above it the \
         benchmark exits non-zero.\n"
    );
    let _ = writeln!(out, "| pools of | claims | CPU over N pools | CPU over one pool | ratio | met |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---|");
    for r in ratios {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} s ({} runs) | {:.1} s ({} runs) | {:.2} | {} |",
            r.kind.name(),
            r.claims,
            r.many,
            r.many_runs,
            r.one,
            r.one_runs,
            r.ratio(),
            if r.met() { "yes" } else { "**NO**" }
        );
    }
    out
}

/// Ok when every ratio is within the aim; else an error naming those that are not.
pub fn verdict(ratios: &[CpuRatio]) -> Result<()> {
    let over: Vec<String> = ratios
        .iter()
        .filter(|r| !r.met())
        .map(|r| {
            format!(
                "{} claims from {} pools of {} took {:.2} times the CPU of one pool ({:.1} s against {:.1} s)",
                r.claims,
                r.claims,
                r.kind.name(),
                r.ratio(),
                r.many,
                r.one
            )
        })
        .collect();
    match over.is_empty() {
        true => Ok(()),
        false => bail!("many pools cost more than {MAX_CPU_RATIO:.1} times one pool's CPU: {}", over.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::storm::Edits;

    fn run(subject: Subject, claims: usize, pools: usize, cpu_seconds: f64) -> RunResult {
        RunResult {
            subject,
            shape: Shape { kind: PoolKind::Addresses, claims, pools, edits_per_second: 0 },
            run: 0,
            seconds: 10.0,
            create_seconds: 2.0,
            peak_rss_mib: 30.0,
            cpu_seconds,
            requests: BTreeMap::new(),
            pools_touched: 0,
            edits: Edits::default(),
            load: (1.0, 1.0),
        }
    }

    #[test]
    fn the_ratio_is_ferro_ipams_median_cpu_over_many_pools_against_one_pool() {
        let runs = vec![
            run(Subject::FerroIpam, 2000, 2000, 6.0),
            run(Subject::FerroIpam, 2000, 2000, 5.0),
            run(Subject::FerroIpam, 2000, 2000, 30.0),
            run(Subject::FerroIpam, 2000, 1, 3.0),
            // The floor's runs and other configurations do not count.
            run(Subject::Floor, 2000, 2000, 100.0),
            run(Subject::FerroIpam, 1000, 1, 0.1),
            run(Subject::FerroIpam, 2000, 100, 9.0),
        ];
        let ratios = ratios(&runs);
        assert_eq!(ratios.len(), 1, "{ratios:?}");
        let r = ratios[0];
        assert_eq!((r.claims, r.many, r.many_runs, r.one, r.one_runs), (2000, 6.0, 3, 3.0, 1));
        assert_eq!(r.ratio(), 2.0);
        assert!(r.met(), "exactly the aim is within it");
        assert!(verdict(&ratios).is_ok());
        assert!(markdown(&ratios).contains("| addresses | 2000 | 6.0 s (3 runs) | 3.0 s (1 runs) | 2.00 | yes |"));
    }

    #[test]
    fn a_ratio_above_the_aim_fails_the_verdict_and_is_marked_in_the_report() {
        let runs = vec![run(Subject::FerroIpam, 2000, 2000, 10.9), run(Subject::FerroIpam, 2000, 1, 2.9)];
        let ratios = ratios(&runs);
        assert!(!ratios[0].met());
        assert!(markdown(&ratios).contains("| 3.76 | **NO** |"), "{}", markdown(&ratios));
        let error = verdict(&ratios).unwrap_err().to_string();
        assert!(
            error.contains("2000 claims from 2000 pools of addresses took 3.76 times the CPU of one pool"),
            "{error}"
        );
    }

    #[test]
    fn without_its_one_pool_run_a_many_pools_run_has_no_ratio() {
        let ratios = ratios(&[run(Subject::FerroIpam, 2000, 2000, 10.0)]);
        assert!(ratios.is_empty());
        assert_eq!(markdown(&ratios), "");
        assert!(verdict(&ratios).is_ok());
    }
}
