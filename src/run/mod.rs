//! The `ferro-ipam` process: logging, client, probes, leader election, and the controllers.

mod compat;
mod diagnostics;
mod leader;
mod logging;
pub mod ratelimit;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cli::{RunFlags, parse_bind_address};
use crate::controller::discovery;
use crate::controller::run::{self as controllers, Settings};
use crate::health::{self, Health};
use crate::metrics::Metrics;

pub use logging::init as init_logging;

async fn client(flags: &RunFlags) -> anyhow::Result<Client> {
    let config = match &flags.kubeconfig {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await.context("finding a kubeconfig or in-cluster service account")?,
    };
    Ok(Client::try_from(config)?)
}

/// Cancels the token on SIGTERM or Ctrl-C.
fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing a SIGTERM handler");
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        info!("shutting down");
        token.cancel();
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

/// Runs the provider until SIGTERM.
pub async fn run(flags: RunFlags) -> anyhow::Result<()> {
    let client = client(&flags).await?;
    compat::check_kubernetes(&client).await?;
    let served = discovery::served(&client).await?;
    let health = Health::default();
    let metrics = Arc::new(Metrics::new());
    diagnostics::serve(&flags, metrics.clone(), client.clone())?;
    if let Some(address) = parse_bind_address(&flags.health_probe_bind_address).map_err(anyhow::Error::msg)? {
        let router = health.router();
        tokio::spawn(async move {
            if let Err(error) = health::serve(address, router).await {
                warn!(%error, "health probe server stopped");
            }
        });
        info!(%address, "serving health probes");
    }
    let identity = identity();
    let settings = Settings {
        namespace: flags.namespace.clone(),
        watch_filter: flags.watch_filter.clone(),
        claim_concurrency: flags.claim_concurrency,
        instance: Some(identity.clone()),
        sticky: Duration::from_secs(flags.sticky_address_seconds),
    };
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());

    if !flags.leader_elect {
        metrics.leader.set(1);
        return controllers::run(client, served, settings, health, metrics, shutdown.cancelled_owned()).await;
    }

    // kube-lease-manager counts whole seconds, with 0 < margin < duration.
    let lease_seconds = flags.leader_elect_lease_duration.as_secs().max(2);
    let margin = flags.leader_elect_lease_duration - flags.leader_elect_renew_deadline;
    let margin_seconds = margin.as_secs().clamp(1, lease_seconds - 1);
    let lease = leader::LeaseSettings {
        namespace: lease_namespace(&flags),
        name: flags.leader_election_id.clone(),
        identity,
        duration: Duration::from_secs(lease_seconds),
        renew_margin: Duration::from_secs(margin_seconds),
    };
    let mut campaign = leader::campaign(client.clone(), &lease).await?;
    let result = lead(&mut campaign.leading, client, served, settings, health, metrics, shutdown).await;
    campaign.resign(Duration::from_secs(5)).await;
    result
}

/// Stands by, and runs the controllers for each leadership term, until shutdown.
async fn lead(
    leading: &mut tokio::sync::watch::Receiver<bool>,
    client: Client,
    served: discovery::Served,
    settings: Settings,
    health: Health,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    loop {
        // Standing by is a healthy, ready state.
        health.set_ready(true);
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            changed = leading.wait_for(|l| *l) => { changed.context("the lease manager stopped")?; }
        }
        info!("became the leader: building the index, then serving claims");
        health.set_ready(false);
        metrics.leader.set(1);
        let term = controllers::run(
            client.clone(),
            served,
            settings.clone(),
            health.clone(),
            metrics.clone(),
            shutdown.clone().cancelled_owned(),
        );
        tokio::select! {
            result = term => return result,
            _ = leading.wait_for(|l| !*l) => {
                // Dropping the term cancels every reconcile in flight: nothing more is written.
                metrics.stand_by();
                warn!("lost the leadership: stopped allocating; standing by");
            }
        }
    }
}
