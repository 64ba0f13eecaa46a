//! Runs the namespace cache exactly while the active policy set needs it.
//!
//! A set needs namespace data when a policy matches on `namespaceSelector` or reads
//! `namespaceObject`. Before such a set is installed (at startup or by a hot reload) the
//! cache is started, so no review of the new set goes without it; after a set that does
//! not need it is installed, the cache is dropped, which stops its watch. Only then does
//! graft talk to the Kubernetes API at all.
//!
//! With `--namespaces FILE` the namespaces come from that file instead, read once at
//! startup, and the API is never contacted. Outside a pod with neither that nor
//! `--kubeconfig` there is no namespace data: the server still starts (a local
//! `graft serve` on the examples just works), says so in its log, and a policy that needs
//! the data fails by its `failurePolicy` with a message naming both flags.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::State;
use super::config::NamespaceConfig;
use super::kube_api::{self, ConnectError};
use super::namespace_cache::NamespaceCache;
use crate::namespaces::{NamespaceMap, NamespacesError, NoNamespaces, read_namespaces};
use crate::policy::PolicySet;

/// Why the `--namespaces` file cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum NamespacesFileError {
    #[error("cannot read the namespaces file {path}: {cause}")]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("the namespaces file {path} is invalid: {cause}")]
    Invalid {
        path: PathBuf,
        cause: NamespacesError,
    },
}

/// How long a hot reload waits for a newly started cache to list the namespaces before
/// installing the set that needs it anyway (`/readyz` then reports not ready until the
/// list arrives).
pub const RELOAD_SYNC_WAIT: Duration = Duration::from_secs(10);

/// Why a policy has no namespace data when graft serves outside a cluster unconfigured.
const OUTSIDE_A_CLUSTER: &str = "graft serve runs outside a Kubernetes pod without namespace data: \
     pass --kubeconfig FILE (or GRAFT_KUBECONFIG) to read the namespaces of a cluster, or \
     --namespaces FILE to serve fixed Namespace objects";

/// Whether `set` has a policy that needs the request namespace's data.
pub fn needed_by(set: &PolicySet) -> bool {
    set.needs_namespaces()
}

/// Starts and stops the namespace cache that [`State::cluster_data`] serves.
#[derive(Debug, Clone)]
pub struct NamespaceSupply {
    /// `None`: the in-cluster configuration.
    kubeconfig: Option<PathBuf>,
    state: Arc<State>,
    shutdown: watch::Receiver<bool>,
}

impl NamespaceSupply {
    /// A supply for `state`; with [`NamespaceConfig::File`] the file is read now and
    /// is served for good.
    pub fn new(
        config: &NamespaceConfig,
        state: Arc<State>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<NamespaceSupply, NamespacesFileError> {
        let kubeconfig = match config {
            NamespaceConfig::Api { kubeconfig } => kubeconfig.clone(),
            NamespaceConfig::File(path) => {
                let map = read_file(path)?;
                state.cluster_data().fix(Arc::new(map));
                None
            }
        };
        Ok(NamespaceSupply {
            kubeconfig,
            state,
            shutdown,
        })
    }

    /// Call before installing `set`: starts the cache when `set` needs one and none is
    /// running, and waits up to `wait` for its first list.
    pub async fn prepare(&self, set: &PolicySet, wait: Duration) -> Result<(), ConnectError> {
        if !needed_by(set) || self.state.cluster_data().is_supplied() {
            return Ok(());
        }
        let purpose = kube_api::Purpose::Namespaces;
        let client = match kube_api::client(self.kubeconfig.as_deref(), purpose).await {
            Ok(client) => client,
            Err(ConnectError::NotInCluster { cause, .. }) if kube_api::outside_a_pod(&cause) => {
                tracing::warn!(
                    "the policy set needs namespace data, but graft runs outside a Kubernetes \
                     pod without --kubeconfig or --namespaces: policies that read namespace \
                     labels fail by their failurePolicy"
                );
                self.state.cluster_data().fix(Arc::new(NoNamespaces {
                    hint: OUTSIDE_A_CLUSTER,
                }));
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let cache = Arc::new(NamespaceCache::start(
            client,
            self.state.metrics().clone(),
            self.shutdown.clone(),
        ));
        self.state.cluster_data().watch(cache.clone());
        if tokio::time::timeout(wait, cache.wait_synced())
            .await
            .is_err()
            && !wait.is_zero()
        {
            tracing::warn!(
                waited_seconds = wait.as_secs_f64(),
                "the namespace cache has not listed the namespaces yet; installing the \
                 policy set anyway, not ready until it has"
            );
        }
        Ok(())
    }

    /// Call after installing a set: stops the cache when the active set does not need it.
    pub fn release_if_unneeded(&self) {
        if needed_by(&self.state.policies()) {
            return;
        }
        if self.state.cluster_data().stop_watching() {
            // Reviews that already hold the cache finish with it; the watch stops when
            // the last of them drops it.
            tracing::info!(
                "the policy set no longer needs namespace data; namespace cache stopped"
            );
        }
    }
}

fn read_file(path: &Path) -> Result<NamespaceMap, NamespacesFileError> {
    let text = std::fs::read_to_string(path).map_err(|cause| NamespacesFileError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    let namespaces = read_namespaces(&text).map_err(|cause| NamespacesFileError::Invalid {
        path: path.to_path_buf(),
        cause,
    })?;
    let count = namespaces.len();
    tracing::info!(
        file = %path.display(),
        namespaces = count,
        "serving namespace data from a file; the Kubernetes API is not contacted"
    );
    Ok(NamespaceMap::new(namespaces, "the --namespaces file"))
}
