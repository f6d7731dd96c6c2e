//! HTTPS for the diagnostics endpoint: the certificate (from `--tls-cert-dir`, reloaded when its
//! files change, else self-signed), the TLS versions and cipher suites of the flags, and a
//! listener that completes each handshake off the accept loop, so that one slow client holds up
//! no other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::debug;

use super::certificate::{self, Resolver, Watched};
use crate::cli::{CipherSuite, RunFlags, TlsVersion};

/// How long a client may take to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// TLS handshakes under way at once. Past it, new connections wait in the kernel's backlog:
/// a flood of handshakes costs bounded CPU and memory, and no handshake already started.
const HANDSHAKES_AT_ONCE: usize = 32;

/// The server configuration the flags ask for. A certificate of `--tls-cert-dir` is read again
/// every [`certificate::RELOAD_PERIOD`] for as long as the process runs.
pub(super) fn server_config(flags: &RunFlags) -> anyhow::Result<Arc<ServerConfig>> {
    server_config_reloading_every(flags, certificate::RELOAD_PERIOD)
}

pub(super) fn server_config_reloading_every(flags: &RunFlags, period: Duration) -> anyhow::Result<Arc<ServerConfig>> {
    let provider = Arc::new(CryptoProvider {
        cipher_suites: cipher_suites(&flags.tls_cipher_suites),
        ..rustls::crypto::ring::default_provider()
    });
    let resolver = match &flags.tls_cert_dir {
        Some(dir) => {
            let (watched, pair) = Watched::load(dir, provider.clone())?;
            let resolver = Arc::new(Resolver::new(pair));
            certificate::watch(watched, resolver.clone(), period);
            resolver
        }
        None => Arc::new(Resolver::new(self_signed(&provider)?)),
    };
    let versions: &[&rustls::SupportedProtocolVersion] = match flags.tls_min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .context("--tls-min-version and --tls-cipher-suites leave no usable cipher suite")?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    Ok(Arc::new(config))
}

/// rustls' suites, TLS 1.2 ones narrowed to `chosen` when any is listed. TLS 1.3 suites stay
/// on, as in Go: listing them changes nothing.
fn cipher_suites(chosen: &[CipherSuite]) -> Vec<rustls::SupportedCipherSuite> {
    use rustls::CipherSuite as Iana;
    let iana = |suite: CipherSuite| match suite {
        CipherSuite::Tls13Aes128GcmSha256 => Iana::TLS13_AES_128_GCM_SHA256,
        CipherSuite::Tls13Aes256GcmSha384 => Iana::TLS13_AES_256_GCM_SHA384,
        CipherSuite::Tls13Chacha20Poly1305Sha256 => Iana::TLS13_CHACHA20_POLY1305_SHA256,
        CipherSuite::EcdheEcdsaAes128GcmSha256 => Iana::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::EcdheEcdsaAes256GcmSha384 => Iana::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::EcdheEcdsaChacha20Poly1305Sha256 => Iana::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        CipherSuite::EcdheRsaAes128GcmSha256 => Iana::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        CipherSuite::EcdheRsaAes256GcmSha384 => Iana::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        CipherSuite::EcdheRsaChacha20Poly1305Sha256 => Iana::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    };
    let tls12: Vec<Iana> = chosen.iter().filter(|s| !s.is_tls13()).map(|s| iana(*s)).collect();
    rustls::crypto::ring::default_provider()
        .cipher_suites
        .into_iter()
        .filter(|suite| match suite {
            rustls::SupportedCipherSuite::Tls13(_) => true,
            rustls::SupportedCipherSuite::Tls12(_) => tls12.is_empty() || tls12.contains(&suite.suite()),
        })
        .collect()
}

/// A certificate for this process only, as controller-runtime makes one when given none: for
/// `localhost`, the loopback addresses and the pod's host name.
fn self_signed(provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if let Ok(host) = std::env::var("HOSTNAME")
        && !host.is_empty()
    {
        names.push(host);
    }
    let certified = rcgen::generate_simple_self_signed(names).context("generating a self-signed certificate")?;
    let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("encoding the self-signed key: {e}"))?;
    CertifiedKey::from_der(vec![certified.cert.der().clone()], key, provider)
        .context("loading the self-signed certificate")
}

/// Accepts TCP connections and hands out those whose TLS handshake succeeded.
pub(super) struct TlsListener {
    connections: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub(super) async fn bind(address: SocketAddr, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let tcp = TcpListener::bind(address).await?;
        let local = tcp.local_addr()?;
        let (done, connections) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        let handshakes = Arc::new(Semaphore::new(HANDSHAKES_AT_ONCE));
        tokio::spawn(async move {
            while !done.is_closed() {
                let Ok(handshake) = handshakes.clone().acquire_owned().await else { return };
                let (stream, peer) = match tcp.accept().await {
                    Ok(connection) => connection,
                    Err(error) => {
                        // Out of file descriptors, typically: wait instead of spinning.
                        debug!(%error, "accepting a diagnostics connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, done) = (acceptor.clone(), done.clone());
                tokio::spawn(async move {
                    // Held until the connection is handed over.
                    let _handshake = handshake;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = done.send((tls, peer)).await;
                        }
                        // A port scan or a plain-HTTP client: nothing the operator must act on.
                        Ok(Err(error)) => debug!(%peer, %error, "TLS handshake refused"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { connections, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The accept loop never ends while this receiver lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(suites: &[rustls::SupportedCipherSuite]) -> Vec<rustls::CipherSuite> {
        suites.iter().map(|s| s.suite()).collect()
    }

    #[test]
    fn listed_tls12_suites_narrow_tls12_and_tls13_stays_on() {
        let all = cipher_suites(&[]);
        assert_eq!(all.len(), rustls::crypto::ring::default_provider().cipher_suites.len());
        let narrowed =
            names(&cipher_suites(&[CipherSuite::EcdheRsaAes128GcmSha256, CipherSuite::Tls13Aes256GcmSha384]));
        assert!(narrowed.contains(&rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        assert!(!narrowed.contains(&rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256));
        assert!(narrowed.contains(&rustls::CipherSuite::TLS13_AES_128_GCM_SHA256), "{narrowed:?}");
    }
}
