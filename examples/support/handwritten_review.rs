//! The review logic of a hand-written, single-purpose webhook: what a platform team would
//! write instead of graft and `policies/multus-networks.yaml`. It parses the whole
//! AdmissionReview into a `serde_json::Value`, applies that one rule in plain Rust and
//! answers with a JSON Patch, as such webhooks do.
//!
//! The rule: a worker pod created in `dynamo-system` and pinned by its node selector to an
//! RDMA node gets that node's RoCE networks in its Multus networks annotation. Networks
//! already attached (JSON list or `[namespace/]name[@interface]` short form) are kept
//! first; the result is written as a JSON list. A value that cannot be read leaves the pod
//! unchanged, because a missing network must never block a worker from starting.
//!
//! `bench/document_probe` computes the same rule on its prototype document with the
//! constants, [`merge`] and [`answer`] made public here.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// The annotation Multus reads a pod's extra networks from.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";
/// The annotation as a JSON Pointer (`/` in the key escaped as `~1`).
const NETWORKS_POINTER: &str = "/metadata/annotations/k8s.v1.cni.cncf.io~1networks";
pub const WORKER_NAMESPACE: &str = "dynamo-system";
pub const COMPONENT_LABEL: &str = "nvidia.com/dynamo-component-type";
pub const NODE_ALIAS: &str = "dynamo.nodeAlias";
const NETWORK_NAMESPACE: &str = "rdma-networks";
const ROCE: &[&str] = &[
    "roce5", "roce7", "roce8", "roce9", "roce10", "roce11", "roce12", "roce13", "roce14", "roce15",
];
/// The RDMA nodes, by alias, with the networks their workers attach.
pub const RDMA_NODES: &[(&str, &[&str])] = &[("worker06", ROCE), ("worker14", ROCE)];

/// Why a body gets HTTP 400 instead of an answer.
#[derive(Debug, thiserror::Error)]
pub enum BadReview {
    #[error("body is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("AdmissionReview has no request.uid")]
    MissingUid,
}

/// The AdmissionReview answering the review in `body`: allowed, echoing the uid, with the
/// patch when the rule applies.
pub fn review(body: &[u8]) -> Result<Vec<u8>, BadReview> {
    let review: Value = serde_json::from_slice(body)?;
    let request = &review["request"];
    let uid = request["uid"].as_str().ok_or(BadReview::MissingUid)?;
    let patch = patch(request)
        .map(|patch| serde_json::to_vec(&patch))
        .transpose()?;
    let api_version = review["apiVersion"].as_str();
    Ok(answer(api_version, uid, patch)?)
}

/// The response review: allowed, echoing the uid, with `patch` (JSON) when there is one.
pub fn answer(
    api_version: Option<&str>,
    uid: &str,
    patch: Option<Vec<u8>>,
) -> serde_json::Result<Vec<u8>> {
    let mut response = json!({ "uid": uid, "allowed": true });
    if let Some(patch) = patch {
        response["patchType"] = "JSONPatch".into();
        response["patch"] = base64::engine::general_purpose::STANDARD
            .encode(patch)
            .into();
    }
    let answer = json!({
        "apiVersion": api_version.unwrap_or("admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    });
    serde_json::to_vec(&answer)
}

/// The JSON Patch (a list of operations) for an admission request, when the rule applies
/// and changes the pod.
pub fn patch(request: &Value) -> Option<Value> {
    let pod = &request["object"];
    let worker_created = request["resource"]["group"] == ""
        && request["resource"]["resource"] == "pods"
        && request["operation"] == "CREATE"
        && request["namespace"] == WORKER_NAMESPACE
        && pod["metadata"]["labels"][COMPONENT_LABEL] == "worker";
    if !worker_created {
        return None;
    }
    let alias = pod["spec"]["nodeSelector"][NODE_ALIAS].as_str()?;
    let (_, networks) = RDMA_NODES.iter().find(|(node, _)| *node == alias)?;
    let annotations = pod["metadata"]["annotations"].as_object();
    let existing = annotations.and_then(|a| a.get(NETWORKS_ANNOTATION));
    let current = match existing {
        Some(value) => value.as_str()?,
        None => "",
    };
    let merged = merge(current, networks, WORKER_NAMESPACE)?;
    let operation = match (annotations, existing) {
        (None, _) => json!({
            "op": "add",
            "path": "/metadata/annotations",
            "value": { NETWORKS_ANNOTATION: merged },
        }),
        (Some(_), None) => json!({ "op": "add", "path": NETWORKS_POINTER, "value": merged }),
        (Some(_), Some(_)) => json!({ "op": "replace", "path": NETWORKS_POINTER, "value": merged }),
    };
    Some(json!([operation]))
}

/// The annotation value with each of `networks` not yet attached appended, as a JSON list;
/// `None` when a JSON list already has them all or `current` cannot be read. An entry
/// without a namespace is in the pod's.
pub fn merge(current: &str, networks: &[&str], pod_namespace: &str) -> Option<String> {
    let current = current.trim();
    let json_list = current.starts_with('[');
    let mut entries: Vec<Value> = if current.is_empty() {
        Vec::new()
    } else if json_list {
        let entries: Vec<Value> = serde_json::from_str(current).ok()?;
        entries.iter().all(is_network).then_some(entries)?
    } else {
        current.split(',').map(short_form).collect::<Option<_>>()?
    };
    let attached = entries.len();
    for network in networks {
        let present = entries.iter().any(|entry| {
            let namespace = entry["namespace"].as_str().filter(|n| !n.is_empty());
            entry["name"] == *network && namespace.unwrap_or(pod_namespace) == NETWORK_NAMESPACE
        });
        if !present {
            entries.push(json!({ "name": network, "namespace": NETWORK_NAMESPACE }));
        }
    }
    if json_list && entries.len() == attached {
        return None;
    }
    serde_json::to_string(&entries).ok()
}

/// Whether a JSON list entry is a network Multus can attach: an object with a name and,
/// if any, a string namespace.
fn is_network(entry: &Value) -> bool {
    let named = entry["name"].as_str().is_some_and(|name| !name.is_empty());
    let namespace = entry.get("namespace");
    entry.is_object() && named && namespace.is_none_or(Value::is_string)
}

/// One `[namespace/]name[@interface]` entry as a JSON object with the parts written.
fn short_form(item: &str) -> Option<Value> {
    let item = item.trim();
    // A stray brace or quote means a broken JSON value, not a network name.
    if item.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '{' | '}')) {
        return None;
    }
    let (reference, interface) = match item.split_once('@') {
        Some((reference, interface)) => (reference, Some(interface)),
        None => (item, None),
    };
    let (namespace, name) = match reference.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, reference),
    };
    let parts = [Some(name), namespace, interface];
    if parts
        .iter()
        .flatten()
        .any(|part| part.is_empty() || part.contains(['/', '@']))
    {
        return None;
    }
    let mut entry = Map::new();
    entry.insert("name".into(), name.into());
    if let Some(namespace) = namespace {
        entry.insert("namespace".into(), namespace.into());
    }
    if let Some(interface) = interface {
        entry.insert("interface".into(), interface.into());
    }
    Some(Value::Object(entry))
}
