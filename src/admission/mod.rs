//! AdmissionReview in and out: the one path shared by `graft serve` and `graft review`
//! ([`review_lean`]), so the two can never disagree.
//!
//! One parse (`parse.rs`), one pass over the body into a request whose objects are
//! trees that build what is read on first read; [`parse_lean`] and [`review_lean`]
//! also leave the object of a request no policy is a candidate for as text. Responses
//! are serialised straight from typed structs (no intermediate `Value` tree).

use serde::{Deserialize, Serialize};

use crate::engine::{self, Evaluation, Outcome};
use crate::namespaces::{NamespaceData, NamespaceSource};
use crate::policy::compiled::Operation;
use crate::policy::{PolicySet, Reads};

pub mod offline;
mod parse;

pub use parse::{parse, parse_lean, review_lean};
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
    pub fn to_json(&self) -> Vec<u8> {
        // The patch is most of a response: room for it and the rest up front, instead of
        // growing the buffer a doubling at a time.
        let patch = self.response.response.patch.as_ref().map_or(0, String::len);
        let mut json = Vec::with_capacity(patch + 512);
        // Serialising plain structs of strings, bools and maps into a Vec cannot fail.
        match serde_json::to_writer(&mut json, &self.response) {
            Ok(()) => json,
            Err(_) => Vec::new(),
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

/// Parses, evaluates and answers one review body; the request's namespace is looked
/// up in `namespaces` only when a candidate policy needs its data.
pub fn review<'b>(
    body: &'b [u8],
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Result<Reviewed<'b>, BadReview> {
    let review = parse(body)?;
    let reads = candidate_reads(&review.request, policies);
    let namespace = resolve(&review.request, reads, namespaces);
    Ok(answer(review, &namespace, policies))
}

/// What the candidate policies for a request can see, together; `None` when no policy
/// is a candidate.
fn candidate_reads(request: &AdmissionRequest<'_>, policies: &PolicySet) -> Option<Reads> {
    let operation = Operation::parse(&request.operation)?;
    policies.candidate_reads(
        &request.resource.resource,
        request.sub_resource.as_deref().unwrap_or(""),
        operation,
        request.namespace.as_deref().unwrap_or(""),
    )
}

/// The data of the request's namespace, looked up in `namespaces` only when the request
/// is namespaced and a candidate policy needs it: a review no policy asks about the
/// namespace for costs no lookup.
pub fn resolve_namespace(
    request: &AdmissionRequest<'_>,
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> NamespaceData {
    resolve(request, candidate_reads(request, policies), namespaces)
}

fn resolve(
    request: &AdmissionRequest<'_>,
    reads: Option<Reads>,
    namespaces: &dyn NamespaceSource,
) -> NamespaceData {
    match request.namespace.as_deref() {
        Some(name) if !name.is_empty() && reads.is_some_and(|reads| reads.namespace) => {
            namespaces.namespace_data(name)
        }
        _ => NamespaceData::NotLookedUp,
    }
}

/// Evaluates a parsed review, with its namespace resolved to `namespace`, and builds the
/// response review. The request keeps the object as it came; `evaluation.object` is the
/// object as the policies left it.
pub fn answer<'t>(
    review: Review<'t>,
    namespace: &NamespaceData,
    policies: &PolicySet,
) -> Reviewed<'t> {
    let evaluation = engine::evaluate(&review.request, namespace, policies);
    let response = respond(&review, &evaluation, policies);
    Reviewed {
        review,
        evaluation,
        response,
    }
}

fn respond(
    review: &Review<'_>,
    evaluation: &Evaluation<'_>,
    policies: &PolicySet,
) -> ResponseReview {
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
                // A patch serialises without fail: its values are trees, whose numbers
                // are finite and whose kept texts were checked when the body was read.
                let json = serde_json::to_vec(&evaluation.patch).unwrap_or_default();
                response.patch = Some(base64_simd::STANDARD.encode_to_string(json));
                response.patch_type = Some("JSONPatch".to_string());
            }
        }
        Outcome::Denied { message } => {
            response.allowed = false;
            response.status = Some(Status {
                code: 403,
                message: message.clone(),
            });
        }
    }
    ResponseReview {
        api_version: review.api_version.clone(),
        kind: "AdmissionReview".to_string(),
        response,
    }
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
