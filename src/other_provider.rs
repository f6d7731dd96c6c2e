//! Another IPAM provider for the same kinds (the in-cluster provider, at least): while its leader
//! Lease is held and renewed, ferro-ipam allocates nothing, since two providers would hand one
//! address to two machines. The Leases are read every retry period (client required); a Lease
//! counts as lapsed when it names no holder, or when its record has stayed unchanged for its
//! `leaseDurationSeconds` on the local clock, as a stand-by of leader election decides (wall-clock
//! times written by the other provider are never compared with the local clock).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tracing::warn;

use crate::client::api_errors::describe;
use crate::lease::{Observer, Verdict};
use crate::misconfig::{Misconfig, Problem};

/// The in-cluster provider's leader Lease, as clusterctl installs it (`NAMESPACE/NAME`).
pub(crate) const IN_CLUSTER_LEASE: &str = "capi-ipam-in-cluster-system/7bb7acb4.ipam.cluster.x-k8s.io";

/// What the check knows of other providers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Others {
    /// Their Leases have not been read yet: nothing may be allocated until they are.
    Unread,
    /// No other provider's Lease is held and renewed.
    Absent,
    /// `lease` (`Lease NAMESPACE/NAME`) is held by `holder` and renewed.
    Active { lease: String, holder: String },
}

impl Others {
    /// Whether ferro-ipam must allocate nothing.
    pub fn blocks(&self) -> bool {
        *self != Others::Absent
    }
}

/// One Lease of another provider, and what was seen of it.
struct Watched {
    api: Api<Lease>,
    name: String,
    object: String,
    observer: Observer,
    /// Who holds and renews it, when someone does.
    holder: Option<String>,
    failing: bool,
}

/// Whether another provider is active; the task that keeps reading its Leases, if any.
pub(crate) struct OtherProviders {
    pub active: watch::Receiver<Others>,
    /// Keeps the channel open when no task runs (the check is off).
    _sender: Option<watch::Sender<Others>>,
}

/// Reads `leases` (`NAMESPACE/NAME`) every `period`. Until the first reads, they are
/// [`Others::Unread`]. With no leases, nothing is checked and none is ever active.
pub(crate) fn watch(client: &Client, leases: &[String], period: Duration, misconfig: Misconfig) -> OtherProviders {
    if leases.is_empty() {
        let (sender, active) = watch::channel(Others::Absent);
        return OtherProviders { active, _sender: Some(sender) };
    }
    let (sender, active) = watch::channel(Others::Unread);
    let mut watched: Vec<Watched> = leases
        .iter()
        .filter_map(|lease| lease.split_once('/'))
        .map(|(namespace, name)| Watched {
            api: Api::namespaced(client.clone(), namespace),
            name: name.to_owned(),
            object: format!("Lease {namespace}/{name}"),
            observer: Observer::default(),
            holder: None,
            failing: false,
        })
        .collect();
    tokio::spawn(async move {
        loop {
            for lease in &mut watched {
                lease.read(&misconfig).await;
            }
            let now = watched
                .iter()
                .find_map(|l| Some(Others::Active { lease: l.object.clone(), holder: l.holder.clone()? }))
                .unwrap_or(Others::Absent);
            sender.send_if_modified(|was| std::mem::replace(was, now.clone()) != now);
            if sender.is_closed() {
                return;
            }
            tokio::time::sleep(period).await;
        }
    });
    OtherProviders { active, _sender: None }
}

impl Watched {
    /// Reads the Lease once, and says what it means. A failed read keeps the last verdict.
    async fn read(&mut self, misconfig: &Misconfig) {
        let lease = match self.api.get_opt(&self.name).await {
            Ok(lease) => lease,
            Err(error) => {
                if !self.failing {
                    let error = describe(&error);
                    warn!(object = %self.object, action = "get", %error, "cannot read another IPAM provider's Lease; keeping the last verdict");
                }
                self.failing = true;
                return;
            }
        };
        self.failing = false;
        let verdict = match lease.and_then(|l| l.spec) {
            Some(spec) => {
                self.observer.observe(&spec, Instant::now());
                self.observer.verdict("", Instant::now())
            }
            None => {
                self.observer.forget();
                Verdict::Free
            }
        };
        self.holder = None;
        match verdict {
            Verdict::HeldBy { holder, left } => {
                self.holder = Some(holder.clone());
                let message = format!(
                    "held by {holder} and renewed: another IPAM provider serves the same kinds; ferro-ipam allocates nothing until the Lease lapses (at least {left:?}), or run it with --other-provider-check=false"
                );
                misconfig.report(Problem::other_provider_active, &self.object, "get", &message);
            }
            _ => misconfig.resolved(&self.object),
        }
    }
}
