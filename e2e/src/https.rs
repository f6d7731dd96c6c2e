//! A small blocking HTTPS client for the provider's diagnostics endpoint: GET with an optional
//! bearer token, the server's certificate checked against a CA or not at all (as a Prometheus
//! with `insecureSkipVerify` scrapes a self-signed endpoint).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

/// How the client treats the server.
pub enum Trust<'a> {
    /// Any certificate.
    Anything,
    /// Certificates signed by this CA, for this name.
    Ca(&'a Path, &'a str),
}

/// Accepts every certificate, as `insecureSkipVerify` does.
#[derive(Debug)]
struct Anything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Anything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client configuration: `trust`, and only TLS 1.2 when `tls12_only`.
fn config(trust: &Trust<'_>, tls12_only: bool) -> Result<(Arc<ClientConfig>, ServerName<'static>)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] =
        if tls12_only { &[&rustls::version::TLS12] } else { rustls::DEFAULT_VERSIONS };
    let builder = ClientConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    Ok(match trust {
        Trust::Anything => (
            Arc::new(
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(Anything(provider)))
                    .with_no_client_auth(),
            ),
            ServerName::try_from("localhost")?,
        ),
        Trust::Ca(ca, name) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in CertificateDer::pem_file_iter(ca)? {
                roots.add(certificate?)?;
            }
            (
                Arc::new(builder.with_root_certificates(roots).with_no_client_auth()),
                ServerName::try_from(name.to_string())?,
            )
        }
    })
}

/// GET `path` from `address` over HTTPS: the status code and the body. An error when the TLS
/// handshake fails.
pub fn get(
    address: &str,
    path: &str,
    token: Option<&str>,
    trust: &Trust<'_>,
    tls12_only: bool,
) -> Result<(u16, String)> {
    let (config, name) = config(trust, tls12_only)?;
    let tcp = TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = StreamOwned::new(ClientConnection::new(config, name)?, tcp);
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(tls, "GET {path} HTTP/1.0\r\nHost: {address}\r\n{authorization}\r\n")?;
    let mut response = Vec::new();
    // A server may close without close_notify; what was read counts.
    match tls.read_to_end(&mut response) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(error) => return Err(error).context("reading the HTTPS response"),
    }
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").context("no HTTP head")?;
    let status = head.split_whitespace().nth(1).context("no status")?.parse()?;
    Ok((status, body.to_owned()))
}

/// GET `path` from `address` once per token, one after another on one HTTP/1.1 connection kept
/// alive, as a flood of scrapes would come: the status codes. An error when the server closes
/// the connection or answers chunked.
pub fn get_each(address: &str, path: &str, tokens: &[String], trust: &Trust<'_>) -> Result<Vec<u16>> {
    let (config, name) = config(trust, false)?;
    let tcp = TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = BufReader::new(StreamOwned::new(ClientConnection::new(config, name)?, tcp));
    let mut statuses = Vec::with_capacity(tokens.len());
    let mut line = String::new();
    for token in tokens {
        write!(tls.get_mut(), "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\n\r\n")?;
        tls.get_mut().flush()?;
        line.clear();
        anyhow::ensure!(tls.read_line(&mut line)? > 0, "the server closed the connection");
        statuses.push(line.split_whitespace().nth(1).context("no status")?.parse()?);
        let mut length = 0;
        loop {
            line.clear();
            tls.read_line(&mut line)?;
            let Some((field, value)) = line.trim_end().split_once(':') else { break };
            anyhow::ensure!(!field.eq_ignore_ascii_case("transfer-encoding"), "a chunked answer: {line}");
            if field.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            }
        }
        tls.read_exact(&mut vec![0; length])?;
    }
    Ok(statuses)
}
