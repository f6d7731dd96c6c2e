//! Fresh credentials for one control plane: a CA, the API server's serving certificate, an
//! admin client certificate, and the service-account signing key.

use std::path::{Path, PathBuf};

use anyhow::Result;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Paths of the files written, and the CA to sign more client certificates with.
pub struct Credentials {
    pub ca: CertifiedIssuer<'static, KeyPair>,
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
}

fn write(dir: &Path, name: &str, content: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, content)?;
    Ok(path)
}

/// A client certificate signed by the CA for `user` in `groups`.
pub fn client_certificate(
    dir: &Path,
    issuer: &rcgen::Issuer<'_, KeyPair>,
    user: &str,
    groups: &[&str],
    file_stem: &str,
) -> Result<(PathBuf, PathBuf)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params.distinguished_name.push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((
        write(dir, &format!("{file_stem}.crt"), &cert.pem())?,
        write(dir, &format!("{file_stem}.key"), &key.serialize_pem())?,
    ))
}

/// A serving certificate signed by the CA for `addresses` (kubelet's, on the e2e node).
pub fn serving_certificate(
    dir: &Path,
    issuer: &rcgen::Issuer<'_, KeyPair>,
    name: &str,
    addresses: &[std::net::IpAddr],
    file_stem: &str,
) -> Result<(PathBuf, PathBuf)> {
    let mut params = CertificateParams::new(vec![name.to_owned()])?;
    params.subject_alt_names.extend(addresses.iter().map(|a| SanType::IpAddress(*a)));
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((
        write(dir, &format!("{file_stem}.crt"), &cert.pem())?,
        write(dir, &format!("{file_stem}.key"), &key.serialize_pem())?,
    ))
}

/// Generates and writes every credential into `dir`; the API server's certificate also names
/// `addresses` (where it listens, when not on loopback).
pub fn generate(dir: &Path, addresses: &[std::net::IpAddr]) -> Result<Credentials> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "ferro-ipam-e2e-ca");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let ca_cert = write(dir, "ca.crt", &ca.pem())?;
    let ca_key = write(dir, "ca.key", &ca.key().serialize_pem())?;

    let mut serving = CertificateParams::new(vec![
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default.svc".to_owned(),
    ])?;
    serving.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse()?));
    serving.subject_alt_names.push(SanType::IpAddress("::1".parse()?));
    // The `kubernetes` Service's address: the first of the bare plane's service range, and of
    // the e2e cluster's (crate::cluster), which pods reach the API server through.
    serving.subject_alt_names.push(SanType::IpAddress("10.0.0.1".parse()?));
    serving.subject_alt_names.push(SanType::IpAddress("10.96.0.1".parse()?));
    for address in addresses {
        serving.subject_alt_names.push(SanType::IpAddress(*address));
    }
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key_pair = KeyPair::generate()?;
    let serving_cert_pem = serving.signed_by(&serving_key_pair, &ca)?.pem();
    let serving_cert = write(dir, "serving.crt", &serving_cert_pem)?;
    let serving_key = write(dir, "serving.key", &serving_key_pair.serialize_pem())?;

    let (admin_cert, admin_key) = client_certificate(dir, &ca, "admin", &["system:masters"], "admin")?;

    let sa = KeyPair::generate()?;
    let service_account_key = write(dir, "sa.key", &sa.serialize_pem())?;
    let service_account_pub = write(dir, "sa.pub", &sa.public_key_pem())?;
    Ok(Credentials {
        ca,
        ca_cert,
        ca_key,
        serving_cert,
        serving_key,
        admin_cert,
        admin_key,
        service_account_key,
        service_account_pub,
    })
}
