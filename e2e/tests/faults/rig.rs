//! What every fault test stands on: a namespace on a control plane (its own when the test stops
//! or freezes the plane), two or more replicas competing for one Lease, and the checks after
//! the fault, gathered so that a failing test reports every broken promise at once.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ferro_ipam_e2e::leadership::{self, ReplicaLog};
use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::{ControlPlane, Provider, clock, invariants};

use crate::SERVED_WITHIN;
use crate::storm::{self, Storm};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use serde_json::json;

/// The lease of every fault test unless it says otherwise: short, so that faults outlast it.
pub const LEASE: Duration = Duration::from_secs(4);
pub const RENEW_MARGIN: Duration = Duration::from_secs(2);

/// A test's namespace and Lease, on a control plane of its own or the shared one.
pub struct Rig {
    pub s: Scope,
    pub lease: String,
    own_plane: bool,
}

impl Rig {
    /// On a control plane of its own, for a test that stops, restarts or freezes it.
    pub async fn own_plane(hint: &str, apiserver_args: &[String]) -> Rig {
        let plane = ControlPlane::start_with(apiserver_args)
            .unwrap_or_else(|e| panic!("starting a control plane for {hint}: {e:#}"))
            .leak();
        Rig { s: Scope::on(plane, hint).await, lease: format!("{hint}-lease"), own_plane: true }
    }

    /// On the plane this suite shares, for a test that leaves the plane alone.
    pub async fn shared_plane(hint: &str) -> Rig {
        Rig { s: Scope::new(hint).await, lease: format!("{hint}-lease"), own_plane: false }
    }

    pub fn plane(&self) -> &'static ControlPlane {
        self.s.plane
    }

    /// Starts a replica and waits until it is ready (standing by, or leading with its index built).
    pub fn replica(&self, name: &'static str, spec: ReplicaSpec) -> Replica {
        let replica = self.launch(name, spec);
        if let Err(error) = replica.provider.wait_ready(Duration::from_secs(60)) {
            panic!("replica {name}: {error:#}");
        }
        replica
    }

    /// Starts a replica without waiting for it.
    pub fn launch(&self, name: &'static str, spec: ReplicaSpec) -> Replica {
        let lease = spec.lease.as_secs().to_string();
        let margin = spec.renew_margin.as_secs().to_string();
        let mut args = self.s.provider_args();
        args.extend([
            "--leader-elect",
            "--leader-election-namespace",
            &self.s.ns,
            "--leader-election-id",
            &self.lease,
            "--leader-elect-lease-duration",
            &lease,
            "--leader-elect-renew-margin",
            &margin,
        ]);
        let env = match spec.clock_ahead {
            0 => Vec::new(),
            seconds => clock::ahead(seconds).unwrap_or_else(|e| panic!("replica {name}: {e:#}")),
        };
        let kubeconfig = spec.kubeconfig.unwrap_or_else(|| self.plane().kubeconfig.clone());
        let provider = Provider::launch_with_env(self.plane(), &kubeconfig, &args, &env)
            .unwrap_or_else(|e| panic!("starting replica {name}: {e:#}"));
        Replica { name, provider, ahead: SignedDuration::from_secs(spec.clock_ahead) }
    }

    /// The Lease's holder identity (None when nobody holds it).
    pub async fn holder(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.s.client.clone(), &self.s.ns);
        leases.get_opt(&self.lease).await.ok()??.spec?.holder_identity.filter(|h| !h.is_empty())
    }

    /// Waits until one of `replicas` holds the Lease, and says which.
    pub async fn leader(&self, replicas: &[&Replica], within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            if let Some(holder) = self.holder().await
                && let Some(n) = replicas.iter().position(|r| r.holds(&holder))
            {
                return n;
            }
            assert!(Instant::now() < deadline, "none of the replicas holds the Lease after {within:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `replica` holds the Lease.
    pub async fn wait_holder(&self, replica: &Replica, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        while !self.holder().await.is_some_and(|h| replica.holds(&h)) {
            if Instant::now() > deadline {
                return Err(anyhow!(
                    "{} did not hold the Lease within {within:?}: {:?}",
                    replica.name,
                    self.holder().await
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// A /22 pool `10.<octet>.0.0/22` and a storm of `claims` claims on it at 100 per second;
    /// returns once the leader has written a sixth of them (it is busy), with how many it wrote.
    pub async fn busy_storm(&self, octet: u8, claims: usize) -> (Storm, usize) {
        let spec =
            json!({"addresses": [format!("10.{octet}.0.0/22")], "prefix": 22, "gateway": format!("10.{octet}.0.1")});
        self.s.pool("pool", spec).await.unwrap();
        let storm = Storm::start(&self.s, "pool", "c", claims, 100);
        let before = storm::wait_addresses(&self.s, claims / 6, Duration::from_secs(60)).await;
        (storm, before)
    }

    /// Rides out a fault that began at `began`: waits until `successor` holds the Lease and has
    /// allocated, and until the fault has lasted `at_least`, then ends it with `end`. Returns when
    /// it ended. Panics when `successor` never took over: the fault did not bite.
    pub async fn ride_out(
        &self,
        successor: &Replica,
        began: Instant,
        at_least: Duration,
        end: impl FnOnce(),
    ) -> (Instant, Timestamp) {
        let took_over = self.wait_holder(successor, Duration::from_secs(30)).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while took_over.is_ok() && successor.allocations() == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(at_least.saturating_sub(began.elapsed())).await;
        end();
        let ended = (Instant::now(), Timestamp::now());
        if let Err(error) = took_over {
            panic!("the fault did not happen: the other replica never led during it: {error:#}");
        }
        ended
    }

    /// The end of every storm test: once the storm is all created, every claim is served within
    /// [`SERVED_WITHIN`] of the fault's end (or of the last claim), the takeover is reported,
    /// and the checks after a fault pass.
    pub async fn conclude_storm(
        &self,
        storm: Storm,
        fault: (Timestamp, Instant),
        what: &str,
        replicas: &[&Replica],
        mut findings: Findings,
    ) {
        let total = storm.total;
        let last_created = storm.finish().await;
        let since = fault.1.max(last_created);
        match storm::all_served(&self.s, total, since + SERVED_WITHIN).await {
            Ok(()) => findings.note(format!(
                "all {total} claims Ready {:.1} s after the fault ended (or the last claim was created, if later)",
                since.elapsed().as_secs_f64()
            )),
            Err(error) => findings.expect("liveness", Err(error)),
        }
        self.takeover(replicas, what, fault.0, &mut findings);
        self.check_after_fault(replicas, &mut findings).await;
        findings.conclude(replicas);
    }

    /// The checks after every fault: the invariants of the objects (one address per claim, no
    /// address twice in a pool, exact pool status) and, from the logs, that no two replicas
    /// allocated at the same time.
    pub async fn check_after_fault(&self, replicas: &[&Replica], findings: &mut Findings) {
        findings.expect("invariants", invariants::check(&self.s.client, &[&self.s.ns]).await);
        let logs: Vec<ReplicaLog> = replicas.iter().map(|r| r.log()).collect();
        for window in leadership::all_windows(&logs) {
            findings.detail(format!("window {window}"));
        }
        findings.expect("allocation windows", leadership::check_windows(&logs));
        for replica in replicas {
            let relists = replica.provider.log_tail(usize::MAX).matches("too old").count();
            if relists > 0 {
                findings
                    .note(format!("replica {}: {relists} watch errors 410 (resourceVersion too old)", replica.name));
            }
        }
    }

    /// Reports when allocation resumed after `since` (the start or the end of a fault), and
    /// when the first term begun since then allocated (the takeover); returns the takeover's
    /// seconds after `since`.
    pub fn takeover(
        &self,
        replicas: &[&Replica],
        what: &str,
        since: Timestamp,
        findings: &mut Findings,
    ) -> Option<f64> {
        let logs: Vec<ReplicaLog> = replicas.iter().map(|r| r.log()).collect();
        let describe = |(replica, allocation, began): leadership::Attributed<'_>| {
            let term = began.map(|b| format!("{:+.2} s", seconds(since, b))).unwrap_or("?".into());
            format!("{:.2} s after {what}, by replica {replica} (term began {term})", seconds(since, allocation.at))
        };
        match leadership::first_allocation_since(&logs, since) {
            Some(first) => findings.note(format!("first allocation {}", describe(first))),
            None => findings.note(format!("no allocation logged after {what}")),
        }
        let takeover = leadership::first_allocation_of_a_term_since(&logs, since);
        match takeover {
            Some(first) => findings.note(format!("takeover: first allocation of a new term {}", describe(first))),
            None => findings.note(format!("no new term allocated after {what}")),
        }
        takeover.map(|(_, allocation, _)| seconds(since, allocation.at))
    }
}

/// Seconds from `from` to `to`.
pub fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.own_plane {
            self.plane().halt();
            // The logs of a failed test stay for a post-mortem.
            if std::thread::panicking() {
                eprintln!("control plane and replica logs of {}: {}", self.s.ns, self.plane().dir.display());
            } else {
                let _ = std::fs::remove_dir_all(&self.plane().dir);
            }
        }
    }
}

/// How to run a replica.
#[derive(Clone, Debug)]
pub struct ReplicaSpec {
    /// Another kubeconfig (through a proxy, or another identity); default: the admin's.
    pub kubeconfig: Option<PathBuf>,
    /// Seconds its wall clock runs ahead of the server's.
    pub clock_ahead: i64,
    pub lease: Duration,
    pub renew_margin: Duration,
}

impl Default for ReplicaSpec {
    fn default() -> Self {
        ReplicaSpec { kubeconfig: None, clock_ahead: 0, lease: LEASE, renew_margin: RENEW_MARGIN }
    }
}

/// One running replica of ferro-ipam.
pub struct Replica {
    pub name: &'static str,
    pub provider: Provider,
    /// How far its wall clock runs ahead of the server's.
    pub ahead: SignedDuration,
}

impl Replica {
    pub fn pid(&self) -> u32 {
        self.provider.process.pid().expect("the replica was started")
    }

    /// Whether a Lease holder identity names this replica (identities end with `-<pid>`).
    pub fn holds(&self, identity: &str) -> bool {
        self.provider.process.pid().is_some_and(|pid| identity.ends_with(&format!("-{pid}")))
    }

    /// Its terms and allocations, on the server's clock.
    pub fn log(&self) -> ReplicaLog {
        ReplicaLog::read(self.name, &self.provider.process.log, self.ahead)
            .unwrap_or_else(|e| panic!("replica {}: {e:#}", self.name))
    }

    /// How many `IPAddress`es it logged creating.
    pub fn allocations(&self) -> usize {
        self.log().allocations().count()
    }

    pub fn signal(&self, signal: i32) {
        self.provider.process.signal(signal);
    }

    /// SIGTERM, then how long it took to exit (None: still running after `limit`, then killed).
    pub fn terminate(&mut self, limit: Duration) -> Option<Duration> {
        let sent = Instant::now();
        self.signal(libc::SIGTERM);
        while sent.elapsed() < limit {
            if !self.provider.process.is_running() {
                return Some(sent.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.provider.kill();
        None
    }
}

/// What a test found: failures (all reported at the end, not only the first) and the numbers
/// worth keeping (takeover times), which also go to `target/fault-report.txt`.
pub struct Findings {
    test: &'static str,
    failures: Vec<String>,
    details: Vec<String>,
}

impl Findings {
    pub fn new(test: &'static str) -> Findings {
        Findings { test, failures: Vec::new(), details: Vec::new() }
    }

    /// Records a failure unless `result` is Ok.
    pub fn expect(&mut self, what: &str, result: Result<()>) {
        if let Err(error) = result {
            self.failures.push(format!("{what}: {error:#}"));
        }
    }

    /// Records a failure unless the fault, begun with `before` of `storm`'s addresses written,
    /// hit `leader` in the middle of the storm.
    pub fn mid_storm(&mut self, storm: &Storm, before: usize, leader: &Replica) {
        let allocations = leader.allocations();
        self.ensure(before < storm.total && allocations > 0, || {
            format!("the fault did not land mid-storm: {before} addresses, {allocations} by replica {}", leader.name)
        });
    }

    /// Records a failure when `holds` is false.
    pub fn ensure(&mut self, holds: bool, what: impl FnOnce() -> String) {
        if !holds {
            self.failures.push(what());
        }
    }

    /// A number for the report (printed, and appended to `target/fault-report.txt`).
    pub fn note(&mut self, line: String) {
        eprintln!("[{}] {line}", self.test);
        report(self.test, &line);
        self.details.push(line);
    }

    /// Context shown with the failures (windows, counts).
    pub fn detail(&mut self, line: String) {
        self.details.push(line);
    }

    /// Fails the test with every failure found, the details, and the replicas' log tails.
    pub fn conclude(self, replicas: &[&Replica]) {
        if self.failures.is_empty() {
            return;
        }
        let mut message = format!(
            "{} failed:\n- {}\n\ndetails:\n  {}\n",
            self.test,
            self.failures.join("\n- "),
            self.details.join("\n  ")
        );
        for replica in replicas {
            message.push_str(&format!(
                "\nreplica {} (pid {:?}, log {}), last lines:\n{}\n",
                replica.name,
                replica.provider.process.pid(),
                replica.provider.process.log.display(),
                replica.provider.log_tail(15)
            ));
        }
        report(self.test, &format!("FAILED: {}", self.failures.join(" | ").replace('\n', " / ")));
        panic!("{message}");
    }
}

/// Appends a line to `target/fault-report.txt`, which `make test-faults` prints at the end.
fn report(test: &str, line: &str) {
    let entry = format!("{} {test}: {line}\n", Timestamp::now());
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(repo_root().join("target/fault-report.txt"))
        .and_then(|mut file| std::io::Write::write_all(&mut file, entry.as_bytes()));
}
