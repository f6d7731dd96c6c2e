//! The serving certificate of the diagnostics endpoint, kept current. [`Resolver`] hands each new
//! TLS connection the pair it holds; [`watch`] reads `--tls-cert-dir` again every few seconds and
//! swaps in a pair whose files changed and parse. Connections already open keep the certificate
//! of their handshake. The watcher compares the files' contents rather than waiting on inotify:
//! a Kubernetes Secret volume swaps a symlink to a new directory at once, which an inotify watch
//! on the old files never sees, and a poll sees on its next turn.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{info, warn};

/// The certificate and key files in `--tls-cert-dir`, named as controller-runtime names them.
pub(crate) const CERT_FILE: &str = "tls.crt";
pub(crate) const KEY_FILE: &str = "tls.key";

/// How often the watcher reads the files again. cert-manager renews well ahead of expiry, and
/// the kubelet takes up to a minute to update a Secret volume: a few seconds more costs nothing.
pub(super) const RELOAD_PERIOD: Duration = Duration::from_secs(5);

/// The pair every new handshake presents.
pub(crate) struct Resolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Resolver {
    pub(crate) fn new(pair: CertifiedKey) -> Resolver {
        Resolver { current: RwLock::new(Arc::new(pair)) }
    }

    fn current(&self) -> Arc<CertifiedKey> {
        // A writer never panics while holding the lock, but a poisoned one still holds a pair.
        self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn replace(&self, pair: CertifiedKey) {
        *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(pair);
    }
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Resolver")
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The two files of a directory, as last read: the bytes tell a change; a file that cannot be
/// read is its error's text.
#[derive(Debug, PartialEq)]
pub(crate) enum Files {
    Read { cert: Vec<u8>, key: Vec<u8> },
    Unreadable(String),
}

/// What one look at the directory did.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The files are as they were last read.
    Unchanged,
    /// New files that parse: new connections get them.
    Reloaded,
    /// New files that do not parse (or cannot be read): the pair before them stays, and the
    /// reason was logged.
    Kept(String),
}

/// A directory's pair and the files it was read from.
pub(crate) struct Watched {
    pub(crate) dir: PathBuf,
    pub(crate) provider: Arc<CryptoProvider>,
    pub(crate) seen: Files,
}

impl Watched {
    /// Reads the pair of `dir`. At start-up there is no pair to keep, so an error is the caller's.
    pub(crate) fn load(dir: &Path, provider: Arc<CryptoProvider>) -> anyhow::Result<(Watched, CertifiedKey)> {
        let seen = read_files(dir);
        let pair = parse(dir, &seen, &provider).map_err(|reason| anyhow::anyhow!("--tls-cert-dir: {reason}"))?;
        Ok((Watched { dir: dir.to_owned(), provider, seen }, pair))
    }

    /// Reads the files again; swaps a new pair that parses into `resolver`. A WARN names the
    /// files and the reason once per change of their contents, however many times it is looked at.
    pub(crate) fn check(&mut self, resolver: &Resolver) -> Outcome {
        let files = read_files(&self.dir);
        if files == self.seen {
            return Outcome::Unchanged;
        }
        self.seen = files;
        match parse(&self.dir, &self.seen, &self.provider) {
            Ok(pair) => {
                resolver.replace(pair);
                info!(dir = %self.dir.display(), "reloaded the metrics certificate: new connections get it");
                Outcome::Reloaded
            }
            Err(reason) => {
                warn!(dir = %self.dir.display(), %reason, "keeping the metrics certificate in use: the new files do not make a pair; write tls.crt and tls.key as a matching PEM pair");
                Outcome::Kept(reason)
            }
        }
    }
}

/// Looks at the files every `period`, for as long as the process runs.
pub(super) fn watch(mut watched: Watched, resolver: Arc<Resolver>, period: Duration) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            watched.check(&resolver);
        }
    });
}

fn read_files(dir: &Path) -> Files {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|error| format!("reading {}: {error}", path.display()))
    };
    match (read(CERT_FILE), read(KEY_FILE)) {
        (Ok(cert), Ok(key)) => Files::Read { cert, key },
        (Err(reason), _) | (_, Err(reason)) => Files::Unreadable(reason),
    }
}

/// The pair of `files`, or what is wrong with them, naming the file.
fn parse(dir: &Path, files: &Files, provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let (cert, key) = match files {
        Files::Read { cert, key } => (cert, key),
        Files::Unreadable(reason) => return Err(reason.clone()),
    };
    let (cert_path, key_path) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{}: {error}", cert_path.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no PEM certificate", cert_path.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|error| format!("{}: {error}", key_path.display()))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|error| format!("{} and {} are not a pair: {error}", cert_path.display(), key_path.display()))
}

#[cfg(test)]
mod tests;
