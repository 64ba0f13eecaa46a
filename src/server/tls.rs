//! TLS for the admission listener: loading a PEM pair, generating a local self-signed
//! pair, the rustls configuration, and a certificate resolver whose pair can be swapped
//! while the server runs (see [`super::cert_reload`]).
//!
//! Handshakes read the current pair through an `ArcSwap`, so a rotation affects new
//! handshakes only; established connections keep the keys they negotiated.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid PEM: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("{path} contains no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("{path} contains no PEM private key (PKCS#8, PKCS#1 or SEC1)")]
    NoKey { path: PathBuf },
    #[error("{cert} and {key} are not a usable pair: {source}")]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("client CA file {path} contains no usable certificate: {reason}")]
    ClientCa { path: PathBuf, reason: String },
    #[error("rustls configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("cannot generate the self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot write the self-signed CA certificate to {path}: {source}")]
    WriteCa {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The crypto provider graft uses everywhere (ring; aws-lc is deliberately not linked).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a certificate chain and its private key, and checks that they belong together.
pub fn load_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    let chain = certificates(cert, &cert_pem)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let private_key = match PrivateKeyDer::from_pem_slice(&key_pem) {
        Ok(private_key) => private_key,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            return Err(TlsError::NoKey {
                path: key.to_path_buf(),
            });
        }
        Err(error) => {
            return Err(TlsError::Pem {
                path: key.to_path_buf(),
                reason: error.to_string(),
            });
        }
    };
    certified(chain, private_key).map_err(|source| TlsError::Pair {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        source,
    })
}

/// A self-signed CA and a localhost certificate it signed.
#[derive(Debug)]
pub struct SelfSigned {
    pub key: Arc<CertifiedKey>,
    pub ca_pem: String,
}

/// How long the generated local certificate is valid.
pub const SELF_SIGNED_VALIDITY: std::time::Duration =
    std::time::Duration::from_secs(365 * 24 * 60 * 60);

/// Generates a throwaway CA and a certificate for `localhost` and `127.0.0.1`, valid for
/// [`SELF_SIGNED_VALIDITY`].
pub fn self_signed() -> Result<SelfSigned, TlsError> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "graft local development CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let leaf_key = KeyPair::generate()?;
    let mut leaf_params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    // rcgen's default validity ends in the year 4096; a pair made afresh at every start
    // needs a year at most, and the expiry metric then says something true.
    let now = std::time::SystemTime::now();
    leaf_params.not_before = now
        .checked_sub(std::time::Duration::from_secs(60))
        .unwrap_or(now)
        .into();
    leaf_params.not_after = now.checked_add(SELF_SIGNED_VALIDITY).unwrap_or(now).into();
    let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

    let private_key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let key = certified(vec![leaf.der().clone()], private_key)?;
    Ok(SelfSigned {
        key,
        ca_pem: ca.pem(),
    })
}

/// Writes the self-signed CA where `curl --cacert` can find it.
pub fn write_ca(path: &Path, ca_pem: &str) -> Result<(), TlsError> {
    fs::write(path, ca_pem).map_err(|source| TlsError::WriteCa {
        path: path.to_path_buf(),
        source,
    })
}

/// The notAfter of the end-entity certificate, as a Unix timestamp.
pub fn expiry(key: &CertifiedKey) -> Option<i64> {
    let der = key.cert.first()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    Some(parsed.validity().not_after.timestamp())
}

/// Serves whichever pair was stored last.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl CertResolver {
    pub fn new(key: Arc<CertifiedKey>) -> CertResolver {
        CertResolver {
            current: ArcSwap::new(key),
        }
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }

    pub fn store(&self, key: Arc<CertifiedKey>) {
        self.current.store(key);
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The rustls configuration: ALPN h2 and http/1.1, optional client-certificate check.
pub fn server_config(
    resolver: Arc<CertResolver>,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let roots = client_roots(path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|error| TlsError::ClientCa {
                    path: path.to_path_buf(),
                    reason: error.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Every certificate in a PEM file; a malformed section is an error, not skipped.
fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })
}

fn client_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let pem = read(path)?;
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, &pem)? {
        roots.add(cert).map_err(|error| TlsError::ClientCa {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
    }
    if roots.is_empty() {
        return Err(TlsError::ClientCa {
            path: path.to_path_buf(),
            reason: "no PEM certificate found".to_string(),
        });
    }
    Ok(roots)
}

/// Builds a pair, insisting that the key matches the certificate: a mismatched pair would
/// fail every handshake, so it must never replace a working one.
fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<CertifiedKey>, rustls::Error> {
    let signing_key = provider().key_provider.load_private_key(key)?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match()?;
    Ok(Arc::new(certified))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_files(cert_pem: &str, key_pem: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        fs::write(&cert, cert_pem).unwrap();
        fs::write(&key, key_pem).unwrap();
        (dir, cert, key)
    }

    fn generated() -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn the_generated_certificate_is_valid_for_a_year() {
        let generated = self_signed().unwrap();
        let leaf = generated.key.end_entity_cert().unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(leaf).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let not_after = cert.validity().not_after.timestamp();
        let year = SELF_SIGNED_VALIDITY.as_secs() as i64;
        assert!(
            (now + year - 120..=now + year + 120).contains(&not_after),
            "expires at {not_after}, now {now}"
        );
        assert!(cert.validity().not_before.timestamp() <= now);
    }

    #[test]
    fn a_pem_pair_loads() {
        let (cert, key) = generated();
        let (_dir, cert, key) = pair_files(&cert, &key);
        assert!(load_pair(&cert, &key).is_ok());
    }

    #[test]
    fn a_malformed_pem_section_is_an_error_not_skipped() {
        let (cert, key) = generated();
        let broken = format!("{cert}-----BEGIN CERTIFICATE-----\nnot base64!\n");
        let (_dir, cert_path, key_path) = pair_files(&broken, &key);
        let error = load_pair(&cert_path, &key_path).unwrap_err();
        assert!(matches!(error, TlsError::Pem { .. }), "{error}");
        assert!(error.to_string().contains("tls.crt"), "{error}");
    }

    #[test]
    fn missing_certificate_and_key_are_named() {
        let (cert, key) = generated();
        let (_dir, cert_path, key_path) = pair_files("no pem here\n", &key);
        let error = load_pair(&cert_path, &key_path).unwrap_err();
        assert!(matches!(error, TlsError::NoCertificate { .. }), "{error}");
        let (_dir, cert_path, key_path) = pair_files(&cert, "");
        let error = load_pair(&cert_path, &key_path).unwrap_err();
        assert!(matches!(error, TlsError::NoKey { .. }), "{error}");
    }
}
