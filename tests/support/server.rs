//! Helpers for the server tests: a test PKI, a kubelet-style Secret directory, TLS clients
//! that verify the server as the apiserver does (CA + SNI `graft.graft.svc`), and an
//! in-process server on ephemeral loopback ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub use super::{Result, fixture};

/// The name the apiserver uses for the webhook Service.
pub const SERVICE_NAME: &str = "graft.graft.svc";
/// Every test is bounded by this.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The fixture as v1beta1 (same request, older envelope).
pub fn as_v1beta1(body: &[u8]) -> Result<Vec<u8>> {
    let mut value: serde_json::Value = serde_json::from_slice(body)?;
    value["apiVersion"] = "admission.k8s.io/v1beta1".into();
    Ok(serde_json::to_vec(&value)?)
}

/// What the CLI would answer for `body` with the policies in `dir`.
pub fn expected_answer(dir: &Path, body: &[u8]) -> Result<Vec<u8>> {
    let loaded = graft::policy::load(&[dir.to_path_buf()])?;
    // The server's namespace source in these tests: none.
    let namespaces = graft::namespaces::NoNamespaces {
        hint: "the server has no namespace data",
    };
    Ok(graft::admission::oracle::review(
        body,
        &loaded.set,
        graft::admission::ClusterSource::namespaces(&namespaces),
    )?
    .to_json()
    .expect("the response serialises"))
}

/// A CA that issues leaf certificates.
pub struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM pair.
#[derive(Clone)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pair {
    pub fn cert_der(&self) -> Result<CertificateDer<'static>> {
        Ok(CertificateDer::from_pem_slice(self.cert_pem.as_bytes())?)
    }
}

impl Pki {
    pub fn new(name: &str) -> Result<Pki> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ok(Pki {
            ca: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
        })
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    pub fn issue(&self, names: &[&str]) -> Result<Pair> {
        let key = KeyPair::generate()?;
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, "graft");
        let cert = params.signed_by(&key, &self.ca)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A Secret volume as kubelet mounts it: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..<timestamp>`.
pub struct SecretDir {
    pub dir: tempfile::TempDir,
    generation: std::cell::Cell<u32>,
}

impl SecretDir {
    pub fn new(pair: &Pair) -> Result<SecretDir> {
        let secret = SecretDir {
            dir: tempfile::tempdir()?,
            generation: std::cell::Cell::new(0),
        };
        let first = secret.write_generation(pair)?;
        std::os::unix::fs::symlink(&first, secret.dir.path().join("..data"))?;
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), secret.dir.path().join(file))?;
        }
        Ok(secret)
    }

    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    pub fn key(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }

    /// Rotates exactly as kubelet does: new timestamped dir, `..data_tmp` symlink renamed
    /// onto `..data`, old dir removed.
    pub fn rotate(&self, pair: &Pair) -> Result {
        let old = std::fs::read_link(self.dir.path().join("..data"))?;
        let new = self.write_generation(pair)?;
        let tmp = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&new, &tmp)?;
        std::fs::rename(&tmp, self.dir.path().join("..data"))?;
        std::fs::remove_dir_all(self.dir.path().join(old))?;
        Ok(())
    }

    fn write_generation(&self, pair: &Pair) -> Result<String> {
        let n = self.generation.get() + 1;
        self.generation.set(n);
        let name = format!("..2026_11_22_10_00_{n:02}.{}", 100_000 + n);
        let path = self.dir.path().join(&name);
        std::fs::create_dir(&path)?;
        std::fs::write(path.join("tls.crt"), &pair.cert_pem)?;
        std::fs::write(path.join("tls.key"), &pair.key_pem)?;
        Ok(name)
    }
}

/// A client that trusts `ca_pem`, optionally presenting a client certificate.
pub fn client_config(
    ca_pem: &str,
    client: Option<&Pair>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(pair) => {
            let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes())?;
            builder.with_client_auth_cert(vec![pair.cert_der()?], key)?
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    // Like the apiserver's Go client: no session resumption, so every connection sees
    // the certificate the server presents now (a resumed session reports the old one).
    config.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(config))
}

pub fn pkcs8(der: Vec<u8>) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der))
}

/// Opens a TLS connection with SNI `graft.graft.svc`.
pub async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(SERVICE_NAME)?;
    Ok(TlsConnector::from(config).connect(name, tcp).await?)
}

/// The certificate the server presented on this connection.
pub fn peer_cert(stream: &TlsStream<TcpStream>) -> Option<CertificateDer<'static>> {
    stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|certs| certs.first())
        .map(|cert| cert.clone().into_owned())
}

pub type Http1 = http1::SendRequest<Full<Bytes>>;
pub type Http2 = http2::SendRequest<Full<Bytes>>;

pub async fn http1(stream: TlsStream<TcpStream>) -> Result<Http1> {
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

pub async fn http2(stream: TlsStream<TcpStream>) -> Result<Http2> {
    let (sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

pub fn mutate_request(
    method: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<Request<Full<Bytes>>> {
    Ok(Request::builder()
        .method(method)
        .uri("/mutate?timeout=10s")
        .header("host", SERVICE_NAME)
        .header("content-type", content_type)
        .header("user-agent", "kube-apiserver-admission")
        .body(Full::new(Bytes::from(body)))?)
}

pub async fn send1(
    sender: &mut Http1,
    request: Request<Full<Bytes>>,
) -> Result<(StatusCode, Bytes)> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

pub async fn send2(
    sender: &mut Http2,
    request: Request<Full<Bytes>>,
) -> Result<(StatusCode, Bytes)> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

/// One plain-HTTP GET to the metrics listener.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(get_request(path).as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    status_and_body(&String::from_utf8(raw)?)
}

/// A plain-HTTP/1.1 GET of `path` that asks the server to close the connection after
/// answering, so the answer ends where the stream does.
pub fn get_request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
}

/// The status and the body of an HTTP/1.1 answer read to the end of its stream.
pub fn status_and_body(text: &str) -> Result<(u16, String)> {
    let status = text.split(' ').nth(1).ok_or("no status")?.parse()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Reads one HTTP/1.1 response with a Content-Length body from a raw stream.
pub async fn read_response<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<(u16, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let header_end = loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err("connection closed before the response headers".into());
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(raw[..header_end].to_vec())?;
    let status = head.split(' ').nth(1).ok_or("no status")?.parse()?;
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .ok_or("no content-length")?;
    let mut body = raw[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err("connection closed inside the body".into());
        }
        body.extend_from_slice(&buf[..n]);
    }
    Ok((status, body))
}

/// A server configuration on ephemeral loopback ports.
pub fn config(policies: &Path, secret: &SecretDir) -> graft::server::Config {
    graft::server::Config {
        policies: vec![policies.to_path_buf()],
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert: graft::server::CertSource::Files {
            cert: secret.cert(),
            key: secret.key(),
        },
        client_ca: None,
        limits: graft::server::Limits::default(),
        shutdown_grace: Duration::from_secs(5),
        watch: graft::watch::WatchConfig::default(),
        namespaces: graft::server::config::NamespaceConfig::default(),
        params: None,
        events: None,
        notices: None,
    }
}

/// A server configuration for the example policies in `policies/`, on ephemeral loopback
/// ports. The sidecar example reads namespace labels and there is no cluster here, so the
/// namespaces come from the fixed set the golden suites use.
pub fn example_config(secret: &SecretDir) -> graft::server::Config {
    let repo = super::repo();
    let mut config = config(&repo.join("policies"), secret);
    config.namespaces = graft::server::config::NamespaceConfig::File(
        repo.join("tests/policies/objects/namespaces.yaml"),
    );
    config
}

/// A started in-process server and the means to stop it.
pub struct TestServer {
    pub running: graft::server::Running,
    pub stop: tokio::sync::oneshot::Sender<()>,
}

pub async fn start(config: graft::server::Config) -> Result<TestServer> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = graft::server::start(config, async move {
        let _ = stopped.await;
    })
    .await?;
    Ok(TestServer { running, stop })
}

impl TestServer {
    pub async fn shutdown(self) -> Result {
        let _ = self.stop.send(());
        tokio::time::timeout(DEADLINE, self.running.wait()).await?;
        Ok(())
    }
}

/// The lines a `graft serve` child writes to standard output (its log, with
/// `--log-format json`), read on a thread of their own so the child never blocks on a
/// full pipe.
pub fn log_lines(child: &mut std::process::Child) -> Result<std::sync::mpsc::Receiver<String>> {
    use std::io::BufRead;
    let stdout = child
        .stdout
        .take()
        .ok_or("the child's stdout is not piped")?;
    let (line_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(|line| line.ok())
        {
            if line_tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(lines)
}

/// Waits (bounded by [`DEADLINE`]) for the next JSON log line `wanted` accepts.
pub fn next_log_where(
    lines: &std::sync::mpsc::Receiver<String>,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value> {
    loop {
        let line = lines.recv_timeout(DEADLINE)?;
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line)
            && wanted(&value)
        {
            return Ok(value);
        }
    }
}

/// `graft serve` on ephemeral loopback ports with `secret`'s certificate, logging JSON at
/// info level to a piped standard output (read it with [`log_lines`]); add arguments and
/// spawn.
pub fn serve_command(policies: &Path, secret: &SecretDir) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_graft"));
    command
        .arg("serve")
        .arg("--policies")
        .arg(policies)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--tls-cert")
        .arg(secret.cert())
        .arg("--tls-key")
        .arg(secret.key())
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    command
}
