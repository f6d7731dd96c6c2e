//! The run's report: settings and the command that replays it, the fault plan, the figures, the
//! timeline. Printed at the end of every run, and written to `target/soak/seed-<seed>.txt`.

use std::collections::BTreeMap;

use ferro_ipam_e2e::plane::repo_root;

use crate::history::ledger::Ledger;
use crate::history::vips::VipLedger;
use crate::schedule::Fault;
use crate::settings::Settings;
use crate::workload::probe::Waits;

pub struct Report {
    pub lines: Vec<String>,
}

impl Report {
    pub fn new(settings: &Settings, plan: &[Fault]) -> Report {
        let mut lines = vec![
            format!(
                "soak: seed {}, {} replicas, {:.0} s of faults and workload ({} min in all)",
                settings.seed,
                settings.replicas,
                settings.chaos.as_secs_f64(),
                settings.minutes
            ),
            format!("replay: {}", settings.replay()),
            format!("fault plan ({} faults):", plan.len()),
        ];
        lines.extend(plan.iter().map(|f| format!("  {f}")));
        Report { lines }
    }

    pub fn line(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    pub fn faults(&mut self, injected: &BTreeMap<String, usize>) {
        let total: usize = injected.values().sum();
        let kinds: Vec<String> = injected.iter().map(|(kind, n)| format!("{kind}: {n}")).collect();
        self.line(format!("faults injected: {total} ({})", kinds.join(", ")));
    }

    pub fn history(&mut self, ledger: &Ledger) {
        self.line(format!(
            "history: {} watch events and relisted objects; {} addresses handed out by ferro-ipam, {} deletions; {} live at the end",
            ledger.events,
            ledger.handed_out,
            ledger.deleted,
            ledger.live()
        ));
        self.line(format!("duplicates: {}", ledger.duplicates.len()));
        self.lines.extend(ledger.duplicates.iter().map(|d| format!("  DUPLICATE {d}")));
        self.line(format!("collisions the workload made by hand (not failures): {}", ledger.collisions.len()));
        self.lines.extend(ledger.collisions.iter().map(|c| format!("  {c}")));
        match ledger.gaps.len() {
            0 => self.line("gaps in the history: none (no watch was refused with 410 Gone)"),
            n => {
                self.line(format!(
                    "gaps in the history: {n} (a duplicate that began and ended within one would not be seen)"
                ));
                self.lines.extend(ledger.gaps.iter().map(|g| format!("  {g}")));
            }
        }
    }

    /// The control-plane VIPs: Clusters made and seen, endpoints written, VIPs lost and
    /// duplicated, each failure on a line of its own.
    pub fn vips(&mut self, vips: &VipLedger, made: usize) {
        let (asked, written) = vips.counts();
        self.line(format!(
            "VIP Clusters: {made} made by the workload, {asked} seen asking for a VIP by the history; {written} endpoints written; {} moments judged",
            vips.moments
        ));
        let never = vips.never_written();
        if !never.is_empty() {
            let names: Vec<&str> = never.iter().map(|k| k.as_str()).collect();
            self.line(format!(
                "Clusters never seen with an endpoint (deleted first, or waiting): {}",
                names.join(", ")
            ));
        }
        self.line(format!("VIPs lost: {}; VIPs duplicated: {}", vips.lost.len(), vips.duplicated.len()));
        self.lines.extend(vips.lost.iter().map(|l| format!("  LOST {l}")));
        self.lines.extend(vips.duplicated.iter().map(|d| format!("  DUPLICATED {d}")));
        if vips.unjudged() > 0 {
            self.line(format!("VIP changes not judged (one watch had not caught up at the end): {}", vips.unjudged()));
        }
        match vips.cluster_gaps.len() {
            0 => self.line("gaps in the Cluster history: none"),
            n => {
                self.line(format!(
                    "gaps in the Cluster history: {n} (a VIP lost or duplicated only within one would not be seen)"
                ));
                self.lines.extend(vips.cluster_gaps.iter().map(|g| format!("  {g}")));
            }
        }
    }

    pub fn waits(&mut self, waits: &Waits) {
        let mut served: Vec<f64> = waits.served.iter().map(|w| w.waited.as_secs_f64()).collect();
        served.sort_by(f64::total_cmp);
        let median = served.get(served.len() / 2).copied().unwrap_or_default();
        self.line(format!(
            "probe: {} probe claims served (median wait {median:.1} s), {} never served",
            served.len(),
            waits.unserved.len()
        ));
        if let Some(longest) = waits.longest() {
            self.line(format!(
                "longest unavailability: {:.1} s (the probe claim created at {:.1} s)",
                longest.waited.as_secs_f64(),
                longest.created_at
            ));
        }
    }

    /// Prints the report and writes it to `target/soak/`; returns the file.
    pub fn publish(&self, settings: &Settings, timeline: &[String]) -> std::path::PathBuf {
        let mut text = self.lines.join("\n");
        text.push_str("\n\ntimeline (seconds since the soak began):\n");
        text.push_str(&timeline.join("\n"));
        text.push('\n');
        let dir = repo_root().join("target/soak");
        let file = dir.join(format!("seed-{}.txt", settings.seed));
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, &text));
        eprintln!("\n{}\n", self.lines.join("\n"));
        match written {
            Ok(()) => eprintln!("report and timeline: {}", file.display()),
            Err(error) => eprintln!("could not write {}: {error}\n{text}", file.display()),
        }
        file
    }
}
