//! Command-line flags, following the conventions of Cluster API providers: the flags that
//! controller-runtime-based providers take, and that cluster-api-operator passes, with their
//! meanings, defaults and value syntax (Go durations, `--flag=true`). A flag given twice takes
//! its last value, as in Go.

mod tls;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

pub use tls::{CipherSuite, TlsVersion};
pub use values::{parse_bool, parse_duration};

/// ferro-ipam: a Cluster API IPAM provider for in-cluster IP pools.
#[derive(Parser, Debug, Clone)]
#[command(name = "ferro-ipam", version, about, long_about = None, args_override_self = true)]
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
    /// Read the cluster and tell what ferro-ipam would do on start, writing nothing: the
    /// addresses it would adopt, conflicts, claims that would wait, pools its CRD would refuse.
    /// Exit status: 0 clean, 1 problems found, 2 could not look.
    Preflight {
        /// Path to a kubeconfig. Default: --kubeconfig before the subcommand, $KUBECONFIG, then
        /// ~/.kube/config, then the in-cluster service account.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Output format: a report, or JSON for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: crate::preflight::Output,
    },
    /// Which pool, claim, IPAddress, Cluster and owner hold an address; otherwise which pools
    /// could hand it out, and whether it is reserved, excluded, the gateway or remembered as
    /// sticky. Read-only. Exit status: 0 answered, 2 could not look.
    WhoHas {
        /// The address (a prefix pool's: a sub-prefix's network address).
        address: std::net::IpAddr,
        /// Path to a kubeconfig, as for preflight.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Output format: text, or JSON for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: crate::preflight::Output,
    },
    /// Why a claim is pending, or how it got its address: the pool (for a purpose claim, the
    /// candidates in order and why each was passed over), the strategy, a reservation or a
    /// requested address. Read-only. Exit status: 0 answered, 2 could not look.
    Explain {
        /// The claim, as NAMESPACE/NAME.
        claim: String,
        /// Path to a kubeconfig, as for preflight.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Output format: text, or JSON for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: crate::preflight::Output,
    },
    /// Pools by use, the fastest-filling first (IPAddresses created in the last hour, or the
    /// leader's allocation and release counters when its metrics endpoint is given), with free
    /// and reserved counts from their status. Read-only. Exit status: 0 answered, 2 could not look.
    Top {
        /// Only the namespaced pools of this namespace.
        #[arg(long, short = 'n')]
        namespace: Option<String>,
        /// The leading replica's metrics endpoint (http(s)://HOST:PORT/metrics): the filling
        /// rate is then the net of its allocation and release counters, read twice.
        #[arg(long, value_name = "URL")]
        metrics: Option<String>,
        /// The time between the two reads of --metrics.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
        metrics_interval: Duration,
        /// A file holding the bearer token for --metrics (the HTTPS endpoint of deploy/ allows
        /// the ferro-ipam-metrics-reader ClusterRole).
        #[arg(long, value_name = "PATH")]
        metrics_token_file: Option<PathBuf>,
        /// Accept the metrics endpoint's serving certificate without checking it (deploy/'s is
        /// self-signed).
        #[arg(long)]
        metrics_insecure_skip_tls_verify: bool,
        /// Path to a kubeconfig, as for preflight.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Output format: a table, or JSON for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: crate::preflight::Output,
    },
    /// Commands for the hub of pools shared by many management clusters.
    Hub {
        #[command(subcommand)]
        command: HubCommand,
    },
}

/// `ferro-ipam hub ...`, run against the hub.
#[derive(Subcommand, Debug, Clone)]
pub enum HubCommand {
    /// Return every AddressBlock of a spoke gone for good: deletes the blocks of the spoke's
    /// namespace, whose addresses the hub's pools then hand out again. Refuses while the spoke
    /// still renews its Lease (ferro-ipam-spoke) there, or when the namespace is not labelled
    /// hub.ferro-ipam.dev/spoke. Exit status: 0 returned, 1 refused, 2 could not look.
    Drain {
        /// The spoke's namespace in the hub.
        #[arg(long, short = 'n', value_name = "SPOKE_NS")]
        namespace: String,
        /// Path to a kubeconfig of the hub, as for preflight.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Output format: text, or JSON for scripts.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: crate::preflight::Output,
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
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set, value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true")]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease. Default: the pod's namespace, else "default".
    #[arg(long)]
    pub leader_election_namespace: Option<String>,

    /// Refuse to allocate while another IPAM provider's leader Lease (--other-provider-lease) is
    /// held and renewed: two providers would hand one address to two machines.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set, value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true")]
    pub other_provider_check: bool,

    /// The leader Leases of other IPAM providers, as NAMESPACE/NAME, comma-separated. Default:
    /// the in-cluster provider's, as clusterctl installs it.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        value_delimiter = ',',
        default_value = crate::other_provider::IN_CLUSTER_LEASE
    )]
    pub other_provider_lease: Vec<String>,

    /// Name of the leader-election Lease. "NAMESPACE/NAME", as cluster-api-operator passes it,
    /// also sets its namespace, whatever --leader-election-namespace says.
    #[arg(long, default_value = "ferro-ipam-leader")]
    pub leader_election_id: String,

    /// How long a leader's Lease stays valid without renewal; a stand-by takes over after that.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "15s")]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew its Lease before it steps down.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub leader_elect_renew_deadline: Duration,

    /// How long replicas wait between attempts to take or renew the Lease.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub leader_elect_retry_period: Duration,

    /// Deprecated: sets --leader-elect-renew-deadline to the lease duration minus this, and the
    /// retry period, unless given, to at most half that deadline.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub leader_elect_renew_margin: Option<Duration>,

    /// Watch claims, namespaced pools, addresses and clusters in this namespace only. Default: all.
    #[arg(long)]
    pub namespace: Option<String>,

    /// Only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value>.
    #[arg(long)]
    pub watch_filter: Option<String>,

    /// Address the metrics endpoint (/metrics) listens on; "0" disables it. It serves HTTPS and
    /// lets in only scrapers the API server authorises (TokenReview, SubjectAccessReview).
    #[arg(long, alias = "metrics-bind-address", alias = "metrics-bind-addr", default_value = ":8443")]
    pub diagnostics_address: String,

    /// Serve /metrics over plain HTTP, to anyone, instead.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set, value_parser = parse_bool, num_args = 0..=1,
          require_equals = true, default_value = "false", default_missing_value = "true")]
    pub insecure_diagnostics: bool,

    /// Directory holding tls.crt and tls.key for the metrics endpoint. Default: a self-signed
    /// certificate made at start-up.
    #[arg(long, value_name = "DIR")]
    pub tls_cert_dir: Option<PathBuf>,

    /// Lowest TLS version of the diagnostics endpoint.
    #[arg(long, value_enum, default_value_t = TlsVersion::Tls12)]
    pub tls_min_version: TlsVersion,

    /// Comma-separated TLS 1.2 cipher suites of the diagnostics endpoint (IANA names). Default: all
    /// that ferro-ipam offers. TLS 1.3 suites are always on.
    #[arg(long, value_name = "SUITES", value_delimiter = ',', value_parser = tls::parse_cipher_suite)]
    pub tls_cipher_suites: Vec<CipherSuite>,

    /// Address the health probes (/healthz, /readyz) listen on; "0" disables them.
    #[arg(long, alias = "health-addr", default_value = ":9440")]
    pub health_probe_bind_address: String,

    /// How often every watched object is reconciled again, even without a change.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub sync_period: Duration,

    /// Requests per second to the API server, sustained; 0: no client-side limit (ferro-ipam
    /// paces its own pool-status writes). The Lease is renewed, and scrapers' tokens reviewed,
    /// outside this limit.
    #[arg(long, default_value_t = 0.0)]
    pub kube_api_qps: f32,

    /// Requests to the API server allowed in a burst above --kube-api-qps.
    #[arg(long, default_value_t = 30)]
    pub kube_api_burst: u32,

    /// Log line format.
    #[arg(long, alias = "logging-format", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter, e.g. "info" or "ferro_ipam=debug,kube=info" (RUST_LOG syntax). Overrides --v.
    #[arg(long, env = "FERRO_IPAM_LOG")]
    pub log_level: Option<String>,

    /// Log verbosity as Kubernetes components count it: 0-3 info, 4 debug, 5 and more trace.
    #[arg(long = "v", short = 'v', value_name = "LEVEL")]
    pub verbosity: Option<u8>,

    /// Seconds a deleted claim's address is remembered for a new claim of the same namespace and
    /// name, which gets it back if it is still free (sticky addresses). Nothing is reserved: any
    /// claim may take the address meanwhile. 0: off.
    #[arg(long, default_value_t = 600)]
    pub sticky_address_seconds: u64,

    /// Give Clusters labelled ferro-ipam.dev/control-plane-vip a control-plane VIP (a claim
    /// created for them, its address written into spec.controlPlaneEndpoint). false: no Cluster
    /// is written to and no claim created, so the rights to patch Clusters and to create and
    /// delete claims can be dropped (deploy/without-control-plane-vip).
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set, value_parser = parse_bool, num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true")]
    pub control_plane_vip: bool,

    /// How many claims are reconciled at once.
    #[arg(long, default_value_t = 64)]
    pub claim_concurrency: u16,

    /// How many pools of each kind are reconciled at once.
    #[arg(long, default_value_t = 16)]
    pub pool_concurrency: u16,

    /// Objects per page when a watch lists what exists (at start, and again after a failure);
    /// 0: one unpaged list.
    #[arg(long, default_value_t = 500)]
    pub list_page_size: u32,

    /// How a watch learns what exists: `paged` lists, read consistently; or `streaming`, a watch
    /// that sends the existing objects first (`sendInitialEvents`). Streaming starts about twice
    /// as fast, but reads the API server's watch cache at any version, which on a control plane
    /// of several API servers may be behind what was last written; and Kubernetes 1.31 and 1.33
    /// refuse it unless their WatchList feature gate is on.
    #[arg(long, value_enum, default_value_t = InitialList::Paged)]
    pub initial_list: InitialList,
}

/// How a watch learns what exists before it follows changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialList {
    Paged,
    Streaming,
}

impl Cli {
    /// Parses the command line and resolves flags that depend on each other. A refused flag or
    /// value gives clap's error (exit status 2) naming it.
    pub fn from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut command = Cli::command();
        let matches = command.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
        cli.run.resolve(&matches).map_err(|message| command.error(ErrorKind::ArgumentConflict, message))?;
        Ok(cli)
    }
}

impl RunFlags {
    /// Applies the deprecated and combined forms, then checks what clap cannot: values that
    /// depend on each other.
    fn resolve(&mut self, matches: &ArgMatches) -> Result<(), String> {
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        if let Some(margin) = self.leader_elect_renew_margin {
            if given("leader_elect_renew_deadline") {
                return Err(
                    "give --leader-elect-renew-deadline or the deprecated --leader-elect-renew-margin, not both"
                        .to_owned(),
                );
            }
            if margin.is_zero() || margin >= self.leader_elect_lease_duration {
                return Err(format!(
                    "--leader-elect-renew-margin ({margin:?}) must be above 0 and below --leader-elect-lease-duration ({:?})",
                    self.leader_elect_lease_duration
                ));
            }
            self.leader_elect_renew_deadline = self.leader_elect_lease_duration - margin;
            // Manifests written for the margin never set a retry period: keep the default's
            // ratio for short leases.
            if !given("leader_elect_retry_period") {
                self.leader_elect_retry_period =
                    self.leader_elect_retry_period.min(self.leader_elect_renew_deadline / 2);
            }
        }
        if let Some((namespace, name)) = self.leader_election_id.split_once('/') {
            if namespace.is_empty() || name.is_empty() || name.contains('/') {
                return Err(format!(
                    "--leader-election-id {:?} is not NAME or NAMESPACE/NAME",
                    self.leader_election_id
                ));
            }
            self.leader_election_namespace = Some(namespace.to_owned());
            self.leader_election_id = name.to_owned();
        }
        self.validate()
    }

    /// Checks values that depend on each other.
    pub fn validate(&self) -> Result<(), String> {
        let (lease, deadline, retry) =
            (self.leader_elect_lease_duration, self.leader_elect_renew_deadline, self.leader_elect_retry_period);
        if retry.is_zero() {
            return Err("--leader-elect-retry-period must be above 0".to_owned());
        }
        if retry >= deadline {
            return Err(format!(
                "--leader-elect-retry-period ({retry:?}) must be below --leader-elect-renew-deadline ({deadline:?})"
            ));
        }
        if deadline >= lease {
            return Err(format!(
                "--leader-elect-renew-deadline ({deadline:?}) must be below --leader-elect-lease-duration ({lease:?})"
            ));
        }
        if self.sync_period.is_zero() {
            return Err("--sync-period must be above 0".to_owned());
        }
        if !(self.kube_api_qps.is_finite() && self.kube_api_qps >= 0.0) {
            return Err(format!("--kube-api-qps ({}) must be 0 (no limit) or above", self.kube_api_qps));
        }
        if self.kube_api_burst == 0 {
            return Err("--kube-api-burst must be at least 1".to_owned());
        }
        for lease in &self.other_provider_lease {
            if !matches!(lease.split_once('/'), Some((ns, name)) if !ns.is_empty() && !name.is_empty()) {
                return Err(format!("--other-provider-lease {lease:?}: expected NAMESPACE/NAME"));
            }
        }
        parse_bind_address(&self.diagnostics_address).map_err(|e| format!("--diagnostics-address: {e}"))?;
        parse_bind_address(&self.health_probe_bind_address).map_err(|e| format!("--health-probe-bind-address: {e}"))?;
        Ok(())
    }

    /// The log filter: --log-level (or $FERRO_IPAM_LOG) when given, else one for --v.
    pub fn log_filter(&self) -> String {
        if let Some(filter) = &self.log_level {
            return filter.clone();
        }
        // kube's HTTP trace layer logs every failed request as an ERROR without saying what it
        // was for; ferro-ipam logs the failure itself, naming the object and the action.
        match self.verbosity.unwrap_or(0) {
            0..=3 => "info,kube_client::client::builder=off",
            4 => "info,kube_client::client::builder=off,ferro_ipam=debug",
            _ => "info,kube=debug,ferro_ipam=trace",
        }
        .to_owned()
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
mod tests;
