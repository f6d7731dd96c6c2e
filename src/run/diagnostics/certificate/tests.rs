use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Instant;

use axum::serve::Listener as _;
use clap::Parser as _;
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::super::tls::{TlsListener, server_config_reloading_every};
use super::*;
use crate::cli::RunFlags;

/// A CA, as cert-manager's issuer would be, whose pairs the client trusts.
struct Authority {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    roots: RootCertStore,
}

/// A serving pair for `localhost`, in PEM, and its certificate as the client receives it.
struct Pair {
    cert: String,
    key: String,
    der: CertificateDer<'static>,
}

impl Authority {
    fn new() -> Authority {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert.der().clone()).unwrap();
        Authority { issuer: rcgen::Issuer::new(params, key), roots }
    }

    fn pair(&self, serial: u64) -> Pair {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.serial_number = Some(serial.into());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pair { cert: cert.pem(), key: key.serialize_pem(), der: cert.der().clone() }
    }
}

impl Pair {
    fn write(&self, dir: &Path) {
        std::fs::write(dir.join(CERT_FILE), &self.cert).unwrap();
        std::fs::write(dir.join(KEY_FILE), &self.key).unwrap();
    }
}

/// An empty directory of this test's own.
fn directory(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferro-ipam-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[derive(clap::Parser)]
struct Flags {
    #[command(flatten)]
    run: RunFlags,
}

/// The endpoint's listener, with the flags' certificate, answering each connection with what it
/// is sent.
async fn echo_server(config: Arc<ServerConfig>) -> SocketAddr {
    let mut listener = TlsListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await;
            tokio::spawn(async move {
                let mut stream = stream;
                while let Ok(chunk) = receive(&mut stream, None).await {
                    if chunk.is_empty() || send(&mut stream, &chunk).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

/// A connection that verifies the server as `localhost` against `roots`, as Prometheus does
/// with `tlsConfig.ca` and `serverName`.
async fn connect(address: SocketAddr, roots: &RootCertStore) -> TlsStream<TcpStream> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    let tcp = TcpStream::connect(address).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("the handshake verifies")
}

fn presented(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().expect("a server certificate")[0].clone().into_owned()
}

/// Writes all of `bytes`. (tokio's io-util is not among the crate's features.)
async fn send(stream: &mut (impl AsyncWrite + Unpin), mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let written = poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, bytes)).await?;
        bytes = &bytes[written..];
    }
    poll_fn(|cx| Pin::new(&mut *stream).poll_flush(cx)).await
}

/// Reads exactly `length` bytes, or what one read returns when `None` (empty at the end).
async fn receive(stream: &mut (impl AsyncRead + Unpin), length: Option<usize>) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0; length.unwrap_or(256)];
    let mut filled = 0;
    loop {
        let mut buffer = ReadBuf::new(&mut bytes[filled..]);
        poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, &mut buffer)).await?;
        let read = buffer.filled().len();
        filled += read;
        if length.is_none() || read == 0 || filled == bytes.len() {
            bytes.truncate(filled);
            return Ok(bytes);
        }
    }
}

async fn echoes(stream: &mut TlsStream<TcpStream>, word: &[u8]) -> bool {
    send(stream, word).await.unwrap();
    receive(stream, Some(word.len())).await.is_ok_and(|answer| answer == word)
}

#[tokio::test(flavor = "multi_thread")]
async fn new_connections_get_a_rotated_pair_without_a_restart_and_open_ones_keep_working() {
    let dir = directory("rotation");
    let authority = Authority::new();
    let (first, second) = (authority.pair(1), authority.pair(2));
    first.write(&dir);
    let flags = Flags::parse_from(["ferro-ipam", "--tls-cert-dir", dir.to_str().unwrap()]).run;
    let config = server_config_reloading_every(&flags, Duration::from_millis(50)).unwrap();
    let address = echo_server(config).await;

    let mut open = connect(address, &authority.roots).await;
    assert!(presented(&open) == first.der, "the first connection gets the pair of --tls-cert-dir");
    second.write(&dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    while presented(&connect(address, &authority.roots).await) != second.der {
        assert!(Instant::now() < deadline, "new connections still get the first pair 10 s after the rotation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(echoes(&mut open, b"still here").await, "the connection opened before the rotation still works");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Log lines written while `during` runs.
fn logged<T>(during: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    let value = tracing::subscriber::with_default(subscriber, during);
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    (value, text)
}

#[test]
fn a_bad_pair_keeps_the_pair_in_use_and_is_reported_once_per_change() {
    let dir = directory("bad-pair");
    let authority = Authority::new();
    let (first, second) = (authority.pair(1), authority.pair(2));
    first.write(&dir);
    let (mut watched, pair) = Watched::load(&dir, Arc::new(rustls::crypto::ring::default_provider())).unwrap();
    let resolver = Resolver::new(pair);
    let in_use = |resolver: &Resolver| resolver.current().cert[0].clone();

    // Half-written: the new certificate beside the old key.
    std::fs::write(dir.join(CERT_FILE), &second.cert).unwrap();
    let ((half, again), log) = logged(|| (watched.check(&resolver), watched.check(&resolver)));
    let Outcome::Kept(reason) = half else { panic!("a certificate beside another's key was taken: {half:?}") };
    assert!(reason.contains("tls.crt and") && reason.contains("tls.key are not a pair"), "{reason}");
    assert_eq!(again, Outcome::Unchanged, "the same files are not judged twice");
    assert_eq!(log.matches(" WARN ").count(), 1, "one WARN per change: {log}");
    assert!(log.contains(&dir.display().to_string()) && log.contains("not a pair"), "{log}");
    assert!(in_use(&resolver) == first.der, "the pair in use stays");

    let garbage = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
    std::fs::write(dir.join(KEY_FILE), garbage).unwrap();
    let outcome = watched.check(&resolver);
    assert!(matches!(&outcome, Outcome::Kept(reason) if reason.contains("tls.key")), "{outcome:?}");
    std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
    let outcome = watched.check(&resolver);
    assert!(matches!(&outcome, Outcome::Kept(reason) if reason.contains("reading") && reason.contains("tls.key")));
    assert!(in_use(&resolver) == first.der, "the pair in use stays through a missing key");

    std::fs::write(dir.join(KEY_FILE), &second.key).unwrap();
    assert_eq!(watched.check(&resolver), Outcome::Reloaded, "the pair completed");
    assert!(in_use(&resolver) == second.der);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_pair_that_cannot_be_read_at_start_is_refused_naming_the_flag_and_the_file() {
    let dir = directory("missing-pair");
    let refused = Watched::load(&dir, Arc::new(rustls::crypto::ring::default_provider())).err().unwrap();
    let message = format!("{refused:#}");
    assert!(message.starts_with("--tls-cert-dir: reading ") && message.contains("tls.crt"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
