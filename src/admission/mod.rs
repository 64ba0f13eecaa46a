//! AdmissionReview in and out: the one path shared by `graft serve` and `graft review`,
//! so the two can never disagree. A review goes through three steps, each one door:
//!
//! 1. [`parse`]: one pass over the body into a request whose objects are trees that
//!    build what is read on first read, and its [`Route`], asked once: which policies the
//!    request is for and what they read. The object of a request no policy is for stays
//!    text.
//! 2. [`resolve`]: the one step that may do I/O: the request namespace's data, looked
//!    up only when the route's policies read it.
//! 3. [`answer`]: the evaluation and the response, serialised straight from typed
//!    structs.
//!
//! [`review`] is the three in one. [`read_request`] reads a review for its request alone
//! (the offline commands); [`oracle`] holds the path that builds every object, which
//! the tests hold the parse to.

use serde::{Deserialize, Serialize};

use crate::engine::{self, Cluster, Evaluation, Outcome};
use crate::namespaces::{NamespaceData, NamespaceSource};
use crate::params::{NoParams, ParamSource};
use crate::policy::{PolicySet, Route};

pub mod check;
pub mod offline;
pub mod oracle;
mod parse;

pub use parse::{Parsed, parse, read_request};
// The request itself is a Kubernetes type the engine reads; it lives in `k8s`, so the
// engine does not import this module, which imports the engine.
pub use crate::k8s::admission_request::{AdmissionRequest, GroupVersionKind, GroupVersionResource};

pub const API_VERSION_V1: &str = "admission.k8s.io/v1";
pub const API_VERSION_V1BETA1: &str = "admission.k8s.io/v1beta1";

/// Why a request body is not an AdmissionReview graft can answer (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    /// JSON is UTF-8 (RFC 8259); the parse skips the parts it does not read without
    /// looking at their bytes, so the body is checked whole first.
    #[error("body is not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    #[error("body is not valid AdmissionReview JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("kind must be AdmissionReview, got {0:?}")]
    Kind(String),
    #[error("apiVersion must be {API_VERSION_V1} or {API_VERSION_V1BETA1}, got {0:?}")]
    ApiVersion(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
    #[error("request.{field} is not valid JSON: {error}")]
    Object {
        field: &'static str,
        error: serde_json::Error,
    },
}

/// The AdmissionResponse as sent to the apiserver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Base64 of the RFC 6902 JSON array.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "verbatim"
    )]
    pub patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub audit_annotations: std::collections::BTreeMap<String, String>,
}

/// A JSON string written as it is, when it needs no escaping (base64 never does): the
/// serialiser's escape check goes byte by byte, and the patch is most of a response.
/// Responses are serialised only to JSON (`Reviewed::to_json`): a raw value is
/// serde_json's own type.
fn verbatim<S: serde::Serializer>(text: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    let Some(text) = text else {
        return serializer.serialize_none();
    };
    // A backslash would be read as an escape; a quote or a control character makes
    // the raw value invalid. Either way the text is escaped the usual way.
    let raw = memchr::memchr(b'\\', text.as_bytes())
        .is_none()
        .then(|| {
            let mut quoted = String::with_capacity(text.len() + 2);
            quoted.push('"');
            quoted.push_str(text);
            quoted.push('"');
            serde_json::value::RawValue::from_string(quoted).ok()
        })
        .flatten();
    match raw {
        Some(raw) => raw.serialize(serializer),
        None => serializer.serialize_str(text),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub code: u16,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseReview {
    pub api_version: String,
    pub kind: String,
    pub response: AdmissionResponse,
}

/// A parsed review: its apiVersion (echoed in the answer) and its request.
#[derive(Debug, Clone, PartialEq)]
pub struct Review<'t> {
    pub api_version: String,
    pub request: AdmissionRequest<'t>,
}

/// Everything about one answered review, for the response body, logs and metrics.
#[derive(Debug)]
pub struct Reviewed<'t> {
    pub review: Review<'t>,
    pub evaluation: Evaluation<'t>,
    pub response: ResponseReview,
}

impl Reviewed<'_> {
    /// The response body. Serialising plain structs of strings, bools and maps into a
    /// `Vec` cannot fail; if it ever did, that is a bug reported as one, never an empty
    /// body sent as an answer.
    pub fn to_json(&self) -> Result<Vec<u8>, InternalError> {
        // The patch is most of a response: room for it and the rest up front, instead of
        // growing the buffer a doubling at a time.
        let patch = self.response.response.patch.as_ref().map_or(0, String::len);
        let mut json = Vec::with_capacity(patch + 512);
        serde_json::to_writer(&mut json, &self.response).map_err(InternalError::Response)?;
        Ok(json)
    }
}

/// A failure that cannot happen unless graft has a bug: reported loudly (a 500, a
/// metric, an error log line), never answered with a default.
#[derive(Debug, thiserror::Error)]
pub enum InternalError {
    /// A patch's values are trees whose numbers are finite and whose kept texts were
    /// checked when the body was read, so it serialises.
    #[error("internal error: the patch could not be serialised: {0}")]
    Patch(serde_json::Error),
    #[error("internal error: the response could not be serialised: {0}")]
    Response(serde_json::Error),
}

/// Why a review could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error(transparent)]
    Bad(#[from] BadReview),
    #[error(transparent)]
    Internal(#[from] InternalError),
}

/// Where a review's cluster data comes from: the namespaces and the parameter objects.
#[derive(Debug, Clone, Copy)]
pub struct ClusterSource<'c> {
    pub namespaces: &'c dyn NamespaceSource,
    pub params: &'c dyn ParamSource,
}

impl<'c> ClusterSource<'c> {
    /// Namespaces from `namespaces`, and no parameter objects.
    pub fn namespaces(namespaces: &'c dyn NamespaceSource) -> ClusterSource<'c> {
        ClusterSource {
            namespaces,
            params: &NoParams,
        }
    }
}

/// The envelope checks every parse makes: kind, apiVersion, a request.
fn checked<R>(api_version: &str, kind: String, request: Option<R>) -> Result<R, BadReview> {
    if kind != "AdmissionReview" {
        return Err(BadReview::Kind(kind));
    }
    if api_version != API_VERSION_V1 && api_version != API_VERSION_V1BETA1 {
        return Err(BadReview::ApiVersion(api_version.to_string()));
    }
    request.ok_or(BadReview::MissingRequest)
}

/// Parses, resolves and answers one review body.
pub fn review<'b>(
    body: &'b [u8],
    policies: &PolicySet,
    source: ClusterSource<'_>,
) -> Result<Reviewed<'b>, ReviewError> {
    let Parsed { review, route } = parse(body, policies)?;
    let cluster = resolve(&review.request, route, source);
    Ok(answer(review, route, &cluster, policies)?)
}

/// What the route's policies read of the cluster, looked up: the request namespace's
/// data when the request is namespaced and a policy reads it (a review no policy asks
/// about the namespace for costs no lookup). The one step of a review that may do I/O:
/// the server's namespace cache reads a namespace it has not seen from the API.
pub fn resolve<'c>(
    request: &AdmissionRequest<'_>,
    route: Option<Route<'_>>,
    source: ClusterSource<'c>,
) -> Cluster<'c> {
    let namespace = match request.namespace.as_deref() {
        Some(name) if !name.is_empty() && route.is_some_and(|route| route.reads.namespace) => {
            source.namespaces.namespace_data(name)
        }
        _ => NamespaceData::NotLookedUp,
    };
    Cluster {
        namespace,
        params: source.params,
    }
}

/// Evaluates a parsed review with what [`resolve`] found of the cluster, and builds the
/// response review. The request keeps the object as it came; `evaluation.object` is the
/// object as the policies left it.
pub fn answer<'t>(
    review: Review<'t>,
    route: Option<Route<'_>>,
    cluster: &Cluster<'_>,
    policies: &PolicySet,
) -> Result<Reviewed<'t>, InternalError> {
    let evaluation = engine::evaluate(&review.request, route, cluster, policies);
    let response = respond(&review, &evaluation, policies)?;
    Ok(Reviewed {
        review,
        evaluation,
        response,
    })
}

fn respond(
    review: &Review<'_>,
    evaluation: &Evaluation<'_>,
    policies: &PolicySet,
) -> Result<ResponseReview, InternalError> {
    let mut response = AdmissionResponse {
        uid: review.request.uid.clone(),
        allowed: true,
        status: None,
        patch: None,
        patch_type: None,
        warnings: evaluation.warnings.clone(),
        audit_annotations: evaluation.audit_annotations.clone(),
    };
    response
        .audit_annotations
        .insert("revision".to_string(), policies.revision().to_string());
    match &evaluation.outcome {
        Outcome::Allowed => {
            if !evaluation.patch.0.is_empty() {
                let json = serde_json::to_vec(&evaluation.patch).map_err(InternalError::Patch)?;
                response.patch = Some(base64_simd::STANDARD.encode_to_string(json));
                response.patch_type = Some("JSONPatch".to_string());
            }
        }
        Outcome::Denied { message, code } => {
            response.allowed = false;
            response.status = Some(Status {
                code: *code,
                message: message.clone(),
            });
        }
    }
    Ok(ResponseReview {
        api_version: review.api_version.clone(),
        kind: "AdmissionReview".to_string(),
        response,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_reads_back_as_it_was_written_whatever_its_characters() {
        for patch in [
            "W3sib3AiOiJhZGQifV0=",
            "",
            "a\"b",
            "a\\u0041",
            "line\nbreak",
            "tab\t",
            "é ✓",
            "\"",
            "\\",
        ] {
            let response = AdmissionResponse {
                uid: "u".to_string(),
                allowed: true,
                status: None,
                patch: Some(patch.to_string()),
                patch_type: None,
                warnings: Vec::new(),
                audit_annotations: Default::default(),
            };
            let json = serde_json::to_vec(&response).unwrap();
            let back: AdmissionResponse = serde_json::from_slice(&json).unwrap();
            assert_eq!(back, response, "{}", String::from_utf8_lossy(&json));
        }
    }
}
