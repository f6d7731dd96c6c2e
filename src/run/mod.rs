//! The `ferro-ipam` process: logging, client, probes, leader election, and the controllers.

mod compat;
mod diagnostics;
mod leader;
mod logging;

use std::sync::Arc;
use std::time::Duration;

use std::future::Future;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cli::{InitialList, RunFlags, parse_bind_address};
use crate::client::discovery;
use crate::client::{self, Fence, Timeouts};
use crate::controller::pool::other_provider::PoolMarker;
use crate::controller::wiring::{Listing, Settings, Term};
use crate::health::{self, Health};
use crate::metrics::Metrics;
use crate::misconfig::Misconfig;
use crate::other_provider::{self, Others};
use leader::Leadership;

pub use logging::init as init_logging;

/// How long shutting down may take before the process exits anyway.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(4);
/// How often the Lease holder marks the pools again while another IPAM provider is active.
const MARK_POOLS_EVERY: Duration = Duration::from_secs(30);
/// How long a leader's term gets to finish its reconciles in flight when shutting down.
const TERM_GRACE: Duration = Duration::from_secs(1);

/// Cancels the token on SIGTERM or Ctrl-C. From then on the process ends within
/// [`SHUTDOWN_LIMIT`] whatever it is doing, and at once on a second signal.
fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(term) => term,
            Err(error) => {
                warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the process");
                let _ = tokio::signal::ctrl_c().await;
                std::process::exit(130);
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        info!("shutting down");
        token.cancel();
        // A plain thread, so that a runtime busy or blocked elsewhere cannot hold the exit up.
        std::thread::spawn(|| {
            std::thread::sleep(SHUTDOWN_LIMIT);
            eprintln!("ferro-ipam: shutdown took longer than {SHUTDOWN_LIMIT:?}; exiting now");
            std::process::exit(1);
        });
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("ferro-ipam: second signal; exiting now");
        std::process::exit(1);
    });
}

fn lease_namespace(flags: &RunFlags) -> String {
    flags
        .leader_election_namespace
        .clone()
        .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|| "default".to_owned())
}

fn identity() -> String {
    let host = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "ferro-ipam".into());
    format!("{host}-{}", std::process::id())
}

fn lease_settings(flags: &RunFlags, identity: String) -> leader::LeaseSettings {
    leader::LeaseSettings {
        namespace: lease_namespace(flags),
        name: flags.leader_election_id.clone(),
        identity,
        duration: flags.leader_elect_lease_duration,
        renew_deadline: flags.leader_elect_renew_deadline,
        retry_period: flags.leader_elect_retry_period,
    }
}

/// Runs the provider until SIGTERM.
pub async fn run(flags: RunFlags) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    // With leader election, nothing is written until the lease is held.
    let fence = if flags.leader_elect { Fence::closed() } else { Fence::always_open() };
    let rate = (flags.kube_api_qps > 0.0).then_some((flags.kube_api_qps, flags.kube_api_burst));
    let config = client::config(flags.kubeconfig.as_deref()).await?;
    let reviews_config = config.clone();
    let (connection, lease_client) = client::connect(config, fence, Timeouts::default(), rate)?;
    let client = connection.client.clone();
    let health = Health::default();
    let metrics = Arc::new(Metrics::new());
    let misconfig = Misconfig::new(health.clone(), metrics.misconfigured.clone());
    diagnostics::serve(&flags, metrics.clone(), reviews_config).await?;
    if let Some(address) = parse_bind_address(&flags.health_probe_bind_address).map_err(anyhow::Error::msg)? {
        health::serve(address, health.router(), "health probes").await?;
        info!(%address, "serving health probes");
    }
    // Not ready until discovery has answered.
    let Some(versions) = discovery::versions_eventually(&client, &misconfig, shutdown.clone().cancelled_owned()).await
    else {
        return Ok(());
    };
    compat::check_kubernetes(&client).await?;
    let identity = identity();
    let settings = Settings {
        namespace: flags.namespace.clone(),
        watch_filter: flags.watch_filter.clone(),
        claim_concurrency: flags.claim_concurrency,
        pool_concurrency: flags.pool_concurrency,
        instance: Some(identity.clone()),
        sticky: Duration::from_secs(flags.sticky_address_seconds),
        clock: connection.clock.clone(),
        sync_period: flags.sync_period,
        fence: connection.fence.clone(),
        listing: Listing { page_size: flags.list_page_size, streaming: flags.initial_list == InitialList::Streaming },
        control_plane_vip_disabled: !flags.control_plane_vip,
        own_namespace: lease_namespace(&flags),
    };

    let others = if flags.other_provider_check { flags.other_provider_lease.clone() } else { Vec::new() };
    let other = other_provider::watch(&client, &others, flags.leader_elect_retry_period, misconfig.clone());
    let mut other_active = other.active.clone();
    let controllers = Term { client, versions, settings, health, metrics, misconfig: misconfig.clone() };
    if !flags.leader_elect {
        // Without leader election, one term that always leads (but waits for another provider).
        let (_always, mut leading) = tokio::sync::watch::channel(Leadership::Leading(1));
        return lead(&controllers, &mut leading, &mut other_active, shutdown).await;
    }

    let settings = lease_settings(&flags, identity);
    let campaign = leader::campaign(lease_client, settings, connection.fence, controllers.health.clone(), misconfig);
    let mut leading = campaign.leading.clone();
    let result = lead(&controllers, &mut leading, &mut other_active, shutdown).await;
    campaign.resign(Duration::from_secs(2)).await;
    result
}

/// Runs a term until it ends by itself or shutdown is asked for; then gives its reconciles in
/// flight [`TERM_GRACE`] to finish, and drops whatever is left.
async fn finish_term(
    term: impl Future<Output = anyhow::Result<()>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut term = std::pin::pin!(term);
    tokio::select! {
        result = &mut term => return result,
        _ = shutdown.cancelled() => {}
    }
    match tokio::time::timeout(TERM_GRACE, term).await {
        Ok(result) => result,
        Err(_) => {
            info!("stopped the reconciles still in flight");
            Ok(())
        }
    }
}

/// What decides whether this replica serves: its leadership, and other IPAM providers.
struct Signals<'a> {
    leading: &'a mut tokio::sync::watch::Receiver<Leadership>,
    other_active: &'a mut tokio::sync::watch::Receiver<Others>,
}

/// How a term ended.
enum TermEnd {
    /// The controllers returned (shutdown, or an error): the process ends with this.
    Finished(anyhow::Result<()>),
    /// The lease went to another replica, or another IPAM provider became active.
    Lost,
}

/// Stands by, and runs the controllers of `controllers` for each leadership term while no
/// other IPAM provider is active, until shutdown. A suspended term (its writes refused) keeps
/// running; it ends when another replica holds the lease, or another provider becomes active.
async fn lead(
    controllers: &Term,
    leading: &mut tokio::sync::watch::Receiver<Leadership>,
    other_active: &mut tokio::sync::watch::Receiver<Others>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (health, metrics) = (&controllers.health, &controllers.metrics);
    let mut signals = Signals { leading, other_active };
    let (client, settings) = (controllers.client.clone(), &controllers.settings);
    let mut marker = PoolMarker::new(client, settings.namespace.clone(), settings.instance.clone());
    loop {
        let Some(term) = stand_by(controllers, &mut signals, &mut marker, &shutdown).await? else {
            return Ok(());
        };
        info!(term, "became the leader: building the index, then serving claims");
        health.set_ready(false);
        metrics.leader.set(1);
        if let TermEnd::Finished(result) = serve(controllers, &mut signals, term, &shutdown).await? {
            return result;
        }
        // Dropping the term cancels every reconcile in flight; the fence already refuses
        // their writes.
        metrics.stand_by();
        health.forget_watches();
        controllers.misconfig.forget(|object| object.starts_with(crate::store::watches::WATCH_PREFIX));
        warn!(
            term,
            "standing by: the term ended (the lease was lost or another IPAM provider is active), its index is dropped"
        );
    }
}

/// Waits until this replica leads and no other provider is active: returns the term, or None
/// at shutdown. While it leads but another provider is active, it marks the pools.
async fn stand_by(
    controllers: &Term,
    signals: &mut Signals<'_>,
    marker: &mut PoolMarker,
    shutdown: &CancellationToken,
) -> anyhow::Result<Option<u64>> {
    loop {
        let leading = *signals.leading.borrow_and_update();
        let others = signals.other_active.borrow_and_update().clone();
        let mut marking = false;
        let standing_by = ready_standing_by(leading, &others);
        match (leading, others) {
            (Leadership::Leading(term), Others::Absent) => {
                marker.reset();
                return Ok(Some(term));
            }
            // The Lease holder says so on every pool, and again every round: a pool created
            // meanwhile, or a status the other provider rewrote.
            (Leadership::Leading(_), Others::Active { lease, holder }) => {
                marking = true;
                marker.mark_all(&lease, &holder, controllers.settings.clock.now()).await;
            }
            (_, Others::Absent) => marker.reset(),
            _ => {}
        }
        controllers.health.set_ready(standing_by);
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            changed = signals.leading.changed() => changed.context("the leader election stopped")?,
            changed = signals.other_active.changed() => changed.context("the other-provider check stopped")?,
            _ = tokio::time::sleep(MARK_POOLS_EVERY), if marking => {}
        }
    }
}

/// Whether a replica that does not serve is ready. Standing by is a healthy, ready state once
/// the lease is known to be another's, or another provider keeps this replica from serving. A
/// replica that may be about to serve (its first attempt at the lease unsettled, or the lease
/// its own while the other providers' Leases are unread) is ready only once it serves.
fn ready_standing_by(leading: Leadership, others: &Others) -> bool {
    matches!(leading, Leadership::Standby | Leadership::Suspended(_)) || matches!(others, Others::Active { .. })
}

/// Runs the controllers for `term` until they return or the term is lost.
async fn serve(
    controllers: &Term,
    signals: &mut Signals<'_>,
    term: u64,
    shutdown: &CancellationToken,
) -> anyhow::Result<TermEnd> {
    let metrics = &controllers.metrics;
    let mut run = std::pin::pin!(finish_term(controllers.run(shutdown.clone().cancelled_owned()), shutdown));
    loop {
        tokio::select! {
            result = &mut run => return Ok(TermEnd::Finished(result)),
            changed = signals.other_active.changed() => {
                changed.context("the other-provider check stopped")?;
                if signals.other_active.borrow_and_update().blocks() {
                    return Ok(TermEnd::Lost);
                }
            }
            changed = signals.leading.changed() => {
                changed.context("the leader election stopped")?;
                match *signals.leading.borrow_and_update() {
                    Leadership::Leading(t) if t == term => metrics.leader.set(1),
                    Leadership::Suspended(t) if t == term => metrics.leader.set(0),
                    _ => return Ok(TermEnd::Lost),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_that_may_be_about_to_serve_is_not_ready_while_standing_by() {
        let active = Others::Active { lease: "Lease ns/other".to_owned(), holder: "them".to_owned() };
        for (leading, others, ready) in [
            (Leadership::Starting, Others::Unread, false),
            (Leadership::Starting, Others::Absent, false),
            (Leadership::Leading(1), Others::Unread, false),
            (Leadership::Leading(1), Others::Absent, false),
            (Leadership::Standby, Others::Unread, true),
            (Leadership::Standby, Others::Absent, true),
            (Leadership::Suspended(1), Others::Absent, true),
            (Leadership::Starting, active.clone(), true),
            (Leadership::Leading(1), active, true),
        ] {
            assert_eq!(ready_standing_by(leading, &others), ready, "{leading:?} with {others:?}");
        }
    }
}
