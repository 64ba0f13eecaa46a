//! Server configuration: one plain struct built by `graft serve` (or a test), so the
//! server never reads flags or the environment itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::watch::WatchConfig;

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertSource {
    /// PEM files, reloaded when their directories change.
    Files { cert: PathBuf, key: PathBuf },
    /// An in-memory CA and localhost certificate, for local use only.
    SelfSigned,
}

/// Protection against slow, large or numerous requests.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_body_bytes: usize,
    /// Established (past the TLS handshake) connections at once
    /// (`server::connection_slots`).
    pub max_connections: usize,
    /// Connections, handshaking or established, one source IP may hold.
    pub max_connections_per_source: usize,
    /// TLS handshakes in progress at once; when full the oldest is shed.
    pub max_handshakes: usize,
    /// Time a client has to send the request headers (HTTP/1).
    pub header_read_timeout: Duration,
    /// Time for a whole request: body read, evaluation and response.
    pub request_timeout: Duration,
    /// Time for a TLS handshake while the handshake budget is under half full; less
    /// above that (`connection_slots::handshake_timeout`).
    pub tls_handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 * 1024 * 1024,
            max_connections: 1024,
            max_connections_per_source: default_per_source(1024),
            max_handshakes: default_handshakes(1024),
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            tls_handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// `--max-connections-per-source` when not given: a quarter of the connection slots, so
/// at least four sources fill them.
pub fn default_per_source(max_connections: usize) -> usize {
    (max_connections / 4).max(1)
}

/// `--max-handshakes` when not given: an eighth of the connection slots, at least 8. A
/// handshake takes a few milliseconds, so this many at once is a burst far beyond what
/// apiservers open; anything slower is shed first.
pub fn default_handshakes(max_connections: usize) -> usize {
    (max_connections / 8).max(8)
}

#[derive(Debug, Clone)]
pub struct Config {
    pub policies: Vec<PathBuf>,
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub cert: CertSource,
    /// When set, clients must present a certificate signed by one of these CAs.
    pub client_ca: Option<PathBuf>,
    pub limits: Limits,
    pub shutdown_grace: Duration,
    /// How certificate (and later policy) directories are watched.
    pub watch: WatchConfig,
    /// Where namespace data comes from while the policy set needs it.
    pub namespaces: NamespaceConfig,
    /// Parameter objects for MutatingAdmissionPolicy bindings with a `paramRef`, read
    /// once at start-up (`--params`); `None`: bindings find no parameter objects.
    pub params: Option<PathBuf>,
    /// Kubernetes Events about the reviews (`--events`); `None`: no Events, and no
    /// client for them.
    pub events: Option<EventsConfig>,
    /// The notice-sinks file (`--notices`); `None`: no notices.
    pub notices: Option<PathBuf>,
}

/// Where and how fast graft records Kubernetes Events.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsConfig {
    /// `None`: the in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
    /// Notices waiting for the events task; a review that finds the queue full drops
    /// its notice rather than wait.
    pub queue: usize,
    /// Writes to the Events API per second, on average.
    pub per_second: f64,
    /// Writes allowed at once after a quiet spell.
    pub burst: u32,
}

impl EventsConfig {
    /// The defaults, writing through the in-cluster configuration or `kubeconfig`.
    pub fn new(kubeconfig: Option<PathBuf>) -> EventsConfig {
        EventsConfig {
            kubeconfig,
            queue: 1024,
            per_second: 10.0,
            burst: 25,
        }
    }
}

/// Where the server gets the namespace data that `namespaceSelector` and
/// `namespaceObject` read. Consulted only while the policy set needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceConfig {
    /// A cache fed by list + watch of the Kubernetes API: the in-cluster configuration,
    /// or the current context of `kubeconfig`.
    Api { kubeconfig: Option<PathBuf> },
    /// A fixed set of Namespace objects read from this file at startup, as the offline
    /// commands' `--namespaces` (local runs without a cluster).
    File(PathBuf),
}

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig::Api { kubeconfig: None }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid duration {0:?}: use a number of seconds or a value like 15s or 500ms")]
pub struct BadDuration(pub String);

/// Parses `15s`, `500ms`, `2m` or plain seconds (`15`, `0.5`).
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    let trimmed = text.trim();
    let bad = || BadDuration(text.to_string());
    let (number, scale) = if let Some(n) = trimmed.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = trimmed.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = trimmed.strip_suffix('m') {
        (n, 60.0)
    } else {
        (trimmed, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    Duration::try_from_secs_f64(value * scale).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let check = |text: &str, expect: Option<Duration>| {
            assert_eq!(parse_duration(text).ok(), expect, "{text}");
        };
        check("15s", Some(Duration::from_secs(15)));
        check("500ms", Some(Duration::from_millis(500)));
        check("15", Some(Duration::from_secs(15)));
        check("0.25", Some(Duration::from_millis(250)));
        check("2m", Some(Duration::from_secs(120)));
        check("-1s", None);
        check("soon", None);
        check("", None);
    }
}
