//! Which CAPI API versions the API server serves, asked at start-up until it answers.

use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::Client;
use kube::discovery;
use tracing::{info, warn};

use crate::misconfig::{Misconfig, discovery_problem};

use crate::api::CapiVersion;
use crate::api::hub::HUB_GROUP;
use crate::api::keys::{CLUSTER_GROUP, IPAM_GROUP};

/// What ERROR lines and `/readyz` call discovery.
const DISCOVERY: &str = "API discovery of the Cluster API groups";

/// The versions ferro-ipam talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapiVersions {
    /// Of `IPAddressClaim` and `IPAddress`.
    pub ipam: CapiVersion,
    /// Of `Cluster`; None when CAPI's core CRDs are not installed.
    pub cluster: Option<CapiVersion>,
    /// Whether the API server serves `AddressBlock` (ferro-ipam's CRDs of this release are
    /// installed): without it the cluster can be neither a hub nor a spoke.
    pub blocks: bool,
}

fn versions_serving(group: &kube::discovery::ApiGroup, kind: &str) -> Vec<String> {
    group
        .versions()
        .filter(|v| group.versioned_resources(v).iter().any(|(r, _)| r.kind == kind))
        .map(str::to_owned)
        .collect()
}

/// Asks the API server which versions of CAPI's types it serves, until it answers (or `stop`
/// resolves: then None). Each failure is retried with a backoff of up to 10 s, and reported as
/// a misconfiguration (ERROR, metric, not ready): until discovery answers, nothing is served.
pub(crate) async fn versions_eventually(
    client: &Client,
    misconfig: &Misconfig,
    stop: impl std::future::Future<Output = ()>,
) -> Option<CapiVersions> {
    let mut stop = std::pin::pin!(stop);
    let mut delay = Duration::from_millis(500);
    loop {
        match versions(client).await {
            Ok(versions) => {
                misconfig.resolved(DISCOVERY);
                return Some(versions);
            }
            Err(error) => misconfig.report(discovery_problem(&error), DISCOVERY, "get", &message(&error)),
        }
        tokio::select! {
            _ = &mut stop => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// A failure as a person reads it: what was being done, and the API server's message without
/// kube's debug form of the whole `Status`.
fn message(error: &anyhow::Error) -> String {
    match error.chain().find_map(|e| e.downcast_ref::<kube::Error>()) {
        Some(cause) => format!("{error}: {}", super::api_errors::describe(cause)),
        None => format!("{error:#}"),
    }
}

/// Asks the API server which versions of CAPI's types it serves.
pub async fn versions(client: &Client) -> anyhow::Result<CapiVersions> {
    let ipam = discovery::group(client, IPAM_GROUP)
        .await
        .with_context(|| format!("discovering API group {IPAM_GROUP}: are Cluster API's CRDs installed?"))?;
    let claim_versions = versions_serving(&ipam, "IPAddressClaim");
    let Some(ipam_version) = CapiVersion::choose(&claim_versions) else {
        bail!(
            "the API server serves IPAddressClaim at {claim_versions:?}; ferro-ipam needs v1beta2 (CAPI >= 1.11) or v1beta1 (CAPI 1.6-1.10)"
        );
    };
    let cluster = match discovery::group(client, CLUSTER_GROUP).await {
        Ok(group) => CapiVersion::choose(&versions_serving(&group, "Cluster")),
        // Only a group the server says it lacks turns the pause rules off; any other error is
        // retried, so that a passing fault cannot turn them off for the life of the process.
        Err(kube::Error::Discovery(error)) => {
            warn!(%error, "no Cluster API core types found: claims will not wait for their Cluster");
            None
        }
        Err(error) => return Err(anyhow::Error::new(error).context(format!("discovering API group {CLUSTER_GROUP}"))),
    };
    let blocks = match discovery::group(client, HUB_GROUP).await {
        Ok(group) => !versions_serving(&group, "AddressBlock").is_empty(),
        Err(kube::Error::Discovery(_)) => false,
        Err(error) => return Err(anyhow::Error::new(error).context(format!("discovering API group {HUB_GROUP}"))),
    };
    if !blocks {
        warn!(
            "the API server does not serve AddressBlock ({HUB_GROUP}): pools shared through a hub are off; \
             apply ferro-ipam's crds/ of this release to turn them on"
        );
    }
    info!(
        ipam = ipam_version.as_str(),
        cluster = cluster.map(CapiVersion::as_str),
        blocks,
        "discovered Cluster API versions"
    );
    Ok(CapiVersions { ipam: ipam_version, cluster, blocks })
}
