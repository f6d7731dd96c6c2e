//! The metrics endpoint as deployed: HTTPS, and each scrape's bearer token reviewed by the API
//! server. A token bound to `deploy/`'s `ferro-ipam-metrics-reader` scrapes; another token gets
//! 403, none or a forged one 401. `--tls-cert-dir` and `--tls-min-version` are honoured, a
//! renewed certificate reaches new connections without a restart, and a real Prometheus
//! configured by the cert-manager component's ServiceMonitor verifies the CA and the name.

use ferro_ipam_e2e::Provider;
use ferro_ipam_e2e::https::{self, Trust};
use ferro_ipam_e2e::objects::Scope;
use std::path::Path;
use std::time::Duration;

use ferro_ipam_e2e::process::{http_get, wait_until};
use ferro_ipam_e2e::prometheus::{Prometheus, binaries, scrape_config};
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair, SanType};

use super::{find, scraper_token, with_components};

/// The name the cert-manager component's Certificate gives the metrics Service.
const SERVICE_NAME: &str = "ferro-ipam-metrics.ferro-ipam-system.svc";

/// Writes to `dir` a serving pair for `names` (and 127.0.0.1) signed by the plane's CA, as
/// cert-manager's CA issuer would.
fn write_pair(s: &Scope, dir: &Path, names: &[&str]) {
    let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let certificate = params.signed_by(&key, &s.plane.credentials.ca).unwrap();
    std::fs::write(dir.join("tls.crt"), certificate.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn only_scrapers_the_api_server_authorises_read_the_metrics() {
    let s = Scope::new("diagnostics").await;
    let provider = Provider::start_secure(s.plane, &s.provider_args()).unwrap();
    let reader = scraper_token(s.plane, &s.ns, "prometheus", true);
    let stranger = scraper_token(s.plane, &s.ns, "stranger", false);

    let (status, body) = provider.scrape(Some(&reader)).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ferro_ipam_build_info") && body.contains("process_cpu_seconds_total"), "{body}");
    assert_eq!(provider.scrape(Some(&stranger)).unwrap().0, 403);
    assert_eq!(provider.scrape(None).unwrap().0, 401);
    assert_eq!(provider.scrape(Some("not-a-token")).unwrap().0, 401);
    // Asked again, the answers stay (they come from memory now).
    assert_eq!(provider.scrape(Some(&stranger)).unwrap().0, 403);
    assert_eq!(provider.scrape(Some(&reader)).unwrap().0, 200);
    assert!(http_get(&provider.metrics, "/metrics").is_none(), "no plain HTTP on the HTTPS port");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_from_tls_cert_dir_and_the_minimum_tls_version_are_used() {
    let s = Scope::new("diagnostics-tls").await;
    let dir = s.plane.dir.join(format!("{}-certs", s.ns));
    std::fs::create_dir_all(&dir).unwrap();
    write_pair(&s, &dir, &["localhost"]);

    let mut args = s.provider_args();
    let dir_arg = dir.to_string_lossy().into_owned();
    args.extend(["--tls-cert-dir", &dir_arg, "--tls-min-version", "VersionTLS13"]);
    let provider = Provider::start_secure(s.plane, &args).unwrap();
    let reader = scraper_token(s.plane, &s.ns, "prometheus", true);
    let signed_by_the_ca = Trust::Ca(&s.plane.credentials.ca_cert, "localhost");
    let (status, body) = https::get(&provider.metrics, "/metrics", Some(&reader), &signed_by_the_ca, false).unwrap();
    assert_eq!(status, 200, "the certificate from --tls-cert-dir verifies against its CA: {body}");
    let tls12 = https::get(&provider.metrics, "/metrics", Some(&reader), &signed_by_the_ca, true);
    assert!(tls12.is_err(), "a TLS 1.2 client is refused under --tls-min-version=VersionTLS13: {tls12:?}");
}

/// A probe or metrics port that another program holds stops the provider at once, with an error
/// naming the address: left running, it would never answer its probes and never say why.
#[tokio::test(flavor = "multi_thread")]
async fn a_port_another_program_holds_stops_the_provider_with_an_error_naming_it() {
    let s = Scope::new("diagnostics-port").await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let held = taken.local_addr().unwrap().to_string();
    let free = format!("127.0.0.1:{}", ferro_ipam_e2e::process::free_port());
    for (health, metrics) in [(held.clone(), free.clone()), (free.clone(), held.clone())] {
        let mut args: Vec<String> = s.provider_args().iter().map(|a| a.to_string()).collect();
        args.extend(["--health-probe-bind-address".into(), health.clone(), "--diagnostics-address".into(), metrics]);
        let mut provider = Provider::launch_exactly(s.plane, &args, health, free.clone()).unwrap();
        let exited =
            ferro_ipam_e2e::process::wait_until(std::time::Duration::from_secs(20), || !provider.process.is_running());
        assert!(exited, "ferro-ipam kept running with {held} taken:\n{}", provider.log_tail(20));
        assert!(
            provider.logged(&["ERROR", "cannot listen on", &held, "Address already in use"]),
            "the error names the address and the reason:\n{}",
            provider.log_tail(20)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_verifies_the_cert_manager_certificate_and_a_renewal_needs_no_restart() {
    let s = Scope::new("diagnostics-renewal").await;
    let dir = s.plane.dir.join(format!("{}-certs", s.ns));
    std::fs::create_dir_all(&dir).unwrap();
    write_pair(&s, &dir, &[SERVICE_NAME]);
    let mut args = s.provider_args();
    let dir_arg = dir.to_string_lossy().into_owned();
    args.extend(["--tls-cert-dir", &dir_arg]);
    let mut provider = Provider::start_secure(s.plane, &args).unwrap();
    let reader = scraper_token(s.plane, &s.ns, "prometheus", true);

    // Prometheus as the operator configures it from the ServiceMonitor of monitoring/ with
    // cert-manager/: the CA of the Secret, the Service's name, the scraper's token.
    let built = with_components(s.plane, &["monitoring", "cert-manager"]);
    let endpoint = &find(&built, "ServiceMonitor", "ferro-ipam")["spec"]["endpoints"][0];
    assert!(endpoint["tlsConfig"]["insecureSkipVerify"].is_null(), "{endpoint}");
    let token_file = s.plane.dir.join(format!("{}-scraper.token", s.ns));
    std::fs::write(&token_file, &reader).unwrap();
    let ca = &s.plane.credentials.ca_cert;
    let config = scrape_config(endpoint, &provider.metrics, &token_file, Some(ca));
    assert_eq!(config["tls_config"]["server_name"], SERVICE_NAME, "{config}");
    let (server, _) = binaries();
    let prometheus = Prometheus::start(&server, config, &serde_json::json!({"groups": []})).unwrap();
    let scraped = wait_until(Duration::from_secs(30), || {
        prometheus.query("up == 1").is_ok_and(|r| !r.is_empty())
            && prometheus.query("ferro_ipam_build_info").is_ok_and(|r| !r.is_empty())
    });
    assert!(
        scraped,
        "Prometheus did not scrape with verification: {:?}\n{}",
        prometheus.query("up"),
        prometheus.log_tail(20)
    );

    // Renewed to a certificate without the Service's name: new connections get it, and a client
    // that checks the name refuses it; renewed again with the name: accepted again.
    let verified = || https::get(&provider.metrics, "/metrics", Some(&reader), &Trust::Ca(ca, SERVICE_NAME), false);
    assert_eq!(verified().unwrap().0, 200);
    write_pair(&s, &dir, &["localhost"]);
    assert!(
        wait_until(Duration::from_secs(20), || verified().is_err()),
        "the renewed certificate never reached a new connection"
    );
    write_pair(&s, &dir, &[SERVICE_NAME]);
    assert!(
        wait_until(Duration::from_secs(20), || verified().is_ok_and(|(status, _)| status == 200)),
        "the certificate renewed again never reached a new connection"
    );
    assert!(provider.process.is_running(), "the provider was not restarted");
}
