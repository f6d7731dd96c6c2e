use super::*;

fn parse(args: &[&str]) -> Result<RunFlags, clap::Error> {
    Cli::from_args(std::iter::once("ferro-ipam").chain(args.iter().copied())).map(|cli| cli.run)
}

fn refused(args: &[&str]) -> String {
    let error = parse(args).expect_err("refused");
    assert_eq!(error.exit_code(), 2, "{error}");
    error.to_string()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn bind_addresses_accept_the_capi_forms() {
    assert_eq!(parse_bind_address("0"), Ok(None));
    assert_eq!(parse_bind_address(":9440"), Ok(Some("0.0.0.0:9440".parse().unwrap())));
    assert_eq!(parse_bind_address("127.0.0.1:8080"), Ok(Some("127.0.0.1:8080".parse().unwrap())));
    assert!(parse_bind_address("localhost").is_err());
}

#[test]
fn defaults_are_controller_runtimes() {
    let flags = parse(&[]).unwrap();
    assert!(!flags.leader_elect);
    assert_eq!(
        (flags.leader_elect_lease_duration, flags.leader_elect_renew_deadline, flags.leader_elect_retry_period),
        (secs(15), secs(10), secs(2))
    );
    assert_eq!(flags.sync_period, secs(600));
    assert_eq!((flags.kube_api_qps, flags.kube_api_burst), (0.0, 30));
    assert_eq!(flags.tls_min_version, TlsVersion::Tls12);
    assert!(flags.tls_cipher_suites.is_empty());
    assert_eq!(flags.log_filter(), "info,kube_client::client::builder=off");
}

#[test]
fn every_duration_flag_takes_go_durations_and_plain_seconds() {
    let flags = parse(&[
        "--leader-elect-lease-duration=1m30s",
        "--leader-elect-renew-deadline",
        "1m",
        "--leader-elect-retry-period=500ms",
        "--sync-period=1h",
    ])
    .unwrap();
    assert_eq!(flags.leader_elect_lease_duration, secs(90));
    assert_eq!(flags.leader_elect_renew_deadline, secs(60));
    assert_eq!(flags.leader_elect_retry_period, Duration::from_millis(500));
    assert_eq!(flags.sync_period, secs(3600));
    let plain =
        parse(&["--leader-elect-lease-duration=30", "--leader-elect-renew-deadline=20", "--sync-period=90"]).unwrap();
    assert_eq!((plain.leader_elect_lease_duration, plain.leader_elect_renew_deadline), (secs(30), secs(20)));
    assert_eq!(plain.sync_period, secs(90));
    assert!(refused(&["--leader-elect-lease-duration=15x"]).contains("--leader-elect-lease-duration"));
}

#[test]
fn the_deprecated_renew_margin_sets_the_deadline_below_the_lease_duration() {
    let flags = parse(&["--leader-elect-lease-duration", "5", "--leader-elect-renew-margin", "2"]).unwrap();
    assert_eq!(flags.leader_elect_renew_deadline, secs(3));
    assert_eq!(flags.leader_elect_retry_period, Duration::from_millis(1500));
    let short = parse(&["--leader-elect-lease-duration", "4", "--leader-elect-renew-margin", "2"]).unwrap();
    assert_eq!((short.leader_elect_renew_deadline, short.leader_elect_retry_period), (secs(2), secs(1)));
    assert!(refused(&["--leader-elect-lease-duration=5", "--leader-elect-renew-margin=5"]).contains("renew-margin"));
    let both = refused(&["--leader-elect-renew-margin=5s", "--leader-elect-renew-deadline=10s"]);
    assert!(both.contains("not both"), "{both}");
}

#[test]
fn retry_period_renew_deadline_and_lease_duration_must_ascend() {
    let retry = refused(&["--leader-elect-retry-period=10s"]);
    assert!(
        retry.contains("--leader-elect-retry-period") && retry.contains("--leader-elect-renew-deadline"),
        "{retry}"
    );
    let deadline = refused(&["--leader-elect-renew-deadline=15s"]);
    assert!(
        deadline.contains("--leader-elect-renew-deadline") && deadline.contains("--leader-elect-lease-duration"),
        "{deadline}"
    );
    assert!(refused(&["--leader-elect-retry-period=0s"]).contains("--leader-elect-retry-period"));
}

#[test]
fn boolean_flags_take_gos_forms() {
    assert!(parse(&["--leader-elect"]).unwrap().leader_elect);
    assert!(parse(&["--leader-elect=true"]).unwrap().leader_elect);
    assert!(!parse(&["--leader-elect=false"]).unwrap().leader_elect);
    assert!(parse(&["--insecure-diagnostics=t"]).unwrap().insecure_diagnostics);
    assert!(refused(&["--leader-elect=maybe"]).contains("--leader-elect"));
}

#[test]
fn a_namespaced_leader_election_id_sets_the_lease_namespace() {
    let flags = parse(&["--leader-election-id=capi-system/ferro"]).unwrap();
    assert_eq!(flags.leader_election_namespace.as_deref(), Some("capi-system"));
    assert_eq!(flags.leader_election_id, "ferro");
    // The operator appends its id to a manifest that already sets the namespace: the id wins.
    let both = parse(&["--leader-election-namespace=pod-ns", "--leader-election-id=lease-ns/ferro"]).unwrap();
    assert_eq!(
        (both.leader_election_namespace.as_deref(), both.leader_election_id.as_str()),
        (Some("lease-ns"), "ferro")
    );
    assert_eq!(
        parse(&["--leader-election-namespace=pod-ns"]).unwrap().leader_election_namespace.as_deref(),
        Some("pod-ns")
    );
    assert!(refused(&["--leader-election-id=a/b/c"]).contains("NAMESPACE/NAME"));
}

#[test]
fn capi_flag_names_are_aliases_of_ours() {
    let flags = parse(&["--health-addr=:9441", "--metrics-bind-addr=:8081", "--logging-format=json"]).unwrap();
    assert_eq!(flags.health_probe_bind_address, ":9441");
    assert_eq!(flags.diagnostics_address, ":8081");
    assert_eq!(flags.log_format, LogFormat::Json);
    assert_eq!(parse(&["--metrics-bind-address=:8082"]).unwrap().diagnostics_address, ":8082");
}

#[test]
fn verbosity_maps_to_a_log_filter_that_log_level_overrides() {
    assert_eq!(parse(&["--v=2"]).unwrap().log_filter(), "info,kube_client::client::builder=off");
    assert_eq!(parse(&["--v=4"]).unwrap().log_filter(), "info,kube_client::client::builder=off,ferro_ipam=debug");
    assert_eq!(parse(&["-v", "5"]).unwrap().log_filter(), "info,kube=debug,ferro_ipam=trace");
    assert_eq!(parse(&["--v=5", "--log-level=warn"]).unwrap().log_filter(), "warn");
    assert!(refused(&["--v=-1"]).contains("--v"));
}

#[test]
fn tls_flags_take_go_names() {
    let flags = parse(&[
        "--tls-min-version=VersionTLS13",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
    ])
    .unwrap();
    assert_eq!(flags.tls_min_version, TlsVersion::Tls13);
    assert_eq!(flags.tls_cipher_suites, [CipherSuite::EcdheRsaAes128GcmSha256, CipherSuite::Tls13Aes128GcmSha256]);
    assert!(refused(&["--tls-min-version=VersionTLS10"]).contains("--tls-min-version"));
    assert!(refused(&["--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA"]).contains("TLS_RSA_WITH_RC4_128_SHA"));
}

#[test]
fn api_rate_limits_must_be_positive() {
    assert_eq!(parse(&["--kube-api-qps=50.5", "--kube-api-burst=100"]).unwrap().kube_api_qps, 50.5);
    assert!(refused(&["--kube-api-qps=-1"]).contains("--kube-api-qps"));
    assert!(refused(&["--kube-api-burst=0"]).contains("--kube-api-burst"));
}

#[test]
fn a_flag_given_twice_takes_its_last_value() {
    let flags =
        parse(&["--sync-period=1m", "--sync-period=2m", "--leader-elect=true", "--leader-elect=false"]).unwrap();
    assert_eq!(flags.sync_period, secs(120));
    assert!(!flags.leader_elect);
}

#[test]
fn unknown_flags_are_refused_by_name() {
    assert!(refused(&["--no-such-flag"]).contains("--no-such-flag"));
    assert!(refused(&["--webhook-port=9443"]).contains("--webhook-port"));
}

#[test]
fn hub_drain_takes_the_spokes_namespace_and_nothing_runs_without_it() {
    let cli = Cli::from_args(["ferro-ipam", "hub", "drain", "-n", "spoke-east", "-o", "json"]).expect("parsed");
    let Some(Command::Hub { command: HubCommand::Drain { namespace, kubeconfig, output } }) = cli.command else {
        panic!("not hub drain: {cli:?}");
    };
    assert_eq!((namespace.as_str(), kubeconfig, output), ("spoke-east", None, crate::preflight::Output::Json));
    let missing = Cli::from_args(["ferro-ipam", "hub", "drain"]).expect_err("refused");
    assert!(missing.to_string().contains("--namespace <SPOKE_NS>"), "{missing}");
    assert!(Cli::from_args(["ferro-ipam", "hub"]).is_err(), "hub alone names no command");
}
