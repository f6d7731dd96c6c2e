//! Command-line flags, following the conventions of Cluster API providers.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// ferro-ipam: a Cluster API IPAM provider for in-cluster IP pools.
#[derive(Parser, Debug, Clone)]
#[command(name = "ferro-ipam", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub run: RunFlags,
}

#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Print the pool CustomResourceDefinitions as YAML and exit.
    Crds {
        /// Write one file per CRD into this directory instead of printing them.
        #[arg(long)]
        output_dir: Option<std::path::PathBuf>,
    },
}

/// How log lines are written.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// Flags of the controller.
#[derive(clap::Args, Debug, Clone)]
pub struct RunFlags {
    /// Path to a kubeconfig. Default: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Elect a leader through a coordination.k8s.io Lease, so that only one replica allocates.
    #[arg(long, default_value_t = false)]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease. Default: the pod's namespace, else "default".
    #[arg(long)]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader-election Lease.
    #[arg(long, default_value = "ferro-ipam-leader")]
    pub leader_election_id: String,

    /// Seconds a leader's Lease stays valid without renewal.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub leader_elect_lease_duration: u64,

    /// Seconds before the Lease expires at which the leader renews it; must be below the lease duration.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3599))]
    pub leader_elect_renew_margin: u64,

    /// Watch claims, namespaced pools, addresses and clusters in this namespace only. Default: all.
    #[arg(long)]
    pub namespace: Option<String>,

    /// Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value>.
    #[arg(long)]
    pub watch_filter: Option<String>,

    /// Address the Prometheus metrics endpoint (/metrics) listens on; "0" disables it.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_bind_address: String,

    /// Address the health probes (/healthz, /readyz) listen on; "0" disables them.
    #[arg(long, default_value = ":9440")]
    pub health_probe_bind_address: String,

    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, e.g. "info" or "ferro_ipam=debug,kube=info" (RUST_LOG syntax).
    #[arg(long, env = "FERRO_IPAM_LOG", default_value = "info")]
    pub log_level: String,

    /// Seconds a deleted claim's address is kept for a new claim of the same namespace and name
    /// (sticky addresses; it goes to others earlier only if the pool is otherwise full). 0: off.
    #[arg(long, default_value_t = 600)]
    pub sticky_address_seconds: u64,

    /// How many claims are reconciled at once.
    #[arg(long, default_value_t = 64)]
    pub claim_concurrency: u16,
}

impl RunFlags {
    /// Checks what clap cannot: values that depend on each other.
    pub fn validate(&self) -> Result<(), String> {
        if self.leader_elect_renew_margin >= self.leader_elect_lease_duration {
            return Err(format!(
                "--leader-elect-renew-margin ({}) must be below --leader-elect-lease-duration ({})",
                self.leader_elect_renew_margin, self.leader_elect_lease_duration
            ));
        }
        parse_bind_address(&self.metrics_bind_address).map_err(|e| format!("--metrics-bind-address: {e}"))?;
        parse_bind_address(&self.health_probe_bind_address).map_err(|e| format!("--health-probe-bind-address: {e}"))?;
        Ok(())
    }
}

/// Parses a bind address: "0" (disabled), ":PORT" (all interfaces) or "HOST:PORT".
pub fn parse_bind_address(value: &str) -> Result<Option<SocketAddr>, String> {
    match value {
        "0" | "" => Ok(None),
        port if port.starts_with(':') => {
            format!("0.0.0.0{port}").parse().map(Some).map_err(|_| format!("{value:?} is not \":PORT\""))
        }
        other => other.parse().map(Some).map_err(|_| format!("{value:?} is not HOST:PORT, :PORT or 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_accept_the_capi_forms() {
        assert_eq!(parse_bind_address("0"), Ok(None));
        assert_eq!(parse_bind_address(":9440"), Ok(Some("0.0.0.0:9440".parse().unwrap())));
        assert_eq!(parse_bind_address("127.0.0.1:8080"), Ok(Some("127.0.0.1:8080".parse().unwrap())));
        assert!(parse_bind_address("localhost").is_err());
    }

    #[test]
    fn renew_margin_must_be_below_lease_duration() {
        let cli = Cli::try_parse_from([
            "ferro-ipam",
            "--leader-elect-lease-duration",
            "5",
            "--leader-elect-renew-margin",
            "5",
        ])
        .unwrap();
        assert!(cli.run.validate().unwrap_err().contains("renew-margin"));
    }

    #[test]
    fn unknown_flags_are_refused() {
        assert!(Cli::try_parse_from(["ferro-ipam", "--no-such-flag"]).is_err());
    }
}
