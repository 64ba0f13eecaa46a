//! A real etcd and kube-apiserver on loopback, the real `graft serve` binary, and the
//! means to drive them (kubectl, a loopback TCP proxy that can cut connections).
//!
//! Everything lives under one temporary directory and on free 127.0.0.1 ports; every wait
//! is a poll with a deadline. Processes are stopped in order (graft, then kube-apiserver,
//! then etcd: with etcd gone first the apiserver can hang in its shutdown) and killed on
//! drop if a test bails out early.

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::support::Result;
use crate::support::server::{Pki, get_request, status_and_body};

/// The admin user's bearer token (group system:masters), for set-up only.
const ADMIN_TOKEN: &str = "graft-e2e-admin-token";
/// An authenticated user with no RBAC binding at all.
pub const NOBODY_TOKEN: &str = "graft-e2e-nobody-token";

/// Polls `check` every 100 ms until it returns `Some`, or fails after `limit` with the
/// last error (or `what`).
pub fn poll<T>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + limit;
    let mut last = String::new();
    loop {
        match check() {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last = error.to_string(),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {limit:?} waiting for {what}; last error: {last}"
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A free loopback port (bound, then released for the child to bind).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A child process with its log file; SIGKILLed on drop unless stopped.
pub struct Proc {
    name: String,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, command: &mut Command, log: PathBuf) -> Result<Proc> {
        let file = std::fs::File::create(&log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .map_err(|error| format!("cannot start {name}: {error}"))?;
        Ok(Proc {
            name: name.to_string(),
            child,
            log,
        })
    }

    /// Fails with the end of the log if the process has exited.
    pub fn check_running(&mut self) -> Result {
        if let Some(status) = self.child.try_wait()? {
            return Err(format!(
                "{} exited ({status}); its log ends:\n{}",
                self.name,
                self.log_tail(40)
            )
            .into());
        }
        Ok(())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop within {grace:?}; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// etcd + kube-apiserver with RBAC, token authentication and the admission plugins that
/// call webhooks.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    /// `https://127.0.0.1:PORT`
    pub server: String,
    pub apiserver_addr: SocketAddr,
    pub ca_file: PathBuf,
    pub admin_kubeconfig: PathBuf,
    apiserver: Option<Proc>,
    etcd: Option<Proc>,
}

/// What a test binary asks of its apiserver beyond the defaults.
pub struct ClusterConfig<'a> {
    /// `--enable-admission-plugins`.
    pub enable_admission: &'a str,
    /// `--disable-admission-plugins`, if any.
    pub disable_admission: Option<&'a str>,
    /// More lines of the token file (`token,user,uid,"group,..."`).
    pub extra_tokens: &'a [&'a str],
}

impl Default for ClusterConfig<'_> {
    fn default() -> Self {
        ClusterConfig {
            enable_admission: "NamespaceLifecycle,ServiceAccount,\
                               MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            disable_admission: None,
            extra_tokens: &[],
        }
    }
}

impl Cluster {
    pub fn start(assets: &Path) -> Result<Cluster> {
        Cluster::start_with(assets, &ClusterConfig::default())
    }

    pub fn start_with(assets: &Path, config: &ClusterConfig<'_>) -> Result<Cluster> {
        let dir = tempfile::Builder::new().prefix("graft-e2e-").tempdir()?;
        let root = dir.path();
        let pki = Pki::new("graft-e2e-apiserver-ca")?;
        let serving = pki.issue(&["127.0.0.1", "localhost"])?;
        let ca_file = root.join("ca.crt");
        std::fs::write(&ca_file, pki.ca_pem())?;
        std::fs::write(root.join("apiserver.crt"), &serving.cert_pem)?;
        std::fs::write(root.join("apiserver.key"), &serving.key_pem)?;
        let signing = rcgen::KeyPair::generate()?;
        std::fs::write(root.join("sa.key"), signing.serialize_pem())?;
        std::fs::write(root.join("sa.pub"), signing.public_key_pem())?;
        std::fs::write(
            root.join("tokens.csv"),
            format!(
                "{ADMIN_TOKEN},graft-e2e-admin,1,\"system:masters\"\n\
                 {NOBODY_TOKEN},graft-e2e-nobody,2\n{}",
                config
                    .extra_tokens
                    .iter()
                    .map(|line| format!("{line}\n"))
                    .collect::<String>()
            ),
        )?;

        let (etcd_port, etcd_peer, apiserver_port) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        let etcd = Proc::spawn(
            "etcd",
            Command::new(assets.join("etcd"))
                .args(["--name", "t", "--data-dir"])
                .arg(root.join("etcd"))
                .args(["--listen-client-urls", &etcd_url])
                .args(["--advertise-client-urls", &etcd_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("t={peer_url}")])
                .args(["--log-level", "warn"]),
            root.join("etcd.log"),
        )?;
        let path = |name: &str| root.join(name).display().to_string();
        let mut command = Command::new(assets.join("kube-apiserver"));
        command.args([
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={apiserver_port}"),
            "--advertise-address=127.0.0.1".into(),
            format!("--tls-cert-file={}", path("apiserver.crt")),
            format!("--tls-private-key-file={}", path("apiserver.key")),
            format!("--client-ca-file={}", path("ca.crt")),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--authorization-mode=RBAC".into(),
            format!("--service-account-key-file={}", path("sa.pub")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--service-cluster-ip-range=10.96.0.0/24".into(),
            "--endpoint-reconciler-type=none".into(),
            format!("--enable-admission-plugins={}", config.enable_admission),
            format!("--cert-dir={}", path("kas-certs")),
        ]);
        if let Some(disable) = config.disable_admission {
            command.arg(format!("--disable-admission-plugins={disable}"));
        }
        let apiserver = Proc::spawn(
            "kube-apiserver",
            &mut command,
            root.join("kube-apiserver.log"),
        )?;
        let server = format!("https://127.0.0.1:{apiserver_port}");
        let admin_kubeconfig = root.join("admin.kubeconfig");
        write_kubeconfig(&admin_kubeconfig, &server, &ca_file, ADMIN_TOKEN)?;
        let mut cluster = Cluster {
            server,
            apiserver_addr: SocketAddr::from(([127, 0, 0, 1], apiserver_port)),
            ca_file,
            admin_kubeconfig,
            apiserver: Some(apiserver),
            etcd: Some(etcd),
            dir,
        };
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// Ready when `/readyz` answers `ok` (bootstrap RBAC roles included) and the OpenAPI
    /// document kubectl validates against is served.
    fn wait_ready(&mut self) -> Result {
        let started = Instant::now();
        poll(Duration::from_secs(90), "kube-apiserver /readyz", || {
            for proc in [&mut self.etcd, &mut self.apiserver].into_iter().flatten() {
                proc.check_running()?;
            }
            Ok(self
                .kubectl(&["get", "--raw", "/readyz"])
                .ok()
                .filter(|body| body.trim() == "ok"))
        })?;
        poll(Duration::from_secs(30), "/openapi/v2", || {
            Ok(self
                .kubectl(&["get", "--raw", "/openapi/v2"])
                .ok()
                .map(drop))
        })?;
        eprintln!(
            "kube-apiserver ready in {:.1} s at {}",
            started.elapsed().as_secs_f64(),
            self.server
        );
        Ok(())
    }

    /// `kubectl --kubeconfig ADMIN ARGS...`; its stdout, or an error with its stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        self.kubectl_with_input(args, None)
    }

    pub fn kubectl_with_input(&self, args: &[&str], input: Option<&str>) -> Result<String> {
        kubectl(&self.admin_kubeconfig, args, input)
    }

    /// Creates `object` (JSON) and returns the object the apiserver stored.
    pub fn create(&self, object: &serde_json::Value) -> Result<serde_json::Value> {
        let out = self.kubectl_with_input(
            &["create", "--validate=false", "-o", "json", "-f", "-"],
            Some(&object.to_string()),
        )?;
        Ok(serde_json::from_str(&out)?)
    }

    /// What the apiserver would store for `object`, admission webhooks included
    /// (`--dry-run=server`: nothing is persisted).
    pub fn dry_run_create(&self, object: &serde_json::Value) -> Result<serde_json::Value> {
        let out = self.kubectl_with_input(
            &[
                "create",
                "--dry-run=server",
                "--validate=false",
                "-o",
                "json",
                "-f",
                "-",
            ],
            Some(&object.to_string()),
        )?;
        Ok(serde_json::from_str(&out)?)
    }

    pub fn apply_json(&self, object: &serde_json::Value) -> Result {
        self.kubectl_with_input(
            &["apply", "--validate=false", "-f", "-"],
            Some(&object.to_string()),
        )?;
        Ok(())
    }

    /// A namespace with the `default` ServiceAccount the ServiceAccount admission plugin
    /// wants before it admits a pod there.
    pub fn create_namespace(&self, name: &str) -> Result {
        self.kubectl(&["create", "namespace", name])?;
        self.kubectl(&["-n", name, "create", "serviceaccount", "default"])?;
        Ok(())
    }

    /// A kubeconfig for `token` against `server` (the apiserver or a proxy in front of
    /// it, which presents the apiserver's certificate).
    pub fn kubeconfig_for(&self, name: &str, server: &str, token: &str) -> Result<PathBuf> {
        let path = self.dir.path().join(format!("{name}.kubeconfig"));
        write_kubeconfig(&path, server, &self.ca_file, token)?;
        Ok(path)
    }

    /// Stops kube-apiserver, then etcd.
    pub fn stop(mut self) {
        if let Some(mut apiserver) = self.apiserver.take() {
            apiserver.stop(Duration::from_secs(20));
        }
        if let Some(mut etcd) = self.etcd.take() {
            etcd.stop(Duration::from_secs(10));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Same order when a test bails out: apiserver first.
        if let Some(mut apiserver) = self.apiserver.take() {
            apiserver.stop(Duration::from_secs(5));
        }
        drop(self.etcd.take());
    }
}

pub fn kubectl(kubeconfig: &Path, args: &[&str], input: Option<&str>) -> Result<String> {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--request-timeout", "20s"])
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot run kubectl: {error}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(format!(
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8(output.stdout)?)
}

fn write_kubeconfig(path: &Path, server: &str, ca_file: &Path, token: &str) -> Result {
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {
            "server": server,
            "certificate-authority": ca_file,
        }}],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    });
    // JSON is YAML: kubectl and kube-rs both read it.
    std::fs::write(path, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

/// One `graft serve` process on free loopback ports.
pub struct Graft {
    proc: Proc,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
}

/// How to start a [`Graft`].
pub struct GraftOptions<'a> {
    pub name: &'a str,
    pub policies: &'a Path,
    pub cert: &'a Path,
    pub key: &'a Path,
    pub kubeconfig: Option<&'a Path>,
    pub log_dir: &'a Path,
    /// More `graft serve` arguments (`--events`).
    pub extra_args: &'a [&'a str],
}

impl Graft {
    /// Starts graft and waits until its metrics listener answers (not until ready:
    /// readiness is what several tests look at).
    pub fn start(options: &GraftOptions<'_>) -> Result<Graft> {
        let (port, metrics_port) = (free_port()?, free_port()?);
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
        let mut command = Command::new(env!("CARGO_BIN_EXE_graft"));
        command
            .arg("serve")
            .arg("--policies")
            .arg(options.policies)
            .arg("--tls-cert")
            .arg(options.cert)
            .arg("--tls-key")
            .arg(options.key)
            .args(["--listen", &addr.to_string()])
            .args(["--metrics-listen", &metrics.to_string()])
            .args(["--shutdown-grace", "2s"])
            // The reload tests must not wait on inotify's coalescing.
            .env("RUST_LOG", "info,graft=debug")
            .env_remove("GRAFT_KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST");
        if let Some(kubeconfig) = options.kubeconfig {
            command.arg("--kubeconfig").arg(kubeconfig);
        }
        command.args(options.extra_args);
        let proc = Proc::spawn(
            &format!("graft ({})", options.name),
            &mut command,
            options.log_dir.join(format!("graft-{}.log", options.name)),
        )?;
        let mut graft = Graft {
            proc,
            addr,
            metrics,
        };
        poll(Duration::from_secs(20), "graft's /healthz", || {
            graft.proc.check_running()?;
            Ok(http_get(graft.metrics, "/healthz")
                .ok()
                .filter(|(s, _)| *s == 200)
                .map(drop))
        })?;
        Ok(graft)
    }

    pub fn ready(&self) -> bool {
        matches!(http_get(self.metrics, "/readyz"), Ok((200, _)))
    }

    /// The value of a metric, named with its labels as exported
    /// (`graft_events_total{result="sent"}`) when it has any.
    pub fn metric(&self, name: &str) -> Result<f64> {
        let (_, text) = http_get(self.metrics, "/metrics")?;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .ok_or_else(|| format!("no metric {name} in\n{text}"))?;
        Ok(value.trim().parse()?)
    }

    pub fn log(&self) -> String {
        self.proc.log_text()
    }

    pub fn log_tail(&self) -> String {
        self.proc.log_tail(30)
    }

    /// Waits up to `limit` for `text` in graft's log: a line is in the log when graft's
    /// log writer has written it (warn and error lines at once, info lines within its
    /// flush interval), which can be after the metric or state that follows the event.
    pub fn wait_for_log(&self, limit: Duration, text: &str) -> Result {
        poll(limit, &format!("{text:?} in graft's log"), || {
            Ok(self.log().contains(text).then_some(()))
        })
        .map_err(|error| format!("{error}\n{}", self.log_tail()).into())
    }

    pub fn check_running(&mut self) -> Result {
        self.proc.check_running()
    }

    pub fn stop(mut self) {
        self.proc.stop(Duration::from_secs(10));
    }
}

/// One plain-HTTP GET; the status and body.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(get_request(path).as_bytes())?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    status_and_body(&text)
}

/// A TCP proxy on loopback in front of `target`, which can refuse new connections and
/// cut the open ones: an apiserver outage as graft sees it.
pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<ProxyShared>,
}

#[derive(Default)]
struct ProxyShared {
    down: AtomicBool,
    stopped: AtomicBool,
    /// Open connections by id: the client side and the upstream side.
    open: Mutex<HashMap<u64, (TcpStream, TcpStream)>>,
}

impl ProxyShared {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (TcpStream, TcpStream)>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Proxy {
    pub fn start(target: SocketAddr) -> Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(ProxyShared::default());
        let accepting = shared.clone();
        std::thread::spawn(move || {
            for (id, client) in (0u64..).zip(listener.incoming()) {
                if accepting.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                if accepting.down.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let _ = connect(&accepting, id, client, target);
            }
        });
        Ok(Proxy { addr, shared })
    }

    /// Refuses new connections and cuts every open one.
    pub fn go_down(&self) {
        self.shared.down.store(true, Ordering::SeqCst);
        for (client, upstream) in self.shared.open().values() {
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
        }
    }

    pub fn come_up(&self) {
        self.shared.down.store(false, Ordering::SeqCst);
    }

    /// Connections currently open through the proxy.
    pub fn open_connections(&self) -> usize {
        self.shared.open().len()
    }
}

fn connect(shared: &Arc<ProxyShared>, id: u64, client: TcpStream, target: SocketAddr) -> Result {
    let upstream = TcpStream::connect(target)?;
    shared
        .open()
        .insert(id, (client.try_clone()?, upstream.try_clone()?));
    let (client_read, upstream_read) = (client.try_clone()?, upstream.try_clone()?);
    let forget = shared.clone();
    std::thread::spawn(move || {
        pipe(client_read, upstream);
        forget.open().remove(&id);
    });
    std::thread::spawn(move || pipe(upstream_read, client));
    Ok(())
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.go_down();
        // Wake the accept loop so it sees `stopped`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies one direction until either side closes, then closes both.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
