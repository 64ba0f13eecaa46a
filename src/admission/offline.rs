//! Admission requests for objects outside a cluster, for `graft apply`, `graft explain`
//! and `graft test`.

use serde_json::Value;

use crate::k8s::admission_request::{AdmissionRequest, GroupVersionKind, GroupVersionResource};
use crate::k8s::objects::is_cluster_scoped;
use crate::k8s::resources::plural;
use crate::tree::Tree;

/// Evaluates `request` as a review of it would be: routed, its cluster data resolved
/// from `source`, evaluated. The offline commands' one way to run policies.
pub fn evaluate<'t>(
    request: &AdmissionRequest<'t>,
    policies: &crate::policy::PolicySet,
    source: super::ClusterSource<'_>,
) -> crate::engine::Evaluation<'t> {
    let route = policies.route(request);
    let cluster = super::resolve(request, route, source);
    crate::engine::evaluate(request, route, &cluster, policies)
}

/// How to present an object to the engine as an admission request.
#[derive(Debug, Clone, Default)]
pub struct RequestOptions {
    /// `CREATE` when empty.
    pub operation: String,
    /// The request namespace; the object's `metadata.namespace`, else `default`, when empty
    /// (none for cluster-scoped kinds).
    pub namespace: Option<String>,
    /// `RESOURCE` or `RESOURCE/SUBRESOURCE`; derived from the object's kind when empty.
    pub resource: Option<String>,
    /// For UPDATE and DELETE.
    pub old_object: Option<Value>,
}

/// Builds the AdmissionRequest the apiserver would send for `object`.
pub fn request_for(
    object: Value,
    options: &RequestOptions,
    uid: &str,
) -> AdmissionRequest<'static> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1");
    let (group, version) = match api_version.split_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let metadata = object.get("metadata");
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (resource, sub_resource) = match options.resource.as_deref() {
        Some(resource) => match resource.split_once('/') {
            Some((resource, sub)) => (resource.to_string(), Some(sub.to_string())),
            None => (resource.to_string(), None),
        },
        None => (plural(&kind), None),
    };
    let namespace = options
        .namespace
        .clone()
        .or_else(|| text("namespace"))
        .or_else(|| Some("default".to_string()).filter(|_| !is_cluster_scoped(&kind)));
    let operation = if options.operation.is_empty() {
        "CREATE".to_string()
    } else {
        options.operation.to_ascii_uppercase()
    };
    let old_object = match operation.as_str() {
        "UPDATE" | "DELETE" => options.old_object.clone().or_else(|| Some(object.clone())),
        _ => None,
    };
    let name = text("name");
    let object = (operation != "DELETE").then_some(object);
    let kind = GroupVersionKind {
        group: group.clone(),
        version: version.clone(),
        kind,
    };
    let resource = GroupVersionResource {
        group,
        version,
        resource,
    };
    // The apiserver sends the request's own kind and resource again as the ones the client
    // asked for, which differ only after a conversion no offline request goes through.
    let request_kind = serde_json::json!({
        "group": kind.group, "version": kind.version, "kind": kind.kind,
    });
    let request_resource = serde_json::json!({
        "group": resource.group, "version": resource.version, "resource": resource.resource,
    });
    AdmissionRequest {
        uid: uid.to_string(),
        request_kind: Some(Tree::from(request_kind)),
        request_resource: Some(Tree::from(request_resource)),
        request_sub_resource: sub_resource.clone(),
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info: Tree::from(serde_json::json!({"username": "graft-offline"})),
        object: object.map(Tree::from),
        old_object: old_object.map(Tree::from),
        dry_run: Some(false),
        options: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plurals() {
        for (kind, expected) in [
            ("Pod", "pods"),
            ("Node", "nodes"),
            ("StatefulSet", "statefulsets"),
            ("Ingress", "ingresses"),
            ("NetworkPolicy", "networkpolicies"),
            ("Endpoints", "endpoints"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural(kind), expected);
        }
    }

    #[test]
    fn requests_for_cluster_scoped_objects_have_no_namespace() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        let options = RequestOptions {
            operation: "update".into(),
            resource: Some("nodes/status".into()),
            ..RequestOptions::default()
        };
        let request = request_for(node.clone(), &options, "u");
        assert_eq!(request.namespace, None);
        assert_eq!(request.operation, "UPDATE");
        assert_eq!(request.resource.resource, "nodes");
        assert_eq!(request.sub_resource.as_deref(), Some("status"));
        assert_eq!(request.old_object, Some(Tree::from(node)));
    }
}
