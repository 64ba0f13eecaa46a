//! Kubernetes Events about reviews (`graft serve --events`), recorded off the request
//! path.
//!
//! A review hands its [`notice::Notice`] to a bounded queue with `try_send` and goes on:
//! when the queue is full the notice is dropped and counted
//! (`graft_events_total{result="dropped"}`), so recording Events can never delay an
//! answer. Everything else happens on the events task: repeats are folded into series
//! ([`series`]), writes to the API are rate-limited ([`rate`]) and bounded by
//! [`WRITE_TIMEOUT`], and a failed write is counted and logged, never retried.
//!
//! - [`notice`]: what a review records, and the reference to its object (no uid at
//!   CREATE; the `generateName` prefix for an object that has no name yet).
//! - [`series`]: aggregation of repeats, as client-go's recorder does it.
//! - [`rate`]: the token bucket in front of the API.

pub mod notice;
pub mod rate;
pub mod series;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, watch};

use self::notice::Notice;
use self::rate::TokenBucket;
use self::series::{Series, Write};
use super::config::EventsConfig;
use crate::admission::Reviewed;
use crate::metrics::{EventResult, Metrics};

/// The Events' `reportingController`.
pub const REPORTING_CONTROLLER: &str = "graft";

/// The Events' `action`: graft reviewed the object; the reason says with what result.
pub const ACTION: &str = "Review";

/// How long one write to the API may take before it counts as failed.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the events task looks for series counts to write.
const TICK: Duration = Duration::from_secs(10);

/// Most distinct Events aggregated at a time (each a few hundred bytes).
const SERIES_CAPACITY: usize = 4096;

/// The review side of the events task: a handle to its queue.
#[derive(Debug)]
pub struct EventSink {
    queue: mpsc::Sender<Notice>,
    metrics: Arc<Metrics>,
    /// Whether the last offer was dropped, so a run of drops logs once.
    dropping: AtomicBool,
}

impl EventSink {
    /// Starts the events task, which writes through `client` until `shutdown` flips to
    /// true or the sink is dropped.
    pub fn start(
        client: kube::Client,
        config: &EventsConfig,
        metrics: Arc<Metrics>,
        shutdown: watch::Receiver<bool>,
    ) -> EventSink {
        let (queue, notices) = mpsc::channel(config.queue.max(1));
        let instance: String = hostname::get()
            .ok()
            .and_then(|name| name.into_string().ok())
            .unwrap_or_else(|| REPORTING_CONTROLLER.to_string())
            .chars()
            .take(128)
            .collect();
        let writer = Writer {
            client,
            instance,
            metrics: metrics.clone(),
            failing: false,
        };
        let bucket = TokenBucket::new(config.per_second, config.burst, Instant::now());
        tracing::info!(
            queue = config.queue,
            per_second = config.per_second,
            burst = config.burst,
            "recording Kubernetes Events about mutated and denied objects"
        );
        tokio::spawn(run(notices, writer, bucket, shutdown));
        EventSink {
            queue,
            metrics,
            dropping: AtomicBool::new(false),
        }
    }

    /// Queues the Event `reviewed` calls for, if any, without ever waiting: a full queue
    /// drops it.
    pub fn offer(&self, reviewed: &Reviewed) {
        let Some(notice) = notice::notice(reviewed) else {
            return;
        };
        match self.queue.try_send(notice) {
            Ok(()) => {
                if self.dropping.load(Ordering::Relaxed) {
                    self.dropping.store(false, Ordering::Relaxed);
                }
            }
            Err(_) => {
                self.metrics.event(EventResult::Dropped);
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the events queue is full (the Kubernetes API is slow or the rate \
                         limit is reached); dropping Events until it drains"
                    );
                }
            }
        }
    }
}

/// Turns notices into writes until shutdown or until every sink is gone.
async fn run(
    mut notices: mpsc::Receiver<Notice>,
    mut writer: Writer,
    mut bucket: TokenBucket,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut series = Series::new(SERIES_CAPACITY);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let writes = tokio::select! {
            notice = notices.recv() => {
                let Some(notice) = notice else { break };
                match series.observe(notice, Utc::now()) {
                    Some(write) => vec![write],
                    None => {
                        writer.metrics.event(EventResult::Aggregated);
                        continue;
                    }
                }
            }
            _ = tick.tick() => series.due(Utc::now()),
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        for write in writes {
            while let Err(wait) = bucket.take(Instant::now()) {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = shutdown.wait_for(|stop| *stop) => return,
                }
            }
            // A write the API does not answer holds up only this task, and only until
            // WRITE_TIMEOUT or shutdown.
            let written = tokio::select! {
                written = writer.write(&write) => written,
                _ = shutdown.wait_for(|stop| *stop) => return,
            };
            if !written {
                series.forget(write.key());
            }
        }
    }
    tracing::info!("events task stopped");
}

/// Writes Events through the API, counting and logging each result.
struct Writer {
    client: kube::Client,
    /// The Events' `reportingInstance`: the host (in a pod, the pod's) name.
    instance: String,
    metrics: Arc<Metrics>,
    /// Whether the last write failed, so a run of failures logs at warn once.
    failing: bool,
}

impl Writer {
    /// Whether the write succeeded.
    async fn write(&mut self, write: &Write) -> bool {
        let regarding = &write.key().regarding;
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let api = Api::<KubeEvent>::namespaced(self.client.clone(), namespace);
        let (name, request) = match write {
            Write::Create {
                name, notice, time, ..
            } => {
                let event = self.event(name, namespace, notice, *time);
                let request =
                    async move { api.create(&PostParams::default(), &event).await.map(drop) };
                (name, futures::future::Either::Left(request))
            }
            Write::Series {
                name,
                count,
                last_observed,
                ..
            } => {
                let patch = serde_json::json!({
                    "series": {"count": count, "lastObservedTime": MicroTime(*last_observed)},
                });
                let request = async move {
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                };
                (name, futures::future::Either::Right(request))
            }
        };
        let error = match tokio::time::timeout(WRITE_TIMEOUT, request).await {
            Ok(Ok(())) => {
                self.metrics.event(EventResult::Sent);
                if std::mem::take(&mut self.failing) {
                    tracing::info!("recording Events works again");
                }
                tracing::debug!(event = %name, namespace, reason = write.key().reason.as_str(), "event recorded");
                return true;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} s", WRITE_TIMEOUT.as_secs()),
        };
        self.metrics.event(EventResult::Failed);
        if std::mem::replace(&mut self.failing, true) {
            tracing::debug!(event = %name, namespace, %error, "cannot record an Event");
        } else {
            tracing::warn!(
                event = %name,
                namespace,
                %error,
                "cannot record an Event (graft needs create and patch on events.k8s.io \
                 events: deploy/components/events); counting failures until one succeeds"
            );
        }
        false
    }

    fn event(
        &self,
        name: &str,
        namespace: &str,
        notice: &Notice,
        time: k8s_openapi::chrono::DateTime<Utc>,
    ) -> KubeEvent {
        let regarding = &notice.regarding;
        KubeEvent {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(time)),
            action: Some(ACTION.to_string()),
            reason: Some(notice.reason.as_str().to_string()),
            note: Some(notice.note.clone()),
            type_: Some(notice.reason.event_type().to_string()),
            regarding: Some(ObjectReference {
                api_version: Some(regarding.api_version.clone()),
                kind: Some(regarding.kind.clone()),
                namespace: regarding.namespace.clone(),
                name: Some(regarding.name.clone()),
                uid: regarding.uid.clone(),
                ..ObjectReference::default()
            }),
            reporting_controller: Some(REPORTING_CONTROLLER.to_string()),
            reporting_instance: Some(self.instance.clone()),
            ..KubeEvent::default()
        }
    }
}
