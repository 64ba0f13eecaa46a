//! A read-only cache of Namespace metadata, kept current by list + watch.
//!
//! Policies that match on a namespace's labels or read `namespaceObject` need more than
//! the namespace's name, which is all an AdmissionReview carries. Asking the API server
//! per review would put its latency and availability on the admission path, so the
//! server keeps every namespace's labels and annotations in memory instead, fed by
//! kube-runtime's watcher over metadata-only requests (no spec or status is transferred).
//!
//! - The first complete list marks the cache synced; until then `/readyz` is 503 and a
//!   lookup answers [`NamespaceData::Unavailable`].
//! - A change arrives as a watch event and is visible to the next review.
//! - A namespace the cache does not hold is read once from the API (a `get`, bounded by
//!   [`FETCH_TIMEOUT`]) before it counts as not found: a namespace created a moment
//!   before its first pod may not have arrived by watch yet, as the API server's own
//!   webhook namespace matching allows for.
//! - When the watch fails, the cache keeps serving the last state it knew, the failure is
//!   logged and counted (`graft_namespace_cache_watch_restarts_total`), and the watcher
//!   resumes (or lists again) after kube-runtime's default backoff. A re-list replaces
//!   the contents at once, so namespaces deleted meanwhile disappear too.
//!
//! The watch runs on its own task, which stops when the last [`NamespaceCache`] handle
//! is dropped or the server shuts down.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace as KubeNamespace;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt as _, metadata_watcher, watcher};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::namespaces::{Namespace, NamespaceData, NamespaceSource};

/// What [`NamespaceData::NotFound`] names as the source.
pub const SOURCE: &str = "the namespace cache (list + watch of the Kubernetes API)";

/// How long a review waits for the API to answer about a namespace the cache does not
/// hold.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// The namespaces graft has seen, and the task that keeps them current.
#[derive(Debug)]
pub struct NamespaceCache {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    /// For reading one namespace the cache does not hold (yet).
    api: kube::Api<KubeNamespace>,
    runtime: tokio::runtime::Handle,
}

#[derive(Debug)]
struct Shared {
    namespaces: RwLock<HashMap<String, Arc<Namespace>>>,
    /// Flips to true at the end of the first complete list and stays true.
    synced: watch::Sender<bool>,
}

impl NamespaceCache {
    /// Starts listing and watching every namespace through `client`. The task ends
    /// when `shutdown` flips to true or the cache is dropped.
    pub fn start(
        client: kube::Client,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) -> NamespaceCache {
        let shared = Arc::new(Shared {
            namespaces: RwLock::new(HashMap::new()),
            synced: watch::Sender::new(false),
        });
        let api = kube::Api::<KubeNamespace>::all(client.clone());
        let task = tokio::spawn(run(client, shared.clone(), metrics, shutdown));
        NamespaceCache {
            shared,
            task,
            api,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Whether the first complete list has arrived.
    pub fn is_synced(&self) -> bool {
        *self.shared.synced.borrow()
    }

    /// Resolves when the first complete list has arrived.
    pub async fn wait_synced(&self) {
        let mut synced = self.shared.synced.subscribe();
        // An error only means the sender is gone, which `self` keeps from happening.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// How many namespaces the cache holds.
    pub fn len(&self) -> usize {
        self.shared.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for NamespaceCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NamespaceSource for NamespaceCache {
    fn namespace_data(&self, name: &str) -> NamespaceData {
        if !self.is_synced() {
            return NamespaceData::Unavailable {
                hint: "the namespace cache has not yet listed the namespaces from the \
                       Kubernetes API (graft reports not ready until it has)",
            };
        }
        let cached = self.shared.read().get(name).cloned();
        match cached {
            Some(namespace) => NamespaceData::Known(namespace),
            None => self.fetch(name),
        }
    }
}

impl NamespaceCache {
    /// Reads one namespace from the API. The result is not stored: the watch delivers
    /// it (and any later change) in order, and a stored read could overwrite a newer
    /// event. Called on an evaluation thread, as reviews are; the request itself runs on
    /// the runtime, and the wait is bounded.
    fn fetch(&self, name: &str) -> NamespaceData {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let (api, owned) = (self.api.clone(), name.to_string());
        self.runtime.spawn(async move {
            let got = tokio::time::timeout(FETCH_TIMEOUT, api.get_metadata_opt(&owned)).await;
            let _ = sender.send(got);
        });
        let not_found = || NamespaceData::NotFound {
            name: name.to_string(),
            source: SOURCE,
        };
        match receiver.recv_timeout(FETCH_TIMEOUT + Duration::from_millis(100)) {
            Ok(Ok(Ok(Some(object)))) => {
                tracing::debug!(
                    namespace = name,
                    "namespace read from the API ahead of its watch event"
                );
                convert(object).map_or_else(not_found, |namespace| {
                    NamespaceData::Known(Arc::new(namespace))
                })
            }
            Ok(Ok(Ok(None))) => not_found(),
            Ok(Ok(Err(error))) => {
                tracing::warn!(namespace = name, %error, "cannot read a namespace missing from the cache");
                NamespaceData::Unavailable {
                    hint: "the namespace is not in the namespace cache and reading it from \
                           the Kubernetes API failed",
                }
            }
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(
                    namespace = name,
                    "reading a namespace missing from the cache timed out"
                );
                NamespaceData::Unavailable {
                    hint: "the namespace is not in the namespace cache and the Kubernetes \
                           API did not answer in time",
                }
            }
        }
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Namespace>>> {
        // A poisoned lock means a writer panicked between two complete updates (each
        // update is a single insert, remove or swap); the map is still consistent.
        self.namespaces
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Namespace>>> {
        self.namespaces
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Applies watcher events until shutdown. A list arrives as `Init`, `InitApply`...,
/// `InitDone`; its objects are buffered and swapped in whole at `InitDone`, so a
/// re-list never shows a half-listed cluster.
async fn run(
    client: kube::Client,
    shared: Arc<Shared>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api = kube::Api::<KubeNamespace>::all(client);
    let events = metadata_watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(events);
    let mut listing: Option<HashMap<String, Arc<Namespace>>> = None;
    let mut failing = false;
    tracing::info!("namespace cache starting: listing and watching namespaces");
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let Some(event) = event else { break };
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                metrics.namespace_watch_restarted();
                tracing::warn!(
                    %error,
                    namespaces = shared.read().len(),
                    "namespace watch failed; serving the last known namespaces and \
                     retrying with backoff"
                );
                failing = true;
                continue;
            }
        };
        if std::mem::take(&mut failing) {
            tracing::info!("namespace watch recovered");
        }
        match event {
            watcher::Event::Init => listing = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let (Some(listing), Some(namespace)) = (listing.as_mut(), convert(object)) {
                    listing.insert(namespace.name.clone(), Arc::new(namespace));
                }
            }
            watcher::Event::InitDone => {
                let listed = listing.take().unwrap_or_default();
                let count = listed.len();
                *shared.write() = listed;
                metrics.namespace_cache_synced(count);
                shared
                    .synced
                    .send_if_modified(|synced| !std::mem::replace(synced, true));
                tracing::info!(namespaces = count, "namespace cache listed all namespaces");
            }
            watcher::Event::Apply(object) => {
                if let Some(namespace) = convert(object) {
                    let mut namespaces = shared.write();
                    namespaces.insert(namespace.name.clone(), Arc::new(namespace));
                    metrics.namespace_cache_synced(namespaces.len());
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(name) = object.metadata.name {
                    let mut namespaces = shared.write();
                    namespaces.remove(&name);
                    metrics.namespace_cache_synced(namespaces.len());
                }
            }
        }
    }
    tracing::info!("namespace cache stopped");
}

/// The part of a Namespace policies can see. `None` for an object without a name,
/// which the API server never sends.
fn convert(object: PartialObjectMeta<KubeNamespace>) -> Option<Namespace> {
    let metadata = object.metadata;
    Some(Namespace {
        name: metadata.name?,
        labels: metadata.labels.unwrap_or_default(),
        annotations: metadata.annotations.unwrap_or_default(),
    })
}
