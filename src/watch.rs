//! Directory watching for mounted ConfigMaps and Secrets, shared by the certificate
//! reloader and the policy reloader.
//!
//! Kubelet updates a mounted volume by writing a new timestamped directory and renaming a
//! `..data_tmp` symlink onto `..data`; the visible files are symlinks through `..data`.
//! Watching a file path would watch an inode that is about to be deleted, so this module
//! watches *directories*, non-recursively, treats every event as "something changed",
//! and debounces the burst a swap produces into one notification. The consumer then
//! re-reads everything through the visible paths; it never interprets the event itself.
//!
//! A watched directory may disappear (an unmounted volume, `rm -r` on a plain directory).
//! The kernel watch dies with it, so while a directory is missing its nearest existing
//! ancestor is watched instead, and after every change the watches are re-aimed at
//! whatever now exists (a re-created directory is a new inode: the old watch would never
//! fire again). Re-aiming happens *before* [`Watcher::changed`] returns, so anything
//! written after the consumer starts re-reading produces another notification.
//!
//! ```no_run
//! # async fn example() -> Result<(), graft::watch::WatchError> {
//! use graft::watch::{WatchConfig, Watcher};
//! let mut watcher = Watcher::new(&["/etc/graft/tls".into()], &WatchConfig::default())?;
//! while watcher.changed().await {
//!     // re-read the files through their visible paths
//! }
//! # Ok(()) }
//! ```

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

/// How to notice changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WatchMode {
    /// Kernel notifications (inotify on Linux): changes are seen within milliseconds.
    #[default]
    Inotify,
    /// Periodic scans, for filesystems without notifications (some network mounts).
    Poll,
    /// Never reload.
    None,
}

#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub mode: WatchMode,
    /// Scan period in [`WatchMode::Poll`].
    pub poll_interval: Duration,
    /// Quiet time gathered after the first event before notifying once.
    pub debounce: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            mode: WatchMode::Inotify,
            poll_interval: Duration::from_secs(1),
            debounce: Duration::from_millis(200),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch directory {dir}: {source}")]
    Watch {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("cannot start the file watcher: {0}")]
    Start(#[source] notify::Error),
}

/// A debounced "something changed in these directories" signal.
pub struct Watcher {
    events: mpsc::Receiver<()>,
    debounce: Duration,
    /// What was asked for, and what is watched for it now.
    targets: Vec<Target>,
    // Kept alive for as long as the Watcher: dropping it stops the notifications.
    _backend: Option<Box<dyn notify::Watcher + Send>>,
    // In WatchMode::None nothing ever sends; holding the sender keeps `changed` pending
    // instead of reporting the end of the stream.
    _idle: Option<mpsc::Sender<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("debounce", &self.debounce)
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// Watches each directory (non-recursively). Must be called inside a Tokio runtime only
    /// for [`Watcher::changed`]; construction itself does not need one.
    pub fn new(dirs: &[PathBuf], config: &WatchConfig) -> Result<Watcher, WatchError> {
        // Capacity 1 and try_send: a burst of events collapses into one pending wake-up.
        let (sender, events) = mpsc::channel(1);
        let backend: Option<Box<dyn notify::Watcher + Send>> = match config.mode {
            WatchMode::None => {
                return Ok(Watcher {
                    events,
                    debounce: config.debounce,
                    targets: Vec::new(),
                    _backend: None,
                    _idle: Some(sender),
                });
            }
            WatchMode::Inotify => {
                let handler = event_handler(sender);
                Some(Box::new(
                    notify::RecommendedWatcher::new(handler, notify::Config::default())
                        .map_err(WatchError::Start)?,
                ))
            }
            WatchMode::Poll => {
                let handler = event_handler(sender);
                // Compare contents: a symlink swap may keep sizes and second-granular mtimes.
                let poll_config = notify::Config::default()
                    .with_poll_interval(config.poll_interval)
                    .with_compare_contents(true);
                Some(Box::new(
                    notify::PollWatcher::new(handler, poll_config).map_err(WatchError::Start)?,
                ))
            }
        };
        let mut backend = backend;
        let mut targets = Vec::new();
        if let Some(watcher) = backend.as_mut() {
            for dir in dirs {
                let watched = Watched::resolve(dir);
                watcher
                    .watch(&watched.path, RecursiveMode::NonRecursive)
                    .map_err(|source| WatchError::Watch {
                        dir: dir.clone(),
                        source,
                    })?;
                targets.push(Target {
                    wanted: dir.clone(),
                    watched,
                });
            }
        }
        Ok(Watcher {
            events,
            debounce: config.debounce,
            targets,
            _backend: backend,
            _idle: None,
        })
    }

    /// Waits for the next change, then for the debounce window to pass, and swallows the
    /// events of that window. Returns `false` once the watcher can no longer report changes.
    pub async fn changed(&mut self) -> bool {
        if self.events.recv().await.is_none() {
            return false;
        }
        tokio::time::sleep(self.debounce).await;
        while self.events.try_recv().is_ok() {}
        self.reaim();
        true
    }

    /// The directories watched now: the wanted ones, or the nearest existing ancestors of
    /// those that are missing.
    pub fn watched(&self) -> Vec<PathBuf> {
        self.targets
            .iter()
            .map(|t| t.watched.path.clone())
            .collect()
    }

    /// Moves each watch to the directory that now stands for its target, when that changed.
    fn reaim(&mut self) {
        let Some(backend) = self._backend.as_mut() else {
            return;
        };
        for target in &mut self.targets {
            let now = Watched::resolve(&target.wanted);
            if now == target.watched {
                continue;
            }
            // The old inode may be gone already, which removed its kernel watch too.
            let _ = backend.unwatch(&target.watched.path);
            // The directory may vanish between resolving and watching: resolve again.
            let mut attempt = now;
            for _ in 0..3 {
                match backend.watch(&attempt.path, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        tracing::info!(
                            dir = %target.wanted.display(),
                            watching = %attempt.path.display(),
                            "watch moved"
                        );
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%error, dir = %target.wanted.display(), "cannot move watch");
                        attempt = Watched::resolve(&target.wanted);
                    }
                }
            }
            target.watched = attempt;
        }
    }
}

/// One requested directory and what stands for it.
#[derive(Debug)]
struct Target {
    wanted: PathBuf,
    watched: Watched,
}

/// A watched directory and the inode it was when the watch was added.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Watched {
    path: PathBuf,
    inode: Option<(u64, u64)>,
}

impl Watched {
    /// `dir` if it exists, else its nearest existing ancestor (`/` or `.` at worst).
    fn resolve(dir: &Path) -> Watched {
        let mut path = dir;
        loop {
            if let Ok(metadata) = std::fs::metadata(path)
                && metadata.is_dir()
            {
                return Watched {
                    path: path.to_path_buf(),
                    inode: Some((metadata.dev(), metadata.ino())),
                };
            }
            match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => path = parent,
                Some(_) if path != Path::new(".") => path = Path::new("."),
                _ => {
                    return Watched {
                        path: dir.to_path_buf(),
                        inode: None,
                    };
                }
            }
        }
    }
}

/// Runs `on_change` on `reloader` after every debounced change until `shutdown` flips to
/// true or the watcher ends: the loop every reloader needs.
pub fn run_until_shutdown<R, Fut>(
    mut watcher: Watcher,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    reloader: R,
    on_change: fn(std::sync::Arc<R>) -> Fut,
) -> tokio::task::JoinHandle<()>
where
    R: Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let reloader = std::sync::Arc::new(reloader);
    tokio::spawn(async move {
        loop {
            // The shutdown branch's guard must be gone before `on_change` is awaited.
            let changed = tokio::select! {
                changed = watcher.changed() => changed,
                _ = shutdown.wait_for(|stop| *stop) => false,
            };
            if !changed {
                break;
            }
            on_change(reloader.clone()).await;
        }
    })
}

fn event_handler(sender: mpsc::Sender<()>) -> impl notify::EventHandler {
    move |event: notify::Result<notify::Event>| {
        match event {
            Ok(event) if !is_change(&event.kind) => return,
            Ok(event) => tracing::trace!(kind = ?event.kind, paths = ?event.paths, "file event"),
            // An error may mean missed events: treat it as a change so the consumer re-reads.
            Err(error) => tracing::warn!(%error, "file watcher error"),
        }
        // Full means a wake-up is already pending; Closed means nobody listens any more.
        let _ = sender.try_send(());
    }
}

/// Whether an event can mean different contents. Opening and reading are not changes:
/// the consumer reads the files it is told about, and counting its own reads would make
/// every reload trigger the next one. Closing a file written to is a change.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_is_not_a_change() {
        use notify::event::{CreateKind, ModifyKind, RemoveKind, RenameMode};
        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Any),
        ];
        for kind in reads {
            assert!(!is_change(&kind), "{kind:?}");
        }
        let changes = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::Any),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            EventKind::Remove(RemoveKind::Any),
            EventKind::Any,
            EventKind::Other,
        ];
        for kind in changes {
            assert!(is_change(&kind), "{kind:?}");
        }
    }

    #[tokio::test]
    async fn a_symlink_swap_is_one_change() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("..v1"))?;
        std::os::unix::fs::symlink("..v1", dir.path().join("..data"))?;
        let mut watcher = Watcher::new(&[dir.path().to_path_buf()], &WatchConfig::default())?;

        std::fs::create_dir(dir.path().join("..v2"))?;
        std::os::unix::fs::symlink("..v2", dir.path().join("..data_tmp"))?;
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data"))?;

        let changed = tokio::time::timeout(Duration::from_secs(10), watcher.changed()).await?;
        assert!(changed);
        // The whole burst was swallowed by the debounce window.
        assert!(watcher.events.try_recv().is_err());
        Ok(())
    }

    #[tokio::test]
    async fn a_removed_directory_is_watched_again_when_it_returns()
    -> Result<(), Box<dyn std::error::Error>> {
        let root = tempfile::tempdir()?;
        let dir = root.path().join("policies");
        std::fs::create_dir(&dir)?;
        let config = WatchConfig {
            debounce: Duration::from_millis(20),
            ..WatchConfig::default()
        };
        let mut watcher = Watcher::new(std::slice::from_ref(&dir), &config)?;
        let wait = Duration::from_secs(10);

        std::fs::remove_dir(&dir)?;
        assert!(tokio::time::timeout(wait, watcher.changed()).await?);
        assert_eq!(watcher.watched(), vec![root.path().to_path_buf()]);

        std::fs::create_dir(&dir)?;
        assert!(tokio::time::timeout(wait, watcher.changed()).await?);
        assert_eq!(watcher.watched(), vec![dir.clone()]);

        // The new inode is watched: a file written into it is a change.
        std::fs::write(dir.join("a.yaml"), "x")?;
        assert!(tokio::time::timeout(wait, watcher.changed()).await?);
        Ok(())
    }

    #[tokio::test]
    async fn none_mode_never_fires() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let config = WatchConfig {
            mode: WatchMode::None,
            ..WatchConfig::default()
        };
        let mut watcher = Watcher::new(&[dir.path().to_path_buf()], &config)?;
        std::fs::write(dir.path().join("x"), "1")?;
        let waited = tokio::time::timeout(Duration::from_millis(50), watcher.changed()).await;
        assert!(waited.is_err());
        Ok(())
    }
}
