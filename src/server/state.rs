//! What the running server shares with its request handlers and with reloaders: the
//! active policy set, where cluster data comes from, readiness, metrics, the serving
//! certificate and the events queue.
//!
//! Every request does exactly one [`State::policies`] load, so it sees one consistent
//! snapshot; a set becomes active only through the one install path
//! (`policy_reload::PolicyReloader::install`, at start-up and on every reload), whose last
//! step is [`State::activate`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::{ArcSwap, Guard};
use tokio::sync::watch;

use super::cert_reload::ReloadStatus;
use super::cluster_data::{ClusterData, ReviewNamespaces};
use super::events::EventSink;
use super::notices::Notices;
use super::policy_reload::PolicyReloadStatus;
use super::tls::CertResolver;
use crate::metrics::{Metrics, ReloadResult};
use crate::policy::PolicySet;

/// Shared server state. Cheap to clone through `Arc<State>`.
#[derive(Debug)]
pub struct State {
    policies: ArcSwap<PolicySet>,
    cluster_data: ClusterData,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    /// The serving certificate; unset until TLS is configured.
    certs: OnceLock<Arc<CertResolver>>,
    tls_reloads: watch::Sender<ReloadStatus>,
    policy_reloads: watch::Sender<PolicyReloadStatus>,
    /// The queue of Kubernetes Events; set at startup with `--events`, never otherwise.
    events: OnceLock<EventSink>,
    /// The notice sinks; set at startup with `--notices`, never otherwise.
    notices: OnceLock<Arc<Notices>>,
}

impl State {
    pub fn new(metrics: Arc<Metrics>) -> State {
        State {
            policies: ArcSwap::from_pointee(PolicySet::empty()),
            cluster_data: ClusterData::default(),
            metrics,
            readiness: Readiness::default(),
            certs: OnceLock::new(),
            tls_reloads: watch::Sender::new(ReloadStatus::default()),
            policy_reloads: watch::Sender::new(PolicyReloadStatus::default()),
            events: OnceLock::new(),
            notices: OnceLock::new(),
        }
    }

    /// The active policy set: a request loads it once and keeps the snapshot.
    pub fn policies(&self) -> Guard<Arc<PolicySet>> {
        self.policies.load()
    }

    /// Makes `set` the active policy set for every request that starts from now on:
    /// the last step of installing one, after its warnings are logged and the cluster
    /// data it needs is prepared. Requests already running keep the snapshot they loaded.
    pub fn activate(&self, set: PolicySet) {
        let (revision, count) = (set.revision().to_string(), set.len());
        let previous = self.policies.swap(Arc::new(set));
        self.metrics.policy_set_installed(count, &revision);
        // Before the first set, the placeholder is empty: there is no previous revision.
        let first = !self.readiness.policies.swap(true, Ordering::SeqCst);
        self.policy_reloads
            .send_modify(|status| status.revision.clone_from(&revision));
        tracing::info!(
            revision,
            previous = (!first).then(|| previous.revision()),
            policies = count,
            "policy set installed"
        );
    }

    /// Whether a set has been installed yet.
    pub fn has_policies(&self) -> bool {
        self.readiness.policies.load(Ordering::SeqCst)
    }

    /// Counts a reload attempt, in the metrics and for those waiting on one.
    pub(super) fn record_policy_reload(&self, result: ReloadResult) {
        self.metrics.policy_reloaded(result);
        self.policy_reloads.send_modify(|status| match result {
            ReloadResult::Success => status.successes += 1,
            ReloadResult::Unchanged => status.unchanged += 1,
            ReloadResult::Error => status.failures += 1,
        });
    }

    /// Reload attempts of the policy set and the active revision, to wait on.
    pub fn policy_reloads(&self) -> watch::Receiver<PolicyReloadStatus> {
        self.policy_reloads.subscribe()
    }

    /// Reloads of the serving certificate, to wait on.
    pub fn tls_reloads(&self) -> watch::Receiver<ReloadStatus> {
        self.tls_reloads.subscribe()
    }

    /// Where the certificate reloader reports.
    pub(super) fn tls_reload_status(&self) -> watch::Sender<ReloadStatus> {
        self.tls_reloads.clone()
    }

    /// Where cluster data comes from.
    pub fn cluster_data(&self) -> &ClusterData {
        &self.cluster_data
    }

    /// The namespace data a review of `set` can see.
    pub fn review_namespaces(&self, set: &PolicySet) -> ReviewNamespaces {
        self.cluster_data.for_review(set)
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The events queue, with `--events`.
    pub fn events(&self) -> Option<&EventSink> {
        self.events.get()
    }

    /// The notice sinks, with `--notices`.
    pub fn notices(&self) -> Option<&Arc<Notices>> {
        self.notices.get()
    }

    pub(super) fn set_notices(&self, notices: Arc<Notices>) {
        let _ = self.notices.set(notices);
    }

    pub(super) fn set_events(&self, sink: EventSink) {
        let _ = self.events.set(sink);
    }

    /// The serving certificate, once TLS is configured.
    pub fn certs(&self) -> Option<&Arc<CertResolver>> {
        self.certs.get()
    }

    /// TLS is configured with `resolver`: the server may report ready.
    pub fn tls_ready(&self, resolver: Arc<CertResolver>) {
        let _ = self.certs.set(resolver);
        self.readiness.tls.store(true, Ordering::SeqCst);
    }

    /// The server stopped accepting: `/readyz` fails from now on.
    pub(super) fn start_draining(&self) {
        self.readiness.draining.store(true, Ordering::SeqCst);
    }

    /// What `/readyz` reports: a set installed, TLS ready, not draining, and the cluster
    /// data the active set needs at hand.
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready() && self.cluster_data.is_ready_for(&self.policies.load())
    }
}

/// `/readyz` is 200 only when policies are loaded, TLS is ready and the server is not
/// draining, so a rolling update takes a pod out of the Service before it stops.
#[derive(Debug, Default)]
struct Readiness {
    policies: AtomicBool,
    tls: AtomicBool,
    draining: AtomicBool,
}

impl Readiness {
    fn is_ready(&self) -> bool {
        self.policies.load(Ordering::SeqCst)
            && self.tls.load(Ordering::SeqCst)
            && !self.draining.load(Ordering::SeqCst)
    }
}
