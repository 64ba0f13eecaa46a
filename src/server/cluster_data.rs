//! Where the server's reviews get cluster data from: one slot, read by every review and
//! changed only by [`super::namespace_supply::NamespaceSupply`] around an install.
//!
//! The data is the namespaces' labels (for `namespaceSelector` and
//! `namespaceObject`): fixed Namespace objects (`--namespaces FILE`, or none at all
//! outside a cluster, with a hint saying so), or the namespace cache while the active set
//! needs it.

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::namespace_cache::NamespaceCache;
use crate::namespaces::{NamespaceData, NamespaceSource, NoNamespaces};
use crate::params::{NoParams, ParamObjects, ParamSource};
use crate::policy::PolicySet;

/// Why a review of a set that needs no namespace data has none.
const NOT_NEEDED: &str = "graft serve reads namespaces only while the policy set has a \
     namespaceSelector or reads namespaceObject";

/// The one slot cluster data comes from.
#[derive(Debug)]
pub struct ClusterData {
    source: ArcSwap<Source>,
    /// The parameter objects of MutatingAdmissionPolicy bindings: the `--params` file,
    /// set once at start-up; none without it.
    params: OnceLock<ParamObjects>,
}

/// What the slot holds.
#[derive(Debug)]
enum Source {
    /// Nothing yet: the active set needs no namespace data, or the cache is starting.
    Nothing,
    /// Namespace data that does not come from a watch, set once at start-up and never
    /// replaced: the `--namespaces` file, or none outside a cluster.
    Fixed(Arc<dyn NamespaceSource>),
    /// The namespace cache, while the active set needs it.
    Watched(Arc<NamespaceCache>),
}

impl Default for ClusterData {
    fn default() -> Self {
        ClusterData {
            source: ArcSwap::from_pointee(Source::Nothing),
            params: OnceLock::new(),
        }
    }
}

impl ClusterData {
    /// Serves `params` for good; false when parameter objects were set before.
    pub(super) fn fix_params(&self, params: ParamObjects) -> bool {
        self.params.set(params).is_ok()
    }

    /// The parameter objects reviews see.
    pub fn params(&self) -> &dyn ParamSource {
        match self.params.get() {
            Some(params) => params,
            None => &NoParams,
        }
    }

    /// Serves `namespaces` for good: no cache is started from now on.
    pub(super) fn fix(&self, namespaces: Arc<dyn NamespaceSource>) {
        self.source.store(Arc::new(Source::Fixed(namespaces)));
    }

    /// Whether a namespace source serves without a cache (fixed), or a cache runs.
    pub(super) fn is_supplied(&self) -> bool {
        !matches!(**self.source.load(), Source::Nothing)
    }

    /// Serves `cache`, unless fixed namespaces are served.
    pub(super) fn watch(&self, cache: Arc<NamespaceCache>) {
        self.source.rcu(|source| match &**source {
            Source::Fixed(_) => Arc::clone(source),
            _ => Arc::new(Source::Watched(Arc::clone(&cache))),
        });
    }

    /// Stops serving the namespace cache; whether one was served. Reviews that already
    /// hold it finish with it; its watch stops when the last of them drops it.
    pub(super) fn stop_watching(&self) -> bool {
        let previous = self.source.rcu(|source| match &**source {
            Source::Watched(_) => Arc::new(Source::Nothing),
            _ => Arc::clone(source),
        });
        matches!(*previous, Source::Watched(_))
    }

    /// Whether the namespace cache is running.
    pub fn is_watching(&self) -> bool {
        matches!(**self.source.load(), Source::Watched(_))
    }

    /// Whether reviews of `set` have the data it needs: it needs none, the namespaces
    /// are fixed, or the cache has listed them.
    pub fn is_ready_for(&self, set: &PolicySet) -> bool {
        if !set.needs_namespaces() {
            return true;
        }
        match &**self.source.load() {
            Source::Nothing => false,
            Source::Fixed(_) => true,
            Source::Watched(cache) => cache.is_synced(),
        }
    }

    /// The namespace data a review of `set` can see: nothing unless `set` needs it.
    pub fn for_review(&self, set: &PolicySet) -> ReviewNamespaces {
        if !set.needs_namespaces() {
            return ReviewNamespaces::NotNeeded;
        }
        match &**self.source.load() {
            Source::Fixed(fixed) => ReviewNamespaces::Fixed(Arc::clone(fixed)),
            Source::Watched(cache) => ReviewNamespaces::Cache(Arc::clone(cache)),
            // Only in the instant a reload swaps sets; the policy then fails with the hint.
            Source::Nothing => ReviewNamespaces::NotNeeded,
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
            ReviewNamespaces::NotNeeded => NoNamespaces { hint: NOT_NEEDED }.namespace_data(name),
            ReviewNamespaces::Cache(cache) => cache.namespace_data(name),
            ReviewNamespaces::Fixed(map) => map.namespace_data(name),
        }
    }
}
