//! What the running server shares with its request handlers and with reloaders: the
//! active policy set, the namespace cache, readiness, metrics, the serving certificate and
//! the events queue.
//!
//! A policy reloader plugs in with [`State::install_policies`]: build and validate the new
//! set off the request path, then install it; every request does exactly one `load` of
//! [`State::policies`], so it sees one consistent snapshot.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};

use super::cert_reload::ReloadStatus;
use super::events::EventSink;
use super::namespace_cache::NamespaceCache;
use super::namespace_supply;
use super::policy_reload::PolicyReloadStatus;
use super::tls::CertResolver;
use crate::metrics::Metrics;
use crate::namespaces::{NamespaceData, NamespaceSource, NoNamespaces};
use crate::policy::PolicySet;

/// Shared server state. Cheap to clone through `Arc<State>`.
#[derive(Debug)]
pub struct State {
    /// The active, immutable policy set.
    pub policies: Arc<ArcSwap<PolicySet>>,
    /// The namespace cache, present while the active set needs namespace data
    /// (started and stopped by [`super::namespace_supply::NamespaceSupply`]).
    pub namespace_cache: ArcSwapOption<NamespaceCache>,
    /// Namespace data that does not come from the API, which replaces the cache when
    /// set: the namespaces of `--namespaces FILE`, or none at all when graft runs outside
    /// a cluster with neither that nor `--kubeconfig`.
    pub fixed_namespaces: std::sync::OnceLock<Arc<dyn NamespaceSource>>,
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
    /// The serving certificate; `None` until TLS is configured.
    pub certs: std::sync::OnceLock<Arc<CertResolver>>,
    /// Counts of certificate reloads, for anyone who needs to wait for one (tests, probes).
    pub tls_reloads: tokio::sync::watch::Sender<ReloadStatus>,
    /// Counts of policy reloads and the active revision, likewise.
    pub policy_reloads: tokio::sync::watch::Sender<PolicyReloadStatus>,
    /// The queue of Kubernetes Events; set at startup with `--events`, never otherwise.
    pub events: std::sync::OnceLock<EventSink>,
}

impl State {
    pub fn new(metrics: Arc<Metrics>) -> State {
        State {
            policies: Arc::new(ArcSwap::from_pointee(PolicySet::empty())),
            namespace_cache: ArcSwapOption::empty(),
            fixed_namespaces: std::sync::OnceLock::new(),
            metrics,
            readiness: Readiness::default(),
            certs: std::sync::OnceLock::new(),
            tls_reloads: tokio::sync::watch::Sender::new(ReloadStatus::default()),
            policy_reloads: tokio::sync::watch::Sender::new(PolicyReloadStatus::default()),
            events: std::sync::OnceLock::new(),
        }
    }

    /// Makes `set` the active policy set for every request that starts from now on.
    /// Requests already running keep the snapshot they loaded.
    pub fn install_policies(&self, set: PolicySet) {
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

    /// What `/readyz` reports: [`Readiness`], and, while the active set needs namespace
    /// data, a namespace cache that has listed the namespaces.
    pub fn is_ready(&self) -> bool {
        self.readiness.is_ready()
            && (!namespace_supply::needed_by(&self.policies.load())
                || self.fixed_namespaces.get().is_some()
                || self
                    .namespace_cache
                    .load()
                    .as_ref()
                    .is_some_and(|cache| cache.is_synced()))
    }

    /// The namespace data a review of `set` can see: the cache when `set` needs it.
    pub fn namespaces_for(&self, set: &PolicySet) -> ReviewNamespaces {
        if !namespace_supply::needed_by(set) {
            return ReviewNamespaces::NotNeeded;
        }
        if let Some(fixed) = self.fixed_namespaces.get() {
            return ReviewNamespaces::Fixed(Arc::clone(fixed));
        }
        match self.namespace_cache.load_full() {
            Some(cache) => ReviewNamespaces::Cache(cache),
            // Only in the instant a reload swaps sets; the policy then fails with the hint.
            None => ReviewNamespaces::NotNeeded,
        }
    }
}

/// The namespace source of one review. Holding the cache keeps it alive until the review
/// ends, even when a reload stops it meanwhile.
#[derive(Debug)]
pub enum ReviewNamespaces {
    NotNeeded,
    Cache(Arc<NamespaceCache>),
    Fixed(Arc<dyn NamespaceSource>),
}

impl NamespaceSource for ReviewNamespaces {
    fn namespace_data(&self, name: &str) -> NamespaceData {
        match self {
            ReviewNamespaces::NotNeeded => NoNamespaces {
                hint: "graft serve reads namespaces only while the policy set has a \
                       namespaceSelector or reads namespaceObject",
            }
            .namespace_data(name),
            ReviewNamespaces::Cache(cache) => cache.namespace_data(name),
            ReviewNamespaces::Fixed(map) => map.namespace_data(name),
        }
    }
}

/// `/readyz` is 200 only when policies are loaded, TLS is ready and the server is not
/// draining, so a rolling update takes a pod out of the Service before it stops.
#[derive(Debug, Default)]
pub struct Readiness {
    pub policies: AtomicBool,
    pub tls: AtomicBool,
    pub draining: AtomicBool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.policies.load(Ordering::SeqCst)
            && self.tls.load(Ordering::SeqCst)
            && !self.draining.load(Ordering::SeqCst)
    }
}
