//! `graft serve`: the HTTPS admission server.
//!
//! [`start`] loads the policies, sets up TLS, binds both listeners and returns a
//! [`Running`] server with its bound addresses and its [`State`]; the server then runs until
//! the shutdown future resolves, drains, and [`Running::wait`] returns.
//!
//! - [`config`]: the plain configuration struct.
//! - [`tls`]: certificates, the swappable resolver, the rustls configuration.
//! - [`connection_slots`]: who may hold a connection on the admission listener (per
//!   source, handshakes in progress, established); [`shed_log`]: the rate-limited line
//!   about the connections it sheds.
//! - [`cert_reload`]: reloading the certificate when its directory changes.
//! - [`policy_reload`]: reloading the policy set when its directory changes.
//! - [`namespace_cache`]: Namespace metadata from list + watch, for namespace-aware policies.
//! - [`namespace_supply`]: running that cache only while the policy set needs it;
//!   [`cluster_data`]: the one slot reviews read cluster data from.
//! - [`kube_api`]: the Kubernetes API client (in-cluster, or `--kubeconfig`).
//! - [`events`]: Kubernetes Events about reviews (`--events`), recorded off the request path.
//! - [`notices`]: notices about reviews to chat and HTTP sinks (`--notices`), off the
//!   request path.
//! - [`routes`]: `POST /mutate`; [`deadline`]: its time budget; [`labels`]: its metric labels;
//!   [`evaluation_pool`]: the threads its reviews are evaluated on.
//! - [`metrics_listener`]: `/healthz`, `/readyz`, `/metrics` on the plain-HTTP listener
//!   of `--metrics-listen`.
//! - [`state`]: what handlers and reloaders share (policy set, readiness, metrics).
//! - [`shutdown`]: SIGTERM and SIGINT.

pub mod cert_reload;
pub mod cluster_data;
pub mod config;
pub mod connection_slots;
pub mod deadline;
pub mod evaluation_pool;
pub mod events;
pub mod kube_api;
pub mod labels;
pub mod metrics_listener;
pub mod namespace_cache;
pub mod namespace_supply;
pub mod notices;
pub mod policy_reload;
pub mod routes;
pub mod shed_log;
pub mod shutdown;
pub mod state;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

pub use config::{CertSource, Config, Limits};
use connection_slots::{ConnectionSlots, SlotLimits};
pub use namespace_supply::NamespaceSupply;
pub use policy_reload::{PolicyReloadStatus, PolicyReloader};
pub use state::State;

use crate::metrics::Metrics;
use crate::policy::{self, Findings};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the policy set is invalid")]
    Policies(Findings),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error(transparent)]
    Watch(#[from] crate::watch::WatchError),
    #[error(transparent)]
    KubeApi(#[from] kube_api::ConnectError),
    #[error(transparent)]
    NamespacesFile(#[from] namespace_supply::NamespacesFileError),
    #[error("cannot read the parameter objects file {path}: {cause}")]
    ParamsRead {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the parameter objects file {path} is invalid: {cause}")]
    ParamsInvalid {
        path: PathBuf,
        cause: crate::params::ParamsError,
    },
    #[error("parameter objects were already set for this server")]
    ParamsTwice,
    #[error(transparent)]
    Notices(#[from] notices::config::ConfigError),
}

/// Re-reads the notices file after its directory changes.
struct NoticesReloader(Arc<notices::Notices>);

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// The bound admission (HTTPS) address.
    pub addr: SocketAddr,
    /// The bound operations (plain HTTP) address.
    pub metrics_addr: SocketAddr,
    /// Where the self-signed CA certificate was written, when no certificate was given.
    pub ca_file: Option<PathBuf>,
    pub state: Arc<State>,
    task: JoinHandle<()>,
}

impl Running {
    /// Waits until the server has shut down and drained.
    pub async fn wait(self) {
        if let Err(error) = self.task.await {
            tracing::error!(%error, "server task failed");
        }
    }
}

/// Starts the server; it stops accepting when `shutdown` resolves and drains within the
/// configured grace period.
pub async fn start(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Running, StartError> {
    let state = Arc::new(State::new(Arc::new(Metrics::new())));
    let (stop, stopped) = watch::channel(false);

    // The metrics listener starts first, so /readyz answers 503 while the rest starts.
    let metrics_listener = bind(config.metrics_listen).await?;
    let metrics_addr = local_addr(&metrics_listener, config.metrics_listen)?;
    let (metrics_stop, metrics_stopped) = watch::channel(false);
    let metrics_task = tokio::spawn(metrics_listener::serve(
        metrics_listener,
        state.clone(),
        metrics_stopped,
    ));

    if let Some(path) = &config.params {
        let params = read_params_file(path)?;
        if !state.cluster_data().fix_params(params) {
            return Err(StartError::ParamsTwice);
        }
    }
    // Watching starts before the first load, so no edit falls between the two.
    let policy_watcher = PolicyReloader::watcher(&config.policies, &config.watch)?;
    // An invalid policy set at startup is fatal: serving without the policies would
    // silently admit objects unmutated, and a bad rollout should stall instead.
    let loaded = policy::load(&config.policies).map_err(StartError::Policies)?;
    let reloader = PolicyReloader::new(
        config.policies.clone(),
        state.clone(),
        // Without a way to reach the API a namespace-aware set cannot be served
        // correctly, so that is as fatal as an invalid set. The first list is not
        // awaited: /readyz reports it.
        NamespaceSupply::new(&config.namespaces, state.clone(), stopped.clone())?,
    );
    reloader.install(loaded, Duration::ZERO).await?;
    // Asked for and impossible is fatal, as for namespace data; without --events no
    // client is made at all.
    if let Some(events) = &config.events {
        let client =
            kube_api::client(events.kubeconfig.as_deref(), kube_api::Purpose::Events).await?;
        let sink =
            events::EventSink::start(client, events, state.metrics().clone(), stopped.clone());
        state.set_events(sink);
    }
    // An invalid notices file at startup is fatal, as an invalid policy set is; later
    // broken edits keep the last good sinks.
    if let Some(path) = &config.notices {
        let watcher = crate::watch::Watcher::new(&[cert_reload::parent(path)], &config.watch)?;
        let notices = Arc::new(notices::Notices::start(
            path,
            state.metrics().clone(),
            stopped.clone(),
        )?);
        state.set_notices(notices.clone());
        crate::watch::run_until_shutdown(
            watcher,
            stopped.clone(),
            NoticesReloader(notices),
            |reloader| async move { reloader.0.reload() },
        );
    }
    reloader.spawn(policy_watcher, stopped.clone());

    let listener = bind(config.listen).await?;
    let addr = local_addr(&listener, config.listen)?;

    let (resolver, ca_file) = match &config.cert {
        CertSource::Files { cert, key } => {
            // As for the policies: watching starts before the first load.
            let watcher = cert_reload::CertReloader::watcher(cert, key, &config.watch)?;
            let resolver = Arc::new(tls::CertResolver::new(tls::load_pair(cert, key)?));
            cert_reload::CertReloader {
                cert: cert.clone(),
                key: key.clone(),
                resolver: resolver.clone(),
                metrics: state.metrics().clone(),
                status: state.tls_reload_status(),
            }
            .spawn(watcher, stopped.clone());
            (resolver, None)
        }
        CertSource::SelfSigned => {
            let generated = tls::self_signed()?;
            // Named by port so several local servers do not overwrite each other's CA.
            let path = std::env::temp_dir().join(format!("graft-ca-{}.pem", addr.port()));
            tls::write_ca(&path, &generated.ca_pem)?;
            tracing::warn!(
                ca_file = %path.display(),
                "no --tls-cert/--tls-key: serving a self-signed certificate for localhost and \
                 127.0.0.1, for local use only (curl --cacert the CA file)"
            );
            (Arc::new(tls::CertResolver::new(generated.key)), Some(path))
        }
    };
    if let Some(expiry) = tls::expiry(&resolver.current()) {
        state.metrics().tls_certificate_expiry(expiry);
    }
    let tls_config = tls::server_config(resolver.clone(), config.client_ca.as_deref())?;
    state.tls_ready(resolver);
    tracing::info!(%addr, %metrics_addr, "graft serving");

    let accept = Acceptor {
        listener,
        tls: TlsAcceptor::from(tls_config),
        state: state.clone(),
        limits: Arc::new(config.limits.clone()),
    };
    let grace = config.shutdown_grace;
    let drain_state = state.clone();
    let task = tokio::spawn(async move {
        let graceful = accept.run(shutdown).await;
        drain_state.start_draining();
        let _ = stop.send(true);
        drain(graceful, grace).await;
        let _ = metrics_stop.send(true);
        let _ = metrics_task.await;
    });
    Ok(Running {
        addr,
        metrics_addr,
        ca_file,
        state,
        task,
    })
}

/// Runs `start` and waits for it: the whole life of `graft serve`.
pub async fn run(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    start(config, shutdown).await?.wait().await;
    Ok(())
}

struct Acceptor {
    listener: TcpListener,
    tls: TlsAcceptor,
    state: Arc<State>,
    limits: Arc<Limits>,
}

impl Acceptor {
    /// Accepts connections until `shutdown` resolves; returns the handle that drains them.
    ///
    /// Every connection is accepted at once and passes `connection_slots`' gates there
    /// and in its own task: waiting for a slot before accepting would let connections
    /// that never finish their handshake hold every slot while the apiserver waits in the
    /// backlog.
    async fn run(self, shutdown: impl Future<Output = ()>) -> GracefulShutdown {
        let graceful = GracefulShutdown::new();
        let slots = ConnectionSlots::new(
            SlotLimits::from_limits(&self.limits),
            self.state.metrics().clone(),
        );
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .keep_alive(true);
        builder.http2().timer(TokioTimer::new());
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => break,
                accepted = accept(&self.listener) => accepted,
            };
            let Some((stream, peer)) = accepted else {
                continue;
            };
            // Over its source's share: dropping the stream closes it at once.
            let Some(admitted) = slots.admit(peer.ip()) else {
                continue;
            };
            let serving = Serving {
                tls: self.tls.clone(),
                state: self.state.clone(),
                limits: self.limits.clone(),
                builder: builder.clone(),
            };
            tokio::spawn(serving.connection(stream, peer, admitted, graceful.watcher()));
        }
        // Close the listening socket before saying so: new connections are refused from here.
        drop(self);
        tracing::info!("stopped accepting connections");
        graceful
    }
}

/// What serving one connection needs.
struct Serving {
    tls: TlsAcceptor,
    state: Arc<State>,
    limits: Arc<Limits>,
    builder: auto::Builder<TokioExecutor>,
}

impl Serving {
    /// One admitted connection: its TLS handshake within the handshake budget, then HTTP
    /// in an established slot.
    async fn connection(
        self,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        mut admitted: connection_slots::Admitted,
        watcher: hyper_util::server::graceful::Watcher,
    ) {
        let Serving {
            tls,
            state,
            limits,
            builder,
        } = self;
        let _open = state.metrics().connection_opened();
        let stream = match admitted.handshake(tls.accept(stream)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%peer, %error, "TLS handshake failed");
                return;
            }
            Err(reason) => {
                tracing::debug!(%peer, reason = reason.as_str(), "TLS handshake shed");
                return;
            }
        };
        if admitted.establish().is_err() {
            tracing::debug!(%peer, "no established slot free; connection closed");
            return;
        }
        // hyper bounds HTTP/1 headers by header_read_timeout, but nothing bounds the bytes
        // before it knows the protocol (hyper-util's version detection waits for them
        // forever) or an HTTP/2 preface: the first request must start within
        // header_read_timeout of the handshake, or the established slot is given back.
        let first_request = Arc::new(tokio::sync::Notify::new());
        let started = first_request.clone();
        let first_deadline = limits.header_read_timeout;
        let service = service_fn(move |request| {
            started.notify_one();
            routes::handle(request, state.clone(), limits.clone())
        });
        let connection = watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::pin!(connection);
        let ended = tokio::select! {
            ended = &mut connection => ended,
            () = first_request.notified() => connection.await,
            () = tokio::time::sleep(first_deadline) => {
                tracing::debug!(%peer, "no request within the header read timeout; closed");
                return;
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%peer, %error, "connection ended with an error");
        }
    }
}

async fn accept(listener: &TcpListener) -> Option<(tokio::net::TcpStream, SocketAddr)> {
    match listener.accept().await {
        Ok(accepted) => Some(accepted),
        Err(error) => {
            // Typically EMFILE: back off briefly instead of spinning on the error.
            tracing::warn!(%error, "accept failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            None
        }
    }
}

/// Closes idle keep-alive connections and waits for in-flight requests, up to `grace`.
async fn drain(graceful: GracefulShutdown, grace: Duration) {
    match tokio::time::timeout(grace, graceful.shutdown()).await {
        Ok(()) => tracing::info!("all connections drained"),
        Err(_) => tracing::warn!(
            grace_seconds = grace.as_secs_f64(),
            "grace period over; closing remaining connections"
        ),
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })
}

fn local_addr(listener: &TcpListener, addr: SocketAddr) -> Result<SocketAddr, StartError> {
    listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })
}

/// The `--params` file's objects, served for good.
fn read_params_file(path: &std::path::Path) -> Result<crate::params::ParamObjects, StartError> {
    let text = std::fs::read_to_string(path).map_err(|cause| StartError::ParamsRead {
        path: path.to_path_buf(),
        cause,
    })?;
    let params = crate::params::read_params(&text).map_err(|cause| StartError::ParamsInvalid {
        path: path.to_path_buf(),
        cause,
    })?;
    tracing::info!(
        file = %path.display(),
        objects = params.len(),
        "serving MutatingAdmissionPolicy parameter objects from a file"
    );
    Ok(params)
}
