//! Leader election on a `coordination.k8s.io` Lease. Only the leader runs the controllers; each
//! leadership term starts from a fresh index, and a lost lease stops all writing at once.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tracing::info;

/// Lease settings from the flags.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub duration: Duration,
    pub renew_margin: Duration,
}

/// The competition for the lease: whether this replica holds it, and the task that renews it.
pub struct Campaign {
    pub leading: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>>,
}

impl Campaign {
    /// Gives the lease up (so that another replica takes over at once, not after it expires),
    /// waiting at most `limit` for the API server.
    pub async fn resign(self, limit: std::time::Duration) {
        drop(self.leading);
        match tokio::time::timeout(limit, self.task).await {
            Ok(Ok(Ok(_))) => info!("released the leader lease"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the leader lease; it expires by itself"),
            _ => tracing::warn!("gave up releasing the leader lease; it expires by itself"),
        }
    }
}

/// Starts competing for the lease.
pub async fn campaign(client: Client, settings: &LeaseSettings) -> anyhow::Result<Campaign> {
    let params =
        LeaseParams::new(settings.identity.clone(), settings.duration.as_secs(), settings.renew_margin.as_secs());
    let manager = LeaseManagerBuilder::new(client, &settings.name)
        .with_namespace(&settings.namespace)
        .with_parameters(params)
        .build()
        .await?;
    info!(lease = %format!("{}/{}", settings.namespace, settings.name), identity = %settings.identity, "competing for leadership");
    // The task renews the lease while the receiver lives, and releases it once it is dropped.
    let (leading, task) = manager.watch().await;
    Ok(Campaign { leading, task })
}
