//! A spoke's client of the hub, from the kubeconfig in its Secret. Its writes pass the same
//! fence as the spoke's own: a replica that no longer leads neither asks for nor returns a block.

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::api::hub::{HubSource, KUBECONFIG_KEY};
use crate::client::{Fence, Timeouts};

/// The hub's client for `source`, or what to fix, in words.
pub async fn hub_client(
    local: &Client,
    own_namespace: &str,
    source: &HubSource,
    fence: Fence,
) -> Result<Client, String> {
    let secrets: Api<Secret> = Api::namespaced(local.clone(), own_namespace);
    let name = &source.kubeconfig_secret;
    let secret = secrets.get(name).await.map_err(|e| {
        format!(
            "reading Secret {own_namespace}/{name} (spec.hub.kubeconfigSecret): {}",
            crate::client::api_errors::describe(&e)
        )
    })?;
    let bytes = secret.data.as_ref().and_then(|d| d.get(KUBECONFIG_KEY)).map(|b| b.0.clone()).ok_or_else(|| {
        format!("Secret {own_namespace}/{name} has no key {KUBECONFIG_KEY}: put the hub's kubeconfig there")
    })?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("Secret {own_namespace}/{name}: {KUBECONFIG_KEY} is not text"))?;
    let kubeconfig = Kubeconfig::from_yaml(&text)
        .map_err(|e| format!("Secret {own_namespace}/{name}: {KUBECONFIG_KEY} is not a kubeconfig: {e}"))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("Secret {own_namespace}/{name}: the kubeconfig cannot be used: {e}"))?;
    config.connect_timeout = Some(std::time::Duration::from_secs(5));
    let (connection, _) = crate::client::connect(config, fence, Timeouts::default(), None)
        .map_err(|e| format!("Secret {own_namespace}/{name}: building the hub's client: {e:#}"))?;
    Ok(connection.client)
}
