//! The TLS settings of the diagnostics endpoint, named as Cluster API providers name them
//! (`--tls-min-version=VersionTLS12`, `--tls-cipher-suites=<IANA names>`).

/// The lowest TLS version the diagnostics endpoint accepts.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    #[value(name = "VersionTLS12")]
    Tls12,
    #[value(name = "VersionTLS13")]
    Tls13,
}

/// A TLS cipher suite that ferro-ipam's TLS library offers, by its IANA name (the name Go and
/// Kubernetes components take).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CipherSuite {
    Tls13Aes128GcmSha256,
    Tls13Aes256GcmSha384,
    Tls13Chacha20Poly1305Sha256,
    EcdheEcdsaAes128GcmSha256,
    EcdheEcdsaAes256GcmSha384,
    EcdheEcdsaChacha20Poly1305Sha256,
    EcdheRsaAes128GcmSha256,
    EcdheRsaAes256GcmSha384,
    EcdheRsaChacha20Poly1305Sha256,
}

/// Every suite with its IANA name.
const SUITES: [(&str, CipherSuite); 9] = [
    ("TLS_AES_128_GCM_SHA256", CipherSuite::Tls13Aes128GcmSha256),
    ("TLS_AES_256_GCM_SHA384", CipherSuite::Tls13Aes256GcmSha384),
    ("TLS_CHACHA20_POLY1305_SHA256", CipherSuite::Tls13Chacha20Poly1305Sha256),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", CipherSuite::EcdheEcdsaAes128GcmSha256),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", CipherSuite::EcdheEcdsaAes256GcmSha384),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", CipherSuite::EcdheEcdsaChacha20Poly1305Sha256),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", CipherSuite::EcdheRsaAes128GcmSha256),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", CipherSuite::EcdheRsaAes256GcmSha384),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", CipherSuite::EcdheRsaChacha20Poly1305Sha256),
];

impl CipherSuite {
    /// Whether this is a TLS 1.3 suite. As in Go, TLS 1.3 suites cannot be turned off: listing
    /// them is accepted and changes nothing.
    pub fn is_tls13(self) -> bool {
        matches!(self, Self::Tls13Aes128GcmSha256 | Self::Tls13Aes256GcmSha384 | Self::Tls13Chacha20Poly1305Sha256)
    }

    pub fn name(self) -> &'static str {
        SUITES.iter().find(|(_, suite)| *suite == self).map(|(name, _)| *name).unwrap_or_default()
    }
}

/// Parses one IANA suite name. Go's short names of the ChaCha20 suites are accepted too.
pub fn parse_cipher_suite(text: &str) -> Result<CipherSuite, String> {
    let name = match text.trim() {
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        other => other,
    };
    SUITES.iter().find(|(known, _)| *known == name).map(|(_, suite)| *suite).ok_or_else(|| {
        let offered: Vec<&str> = SUITES.iter().map(|(n, _)| *n).collect();
        format!(
            "{text:?} is not a cipher suite ferro-ipam offers (only AEAD suites with forward secrecy): {}",
            offered.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iana_names_and_gos_short_chacha_names_parse() {
        assert_eq!(
            parse_cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
            Ok(CipherSuite::EcdheRsaAes128GcmSha256)
        );
        assert_eq!(
            parse_cipher_suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"),
            Ok(CipherSuite::EcdheEcdsaChacha20Poly1305Sha256)
        );
        for (name, suite) in SUITES {
            assert_eq!(parse_cipher_suite(name), Ok(suite));
            assert_eq!(suite.name(), name);
        }
    }

    #[test]
    fn suites_without_forward_secrecy_or_aead_are_refused_by_name() {
        for weak in ["TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "tls_aes_128_gcm_sha256"]
        {
            let error = parse_cipher_suite(weak).unwrap_err();
            assert!(error.contains(weak) && error.contains("TLS_AES_128_GCM_SHA256"), "{error}");
        }
    }
}
