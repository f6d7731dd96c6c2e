//! `ferro-ipam who-has`, `explain` and `top`: answers for an operator, read-only like
//! `ferro-ipam preflight` and with its output formats; and `ferro-ipam hub drain`, the one
//! command here that writes (it returns a gone spoke's blocks to the hub, see `drain`).
//!
//! Each command: load (list calls, the same as preflight's; client required) -> answer (pure:
//! the controller's own index, built as at start-up, and its own rules) -> print.

mod drain;
mod explain;
mod pools;
mod scrape;
mod top;
mod who_has;

use std::net::IpAddr;
use std::path::Path;

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::index::{HolderKey, Index};
use crate::preflight::gather::{Inventory, gather};
use crate::preflight::{FAILED, Output, build_index, connect};

/// Exit status of an answer.
pub const ANSWERED: i32 = 0;
pub use drain::REFUSED;

/// Lists what the answers read, and builds the index from it as the controller does on start.
async fn load(kubeconfig: Option<&Path>) -> anyhow::Result<(Inventory, Index)> {
    let inventory = gather(&connect(kubeconfig).await?).await?;
    let index = build_index(&inventory, Timestamp::now());
    Ok((inventory, index))
}

fn print<T: Serialize>(output: Output, answer: &T, text: impl Fn(&T) -> String) -> anyhow::Result<()> {
    match output {
        Output::Text => print!("{}", text(answer)),
        Output::Json => println!("{}", serde_json::to_string_pretty(answer)?),
    }
    Ok(())
}

/// Runs a command, printing its error and giving preflight's exit status when it could not look.
fn exit_status(command: &str, answered: anyhow::Result<()>) -> i32 {
    match answered {
        Ok(()) => ANSWERED,
        Err(error) => {
            eprintln!("ferro-ipam {command}: {error:#}");
            FAILED
        }
    }
}

/// `ferro-ipam who-has ADDRESS`.
pub async fn who_has(kubeconfig: Option<&Path>, address: IpAddr, output: Output) -> i32 {
    let answered = async {
        let (inventory, index) = load(kubeconfig).await?;
        print(output, &who_has::answer(&inventory, &index, address), who_has::text)
    };
    exit_status("who-has", answered.await)
}

/// The infrastructure provider of a purpose claim (its Cluster's or owner's CRD label), as the
/// claim controller finds it; None for other claims.
async fn provider_of(client: &kube::Client, inventory: &Inventory, holder: &HolderKey) -> Option<String> {
    use crate::api::capi::cluster_name;
    use crate::client::providers::{Providers, provider_kind};
    use crate::contract::Target;
    use kube::ResourceExt as _;
    let claim = inventory
        .claims
        .iter()
        .find(|c| c.namespace().as_deref() == Some(holder.namespace.as_str()) && *c.name_any() == *holder.name)?;
    if !matches!(Target::of(claim), Some(Target::Purpose(_))) {
        return None;
    }
    let cluster = cluster_name(claim).and_then(|name| {
        inventory
            .clusters
            .iter()
            .flatten()
            .find(|c| c.namespace().as_deref() == Some(holder.namespace.as_str()) && c.name_any() == name)
    });
    Providers::new(client.clone()).of_kind(&provider_kind(claim, cluster)?).await
}

/// `ferro-ipam explain NAMESPACE/NAME`.
pub async fn explain(kubeconfig: Option<&Path>, claim: &str, output: Output) -> i32 {
    let answered = async {
        let Some((namespace, name)) = claim.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty()) else {
            anyhow::bail!("{claim:?} names no claim: write NAMESPACE/NAME");
        };
        let holder = HolderKey::new(namespace, name);
        let client = connect(kubeconfig).await?;
        let inventory = gather(&client).await?;
        let index = build_index(&inventory, Timestamp::now());
        let provider = provider_of(&client, &inventory, &holder).await;
        print(output, &explain::answer(&inventory, &index, &holder, provider.as_deref()), explain::text)
    };
    exit_status("explain", answered.await)
}

/// Where `top --metrics` reads the filling rate.
pub struct MetricsSource {
    pub url: String,
    pub token_file: Option<std::path::PathBuf>,
    pub insecure: bool,
    pub interval: std::time::Duration,
}

/// `ferro-ipam top`.
pub async fn top(
    kubeconfig: Option<&Path>,
    namespace: Option<&str>,
    metrics: Option<MetricsSource>,
    output: Output,
) -> i32 {
    let answered = async {
        let (inventory, _) = load(kubeconfig).await?;
        let filling = match metrics {
            None => None,
            Some(source) => {
                let token = match &source.token_file {
                    Some(path) => Some(
                        std::fs::read_to_string(path)
                            .map_err(|e| anyhow::anyhow!("reading --metrics-token-file {}: {e}", path.display()))?
                            .trim()
                            .to_owned(),
                    ),
                    None => None,
                };
                let endpoint = scrape::Endpoint { url: source.url, token, insecure: source.insecure };
                Some(scrape::filling(&endpoint, source.interval).await?)
            }
        };
        print(output, &top::answer(&inventory, namespace, Timestamp::now(), filling.as_ref()), top::text)
    };
    exit_status("top", answered.await)
}

/// `ferro-ipam hub drain --namespace SPOKE_NS`: 0 drained, 1 refused, 2 could not look (or a
/// deletion failed).
pub async fn hub_drain(kubeconfig: Option<&Path>, namespace: &str, output: Output) -> i32 {
    let drained = async {
        let config = crate::client::config(kubeconfig).await?;
        let server = config.cluster_url.clone();
        let fence = crate::client::Fence::always_open();
        let (connection, _) = crate::client::connect(config, fence, crate::client::Timeouts::default(), None)?;
        connection.client.apiserver_version().await.with_context(|| {
            format!(
                "reaching the API server at {server}: check the kubeconfig's server and credentials, and the network"
            )
        })?;
        let clock = connection.clock.clone();
        let answer = drain::drain(&connection.client, namespace, move || clock.now()).await?;
        print(output, &answer, drain::text)?;
        anyhow::Ok(drain::exit_status(&answer))
    };
    match drained.await {
        Ok(status) => status,
        Err(error) => {
            eprintln!("ferro-ipam hub drain: {error:#}");
            FAILED
        }
    }
}

#[cfg(test)]
mod hub_tests;
#[cfg(test)]
mod tests;
