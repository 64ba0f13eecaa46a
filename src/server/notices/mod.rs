//! Notices about reviews sent to chat groups and HTTP endpoints (`graft serve --notices
//! FILE`), off the request path.
//!
//! A review builds one [`message::Notice`] and offers it, with `try_send`, to the
//! bounded queue of every sink that wants it; a full queue drops it and counts
//! `graft_notices_total{sink,result="dropped"}`, so no sink can delay an answer. Each
//! sink has a worker task of its own: repeats within the sink's grouping window are
//! counted (`grouped`) rather than sent, messages are rate-limited by a token bucket,
//! and each delivery is bounded by the sink's timeout and counted `sent` or `failed`.
//!
//! The file is re-read when its directory changes; a file that does not parse keeps
//! the sinks running as they were and logs why. URLs and secrets are read from their
//! files at every delivery, so a rotated Secret needs no reload.
//!
//! - [`config`]: the notices file.
//! - [`message`]: the notice and each sink's body.
//! - [`sign`]: DingTalk's, Feishu's and the webhook's signatures.
//! - [`deliver`]: one HTTP POST.

pub mod config;
pub mod deliver;
pub mod message;
pub mod sign;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, watch};

use self::config::{ConfigError, SinkConfig, SinkKind};
use self::deliver::DeliveryError;
use self::message::Notice;
use super::events::rate::TokenBucket;
use crate::admission::Reviewed;
use crate::metrics::{Metrics, NoticeResult};

/// Most repeat keys a sink remembers for grouping.
const GROUP_CAPACITY: usize = 4096;

/// How many times the notices file was re-read into new sinks, and refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    pub successes: u64,
    pub failures: u64,
}

/// The review side of the sinks: their queues, swapped whole on reload.
#[derive(Debug)]
pub struct Notices {
    path: PathBuf,
    sinks: ArcSwap<Vec<SinkHandle>>,
    /// The configuration the running sinks were started from.
    current: std::sync::Mutex<config::NoticesFile>,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
    reloads: watch::Sender<ReloadCounts>,
}

#[derive(Debug)]
struct SinkHandle {
    config: Arc<SinkConfig>,
    queue: mpsc::Sender<Arc<Notice>>,
    /// Whether the last offer was dropped, so a run of drops logs once.
    dropping: AtomicBool,
}

impl Notices {
    /// Reads `path` and starts a worker per sink. An invalid file at startup is an
    /// error: a configured sink silently absent would hide every notice.
    pub fn start(
        path: &Path,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Notices, ConfigError> {
        let file = config::load(path)?;
        let notices = Notices {
            path: path.to_path_buf(),
            sinks: ArcSwap::from_pointee(Vec::new()),
            current: std::sync::Mutex::new(config::NoticesFile { sinks: Vec::new() }),
            metrics,
            shutdown,
            reloads: watch::Sender::new(ReloadCounts::default()),
        };
        notices.install(file);
        Ok(notices)
    }

    /// The notices file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reload results so far, for a caller that waits for the next one.
    pub fn reloads(&self) -> watch::Receiver<ReloadCounts> {
        self.reloads.subscribe()
    }

    /// The names of the running sinks.
    pub fn sink_names(&self) -> Vec<String> {
        self.sinks
            .load()
            .iter()
            .map(|sink| sink.config.name.clone())
            .collect()
    }

    /// Re-reads the file; keeps the running sinks when it is invalid or unchanged.
    pub fn reload(&self) {
        match config::load(&self.path) {
            Ok(file) => {
                let unchanged = self.current.lock().is_ok_and(|current| *current == file);
                if unchanged {
                    tracing::debug!(path = %self.path.display(), "notices file unchanged");
                    return;
                }
                self.install(file);
                self.reloads.send_modify(|counts| counts.successes += 1);
            }
            Err(error) => {
                self.reloads.send_modify(|counts| counts.failures += 1);
                tracing::warn!(%error, "notices file not reloaded; the sinks keep their last good configuration");
            }
        }
    }

    /// Starts workers for `file`'s sinks and retires the old ones (their queues close,
    /// so they end after the notice in hand).
    fn install(&self, file: config::NoticesFile) {
        let handles: Vec<SinkHandle> = file
            .sinks
            .iter()
            .map(|sink| {
                let config = Arc::new(sink.clone());
                let (queue, received) = mpsc::channel(sink.queue.max(1));
                for result in NoticeResult::ALL {
                    self.metrics.notice_touch(&sink.name, result);
                }
                tokio::spawn(run(
                    config.clone(),
                    received,
                    self.metrics.clone(),
                    self.shutdown.clone(),
                ));
                SinkHandle {
                    config,
                    queue,
                    dropping: AtomicBool::new(false),
                }
            })
            .collect();
        let names: Vec<&str> = file.sinks.iter().map(|sink| sink.name.as_str()).collect();
        tracing::info!(path = %self.path.display(), sinks = ?names, "notice sinks configured");
        self.sinks.store(Arc::new(handles));
        if let Ok(mut current) = self.current.lock() {
            *current = file;
        }
    }

    /// Offers `reviewed`'s notice, if any, to every sink that wants it, never waiting.
    pub fn offer(&self, reviewed: &Reviewed) {
        let sinks = self.sinks.load();
        if sinks.is_empty() {
            return;
        }
        let Some(notice) = message::notice(reviewed) else {
            return;
        };
        let notice = Arc::new(notice);
        for sink in sinks.iter() {
            if !sink.config.wants(&notice.outcomes, &notice.policies) {
                continue;
            }
            match sink.queue.try_send(notice.clone()) {
                Ok(()) => sink.dropping.store(false, Ordering::Relaxed),
                Err(_) => {
                    self.metrics
                        .notice(&sink.config.name, NoticeResult::Dropped);
                    if !sink.dropping.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            sink = %sink.config.name,
                            "the sink's notice queue is full (it is slow, failing or rate-limited); \
                             dropping its notices until it drains"
                        );
                    }
                }
            }
        }
    }
}

/// One sink's worker: groups, rate-limits and delivers until its queue closes (a
/// reload replaced it) or shutdown.
async fn run(
    sink: Arc<SinkConfig>,
    mut received: mpsc::Receiver<Arc<Notice>>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let per_second = f64::from(sink.per_minute.max(1)) / 60.0;
    let mut bucket = TokenBucket::new(per_second, sink.per_minute.max(1), Instant::now());
    let mut last_sent: HashMap<String, Instant> = HashMap::new();
    let mut failing = false;
    loop {
        let notice = tokio::select! {
            notice = received.recv() => match notice {
                Some(notice) => notice,
                None => break,
            },
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let now = Instant::now();
        let key = notice.group_key();
        if last_sent
            .get(&key)
            .is_some_and(|sent| now.duration_since(*sent) < sink.group_window())
        {
            metrics.notice(&sink.name, NoticeResult::Grouped);
            continue;
        }
        while let Err(wait) = bucket.take(Instant::now()) {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
        let delivered = tokio::select! {
            delivered = tokio::time::timeout(sink.timeout(), send(&sink, &notice)) => delivered,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        let error = match delivered {
            Ok(Ok(())) => {
                metrics.notice(&sink.name, NoticeResult::Sent);
                if last_sent.len() >= GROUP_CAPACITY {
                    let window = sink.group_window();
                    last_sent.retain(|_, sent| now.duration_since(*sent) < window);
                }
                last_sent.insert(key, now);
                if std::mem::take(&mut failing) {
                    tracing::info!(sink = %sink.name, "notices are delivered again");
                }
                continue;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} s", sink.timeout().as_secs()),
        };
        metrics.notice(&sink.name, NoticeResult::Failed);
        if std::mem::replace(&mut failing, true) {
            tracing::debug!(sink = %sink.name, %error, "cannot deliver a notice");
        } else {
            tracing::warn!(sink = %sink.name, %error, "cannot deliver a notice; counting failures until one succeeds");
        }
    }
    tracing::debug!(sink = %sink.name, "notice sink stopped");
}

/// Why a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
}

fn read_secret(path: &Path) -> Result<String, SendError> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .map_err(|source| SendError::Read {
            path: path.to_path_buf(),
            source,
        })
}

/// Sends `notice` to `sink` once, reading its URL and secret now.
pub async fn send(sink: &SinkConfig, notice: &Notice) -> Result<(), SendError> {
    let mut url = read_secret(&sink.url_file)?;
    let secret = match &sink.secret_file {
        Some(path) => Some(read_secret(path)?),
        None => None,
    };
    let mut body = message::body(sink, notice);
    if let (SinkKind::Feishu, Some(secret), Some(fields)) =
        (sink.kind, &secret, body.as_object_mut())
    {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        fields.insert("timestamp".into(), timestamp.to_string().into());
        fields.insert("sign".into(), sign::feishu(secret, timestamp).into());
    }
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut headers = Vec::new();
    match (sink.kind, &secret) {
        (SinkKind::Dingtalk, Some(secret)) => {
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis();
            let separator = if url.contains('?') { '&' } else { '?' };
            let sign = sign::dingtalk(secret, timestamp);
            url = format!("{url}{separator}timestamp={timestamp}&sign={sign}");
        }
        (SinkKind::Webhook, Some(secret)) => {
            headers.push((sink.signature_header.clone(), sign::webhook(secret, &body)));
        }
        // Feishu's signature is in the body; Slack's URL is its only secret.
        (SinkKind::Feishu | SinkKind::Slack, _) | (_, None) => {}
    }
    let answer = deliver::post(&url, &headers, body).await?;
    // DingTalk and Feishu answer 200 with an error code for a bad signature or a
    // blocked word: `errcode`/`errmsg`, and `code`/`msg`.
    let (code_field, message_field) = match sink.kind {
        SinkKind::Dingtalk => ("errcode", "errmsg"),
        SinkKind::Feishu => ("code", "msg"),
        SinkKind::Slack | SinkKind::Webhook => return Ok(()),
    };
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
    if let Some(code) = answer.get(code_field).and_then(serde_json::Value::as_i64)
        && code != 0
    {
        let message = answer[message_field].as_str().unwrap_or_default();
        return Err(DeliveryError::Refused(format!("{code_field} {code}: {message}")).into());
    }
    Ok(())
}
