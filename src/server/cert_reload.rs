//! Reloads the serving certificate when its mounted Secret changes (cert-manager rotation,
//! kubelet's `..data` symlink swap). Every change re-reads both files through their visible
//! paths; a pair that cannot be read or whose key does not match keeps the old one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::tls::{self, CertResolver};
use crate::metrics::{Metrics, ReloadResult};
use crate::watch::{WatchConfig, WatchError, Watcher};

/// Running totals of reload attempts that changed something or failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    pub successes: u64,
    pub failures: u64,
}

pub struct CertReloader {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub resolver: Arc<CertResolver>,
    pub metrics: Arc<Metrics>,
    pub status: watch::Sender<ReloadStatus>,
}

impl CertReloader {
    /// The directories of both files. Made before the first load of the pair, so that a
    /// rotation between that load and the first reload is not missed.
    pub fn watcher(cert: &Path, key: &Path, config: &WatchConfig) -> Result<Watcher, WatchError> {
        let mut dirs = vec![parent(cert), parent(key)];
        dirs.dedup();
        Watcher::new(&dirs, config)
    }

    /// Reloads after every change `watcher` reports until `shutdown` flips to true.
    pub fn spawn(self, watcher: Watcher, shutdown: watch::Receiver<bool>) -> JoinHandle<()> {
        crate::watch::run_until_shutdown(watcher, shutdown, self, |reloader| async move {
            reloader.reload()
        })
    }

    /// Re-reads the pair; installs it if it differs from the current one and is valid.
    pub fn reload(&self) {
        match tls::load_pair(&self.cert, &self.key) {
            Ok(pair) => {
                // Directory events also fire for unrelated files; only a new pair counts.
                if pair.cert == self.resolver.current().cert {
                    tracing::debug!(cert = %self.cert.display(), "certificate unchanged");
                    return;
                }
                let expiry = tls::expiry(&pair);
                self.resolver.store(pair);
                self.metrics.tls_reloaded(ReloadResult::Success);
                if let Some(expiry) = expiry {
                    self.metrics.tls_certificate_expiry(expiry);
                }
                self.status.send_modify(|status| status.successes += 1);
                tracing::info!(
                    cert = %self.cert.display(),
                    expiry_unix = expiry,
                    "serving certificate reloaded"
                );
            }
            Err(error) => {
                self.metrics.tls_reloaded(ReloadResult::Error);
                self.status.send_modify(|status| status.failures += 1);
                tracing::warn!(
                    %error,
                    cert = %self.cert.display(),
                    "serving certificate not reloaded; keeping the previous one"
                );
            }
        }
    }
}

/// The directory a file lives in: what to watch for it.
pub(crate) fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
