//! The oldest Kubernetes ferro-ipam runs on, checked once at start-up.
//!
//! The pool CRDs validate addresses with CEL's IP and CIDR functions (`isIP`, `cidr()`, ...).
//! Kubernetes 1.30 added them, and an API server accepts them in new CRD rules one minor release
//! later, so the CRDs install on 1.31 and later only.

use k8s_openapi::apimachinery::pkg::version::Info;
use kube::Client;
use tracing::{info, warn};

/// The oldest supported Kubernetes minor version (of major version 1).
pub const MINIMUM_MINOR: u32 = 31;

/// What the API server's version means for ferro-ipam.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Supported,
    TooOld,
    /// A version that does not read as `1.<minor>`: let it run, and say so.
    Unknown,
}

fn judge(info: &Info) -> Verdict {
    // Managed distributions report minors like "31+".
    let minor: String = info.minor.chars().take_while(char::is_ascii_digit).collect();
    match (info.major.as_str(), minor.parse::<u32>()) {
        ("1", Ok(minor)) if minor >= MINIMUM_MINOR => Verdict::Supported,
        ("1", Ok(_)) => Verdict::TooOld,
        _ => Verdict::Unknown,
    }
}

/// Refuses to start on a Kubernetes older than the minimum; warns when the version is unreadable.
pub(super) async fn check_kubernetes(client: &Client) -> anyhow::Result<()> {
    let info = match client.apiserver_version().await {
        Ok(info) => info,
        Err(error) => {
            warn!(%error, "could not read the API server's version; ferro-ipam needs Kubernetes 1.{MINIMUM_MINOR} or later");
            return Ok(());
        }
    };
    match judge(&info) {
        Verdict::Supported => {
            info!(kubernetes = %info.git_version, "API server version supported");
            Ok(())
        }
        Verdict::TooOld => anyhow::bail!(
            "Kubernetes {} is older than 1.{MINIMUM_MINOR}, the first whose CRD validation has the IP and CIDR \
             functions that ferro-ipam's pool CRDs use; upgrade the cluster",
            info.git_version
        ),
        Verdict::Unknown => {
            warn!(
                kubernetes = %info.git_version,
                "cannot read the API server's version; ferro-ipam needs Kubernetes 1.{MINIMUM_MINOR} or later"
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info { major: major.into(), minor: minor.into(), git_version: format!("v{major}.{minor}"), ..Info::default() }
    }

    #[test]
    fn kubernetes_from_the_minimum_on_is_supported_and_older_is_refused() {
        assert_eq!(judge(&info("1", "31")), Verdict::Supported);
        assert_eq!(judge(&info("1", "37")), Verdict::Supported);
        assert_eq!(judge(&info("1", "30")), Verdict::TooOld);
        assert_eq!(judge(&info("1", "29")), Verdict::TooOld);
    }

    #[test]
    fn managed_distributions_minor_suffixes_are_read() {
        assert_eq!(judge(&info("1", "31+")), Verdict::Supported);
        assert_eq!(judge(&info("1", "30+")), Verdict::TooOld);
    }

    #[test]
    fn an_unreadable_version_is_let_through() {
        assert_eq!(judge(&info("", "")), Verdict::Unknown);
        assert_eq!(judge(&info("2", "0")), Verdict::Unknown);
    }
}
