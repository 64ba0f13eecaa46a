//! Helpers for the policy reload tests: policy files whose effect is a visible version,
//! the three ways a policy directory changes (kubelet's AtomicWriter, an in-place edit,
//! an editor's write-and-rename), and a client that sends reviews without pause and
//! records which version each answer carried.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::server::*;

/// The review every reload test sends: a pod CREATE that carries annotations.
pub const FIXTURE: &str = "pod-create-multus-worker.json";
/// The annotation the test policy sets; its value is the policy set's "version".
pub const ANNOTATION: &str = "graft.test/version";
/// The one policy file of the test sets.
pub const FILE: &str = "multus.yaml";

/// A valid policy that stamps `version` on every created pod.
pub fn versioned(version: &str) -> String {
    super::policies::policy_yaml(
        "stamp",
        &format!(
            "  match:\n    resources: [pods]\n    operations: [CREATE]\n  mutations:\n    - set:\n        \
             path: $.metadata.annotations['{ANNOTATION}']\n        value: {version}\n"
        ),
    )
}

/// The same policy with a typo in a field name: the whole set is invalid.
pub fn invalid() -> String {
    versioned("broken").replace("path:", "pth:")
}

/// Changes the files of a policy directory, each the way a real writer does.
pub trait Editor: Send + Sync {
    /// The directory graft is pointed at.
    fn dir(&self) -> PathBuf;
    /// Makes the directory hold exactly `files` (name, content). Returns the instant
    /// the new content became visible.
    fn write(&self, files: &[(&str, String)]) -> Result<Instant>;
}

/// A ConfigMap volume, updated exactly as kubelet's AtomicWriter does.
pub struct ConfigMapDir {
    pub root: tempfile::TempDir,
    generation: std::sync::Mutex<u32>,
}

impl ConfigMapDir {
    pub fn new(files: &[(&str, String)]) -> Result<ConfigMapDir> {
        let volume = ConfigMapDir {
            root: tempfile::tempdir()?,
            generation: std::sync::Mutex::new(0),
        };
        volume.write(files)?;
        Ok(volume)
    }

    fn timestamped(&self, files: &[(&str, String)]) -> Result<String> {
        let mut generation = self.generation.lock().map_err(|_| "poisoned")?;
        *generation += 1;
        let name = format!("..2026_11_22_10_00_00.{:09}", *generation);
        let path = self.root.path().join(&name);
        std::fs::create_dir(&path)?;
        for (file, text) in files {
            std::fs::write(path.join(file), text)?;
        }
        Ok(name)
    }
}

impl Editor for ConfigMapDir {
    fn dir(&self) -> PathBuf {
        self.root.path().to_path_buf()
    }

    /// 1. new timestamped directory; 2. `..data_tmp -> it`, renamed onto `..data`;
    /// 3. symlinks for new keys; 4. stale key symlinks removed; 5. old directory removed.
    fn write(&self, files: &[(&str, String)]) -> Result<Instant> {
        let root = self.root.path();
        let data = root.join("..data");
        let old = std::fs::read_link(&data).ok();
        let new = self.timestamped(files)?;
        let tmp = root.join("..data_tmp");
        std::os::unix::fs::symlink(&new, &tmp)?;
        std::fs::rename(&tmp, &data)?;
        let swapped = Instant::now();
        for (file, _) in files {
            let link = root.join(file);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("..data/{file}"), link)?;
            }
        }
        for entry in std::fs::read_dir(root)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') && !files.iter().any(|(file, _)| *file == name) {
                std::fs::remove_file(entry.path())?;
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(root.join(old))?;
        }
        Ok(swapped)
    }
}

/// How a plain directory is edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// Truncate and write the file itself (`>` in a shell, many editors).
    InPlace,
    /// Write `x.yaml.tmp`, then rename it over `x.yaml` (atomic saves).
    Rename,
}

/// A plain directory of policy files, with an editor's swap and backup files beside them.
pub struct PlainDir {
    pub root: tempfile::TempDir,
    pub edit: Edit,
}

impl PlainDir {
    pub fn new(edit: Edit, files: &[(&str, String)]) -> Result<PlainDir> {
        let dir = PlainDir {
            root: tempfile::tempdir()?,
            edit,
        };
        dir.write(files)?;
        Ok(dir)
    }
}

impl Editor for PlainDir {
    fn dir(&self) -> PathBuf {
        self.root.path().to_path_buf()
    }

    fn write(&self, files: &[(&str, String)]) -> Result<Instant> {
        let root = self.root.path();
        for (file, text) in files {
            let path = root.join(file);
            // What vim leaves around while editing: never policies, never errors.
            std::fs::write(root.join(format!(".{file}.swp")), "\u{0}binary swap")?;
            match self.edit {
                Edit::InPlace => {
                    use std::io::Write as _;
                    let mut out = std::fs::OpenOptions::new()
                        .create(true)
                        .write(true)
                        .truncate(true)
                        .open(&path)?;
                    out.write_all(text.as_bytes())?;
                }
                Edit::Rename => {
                    if path.exists() {
                        std::fs::copy(&path, root.join(format!("{file}~")))?;
                    }
                    let tmp = root.join(format!("{file}.tmp"));
                    std::fs::write(&tmp, text)?;
                    std::fs::rename(&tmp, &path)?;
                }
            }
        }
        let written = Instant::now();
        for entry in std::fs::read_dir(root)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if graft::policy::load::is_policy_file_name(&name)
                && !files.iter().any(|(file, _)| *file == name)
            {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(written)
    }
}

/// The version the test policy stamped on the pod, and the revision in auditAnnotations.
pub fn read_answer(request: &[u8], answer: &[u8]) -> Result<(Option<String>, String)> {
    let answer: serde_json::Value = serde_json::from_slice(answer)?;
    let response = &answer["response"];
    let revision = response["auditAnnotations"]["revision"]
        .as_str()
        .ok_or("no revision in auditAnnotations")?
        .to_string();
    let Some(patch) = response["patch"].as_str() else {
        return Ok((None, revision));
    };
    let patch: json_patch::Patch =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch)?)?;
    let request: serde_json::Value = serde_json::from_slice(request)?;
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch)?;
    let version = object["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(str::to_string);
    Ok((version, revision))
}

/// What the load loop has seen so far.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub answered: u64,
    /// The version of the latest answer, and when it arrived.
    pub version: Option<String>,
    pub at: Option<Instant>,
    /// Every version in the order seen, without repeats, with the arrival of its first
    /// answer: a request that went back to an older set shows up here.
    pub history: Vec<(Option<String>, Instant)>,
    pub failures: Vec<String>,
}

/// A client that sends reviews without pause on one kept-alive HTTP/1.1 connection (as
/// the apiserver does), opening a new one only if the server closed it.
pub struct Load {
    pub observed: tokio::sync::watch::Receiver<Observed>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result>,
}

impl Load {
    pub fn start(addr: std::net::SocketAddr, client: Arc<rustls::ClientConfig>) -> Result<Load> {
        let body = fixture(FIXTURE)?;
        let (sender, observed) = tokio::sync::watch::channel(Observed::default());
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut h1 = http1(connect(addr, client.clone()).await?).await?;
            while !stopping.load(Ordering::SeqCst) {
                if h1.is_closed() {
                    h1 = http1(connect(addr, client.clone()).await?).await?;
                }
                let request = mutate_request("POST", "application/json", body.clone())?;
                let outcome = match send1(&mut h1, request).await {
                    Ok((status, answer)) if status == 200 => read_answer(&body, &answer),
                    Ok((status, _)) => Err(format!("status {status}").into()),
                    Err(error) => Err(error),
                };
                sender.send_modify(|seen| match outcome {
                    Ok((version, _)) => {
                        let now = Instant::now();
                        seen.answered += 1;
                        seen.at = Some(now);
                        if seen.history.last().map(|(v, _)| v) != Some(&version) {
                            seen.history.push((version.clone(), now));
                        }
                        seen.version = version;
                    }
                    Err(error) => seen.failures.push(error.to_string()),
                });
            }
            Ok(())
        });
        Ok(Load {
            observed,
            stop,
            task,
        })
    }

    /// Waits until an answer carries `version`; returns when the first such answer
    /// (since the version last changed) arrived.
    pub async fn wait_version(&mut self, version: Option<&str>) -> Result<Instant> {
        let seen = tokio::time::timeout(
            DEADLINE,
            self.observed
                .wait_for(|seen| seen.version.as_deref() == version && seen.at.is_some()),
        )
        .await??;
        let first = seen.history.last().map(|(_, at)| *at);
        Ok(first.ok_or("no answer")?)
    }

    /// Waits for `n` more answers.
    pub async fn wait_answers(&mut self, n: u64) -> Result {
        let target = self.observed.borrow().answered + n;
        tokio::time::timeout(
            DEADLINE,
            self.observed.wait_for(|seen| seen.answered >= target),
        )
        .await??;
        Ok(())
    }

    /// The versions seen, in order.
    pub fn versions(observed: &Observed) -> Vec<Option<&str>> {
        observed.history.iter().map(|(v, _)| v.as_deref()).collect()
    }

    /// Stops the loop and returns everything it saw.
    pub async fn finish(self) -> Result<Observed> {
        self.stop.store(true, Ordering::SeqCst);
        tokio::time::timeout(DEADLINE, self.task).await???;
        let observed = self.observed.borrow().clone();
        Ok(observed)
    }
}

/// A server over `dir` with a fresh PKI, and a client that trusts it.
pub struct Harness {
    pub server: TestServer,
    pub client: Arc<rustls::ClientConfig>,
    pub reloads: tokio::sync::watch::Receiver<graft::server::PolicyReloadStatus>,
    _secret: SecretDir,
}

impl Harness {
    pub async fn start(dir: &Path, watch: graft::watch::WatchConfig) -> Result<Harness> {
        let pki = Pki::new("test CA")?;
        let secret = SecretDir::new(&pki.issue(&[SERVICE_NAME])?)?;
        let mut config = config(dir, &secret);
        config.watch = watch;
        let server = start(config).await?;
        let client = client_config(&pki.ca_pem(), None, &[b"http/1.1"])?;
        let reloads = server.running.state.policy_reloads();
        Ok(Harness {
            server,
            client,
            reloads,
            _secret: secret,
        })
    }

    pub fn load(&self) -> Result<Load> {
        Load::start(self.server.running.addr, self.client.clone())
    }

    /// Waits until the reload status satisfies `done`, within the test deadline.
    pub async fn wait_reload(
        &mut self,
        done: impl FnMut(&graft::server::PolicyReloadStatus) -> bool,
    ) -> Result<graft::server::PolicyReloadStatus> {
        let status = tokio::time::timeout(DEADLINE, self.reloads.wait_for(done)).await??;
        Ok(status.clone())
    }

    pub async fn metrics(&self) -> Result<String> {
        Ok(get(self.server.running.metrics_addr, "/metrics").await?.1)
    }

    pub async fn ready(&self) -> Result<u16> {
        Ok(get(self.server.running.metrics_addr, "/readyz").await?.0)
    }

    pub fn revision(&self) -> String {
        self.server.running.state.policies().revision().to_string()
    }
}

/// The delay between a change becoming visible and the first answer that shows it.
pub fn delay(changed: Instant, seen: Instant) -> Duration {
    seen.saturating_duration_since(changed)
}
