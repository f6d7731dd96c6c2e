//! The checks once the faults stop (client required), each failure kept so that a failing run
//! reports all of them at once, with its seed and timeline: liveness with true reasons, the
//! invariants of the objects, the history (no address ever held twice, no control-plane VIP lost
//! or held for two Clusters, and a history that matches fresh lists), the nemesis's own failures
//! (a SIGTERM not obeyed), and the allocation windows of every replica process of the run.

use std::time::Instant;

use anyhow::anyhow;
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{invariants, leadership};
use kube::api::ListParams;

use crate::cast::Cast;
use crate::history::{self, History};
use crate::nemesis::Tally;
use crate::report::Report;
use crate::rig::Findings;
use crate::settings::Settings;
use crate::timeline::Timeline;
use crate::workload::Workload;
use crate::{SERVED_WITHIN, liveness};

pub struct Verdict<'a> {
    pub a: &'a Scope,
    pub b: &'a Scope,
    pub cast: &'a Cast,
    /// When the last fault ended.
    pub quiet: Instant,
    pub tally: &'a Tally,
}

impl Verdict<'_> {
    /// Runs every check, publishes the report, and fails with every failure found.
    pub async fn judge(
        &self,
        workload: Workload,
        history: History,
        settings: &Settings,
        mut report: Report,
        timeline: &Timeline,
    ) {
        let mut findings = Findings::new("soak");
        self.liveness(&mut findings, &mut report).await;
        let counters = workload.counters.clone();
        let waits = workload.finish().await;
        let (a, b) = (self.a, self.b);
        findings.expect("invariants", invariants::check(&a.client, &[&a.ns, &b.ns]).await);
        let vip_clusters = counters.vip_clusters.load(std::sync::atomic::Ordering::SeqCst);
        self.history(history, vip_clusters, &mut findings, &mut report).await;
        for failure in &self.tally.failures {
            findings.expect("nemesis", Err(anyhow!("{failure}")));
        }
        let (processes, windows) = self
            .cast
            .all_replicas(|all| {
                let logs: Vec<_> = all.iter().map(|r| r.log()).collect();
                (all.len(), leadership::check_windows(&logs))
            })
            .await;
        findings.expect("allocation windows", windows);

        report.line(format!("workload: {}; {} claims at the end", counters.summary(), self.claims_left().await));
        report.waits(&waits.lock().unwrap_or_else(|e| e.into_inner()));
        report.line(format!("replica processes started over the run: {processes}"));
        let file = report.publish(settings, &timeline.lines());
        findings.detail(format!("seed {}; replay with: {}", settings.seed, settings.replay()));
        findings.detail(format!("report and fault timeline: {}", file.display()));
        findings.detail(format!("control plane and replica logs: {}", self.a.plane.dir.display()));
        self.cast.all_replicas(|all| findings.conclude(all)).await;
    }

    async fn liveness(&self, findings: &mut Findings, report: &mut Report) {
        let deadline = self.quiet + SERVED_WITHIN;
        let served = liveness::served_or_truly_waiting(&[self.a, self.b], self.quiet, deadline).await;
        match &served {
            Ok(after) => report.line(format!(
                "liveness: every claim served or truly waiting {:.1} s after the faults stopped",
                after.as_secs_f64()
            )),
            Err(error) => report.line(format!("liveness: FAILED: {error:#}")),
        }
        findings.expect("liveness", served.map(drop));
    }

    async fn history(&self, history: History, vip_clusters: usize, findings: &mut Findings, report: &mut Report) {
        let differences = history::compare_with_list(&self.a.client, &history.ledger).await;
        findings.ensure(differences.is_empty(), || {
            format!("the history does not match a fresh list at the end: {differences:#?}")
        });
        let differences = history::settle_vips(&self.a.client, &history.vips).await;
        findings.ensure(differences.is_empty(), || {
            format!("the VIPs' history does not match fresh lists at the end:\n  {}", differences.join("\n  "))
        });
        let (ledger, vips) = history.stop().await;
        let ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
        let duplicates = &ledger.duplicates;
        findings.ensure(duplicates.is_empty(), || format!("addresses held twice in the history: {duplicates:#?}"));
        report.history(&ledger);
        let vips = vips.lock().unwrap_or_else(|e| e.into_inner());
        findings.ensure(vips.lost.is_empty(), || format!("VIPs lost in the history:\n  {}", vips.lost.join("\n  ")));
        findings.ensure(vips.duplicated.is_empty(), || {
            format!("VIPs held for two Clusters in the history:\n  {}", vips.duplicated.join("\n  "))
        });
        report.vips(&vips, vip_clusters);
    }

    async fn claims_left(&self) -> usize {
        let mut left = 0;
        for s in [self.a, self.b] {
            left += s.claims().list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0);
        }
        left
    }
}
