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

/// Starts competing for the lease; the receiver says whether this replica holds it.
pub async fn campaign(client: Client, settings: &LeaseSettings) -> anyhow::Result<watch::Receiver<bool>> {
    let params =
        LeaseParams::new(settings.identity.clone(), settings.duration.as_secs(), settings.renew_margin.as_secs());
    let manager = LeaseManagerBuilder::new(client, &settings.name)
        .with_namespace(&settings.namespace)
        .with_parameters(params)
        .build()
        .await?;
    info!(lease = %format!("{}/{}", settings.namespace, settings.name), identity = %settings.identity, "competing for leadership");
    let (receiver, _task) = manager.watch().await;
    Ok(receiver)
}
