//! The admission route: `POST /mutate` -> AdmissionReview -> the exact bytes of
//! [`crate::admission::Reviewed::to_json`], which `graft review` prints too.
//!
//! Bad input is refused as cheaply as possible (method, content type and declared length
//! before any body byte is read) and always with a JSON `{"error": "..."}` body.
//!
//! Each review is evaluated inside a `review` span carrying its uid, kind, object and the
//! policy set's revision, so every line logged about it (including a panic) can be found
//! by uid. A policy that failed is logged at warn with its field and reason.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode};
use tracing::Instrument;
use tracing::field::Empty;

use super::config::Limits;
use super::evaluation_pool::{EvaluationPool, JobFailed};
use super::state::State;
use super::{deadline, labels};
use crate::admission::{self, AdmissionRequest, Reviewed};
use crate::engine::{Outcome, PolicyReport, PolicyResult};
use crate::metrics::ErrorReason;
use crate::policy::PolicySet;
use crate::tree::Tree;

pub type Body = Full<Bytes>;

/// Serves one request on the admission listener. Never fails: every problem is a response.
pub async fn handle(
    request: Request<Incoming>,
    state: Arc<State>,
    limits: Arc<Limits>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let (head, mut body) = request.into_parts();
    let budget = deadline::budget(head.uri.query(), limits.request_timeout);
    let answer = tokio::time::timeout(budget, async {
        let routed = route(&head, &mut body, &state, &limits, started, budget).await;
        if let Err(refusal) = &routed
            && refusal.refused_unread()
        {
            drain(&mut body, limits.max_body_bytes).await;
        }
        routed
    })
    .await;
    Ok(match answer {
        Ok(Ok(response)) => response,
        Ok(Err(refusal)) => refusal.into_response(&state),
        Err(_) => Refusal::too_slow(budget).into_response(&state),
    })
}

/// Reads and discards the body of a request refused before its body was read (wrong
/// path, method or content type), so the client can finish sending and the exchange
/// ends normally: over HTTP/2 without a stream reset (which older curl reports as a
/// stream error instead of showing the answer), over HTTP/1.1 on a connection that
/// stays open. Bounded by the body limit (and, by the caller, the request timeout): a
/// longer body is left unread, and hyper ends it as RFC 9113 section 8.1 asks, with
/// RST_STREAM(NO_ERROR) after the complete answer.
async fn drain(body: &mut Incoming, limit: usize) {
    let mut read = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            read = read.saturating_add(data.len());
            if read > limit {
                return;
            }
        }
    }
}

async fn route(
    request: &Parts,
    body: &mut Incoming,
    state: &Arc<State>,
    limits: &Limits,
    started: Instant,
    budget: Duration,
) -> Result<Response<Body>, Refusal> {
    if request.uri.path() != "/mutate" {
        return Err(Refusal::new(
            ErrorReason::NotFound,
            StatusCode::NOT_FOUND,
            "not found: admission reviews are served at POST /mutate",
        ));
    }
    if request.method != Method::POST {
        return Err(Refusal::new(
            ErrorReason::Method,
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: use POST",
        ));
    }
    if !is_json(request.headers.get(header::CONTENT_TYPE)) {
        return Err(Refusal::new(
            ErrorReason::ContentType,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content type must be application/json",
        ));
    }
    let too_large = || {
        Refusal::new(
            ErrorReason::TooLarge,
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body larger than {} bytes", limits.max_body_bytes),
        )
    };
    let declared = request
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_body_bytes as u64) {
        return Err(too_large());
    }
    // Limited also caps chunked and HTTP/2 bodies that declare no length.
    let body = match Limited::new(body, limits.max_body_bytes).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(error) => {
            return Err(Refusal::new(
                ErrorReason::BodyRead,
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {error}"),
            ));
        }
    };

    // Everything from parsing to the response bytes, the log line and the metrics runs
    // on one evaluation thread, which also drops the parsed review: a review allocates
    // hundreds of small values, and freeing them on another thread than the one that
    // allocated them cost a fifth of the server's CPU in the allocator's slow paths.
    let state = Arc::clone(state);
    // At error level, so the warn and error lines about a review name it even where
    // info is filtered out.
    let span = tracing::error_span!(
        "review",
        uid = Empty,
        kind = Empty,
        object = Empty,
        revision = Empty
    );
    let evaluating = span.clone();
    let answered = isolated(move || {
        let _entered = evaluating.enter();
        // Exactly one load per request: the whole review sees one policy set.
        let set = state.policies();
        let admission::Parsed { review, route } =
            admission::parse(&body, &set).map_err(|error| {
                Refusal::new(
                    ErrorReason::BadReview,
                    StatusCode::BAD_REQUEST,
                    error.to_string(),
                )
            })?;
        name_span(&evaluating, &review.request, set.revision());
        // The namespace cache while the set needs it; held until the review ends.
        let namespaces = state.review_namespaces(&set);
        let cluster = admission::resolve(
            &review.request,
            route,
            admission::ClusterSource {
                namespaces: &namespaces,
                params: state.cluster_data().params(),
            },
        );
        let reviewed = admission::answer(review, route, &cluster, &set).map_err(internal)?;
        if started.elapsed() > budget {
            // The client has (or is about to have) the timeout answer instead.
            tracing::warn!(
                latency_ms = started.elapsed().as_secs_f64() * 1000.0,
                budget_ms = budget.as_secs_f64() * 1000.0,
                "review finished after its deadline; its answer is not sent"
            );
            return Err(Refusal::too_slow(budget));
        }
        record(&reviewed, &state, &set, started);
        // A non-blocking hand-over: a full events queue drops the Event, never waits.
        if let Some(events) = state.events() {
            events.offer(&reviewed);
        }
        // The same hand-over for chat and HTTP notices: per-sink queues, never waited on.
        if let Some(notices) = state.notices() {
            notices.offer(&reviewed);
        }
        reviewed.to_json().map_err(internal)
    })
    .instrument(span)
    .await
    .map_err(|()| {
        Refusal::new(
            ErrorReason::Panic,
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error while evaluating the review",
        )
    })??;
    Ok(json_response(StatusCode::OK, answered))
}

/// A bug graft reports: logged at error level, counted, answered with a 500.
fn internal(error: admission::InternalError) -> Refusal {
    tracing::error!(%error, "internal error while answering the review");
    Refusal::new(
        ErrorReason::Internal,
        StatusCode::INTERNAL_SERVER_ERROR,
        error.to_string(),
    )
}

/// Runs CPU-bound evaluation off the async workers, on the evaluation pool, and turns a
/// panic into `Err(())` so one bad request costs one 500 and never the process or its
/// other connections.
pub async fn isolated<T, F>(work: F) -> Result<T, ()>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    EvaluationPool::global()
        .run(work)
        .await
        .map_err(|failed| match failed {
            JobFailed::Panicked(panic) => tracing::error!(%panic, "evaluation panicked"),
            JobFailed::NotRun => tracing::error!("no evaluation thread could run the review"),
        })
}

/// Names the review's span: uid, kind, `namespace/name` (object contents never) and the
/// policy set's revision, recorded together: each record is a call through every layer
/// of the subscriber, four of them were a span's main cost.
fn name_span(span: &tracing::Span, request: &AdmissionRequest, revision: &str) {
    let Some(fields) = span.metadata().map(|metadata| metadata.fields()) else {
        return;
    };
    let (Some(uid), Some(kind), Some(object), Some(revision_field)) = (
        fields.field("uid"),
        fields.field("kind"),
        fields.field("object"),
        fields.field("revision"),
    ) else {
        return;
    };
    let name = object_name(request).unwrap_or_default();
    let object_value = match request.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name,
    };
    let values: [&dyn tracing::Value; 4] = [
        &request.uid.as_str(),
        &request.kind.kind.as_str(),
        &object_value.as_str(),
        &revision,
    ];
    span.record_all(&fields.value_set(&[
        (&uid, Some(values[0])),
        (&kind, Some(values[1])),
        (&object, Some(values[2])),
        (&revision_field, Some(values[3])),
    ]));
}

/// The request's name or, for an object the apiserver has not named yet, its
/// `generateName` and `*`.
fn object_name(request: &AdmissionRequest<'_>) -> Option<String> {
    request.name.clone().filter(|n| !n.is_empty()).or_else(|| {
        let prefix = generate_name(request.object.as_ref()?)?;
        Some(format!("{prefix}*"))
    })
}

/// `metadata.generateName` of the object. An object no policy was a candidate for is
/// still its text: the name is read from the text, which is not built for it.
fn generate_name(object: &Tree<'_>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Object<'a> {
        #[serde(borrow)]
        metadata: Option<Metadata<'a>>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata<'a> {
        #[serde(borrow)]
        generate_name: Option<Cow<'a, str>>,
    }
    match object {
        Tree::Text(text) if !text.is_built() => {
            let object: Object<'_> = serde_json::from_str(text.as_str()).ok()?;
            object.metadata?.generate_name.map(Cow::into_owned)
        }
        _ => object
            .pointer("/metadata/generateName")?
            .as_str()
            .map(str::to_string),
    }
}

/// The log lines and the metrics of an answered review. Never logs the object itself.
fn record(reviewed: &Reviewed, state: &State, set: &PolicySet, started: Instant) {
    let request = &reviewed.review.request;
    let evaluation = &reviewed.evaluation;
    let seconds = started.elapsed().as_secs_f64();
    let decision = match &evaluation.outcome {
        Outcome::Allowed => "allowed",
        Outcome::Denied { .. } => "denied",
    };
    for report in &evaluation.policies {
        state.metrics().policy_evaluated(
            &report.policy,
            report.dialect.as_str(),
            report.result.label(),
        );
        log_failure(report);
    }
    state.metrics().review_answered(
        labels::operation(&request.operation),
        &labels::resource(
            set,
            &request.resource.resource,
            request.sub_resource.as_deref().unwrap_or_default(),
        ),
        decision,
        seconds,
    );
    // The log line joins and formats several strings: skip building them when the
    // level is filtered out, as it is on the hot path of a quiet deployment.
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let resource = match &request.sub_resource {
        Some(sub) if !sub.is_empty() => format!("{}/{}", request.resource.resource, sub),
        _ => request.resource.resource.clone(),
    };
    // A MutatingAdmissionPolicy runs once per binding: named with it, as explain names it.
    let matched: Vec<String> = evaluation
        .policies
        .iter()
        .map(|report| match &report.binding {
            Some(binding) => format!("{} (binding {binding})", report.policy),
            None => report.policy.clone(),
        })
        .collect();
    let applied: Vec<&str> = evaluation.applied().collect();
    let name = object_name(request);
    tracing::info!(
        uid = %request.uid,
        kind = %request.kind.kind,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = name.as_deref().unwrap_or(""),
        operation = %request.operation,
        resource = %resource,
        matched = %matched.join(","),
        applied = %applied.join(","),
        patch_ops = evaluation.patch.0.len(),
        decision,
        latency_ms = seconds * 1000.0,
        "admission review"
    );
}

/// A failed policy at warn: which policy, at which field, why, and what became of the
/// review.
fn log_failure(report: &PolicyReport) {
    let (failure, message) = match &report.result {
        PolicyResult::Failed(failure) => (failure, "policy failed; review denied"),
        PolicyResult::Ignored(failure) => (
            failure,
            "policy failed; skipped (failurePolicy Ignore), the review goes on without it",
        ),
        _ => return,
    };
    tracing::warn!(
        policy = report.policy.as_str(),
        dialect = report.dialect.as_str(),
        binding = report.binding.as_deref(),
        param = report.param.as_deref(),
        field = failure.field.as_str(),
        reason = failure.reason.as_str(),
        "{message}"
    );
}

/// `application/json`, with any parameters (`; charset=utf-8`).
fn is_json(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// A request graft refuses to review, with its status and reason.
#[derive(Debug)]
struct Refusal {
    reason: ErrorReason,
    status: StatusCode,
    message: String,
}

impl Refusal {
    /// True when the request was refused before any of its body was read.
    fn refused_unread(&self) -> bool {
        matches!(
            self.reason,
            ErrorReason::NotFound | ErrorReason::Method | ErrorReason::ContentType
        )
    }

    fn new(reason: ErrorReason, status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            status,
            message: message.into(),
        }
    }

    /// The review did not finish within its `budget` ([`deadline::budget`]).
    fn too_slow(budget: Duration) -> Refusal {
        Refusal::new(
            ErrorReason::Timeout,
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "review not completed within {} ms (the apiserver's ?timeout= less a margin, \
                 at most --request-timeout)",
                budget.as_millis()
            ),
        )
    }

    fn into_response(self, state: &State) -> Response<Body> {
        state.metrics().admission_error(self.reason);
        tracing::warn!(
            status = self.status.as_u16(),
            reason = self.reason.as_str(),
            error = %self.message,
            "request refused"
        );
        let body = serde_json::json!({ "error": self.message });
        let mut response = json_response(self.status, body.to_string().into_bytes());
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let check = |value: Option<&str>, expect: bool| {
            let header = value.and_then(|v| HeaderValue::from_str(v).ok());
            assert_eq!(is_json(header.as_ref()), expect, "{value:?}");
        };
        check(Some("application/json"), true);
        check(Some("application/json; charset=utf-8"), true);
        check(Some("Application/JSON"), true);
        check(Some("application/yaml"), false);
        check(Some("text/plain"), false);
        check(None, false);
    }

    /// The name is the same whether the object was built or kept as text, and reading
    /// it from the text does not build the text.
    #[test]
    fn an_unnamed_object_is_named_by_its_generate_name_built_or_not() {
        let body =
            r#"{"metadata": {"generateName": "web-7d9f8-", "labels": {"a": "b"}}, "spec": {}}"#;
        let review = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"CREATE","resource":{{"resource":"configmaps"}},"object":{body}}}}}"#
        );
        let no_policies = PolicySet::empty();
        let kept = admission::parse(review.as_bytes(), &no_policies)
            .expect("a valid review")
            .review;
        let Some(Tree::Text(text)) = &kept.request.object else {
            panic!("no candidate: the object stays text");
        };
        assert_eq!(object_name(&kept.request).as_deref(), Some("web-7d9f8-*"));
        assert!(!text.is_built());
        let built = admission::read_request(review.as_bytes()).expect("a valid review");
        assert!(matches!(built.request.object, Some(Tree::Map(_))));
        assert_eq!(object_name(&built.request).as_deref(), Some("web-7d9f8-*"));
    }

    #[tokio::test]
    async fn a_panic_is_contained() {
        let result: Result<u8, ()> = isolated(|| panic!("engine bug")).await;
        assert_eq!(result, Err(()));
        // The runtime still runs work afterwards.
        assert_eq!(isolated(|| 7).await, Ok(7));
    }
}
