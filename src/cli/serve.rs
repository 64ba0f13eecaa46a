//! `graft serve`: flags and environment -> [`crate::server::Config`], logging setup, and
//! the Tokio runtime. The server itself lives in [`crate::server`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use crate::logging::json as log_json;
use crate::logging::writer::{self as log_writer, Flusher};
use crate::server::config::{EventsConfig, NamespaceConfig, parse_duration};
use crate::server::{self, CertSource, Config, Limits, StartError};
use crate::watch::{WatchConfig, WatchMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The flags of `graft serve`, boxed so the subcommand enum stays small.
///
/// Every setting also reads an environment variable named after its flag (`--max-body-bytes`:
/// `GRAFT_MAX_BODY_BYTES`), the way containers are configured; `--lint` is an action, not
/// a setting, and has none. A flag wins over its variable.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every flag but --lint can also be set by its environment variable, shown as [env: ...]; a flag given on the command line wins.\n\nExamples:\n  graft serve --policies policies/ --listen 127.0.0.1:8443 --metrics-listen 127.0.0.1:8080\n  GRAFT_POLICIES=/etc/graft/policies GRAFT_LOG_FORMAT=json graft serve"
)]
pub struct Args {
    #[command(flatten)]
    pub flags: Box<Flags>,
}

#[derive(Debug, clap::Args)]
pub struct Flags {
    /// Policy directory (or file).
    #[arg(long, env = "GRAFT_POLICIES", default_value = "policies")]
    pub policies: PathBuf,
    /// Admission (HTTPS) listen address.
    #[arg(long, env = "GRAFT_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Serving certificate chain (PEM). Without --tls-cert/--tls-key a self-signed
    /// localhost certificate is generated, for local use only.
    #[arg(long, env = "GRAFT_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving private key (PEM).
    #[arg(long, env = "GRAFT_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (apiserver mTLS).
    #[arg(long, env = "GRAFT_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// Plain-HTTP listen address for /healthz, /readyz and /metrics.
    #[arg(long, env = "GRAFT_METRICS_LISTEN", default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Log line format: `text` for a terminal, `json` (one object per line) for log
    /// collectors.
    #[arg(long, env = "GRAFT_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Largest accepted request body.
    #[arg(long, env = "GRAFT_MAX_BODY_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Most established connections (past the TLS handshake); a connection that
    /// completes its handshake when all are taken is closed. Established connections are
    /// never closed to make room.
    #[arg(long, env = "GRAFT_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Most connections (handshaking or established) one source IP may hold; a further one
    /// is closed at once. Default: a quarter of --max-connections.
    #[arg(long, env = "GRAFT_MAX_CONNECTIONS_PER_SOURCE")]
    pub max_connections_per_source: Option<usize>,
    /// Most TLS handshakes in progress; when all are taken a new connection sheds the
    /// oldest handshake of the busiest source, and the handshake timeout shrinks to 1s as
    /// they fill up. Default: an eighth of --max-connections, at least 8.
    #[arg(long, env = "GRAFT_MAX_HANDSHAKES")]
    pub max_handshakes: Option<usize>,
    /// Time to finish in-flight requests after SIGTERM (15s, 500ms or seconds).
    #[arg(long, env = "GRAFT_SHUTDOWN_GRACE", default_value = "15s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Time a whole request may take.
    #[arg(long, env = "GRAFT_REQUEST_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Time a client has to send its request headers.
    #[arg(long, env = "GRAFT_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// Time a client has to complete the TLS handshake while fewer than half of
    /// --max-handshakes are in progress; less (down to 1s) above that.
    #[arg(long, env = "GRAFT_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,
    /// How certificate (and policy) directories are watched for changes.
    #[arg(long, env = "GRAFT_WATCH", value_enum, default_value = "inotify")]
    pub watch: WatchMode,
    /// Scan period for --watch poll.
    #[arg(long, env = "GRAFT_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// Kubeconfig for the Kubernetes API when running outside a cluster: for reading
    /// namespaces (only while a policy has a namespaceSelector or reads namespaceObject,
    /// and not with --namespaces) and for --events. Without it graft uses its pod's
    /// ServiceAccount (the in-cluster configuration).
    #[arg(long, env = "GRAFT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Serve namespace data from this file of Namespace objects (`kubectl get ns -o
    /// yaml`) instead of the Kubernetes API, for local runs. Read once at startup.
    #[arg(long, env = "GRAFT_NAMESPACES", value_name = "FILE")]
    pub namespaces: Option<PathBuf>,
    /// Parameter objects (YAML or JSON, any kind) for MutatingAdmissionPolicy bindings
    /// with a `paramRef`. Read once at startup.
    #[arg(long, env = "GRAFT_PARAMS", value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// Record Kubernetes Events on the objects graft mutates (reason Mutated) or denies
    /// (reason Denied), off the request path: needs create and patch on events
    /// (deploy/components/events).
    #[arg(long, env = "GRAFT_EVENTS")]
    pub events: bool,
    /// Send notices about reviews to the chat and HTTP sinks this file configures
    /// (DingTalk, Feishu/Lark, Slack, generic JSON webhooks), off the request path; re-read when it changes,
    /// a broken edit keeps the last good sinks (docs/operations.md, "Notices").
    #[arg(long, env = "GRAFT_NOTICES", value_name = "FILE")]
    pub notices: Option<PathBuf>,
    /// Lint the policy directory and exit.
    #[arg(long)]
    pub lint: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let args = *args.flags;
    if args.lint {
        return super::lint::lint_paths(std::slice::from_ref(&args.policies));
    }
    // Held until the server has stopped: dropping it writes out the last lines.
    let _log_writer = init_logging(args.log_format)?;
    let config = config(args);
    // Reviews are evaluated on graft's own pool (`server::evaluation_pool`); Tokio's
    // blocking pool only loads policy sets.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the Tokio runtime")?;
    match runtime.block_on(server::run(config, server::shutdown::signal())) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(StartError::Policies(findings)) => {
            for finding in &findings.0 {
                say!("{finding}");
            }
            tracing::error!(
                problems = findings.0.len(),
                "the policy set is invalid; not serving"
            );
            Ok(ExitCode::FAILURE)
        }
        Err(error) => Err(error.into()),
    }
}

fn config(args: Flags) -> Config {
    let cert = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => CertSource::Files { cert, key },
        _ => CertSource::SelfSigned,
    };
    Config {
        policies: vec![args.policies],
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        cert,
        client_ca: args.client_ca,
        limits: Limits {
            max_body_bytes: args.max_body_bytes,
            max_connections: args.max_connections.max(1),
            max_connections_per_source: args
                .max_connections_per_source
                .unwrap_or_else(|| server::config::default_per_source(args.max_connections))
                .max(1),
            max_handshakes: args
                .max_handshakes
                .unwrap_or_else(|| server::config::default_handshakes(args.max_connections))
                .max(1),
            header_read_timeout: args.header_read_timeout,
            request_timeout: args.request_timeout,
            tls_handshake_timeout: args.tls_handshake_timeout,
        },
        shutdown_grace: args.shutdown_grace,
        watch: WatchConfig {
            mode: args.watch,
            poll_interval: args.poll_interval,
            ..WatchConfig::default()
        },
        events: args
            .events
            .then(|| EventsConfig::new(args.kubeconfig.clone())),
        params: args.params,
        notices: args.notices,
        namespaces: match args.namespaces {
            Some(file) => NamespaceConfig::File(file),
            None => NamespaceConfig::Api {
                kubeconfig: args.kubeconfig,
            },
        },
    }
}

/// Logs to stdout through an in-memory buffer ([`log_writer`]); the returned flusher
/// writes out what is left when it is dropped.
fn init_logging(format: LogFormat) -> anyhow::Result<Flusher> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour codes only on a terminal: in a pod they would garble the log collector.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let (writer, flusher) = log_writer::start().context("cannot start the log's flusher")?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(ansi);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .fmt_fields(log_json::JsonMembers)
            .event_format(log_json::JsonLines)
            .try_init(),
    };
    result.map_err(|error| anyhow::anyhow!("cannot set up logging: {error}"))?;
    Ok(flusher)
}
