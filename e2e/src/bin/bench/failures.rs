//! Runs that failed: kept, put at the top of the report, and the reason the benchmark exits
//! non-zero. A failed run has no figures, so leaving it out of the medians quietly would make a
//! broken provider look like a fast one.

use std::fmt::Write as _;

use anyhow::{Result, bail};
use serde::Serialize;

use crate::config::{Shape, Subject};
use crate::run::{Duplicate, Excluded};

/// One failed measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// What failed: `<subject> <claims> claims / <pools> pools of <kind>[, <rate> pool edits/s],
    /// run <n>`, or `start-up`.
    pub what: String,
    /// The run found one address held twice.
    pub duplicate: bool,
    /// The run found an address its pool excludes.
    pub excluded: bool,
    pub error: String,
}

impl Failure {
    pub fn of_run(subject: Subject, shape: &Shape, run: usize, error: &anyhow::Error) -> Failure {
        let what = format!("{} {}, run {}", subject.name(), shape.describe(), run + 1);
        Failure::new(what, error)
    }

    pub fn new(what: String, error: &anyhow::Error) -> Failure {
        let duplicate = error.chain().any(|cause| cause.is::<Duplicate>());
        let excluded = error.chain().any(|cause| cause.is::<Excluded>());
        Failure { what, duplicate, excluded, error: format!("{error:#}") }
    }
}

/// The report's section on failed runs (empty when none failed).
pub fn markdown(failures: &[Failure]) -> String {
    let mut out = String::new();
    if failures.is_empty() {
        return out;
    }
    let duplicates = failures.iter().filter(|f| f.duplicate).count();
    let _ = writeln!(out, "### FAILED: {} run(s), {duplicates} with an address handed out twice\n", failures.len());
    let _ = writeln!(
        out,
        "These runs have no figures below (the medians are over the runs that succeeded), and the \
         benchmark exits non-zero.\n"
    );
    let _ = writeln!(out, "| run | what went wrong |");
    let _ = writeln!(out, "|---|---|");
    for f in failures {
        let kind = match (f.duplicate, f.excluded) {
            (true, _) => "**DUPLICATE ADDRESS**: ",
            (_, true) => "**EXCLUDED ADDRESS HANDED OUT**: ",
            _ => "",
        };
        let first_line = f.error.lines().next().unwrap_or_default().replace('|', "\\|");
        let _ = writeln!(out, "| {} | {kind}{first_line} |", f.what);
    }
    let _ = writeln!(out);
    out
}

/// Ok when every run succeeded; else an error that names how many failed.
pub fn verdict(failures: &[Failure]) -> Result<()> {
    let duplicates = failures.iter().filter(|f| f.duplicate).count();
    match failures.len() {
        0 => Ok(()),
        n => bail!("{n} run(s) failed, {duplicates} of them with an address handed out twice: see the report"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PoolKind;

    fn shape(kind: PoolKind, edits_per_second: u32) -> Shape {
        Shape { kind, claims: 200, pools: 1, edits_per_second }
    }

    fn excluded() -> anyhow::Error {
        let (address, pool, entry) = ("10.0.255.254".into(), "pool-0".into(), "10.0.255.254".into());
        anyhow::Error::from(Excluded { address, pool, entry }).context("ferro-ipam with 200 claims")
    }

    fn duplicate() -> anyhow::Error {
        anyhow::Error::from(Duplicate { address: "10.0.0.7".into(), pool: "pool-0".into() })
            .context("ferro-ipam with 200 claims")
    }

    #[test]
    fn a_duplicate_is_recognised_through_the_context_and_named_in_the_report() {
        let failures = [
            Failure::of_run(Subject::FerroIpam, &shape(PoolKind::Addresses, 0), 0, &duplicate()),
            Failure::of_run(
                Subject::InCluster,
                &shape(PoolKind::Prefixes, 0),
                1,
                &anyhow::anyhow!("150 of 200 claims addressed"),
            ),
            Failure::of_run(Subject::FerroIpam, &shape(PoolKind::Addresses, 20), 0, &excluded()),
        ];
        assert!(failures[0].duplicate && !failures[1].duplicate && !failures[2].duplicate);
        assert!(failures[2].excluded && !failures[0].excluded);
        let report = markdown(&failures);
        assert!(report.starts_with("### FAILED: 3 run(s), 1 with an address handed out twice"), "{report}");
        assert!(
            report.contains("| ferro-ipam 200 claims / 1 pools of addresses, 20 pool edits/s, run 1 | **EXCLUDED ADDRESS HANDED OUT**: "),
            "{report}"
        );
        assert!(report.contains("| ferro-ipam 200 claims / 1 pools of addresses, run 1 | **DUPLICATE ADDRESS**: ferro-ipam with 200 claims: 10.0.0.7 handed out twice in pool pool-0 |"), "{report}");
        assert!(
            report.contains("| in-cluster 200 claims / 1 pools of prefixes, run 2 | 150 of 200 claims addressed |"),
            "{report}"
        );
    }

    #[test]
    fn any_failure_makes_the_verdict_an_error_and_none_does_not() {
        assert!(verdict(&[]).is_ok());
        assert_eq!(markdown(&[]), "");
        let error = verdict(&[Failure::new("start-up".into(), &duplicate())]).unwrap_err().to_string();
        assert_eq!(error, "1 run(s) failed, 1 of them with an address handed out twice: see the report");
    }
}
