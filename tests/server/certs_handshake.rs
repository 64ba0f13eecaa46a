//! `graft certs` output works for real TLS: a tokio-rustls server with `tls.crt`/`tls.key`
//! and a client trusting only `ca.crt` complete a handshake for every Service DNS name,
//! and refuse any other name.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::support::cli::graft_certs;

/// `graft certs` for the Service `graft` in namespace `graft`, with `extra` flags.
fn certs_for_graft(out: &Path, extra: &[&str]) -> Output {
    let service = ["--service", "graft", "--namespace", "graft"];
    graft_certs(out, &[&service[..], extra].concat())
}

fn issue(out: &Path) {
    let output = certs_for_graft(out, &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let pem = std::fs::read(path).expect("read certificate");
    CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .expect("PEM certificates")
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    let pem = std::fs::read(path).expect("read key");
    PrivateKeyDer::from_pem_slice(&pem).expect("a PEM private key")
}

/// Serves one TLS connection from `dir`'s pair and connects to it as `name`, trusting
/// only `dir/ca.crt`. Returns what the client read, or the client's handshake error.
async fn handshake(dir: &Path, name: &str) -> Result<String, std::io::Error> {
    let server = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs(&dir.join("tls.crt")), key(&dir.join("tls.key")))
        .expect("server config from graft certs output");
    let acceptor = TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let serve = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        // A failed handshake is the expected outcome for a wrong name; ignore it here.
        if let Ok(mut tls) = acceptor.accept(stream).await {
            let _ = tls.write_all(b"hello from graft").await;
            let _ = tls.shutdown().await;
        }
    });

    let mut roots = rustls::RootCertStore::empty();
    for ca in certs(&dir.join("ca.crt")) {
        roots.add(ca).expect("CA certificate");
    }
    let client = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(client));
    let stream = TcpStream::connect(address).await.expect("connect");
    let server_name = ServerName::try_from(name.to_string()).expect("DNS name");
    let result = async {
        let mut tls = connector.connect(server_name, stream).await?;
        let mut text = String::new();
        tls.read_to_string(&mut text).await?;
        Ok(text)
    }
    .await;
    let _ = serve.await;
    result
}

#[tokio::test]
async fn handshake_succeeds_for_every_service_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    issue(dir.path());
    for name in [
        "graft.graft.svc",
        "graft",
        "graft.graft",
        "graft.graft.svc.cluster.local",
    ] {
        let text = handshake(dir.path(), name)
            .await
            .unwrap_or_else(|e| panic!("handshake as {name}: {e}"));
        assert_eq!(text, "hello from graft");
    }
}

#[tokio::test]
async fn handshake_fails_for_a_wrong_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    issue(dir.path());
    for name in ["graft.other.svc", "webhook.graft.svc"] {
        let error = handshake(dir.path(), name)
            .await
            .expect_err("a name outside the certificate must be refused");
        let rustls_error = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        assert!(
            matches!(
                rustls_error,
                Some(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. }
                ))
            ),
            "{name}: refused for the wrong reason: {error}"
        );
    }
}

#[tokio::test]
async fn handshake_fails_against_another_ca() {
    let (first, second) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    issue(first.path());
    issue(second.path());
    // The serving pair of one run, trusted through the CA of another: a stale caBundle.
    std::fs::copy(second.path().join("ca.crt"), first.path().join("ca.crt")).expect("copy");
    let error = handshake(first.path(), "graft.graft.svc")
        .await
        .expect_err("a certificate from another CA must be refused");
    let rustls_error = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    assert!(
        matches!(rustls_error, Some(rustls::Error::InvalidCertificate(_))),
        "refused for the wrong reason: {error}"
    );
}

#[test]
fn writes_every_file_and_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("nested/certs");
    issue(&out);
    let files = ["ca.crt", "tls.crt", "tls.key", "secret.yaml"];
    for file in files {
        assert!(out.join(file).is_file(), "{file} written");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        for private in ["tls.key", "secret.yaml"] {
            let mode = std::fs::metadata(out.join(private))
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "{private} is private to its owner");
        }
    }

    let ca_before = std::fs::read(out.join("ca.crt")).expect("ca");
    let refused = certs_for_graft(&out, &[]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--force") && stderr.contains("ca.crt"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(out.join("ca.crt")).expect("ca"),
        ca_before,
        "untouched"
    );

    let forced = certs_for_graft(&out, &["--force", "--days", "30"]);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_ne!(
        std::fs::read(out.join("ca.crt")).expect("ca"),
        ca_before,
        "rotated"
    );
}

#[test]
fn zero_days_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = certs_for_graft(dir.path(), &["--days", "0"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--days"));
}
