//! `ferro-ipam preflight`: reads a live cluster and tells what ferro-ipam would do with it on
//! start, without writing anything: the addresses it would adopt, the conflicts it would meet,
//! the claims that would wait, the pools its CRD would refuse, the features in use, and whether
//! another IPAM provider runs.
//!
//! gather (list calls) -> analyse (pure: the controller's own index and decisions) -> the other
//! provider's Lease (one get) -> report.

mod analyse;
pub(crate) mod claims;
mod findings;
pub(crate) mod gather;
mod other_provider;
mod report;
mod reservations;
mod rules;
pub(crate) mod spokes;

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;

use analyse::analyse;
pub(crate) use analyse::build_index;
#[cfg(test)]
use gather::Inventory;
use gather::gather;
use report::text;

/// How preflight prints its findings.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// A report for people.
    Text,
    /// The findings as one JSON document (see docs/migration.md for its shape).
    Json,
}

/// Exit status when nothing stands in the way.
pub const CLEAN: i32 = 0;
/// Exit status when anything would conflict, a pool is refused or invalid, an object unreadable,
/// or another IPAM provider runs.
pub const PROBLEMS: i32 = 1;
/// Exit status when preflight could not look (no cluster, no permission, no CRDs): then it prints
/// only the error. Also when it could not read another IPAM provider's Lease: then it prints its
/// findings, saying that this check was not done and why.
pub const FAILED: i32 = 2;

/// A client of the cluster `kubeconfig` points at (or the usual one), once it answers.
pub(crate) async fn connect(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = crate::client::config(kubeconfig).await?;
    let server = config.cluster_url.clone();
    let client = kube::Client::try_from(config)?;
    client.apiserver_version().await.with_context(|| {
        format!("reaching the API server at {server}: check the kubeconfig's server and credentials, and the network")
    })?;
    Ok(client)
}

/// Reads the cluster `kubeconfig` points at (or the usual one), prints the findings, and returns
/// the exit status.
pub async fn run(kubeconfig: Option<&std::path::Path>, output: Output) -> anyhow::Result<i32> {
    let client = connect(kubeconfig).await?;
    let inventory = gather(&client).await?;
    let mut findings = analyse(&inventory, Timestamp::now());
    findings
        .check_lease(other_provider::read(&client, crate::other_provider::IN_CLUSTER_LEASE, Timestamp::now()).await);
    match output {
        Output::Text => print!("{}", text(&findings)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&findings)?),
    }
    Ok(findings.exit_status())
}

#[cfg(test)]
pub(crate) mod hub_fixtures;
#[cfg(test)]
mod hub_tests;
#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod tests;
