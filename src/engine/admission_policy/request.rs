//! The `request` a MutatingAdmissionPolicy's expressions see: the apiserver's
//! `CreateAdmissionRequest`, serialised with admission/v1's JSON tags, so an empty field
//! is absent (`request.name` of a CREATE by `generateName` is `no such key: name`), not
//! empty.

use crate::k8s::admission_request::AdmissionRequest;
use crate::tree::{Map, Tree};

/// The `request` binding of a MutatingAdmissionPolicy evaluation.
pub fn binding<'t>(request: &AdmissionRequest<'t>) -> Tree<'t> {
    let mut map = Map::with_capacity(12);
    let gvk = |group: &str, version: &str, kind_key: &'static str, kind: &str| {
        let mut map = Map::with_capacity(3);
        map.insert("group", Tree::from(group.to_string()));
        map.insert("version", Tree::from(version.to_string()));
        map.insert(kind_key, Tree::from(kind.to_string()));
        Tree::from(map)
    };
    let kind = &request.kind;
    map.insert("kind", gvk(&kind.group, &kind.version, "kind", &kind.kind));
    let resource = &request.resource;
    map.insert(
        "resource",
        gvk(
            &resource.group,
            &resource.version,
            "resource",
            &resource.resource,
        ),
    );
    if let Some(sub) = request
        .sub_resource
        .as_deref()
        .filter(|sub| !sub.is_empty())
    {
        map.insert("subResource", Tree::from(sub.to_string()));
    }
    // The kind and resource as the client asked for them; the request's own when the
    // review does not say (an older apiserver, an offline request).
    let request_kind = request
        .request_kind
        .clone()
        .unwrap_or_else(|| gvk(&kind.group, &kind.version, "kind", &kind.kind));
    map.insert("requestKind", request_kind);
    let request_resource = request.request_resource.clone().unwrap_or_else(|| {
        gvk(
            &resource.group,
            &resource.version,
            "resource",
            &resource.resource,
        )
    });
    map.insert("requestResource", request_resource);
    let request_sub = request
        .request_sub_resource
        .as_deref()
        .or(request.sub_resource.as_deref())
        .filter(|sub| !sub.is_empty());
    if let Some(sub) = request_sub {
        map.insert("requestSubResource", Tree::from(sub.to_string()));
    }
    for (key, value) in [("name", &request.name), ("namespace", &request.namespace)] {
        if let Some(value) = value.as_deref().filter(|value| !value.is_empty()) {
            map.insert(key, Tree::from(value.to_string()));
        }
    }
    map.insert("operation", Tree::from(request.operation.clone()));
    map.insert("userInfo", user_info(&request.user_info));
    map.insert("dryRun", Tree::from(request.dry_run.unwrap_or(false)));
    map.insert("options", request.options.clone().unwrap_or(Tree::Null));
    Tree::from(map)
}

/// `userInfo` with its empty fields left out, as Go's `omitempty` leaves them.
fn user_info<'t>(user_info: &Tree<'t>) -> Tree<'t> {
    let Some(fields) = user_info.as_map() else {
        return Tree::from(Map::new());
    };
    let mut kept = Map::with_capacity(fields.len());
    for (key, value) in fields.iter() {
        let empty = match value {
            Tree::Null => true,
            Tree::String(text) => text.is_empty(),
            Tree::List(items) => items.is_empty(),
            Tree::Map(map) => map.is_empty(),
            _ => false,
        };
        if !empty {
            kept.insert(key.to_string(), value.clone());
        }
    }
    Tree::from(kept)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn empty_fields_are_absent_as_the_apiserver_serialises_them() {
        let text = json!({
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "name": "",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": [], "uid": ""},
        })
        .to_string();
        let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            binding(&request).to_value(),
            json!({
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "team-a",
                "operation": "CREATE",
                "userInfo": {"username": "alice"},
                "dryRun": false,
                "options": null,
            })
        );
    }
}
