//! Prometheus metrics: one [`Metrics`] value owns every family and the registry that
//! exposes them, so a new metric is one field plus one `register` line in [`Metrics::new`].
//!
//! The families are updated through small methods named after what happened (a review
//! was answered, a certificate was reloaded), so call sites never spell label values
//! twice and a reloader can reuse them ([`Metrics::policy_set_installed`]).
//!
//! Label cardinality is bounded on purpose: `operation`, `resource` and `decision` come
//! from small Kubernetes vocabularies (closed by `server::labels`, anything else is
//! `other`), `policy` from the loaded set, `reason` and `result` from fixed strings in
//! this crate. Never label by object name or uid.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::encode`] output (OpenMetrics text, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    resource: String,
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    policy: String,
    /// `MutationPolicy` or `MutatingAdmissionPolicy`.
    dialect: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkResultLabels {
    sink: String,
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    revision: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

/// Why a request to `/mutate` was not answered with a review (`graft_admission_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReason {
    NotFound,
    Method,
    ContentType,
    TooLarge,
    BadReview,
    BodyRead,
    Timeout,
    Panic,
    /// A bug graft reports rather than answer with a default (`admission::InternalError`).
    Internal,
}

impl ErrorReason {
    pub const ALL: [ErrorReason; 9] = [
        ErrorReason::NotFound,
        ErrorReason::Method,
        ErrorReason::ContentType,
        ErrorReason::TooLarge,
        ErrorReason::BadReview,
        ErrorReason::BodyRead,
        ErrorReason::Timeout,
        ErrorReason::Panic,
        ErrorReason::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorReason::NotFound => "not_found",
            ErrorReason::Method => "method",
            ErrorReason::ContentType => "content_type",
            ErrorReason::TooLarge => "too_large",
            ErrorReason::BadReview => "bad_review",
            ErrorReason::BodyRead => "body_read",
            ErrorReason::Timeout => "timeout",
            ErrorReason::Panic => "panic",
            ErrorReason::Internal => "internal",
        }
    }
}

/// Why the admission listener closed a connection before it could carry a request
/// (`graft_connections_shed_total`; `server::connection_slots` decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShedReason {
    /// The handshake budget was full and a newer connection took this one's place.
    HandshakeBudget,
    /// The TLS handshake did not finish in time (the time shrinks as the budget fills).
    HandshakeTimeout,
    /// Its source address already held `--max-connections-per-source` connections.
    PerSource,
    /// The handshake finished but every established slot (`--max-connections`) was taken.
    Full,
}

impl ShedReason {
    pub const ALL: [ShedReason; 4] = [
        ShedReason::HandshakeBudget,
        ShedReason::HandshakeTimeout,
        ShedReason::PerSource,
        ShedReason::Full,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ShedReason::HandshakeBudget => "handshake_budget",
            ShedReason::HandshakeTimeout => "handshake_timeout",
            ShedReason::PerSource => "per_source",
            ShedReason::Full => "full",
        }
    }

    /// Its position in [`ShedReason::ALL`].
    pub fn index(self) -> usize {
        match self {
            ShedReason::HandshakeBudget => 0,
            ShedReason::HandshakeTimeout => 1,
            ShedReason::PerSource => 2,
            ShedReason::Full => 3,
        }
    }
}

/// Outcome of one reload attempt (of the certificate or of the policy set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    /// Something new was installed.
    Success,
    /// The files were valid and identical to what is running: nothing to do.
    Unchanged,
    /// The files could not be read or were invalid; the running one is kept.
    Error,
}

impl ReloadResult {
    const ALL: [ReloadResult; 3] = [
        ReloadResult::Success,
        ReloadResult::Unchanged,
        ReloadResult::Error,
    ];

    fn as_str(self) -> &'static str {
        match self {
            ReloadResult::Success => "success",
            ReloadResult::Unchanged => "unchanged",
            ReloadResult::Error => "error",
        }
    }
}

/// What became of one notice offered to a sink (`graft_notices_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeResult {
    /// Delivered: the sink answered 2xx (and DingTalk `errcode` 0).
    Sent,
    /// A repeat within the sink's grouping window, counted and not sent.
    Grouped,
    /// Never sent: the sink's queue was full, so the review did not wait.
    Dropped,
    /// The sink refused, errored or did not answer within its timeout.
    Failed,
}

impl NoticeResult {
    pub const ALL: [NoticeResult; 4] = [
        NoticeResult::Sent,
        NoticeResult::Grouped,
        NoticeResult::Dropped,
        NoticeResult::Failed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            NoticeResult::Sent => "sent",
            NoticeResult::Grouped => "grouped",
            NoticeResult::Dropped => "dropped",
            NoticeResult::Failed => "failed",
        }
    }
}

/// What became of one Kubernetes Event graft meant to record (`graft_events_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventResult {
    /// Written to the API: an Event created, or a series' count patched.
    Sent,
    /// A repeat folded into its series' count, written later with the series.
    Aggregated,
    /// Never recorded: the events queue was full, so the review did not wait.
    Dropped,
    /// The API refused or did not answer the write.
    Failed,
}

impl EventResult {
    const ALL: [EventResult; 4] = [
        EventResult::Sent,
        EventResult::Aggregated,
        EventResult::Dropped,
        EventResult::Failed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            EventResult::Sent => "sent",
            EventResult::Aggregated => "aggregated",
            EventResult::Dropped => "dropped",
            EventResult::Failed => "failed",
        }
    }
}

/// Every metric graft exports, and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Family<DecisionLabels, Histogram, fn() -> Histogram>,
    policy_evaluations: Family<PolicyLabels, Counter>,
    policies_loaded: Gauge,
    policy_set_info: Family<RevisionLabels, Gauge>,
    /// The revision labelled in `policy_set_info`, so a swap can remove its series.
    installed_revision: std::sync::Mutex<Option<String>>,
    policy_reloads: Family<ResultLabels, Counter>,
    policy_last_success: Gauge<f64, AtomicU64>,
    errors: Family<ReasonLabels, Counter>,
    tls_reloads: Family<ResultLabels, Counter>,
    tls_expiry: Gauge<f64, AtomicU64>,
    namespace_last_sync: Gauge<f64, AtomicU64>,
    namespace_watch_restarts: Counter,
    namespaces_cached: Gauge,
    connections: Gauge,
    handshakes: Gauge,
    shed: Family<ReasonLabels, Counter>,
    events: Family<ResultLabels, Counter>,
    notices: Family<SinkResultLabels, Counter>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let duration = Family::new_with_constructor(duration_histogram as fn() -> Histogram);
        let policy_evaluations = Family::<PolicyLabels, Counter>::default();
        let policies_loaded = Gauge::default();
        let policy_set_info = Family::<RevisionLabels, Gauge>::default();
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        let policy_last_success = Gauge::<f64, AtomicU64>::default();
        let errors = Family::<ReasonLabels, Counter>::default();
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        let tls_expiry = Gauge::<f64, AtomicU64>::default();
        let namespace_last_sync = Gauge::<f64, AtomicU64>::default();
        let namespace_watch_restarts = Counter::default();
        let namespaces_cached = Gauge::default();
        let connections = Gauge::default();
        let handshakes = Gauge::default();
        let shed = Family::<ReasonLabels, Counter>::default();
        let events = Family::<ResultLabels, Counter>::default();
        let build = Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]);

        // prometheus-client appends `_total` to counters and `_info` to info metrics.
        registry.register(
            "graft_admission_requests",
            "AdmissionReviews answered, by operation, resource and decision",
            requests.clone(),
        );
        registry.register(
            "graft_admission_duration_seconds",
            "Time from request headers to response, for answered reviews, by decision",
            duration.clone(),
        );
        registry.register(
            "graft_policy_evaluations",
            "Matching policies evaluated, by policy and result",
            policy_evaluations.clone(),
        );
        registry.register(
            "graft_policies_loaded",
            "Policies in the active policy set",
            policies_loaded.clone(),
        );
        // A gauge rather than an Info metric: Info is fixed at registration, and the
        // revision label must follow every swap.
        registry.register(
            "graft_policy_set_info",
            "The revision (content hash) of the active policy set; always 1",
            policy_set_info.clone(),
        );
        registry.register(
            "graft_policy_reloads",
            "Policy set reloads, by result (success, unchanged, error)",
            policy_reloads.clone(),
        );
        registry.register(
            "graft_policy_last_reload_success_timestamp_seconds",
            "When the policy files were last read and found valid, as a Unix timestamp",
            policy_last_success.clone(),
        );
        registry.register(
            "graft_admission_errors",
            "Requests to the admission server answered with an error, by reason",
            errors.clone(),
        );
        registry.register(
            "graft_tls_reloads",
            "Serving certificate reloads, by result",
            tls_reloads.clone(),
        );
        registry.register(
            "graft_tls_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate, as a Unix timestamp",
            tls_expiry.clone(),
        );
        // Registered whether or not the policy set needs namespace data, so alerts on
        // them have a series to read (0 before the first sync).
        registry.register(
            "graft_namespace_cache_last_sync_timestamp_seconds",
            "When the namespace cache last listed the namespaces or received a watch event, \
             as a Unix timestamp; 0 before the first",
            namespace_last_sync.clone(),
        );
        registry.register(
            "graft_namespace_cache_watch_restarts",
            "Times the namespace watch failed and was restarted (with backoff)",
            namespace_watch_restarts.clone(),
        );
        registry.register(
            "graft_namespace_cache_namespaces",
            "Namespaces in the namespace cache",
            namespaces_cached.clone(),
        );
        registry.register(
            "graft_admission_connections",
            "Open connections on the admission listener, in their TLS handshake or \
             established (established ones are limited by --max-connections)",
            connections.clone(),
        );
        registry.register(
            "graft_admission_handshakes",
            "Connections in their TLS handshake on the admission listener (limited by \
             --max-handshakes)",
            handshakes.clone(),
        );
        registry.register(
            "graft_connections_shed",
            "Admission connections closed before carrying a request, by reason: \
             handshake_budget, handshake_timeout, per_source, full",
            shed.clone(),
        );
        // Registered with or without --events, like the namespace cache's metrics.
        registry.register(
            "graft_events",
            "Kubernetes Events (serve --events), by result: sent, aggregated into a \
             series, dropped (queue full) or failed",
            events.clone(),
        );
        let notices = Family::<SinkResultLabels, Counter>::default();
        registry.register(
            "graft_notices",
            "Notices to chat and HTTP sinks (serve --notices), by sink and result: sent, \
             grouped (a repeat), dropped (queue full) or failed",
            notices.clone(),
        );
        registry.register("graft_build", "Build information", build);

        // Counters of closed label sets start at zero, so the first error is an increase
        // Prometheus can see (a series that appears at 1 has no increase to rate).
        for reason in ErrorReason::ALL {
            let _ = errors.get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            });
        }
        for result in ReloadResult::ALL {
            let labels = ResultLabels {
                result: result.as_str(),
            };
            let _ = policy_reloads.get_or_create(&labels);
            let _ = tls_reloads.get_or_create(&labels);
        }
        for reason in ShedReason::ALL {
            let _ = shed.get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            });
        }
        for result in EventResult::ALL {
            let _ = events.get_or_create(&ResultLabels {
                result: result.as_str(),
            });
        }

        Metrics {
            registry,
            requests,
            duration,
            policy_evaluations,
            policies_loaded,
            policy_set_info,
            installed_revision: std::sync::Mutex::new(None),
            policy_reloads,
            policy_last_success,
            errors,
            tls_reloads,
            tls_expiry,
            namespace_last_sync,
            namespace_watch_restarts,
            namespaces_cached,
            connections,
            handshakes,
            shed,
            events,
            notices,
        }
    }

    /// Counts one notice for `sink`.
    pub fn notice(&self, sink: &str, result: NoticeResult) {
        self.notices
            .get_or_create(&SinkResultLabels {
                sink: sink.to_string(),
                result: result.as_str(),
            })
            .inc();
    }

    /// Makes `sink`'s counter for `result` exist at zero, so its first increase shows.
    pub fn notice_touch(&self, sink: &str, result: NoticeResult) {
        let _ = self.notices.get_or_create(&SinkResultLabels {
            sink: sink.to_string(),
            result: result.as_str(),
        });
    }

    pub fn event(&self, result: EventResult) {
        self.events
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    /// Records one answered review.
    pub fn review_answered(
        &self,
        operation: &'static str,
        resource: &str,
        decision: &'static str,
        seconds: f64,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                operation,
                resource: resource.to_string(),
                decision,
            })
            .inc();
        self.duration
            .get_or_create(&DecisionLabels { decision })
            .observe(seconds);
    }

    pub fn policy_evaluated(&self, policy: &str, dialect: &'static str, result: &'static str) {
        self.policy_evaluations
            .get_or_create(&PolicyLabels {
                policy: policy.to_string(),
                dialect,
                result,
            })
            .inc();
    }

    /// Records that a policy set became active (at startup, and by the reloader): its
    /// size, its revision (replacing the previous one's series) and the time.
    pub fn policy_set_installed(&self, policies: usize, revision: &str) {
        self.policies_loaded
            .set(i64::try_from(policies).unwrap_or(i64::MAX));
        // A poisoned lock only means another thread panicked mid-update; the value is
        // still a revision string.
        let mut installed = self
            .installed_revision
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The new series first, so a scrape never sees no revision at all.
        self.policy_set_info
            .get_or_create(&RevisionLabels {
                revision: revision.to_string(),
            })
            .set(1);
        if let Some(old) = installed.replace(revision.to_string())
            && old != revision
        {
            self.policy_set_info
                .remove(&RevisionLabels { revision: old });
        }
        drop(installed);
        self.policy_files_valid();
    }

    /// Counts one policy reload attempt; a valid set (installed or unchanged) also
    /// moves the last-success timestamp.
    pub fn policy_reloaded(&self, result: ReloadResult) {
        self.policy_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
        if result == ReloadResult::Unchanged {
            self.policy_files_valid();
        }
    }

    fn policy_files_valid(&self) {
        self.policy_last_success.set(unix_now());
    }

    /// Records a successful list or watch event of the namespace cache, and its size.
    pub fn namespace_cache_synced(&self, namespaces: usize) {
        self.namespace_last_sync.set(unix_now());
        self.namespaces_cached
            .set(i64::try_from(namespaces).unwrap_or(i64::MAX));
    }

    /// Counts one failure of the namespace watch (it restarts after a backoff).
    pub fn namespace_watch_restarted(&self) {
        self.namespace_watch_restarts.inc();
    }

    pub fn admission_error(&self, reason: ErrorReason) {
        self.errors
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            })
            .inc();
    }

    pub fn tls_reloaded(&self, result: ReloadResult) {
        self.tls_reloads
            .get_or_create(&ResultLabels {
                result: result.as_str(),
            })
            .inc();
    }

    pub fn tls_certificate_expiry(&self, unix_seconds: i64) {
        // Timestamps fit an f64 exactly for the next few million years.
        #[allow(clippy::cast_precision_loss)]
        self.tls_expiry.set(unix_seconds as f64);
    }

    /// Counts an open admission connection until the returned guard is dropped.
    pub fn connection_opened(&self) -> OpenConnection {
        self.connections.inc();
        OpenConnection(self.connections.clone())
    }

    /// Counts one connection closed by `server::connection_slots`.
    pub fn connection_shed(&self, reason: ShedReason) {
        self.shed
            .get_or_create(&ReasonLabels {
                reason: reason.as_str().to_string(),
            })
            .inc();
    }

    /// The number of connections in their TLS handshake.
    pub fn handshakes_in_progress(&self, count: usize) {
        self.handshakes
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Seconds since the Unix epoch, as Prometheus timestamps are given.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs_f64())
        .unwrap_or_default()
}

/// Admission must answer within the webhook timeout (1-30 s); most answers take well
/// under a millisecond, so the buckets span 100 µs to ~3 s.
fn duration_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 2.5, 12,
    ))
}

/// One open connection in `graft_admission_connections`; dropping it closes the count.
#[derive(Debug)]
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_documented_names() {
        let metrics = Metrics::new();
        metrics.review_answered("CREATE", "pods", "allowed", 0.001);
        metrics.policy_evaluated("p", "MutatingAdmissionPolicy", "applied");
        metrics.admission_error(ErrorReason::Panic);
        metrics.tls_reloaded(ReloadResult::Error);
        metrics.policy_set_installed(3, "sha256:aaaaaaaaaaaa");
        metrics.policy_set_installed(3, "sha256:bbbbbbbbbbbb");
        metrics.policy_reloaded(ReloadResult::Unchanged);
        metrics.connection_shed(ShedReason::Full);
        let text = metrics.encode();
        assert!(
            !text.contains("sha256:aaaaaaaaaaaa"),
            "old revision kept:\n{text}"
        );
        for needle in [
            "graft_admission_requests_total{operation=\"CREATE\",resource=\"pods\",decision=\"allowed\"} 1",
            "graft_admission_duration_seconds_count{decision=\"allowed\"} 1",
            "graft_policy_evaluations_total{policy=\"p\",dialect=\"MutatingAdmissionPolicy\",result=\"applied\"} 1",
            "graft_admission_errors_total{reason=\"panic\"} 1",
            "graft_tls_reloads_total{result=\"error\"} 1",
            "graft_policies_loaded 3",
            "graft_policy_set_info{revision=\"sha256:bbbbbbbbbbbb\"} 1",
            "graft_policy_reloads_total{result=\"unchanged\"} 1",
            "graft_policy_last_reload_success_timestamp_seconds",
            "graft_tls_certificate_expiry_timestamp_seconds",
            "graft_build_info{version=",
            "graft_namespace_cache_last_sync_timestamp_seconds 0",
            "graft_namespace_cache_watch_restarts_total 0",
            "graft_namespace_cache_namespaces 0",
            "graft_admission_connections 0",
            "graft_admission_handshakes 0",
            "graft_connections_shed_total{reason=\"handshake_budget\"} 0",
            "graft_connections_shed_total{reason=\"handshake_timeout\"} 0",
            "graft_connections_shed_total{reason=\"per_source\"} 0",
            "graft_connections_shed_total{reason=\"full\"} 1",
            "graft_admission_errors_total{reason=\"timeout\"} 0",
            "graft_policy_reloads_total{result=\"error\"} 0",
            "graft_tls_reloads_total{result=\"success\"} 0",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn namespace_cache_metrics_move() {
        let metrics = Metrics::new();
        metrics.namespace_cache_synced(7);
        metrics.namespace_watch_restarted();
        let text = metrics.encode();
        assert!(
            text.contains("graft_namespace_cache_watch_restarts_total 1"),
            "{text}"
        );
        assert!(
            text.contains("graft_namespace_cache_namespaces 7"),
            "{text}"
        );
        assert!(
            !text.contains("graft_namespace_cache_last_sync_timestamp_seconds 0.0"),
            "{text}"
        );
    }
}
