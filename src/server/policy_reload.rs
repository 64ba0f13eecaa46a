//! Reloads the policy set when its mounted ConfigMap (or plain directory) changes.
//!
//! Every change re-reads the whole set through the visible paths and loads it off the
//! request path (`spawn_blocking`: parsing and compiling CEL is CPU work). Only a set
//! that is valid as a whole is installed; otherwise every finding is logged, the error is
//! counted, and the last good set keeps serving (and `/readyz` stays ready, because
//! serving it is correct). A missing directory is just another invalid update.
//!
//! The first valid reload after failed ones says at info that the error is resolved, even
//! when the set is the running one (a broken edit reverted): otherwise the log's last word
//! on the policies would stay the error.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::State;
use super::kube_api::ConnectError;
use super::namespace_supply::{NamespaceSupply, RELOAD_SYNC_WAIT};
use crate::metrics::ReloadResult;
use crate::policy::{self, Findings, Loaded, Severity};
use crate::watch::{WatchConfig, WatchError, Watcher};

/// Running totals of policy reload attempts, and the revision now serving; subscribe
/// through [`State::policy_reloads`] to wait for a reload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyReloadStatus {
    /// Reloads that installed a new set.
    pub successes: u64,
    /// Reloads whose set was identical to the running one.
    pub unchanged: u64,
    /// Reloads that kept the running set because the files were unreadable or invalid.
    pub failures: u64,
    /// The revision of the active set.
    pub revision: String,
}

/// Watches the policy paths and installs every valid new set into [`State`].
pub struct PolicyReloader {
    paths: Vec<PathBuf>,
    state: Arc<State>,
    /// Starts the namespace cache before a set that needs it, stops it after one that
    /// does not.
    namespaces: NamespaceSupply,
    /// Reloads that failed since the last valid one.
    failed_in_a_row: AtomicU64,
}

impl PolicyReloader {
    pub fn new(paths: Vec<PathBuf>, state: Arc<State>, namespaces: NamespaceSupply) -> Self {
        PolicyReloader {
            paths,
            state,
            namespaces,
            failed_in_a_row: AtomicU64::new(0),
        }
    }

    /// The directories that hold `paths`. Made before the initial load, so that a change
    /// between that load and the first reload is not missed.
    pub fn watcher(paths: &[PathBuf], config: &WatchConfig) -> Result<Watcher, WatchError> {
        let mut dirs: Vec<PathBuf> = paths
            .iter()
            .map(|path| {
                if path.is_file() {
                    super::cert_reload::parent(path)
                } else {
                    path.clone()
                }
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        Watcher::new(&dirs, config)
    }

    /// Reloads after every change reported by `watcher` until `shutdown` flips to true.
    pub fn spawn(self, watcher: Watcher, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
        crate::watch::run_until_shutdown(watcher, shutdown, self, |reloader| async move {
            reloader.reload().await;
        })
    }

    /// Loads the set off the request path and installs it if valid and new.
    pub async fn reload(&self) -> ReloadResult {
        let result = self.load_and_install().await;
        if result == ReloadResult::Error {
            self.failed_in_a_row.fetch_add(1, Ordering::Relaxed);
            return result;
        }
        let failed = self.failed_in_a_row.swap(0, Ordering::Relaxed);
        if failed > 0 {
            tracing::info!(
                revision = self.state.policies().revision(),
                changed = result == ReloadResult::Success,
                failed_reloads = failed,
                "policy set reloaded; the earlier error is resolved"
            );
        }
        result
    }

    async fn load_and_install(&self) -> ReloadResult {
        let paths = self.paths.clone();
        let loaded = match tokio::task::spawn_blocking(move || policy::load(&paths)).await {
            Ok(loaded) => loaded,
            Err(error) => {
                // A panic while loading is a bug, but it must not stop the reloader.
                tracing::error!(%error, "policy load task failed; keeping the running set");
                self.state.record_policy_reload(ReloadResult::Error);
                return ReloadResult::Error;
            }
        };
        match loaded {
            Ok(loaded) => match self.install(loaded, RELOAD_SYNC_WAIT).await {
                Ok(result) => result,
                Err(error) => {
                    tracing::error!(
                        %error,
                        revision = self.state.policies().revision(),
                        "policy set not reloaded; keeping the running set"
                    );
                    self.state.record_policy_reload(ReloadResult::Error);
                    ReloadResult::Error
                }
            },
            Err(findings) => {
                self.reject(&findings);
                ReloadResult::Error
            }
        }
    }

    /// Installs a loaded set, at start-up and on every reload: logs its warnings (and
    /// that it is empty, if it is), starts the cluster data it needs (waiting up to
    /// `wait` for the first list), makes it active, and stops what it no longer needs.
    /// A set identical to the active one is left alone, except the first.
    pub async fn install(
        &self,
        loaded: Loaded,
        wait: Duration,
    ) -> Result<ReloadResult, ConnectError> {
        let revision = loaded.set.revision().to_string();
        // Events also fire for unrelated writes (editor swap files, the `..data_tmp`
        // dance); an identical set is not a new one.
        if self.state.has_policies() && revision == self.state.policies().revision() {
            tracing::debug!(revision, "policy files changed but the set is the same");
            self.state.record_policy_reload(ReloadResult::Unchanged);
            return Ok(ReloadResult::Unchanged);
        }
        self.namespaces.prepare(&loaded.set, wait).await?;
        for finding in &loaded.warnings {
            match finding.severity {
                Severity::Note => tracing::info!(%finding, "policy note"),
                Severity::Error | Severity::Warning => {
                    tracing::warn!(%finding, "policy warning");
                }
            }
        }
        if loaded.set.is_empty() {
            tracing::warn!(revision, "the policy set is empty: graft changes nothing");
        }
        let first = !self.state.has_policies();
        // `activate` logs the swap with both revisions.
        self.state.activate(loaded.set);
        self.namespaces.release_if_unneeded();
        if !first {
            self.state.record_policy_reload(ReloadResult::Success);
        }
        Ok(ReloadResult::Success)
    }

    fn reject(&self, findings: &Findings) {
        let errors = findings.0.iter().filter(|f| f.is_error()).count();
        for finding in &findings.0 {
            // Display is exactly what `graft lint` prints: file:line, policy, field.
            tracing::error!(finding = %finding, "policy finding");
        }
        tracing::error!(
            errors,
            revision = self.state.policies().revision(),
            "policy set not reloaded; keeping the running set"
        );
        self.state.record_policy_reload(ReloadResult::Error);
    }
}
