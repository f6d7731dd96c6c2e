//! Leader election on a `coordination.k8s.io` Lease, following client-go's algorithm, with a
//! fence that closes on the local monotonic clock.
//!
//! - A standby reads the Lease every retry period and takes it only when it is free, or when
//!   its record has stayed unchanged for a whole lease duration on the standby's own clock.
//! - The leader renews every retry period. Each successful renewal opens the write fence until
//!   the renew deadline, counted from when that renewal was *sent*. If no renewal succeeds by
//!   then (API server down or slow, partition, the process paused), the fence closes and the
//!   term is suspended, whether or not the API server can be reached: the leader has stopped
//!   writing before any standby can have seen the record unchanged for a lease duration, since
//!   that count starts no earlier than the renewal was sent and the lease duration is longer
//!   than the deadline.
//! - A suspended term resumes only if the Lease still names this replica when a renewal next
//!   succeeds: nobody else can have held it meanwhile (only this replica writes its own name),
//!   so the index, kept current by the watches, is still the whole truth. If another replica
//!   holds it, or took it and gave it up, the term ends: its reconciles are cancelled and its
//!   index dropped; a later term starts afresh.
//! - Every call is bounded by the time left before the deadline, so a hung connection cannot
//!   keep a term alive.
//! - Takes and renewals are conditional on the Lease's `resourceVersion`: of two replicas that
//!   decide to take it at once, one wins.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::client::Fence;
use crate::client::api_errors::describe;
use crate::health::Health;
use crate::lease::{Observer, Verdict, claimed, released};
use crate::misconfig::{Misconfig, Problem, lease_problem};

/// Lease settings from the flags.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a record may stay unchanged before a standby takes the Lease.
    pub duration: Duration,
    /// How long after its last successful renewal was sent the leader stops writing.
    pub renew_deadline: Duration,
    /// How often the Lease is read or renewed.
    pub retry_period: Duration,
}

/// Where this replica stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// No attempt has settled yet whether the lease is free: not ready, since this replica may
    /// be about to lead (and serve only once its index is built).
    Starting,
    /// Another replica holds the lease.
    Standby,
    /// Leading term N: writes pass the fence.
    Leading(u64),
    /// Term N missed its renew deadline: writes are refused until the Lease is renewed.
    Suspended(u64),
}

/// The competition for the lease: where this replica stands, and the task that keeps it.
pub struct Campaign {
    pub leading: watch::Receiver<Leadership>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Campaign {
    /// Stops competing, and gives the lease up if this replica holds it, so that another
    /// replica takes over at once rather than after it expires. Waits at most `limit`.
    pub async fn resign(self, limit: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(limit, self.task).await.is_err() {
            warn!("gave up releasing the leader lease; it expires by itself");
        }
    }
}

/// Starts competing for the lease. Writes through `fence` are allowed only while this replica
/// leads.
pub fn campaign(
    client: Client,
    settings: LeaseSettings,
    fence: Fence,
    health: Health,
    misconfig: Misconfig,
) -> Campaign {
    let (tx, leading) = watch::channel(Leadership::Starting);
    let stop = CancellationToken::new();
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    info!(lease = %format!("{}/{}", settings.namespace, settings.name), identity = %settings.identity, "competing for leadership");
    let elector = Elector {
        api,
        settings,
        fence,
        health,
        misconfig,
        action: "get",
        tx,
        observer: Observer::default(),
        cached: None,
        failing: false,
        terms: 0,
    };
    let task = tokio::spawn(elector.run(stop.clone()));
    Campaign { leading, stop, task }
}

struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    fence: Fence,
    health: Health,
    misconfig: Misconfig,
    /// The verb of the Lease call in flight (for the ERROR line of a misconfiguration).
    action: &'static str,
    tx: watch::Sender<Leadership>,
    /// The number of the last term this replica started.
    terms: u64,
    observer: Observer,
    /// The Lease as this replica last wrote it, while it leads: renewals need no read.
    cached: Option<Lease>,
    /// Whether the last attempt failed (a streak of failures is logged once).
    failing: bool,
}

/// How one attempt to take or renew the lease ended.
enum Attempt {
    /// The Lease is this replica's; `renewed`: it already named this replica before.
    Leading {
        renewed: bool,
    },
    Standing(Verdict),
    /// The Lease changed between reading and writing it: read it again.
    Reread,
}

impl Elector {
    fn state(&self) -> Leadership {
        *self.tx.borrow()
    }

    /// Whether this replica holds, or held until its deadline, the lease.
    fn leads(&self) -> bool {
        matches!(self.state(), Leadership::Leading(_) | Leadership::Suspended(_))
    }

    async fn run(mut self, stop: CancellationToken) {
        let mut deadline: Option<Instant> = None;
        loop {
            let sent = Instant::now();
            // A leader's attempt may take until its deadline; a standby's a renew deadline.
            let budget = deadline.map_or(self.settings.renew_deadline, |d| d.saturating_duration_since(sent));
            let attempt = tokio::select! {
                _ = stop.cancelled() => break,
                attempt = tokio::time::timeout(budget, self.attempt()) => attempt,
            };
            self.health.beat_lease();
            if matches!(attempt, Ok(Ok(_))) {
                self.failing = false;
                self.misconfig.resolved(&self.lease_object());
            }
            match attempt {
                Ok(Ok(Attempt::Leading { renewed })) => {
                    let until = sent + self.settings.renew_deadline;
                    self.fence.open_until(until);
                    deadline = Some(until);
                    self.lead(renewed);
                }
                Ok(Ok(Attempt::Standing(verdict))) => {
                    if self.leads() {
                        self.step_down(&format!("the lease is now held by {}", verdict.holder()));
                        deadline = None;
                    } else if self.state() == Leadership::Starting {
                        self.tx.send_replace(Leadership::Standby);
                    }
                }
                Ok(Ok(Attempt::Reread)) => {
                    self.cached = None;
                    debug!(lease = %self.settings.name, "the lease changed since it was read; reading it again");
                }
                Ok(Err(error)) => {
                    self.misconfigured(&error);
                    self.failed(&describe(&error));
                }
                Err(_) => self.failed(&format!("no answer within {budget:?}")),
            }
            let wake = Instant::now() + self.settings.retry_period;
            let expiry = deadline.unwrap_or(wake + self.settings.duration);
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = tokio::time::sleep_until(expiry.into()), if deadline.is_some() => {}
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.suspend();
                deadline = None;
            }
        }
        if self.leads() {
            // The term has ended: close the fence before anyone else can take the lease.
            self.fence.close();
            self.tx.send_replace(Leadership::Standby);
            self.release().await;
        }
    }

    /// The lease is held (`renewed`: it was already ours): a suspended term resumes, else a new
    /// term begins unless one is running.
    fn lead(&mut self, renewed: bool) {
        match self.state() {
            Leadership::Leading(_) => {}
            Leadership::Suspended(term) if renewed => {
                info!(
                    lease = %self.settings.name,
                    term,
                    "became the leader again: the lease still names this replica, so its term resumes with its index"
                );
                self.tx.send_replace(Leadership::Leading(term));
            }
            _ => {
                self.terms += 1;
                info!(identity = %self.settings.identity, "acquired the leader lease");
                self.tx.send_replace(Leadership::Leading(self.terms));
            }
        }
    }

    /// An attempt failed: a leader says so once per streak of failures (WARN), the rest is
    /// debug.
    fn failed(&mut self, error: &str) {
        self.cached = None;
        let lease = format!("{}/{}", self.settings.namespace, self.settings.name);
        if self.leads() && !self.failing {
            warn!(%lease, %error, "could not renew the leader lease; retrying until the renew deadline");
        } else {
            debug!(%lease, %error, "leader lease call failed; retrying");
        }
        self.failing = true;
    }

    /// The Lease, as ERROR lines and `/readyz` name it.
    fn lease_object(&self) -> String {
        format!("Lease {}/{}", self.settings.namespace, self.settings.name)
    }

    /// A failed call that no retry can fix (the namespace missing, RBAC): said at ERROR, in the
    /// metric and in readiness, until a call succeeds.
    fn misconfigured(&self, error: &kube::Error) {
        let problem = match lease_problem(error) {
            // A Lease deleted between a read and a write also answers 404.
            Some(Problem::lease_namespace_missing) if self.action != "create" => None,
            other => other,
        };
        if let Some(problem) = problem {
            self.misconfig.report(problem, &self.lease_object(), self.action, &describe(error));
        }
    }

    /// The renew deadline passed: the fence has closed by itself; the term waits.
    fn suspend(&mut self) {
        self.fence.close();
        self.cached = None;
        if let Leadership::Leading(term) = self.state() {
            self.tx.send_replace(Leadership::Suspended(term));
            warn!(
                lease = %self.settings.name,
                "lost the leadership: no renewal succeeded before the renew deadline; every write is refused until the lease is renewed"
            );
        }
    }

    /// Another replica holds the lease: the term ends.
    fn step_down(&mut self, why: &str) {
        self.fence.close();
        self.cached = None;
        self.observer.forget();
        let was = self.tx.send_replace(Leadership::Standby);
        if matches!(was, Leadership::Leading(_)) {
            warn!(lease = %self.settings.name, reason = why, "lost the leadership: stopped allocating");
        } else {
            info!(lease = %self.settings.name, reason = why, "the suspended term ends: another replica holds the lease");
        }
    }

    /// Reads the lease (unless this replica leads and has it cached), and takes or renews it
    /// when the verdict allows.
    async fn attempt(&mut self) -> kube::Result<Attempt> {
        let me = self.settings.identity.clone();
        let current = match self.cached.take() {
            Some(lease) if matches!(self.state(), Leadership::Leading(_)) => lease,
            _ => {
                self.action = "get";
                match self.api.get_opt(&self.settings.name).await? {
                    Some(lease) => lease,
                    None => return self.create(&me).await,
                }
            }
        };
        let spec = current.spec.clone().unwrap_or_default();
        self.observer.observe(&spec, Instant::now());
        let verdict = self.observer.verdict(&me, Instant::now());
        let renewed = verdict == Verdict::Ours;
        if !verdict.may_take() {
            return Ok(Attempt::Standing(verdict));
        }
        if verdict == Verdict::Expired {
            info!(lease = %self.settings.name, previous = spec.holder_identity.as_deref().unwrap_or_default(), "the leader lease expired; taking it");
        }
        let mut next = current.clone();
        next.spec = Some(claimed(Some(&spec), &me, self.settings.duration, Timestamp::now()));
        self.action = "update";
        match self.api.replace(&self.settings.name, &PostParams::default(), &next).await {
            Ok(written) => {
                self.observer.observe(&written.spec.clone().unwrap_or_default(), Instant::now());
                self.cached = Some(written);
                Ok(Attempt::Leading { renewed })
            }
            // Someone wrote the Lease since it was read: another replica, or this one's own
            // renewal whose answer was lost. The next attempt reads it afresh and decides.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Reread),
            Err(error) => Err(error),
        }
    }

    async fn create(&mut self, me: &str) -> kube::Result<Attempt> {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(self.settings.name.clone()), ..ObjectMeta::default() },
            spec: Some(claimed(None, me, self.settings.duration, Timestamp::now())),
        };
        self.action = "create";
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                self.observer.observe(&written.spec.clone().unwrap_or_default(), Instant::now());
                self.cached = Some(written);
                Ok(Attempt::Leading { renewed: false })
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Standing(Verdict::HeldBy {
                holder: "another replica".into(),
                left: self.settings.duration,
            })),
            Err(error) => Err(error),
        }
    }

    /// Gives the lease up (after the fence closed): its record names no holder.
    async fn release(&mut self) {
        let released = async {
            let current = self.api.get(&self.settings.name).await?;
            let spec = current.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
                return Ok::<_, kube::Error>(false);
            }
            let mut next = current;
            next.spec = Some(released(&spec, Timestamp::now()));
            self.api.replace(&next.name_any(), &PostParams::default(), &next).await?;
            Ok(true)
        };
        match tokio::time::timeout(self.settings.renew_deadline, released).await {
            Ok(Ok(true)) => info!(lease = %self.settings.name, "released the leader lease"),
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                let error = describe(&error);
                warn!(lease = %self.settings.name, %error, "could not release the leader lease; it expires by itself")
            }
            Err(_) => warn!(lease = %self.settings.name, "releasing the leader lease timed out; it expires by itself"),
        }
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
