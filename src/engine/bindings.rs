//! The JSON bindings a review's CEL expressions share: `request` with the fields the
//! candidates read, and `namespaceObject`, each built on first use; and the types of
//! the objects its policies write to, looked up once.

use std::cell::OnceCell;

use super::matching::RequestFacts;
use super::typed_writes::WriteTypes;
use crate::expr::{RequestFields, request_fields};
use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::schema;
use crate::tree::{Map, Tree};

/// The `request` variable CEL expressions see, with the fields in `fields`: those the
/// review's candidate policies can read (`expr::request_fields`).
pub fn request_binding(request: &AdmissionRequest<'_>, fields: RequestFields) -> Tree<'static> {
    let mut binding = Map::with_capacity(request_fields::FIELDS.len());
    for field in request_fields::FIELDS {
        if fields.includes(field) {
            binding.insert(field, request_field(request, field));
        }
    }
    Tree::from(binding)
}

/// One field of the `request` binding, as serde writes it.
fn request_field(request: &AdmissionRequest<'_>, field: &str) -> Tree<'static> {
    let text = |value: &Option<String>| Tree::from(value.as_deref().unwrap_or_default());
    let (kind, resource) = (&request.kind, &request.resource);
    match field {
        "uid" => Tree::from(request.uid.as_str()),
        "kind" => strings([
            ("group", &kind.group),
            ("version", &kind.version),
            ("kind", &kind.kind),
        ]),
        "resource" => strings([
            ("group", &resource.group),
            ("version", &resource.version),
            ("resource", &resource.resource),
        ]),
        "subResource" => text(&request.sub_resource),
        "name" => text(&request.name),
        "namespace" => text(&request.namespace),
        "operation" => Tree::from(request.operation.as_str()),
        "userInfo" => request.user_info.clone().into_static(),
        "dryRun" => Tree::Bool(request.dry_run.unwrap_or(false)),
        // `request_fields::FIELDS` names no other field.
        _ => Tree::Null,
    }
}

/// A map of strings, its keys in the order given: a group, version and kind or
/// resource, in the order of their struct's fields, which serde writes them in.
fn strings(entries: [(&'static str, &String); 3]) -> Tree<'static> {
    let mut map = Map::with_capacity(entries.len());
    for (key, value) in entries {
        map.insert(key, Tree::from(value.as_str()));
    }
    Tree::from(map)
}

/// The bindings one review shares between its policies, each built on first use: most
/// policies use no CEL, and then no review pays for them.
pub struct SharedBindings {
    /// The fields of `request` the review's candidates can read.
    request_fields: RequestFields,
    request: OnceCell<Tree<'static>>,
    /// `None` for a cluster-scoped request (CEL `null`).
    namespace_object: OnceCell<Option<Tree<'static>>>,
    /// The table's type of the request's kind, and of a Pod (what a `podControllers`
    /// policy writes to); `None` when the table lacks it.
    request_type: OnceCell<Option<WriteTypes>>,
    pod_type: OnceCell<Option<WriteTypes>>,
}

impl SharedBindings {
    /// Bindings whose `request` holds `request_fields`.
    pub fn new(request_fields: RequestFields) -> SharedBindings {
        SharedBindings {
            request_fields,
            request: OnceCell::new(),
            namespace_object: OnceCell::new(),
            request_type: OnceCell::new(),
            pod_type: OnceCell::new(),
        }
    }

    /// The type of the object a policy run with `facts` writes to: a Pod for pods (and
    /// a pod template's stand-in, whose facts are a Pod's), the request's kind otherwise.
    pub(super) fn write_types(
        &self,
        facts: &RequestFacts<'_>,
        request: &AdmissionRequest<'_>,
    ) -> Option<&WriteTypes> {
        let table = || schema::builtin().ok();
        if facts.group.is_empty() && facts.resource == "pods" && facts.subresource.is_empty() {
            self.pod_type
                .get_or_init(|| table()?.kind("", "v1", "Pod").map(WriteTypes::new))
                .as_ref()
        } else {
            let kind = &request.kind;
            self.request_type
                .get_or_init(|| {
                    table()?
                        .kind(&kind.group, &kind.version, &kind.kind)
                        .map(WriteTypes::new)
                })
                .as_ref()
        }
    }

    pub(super) fn request(&self, request: &AdmissionRequest<'_>) -> &Tree<'static> {
        self.request
            .get_or_init(|| request_binding(request, self.request_fields))
    }

    /// `namespaceObject`, or why the namespace's data is missing.
    pub(super) fn namespace_object(
        &self,
        facts: &RequestFacts<'_>,
    ) -> Result<Option<&Tree<'static>>, String> {
        if let Some(built) = self.namespace_object.get() {
            return Ok(built.as_ref());
        }
        let built = if facts.namespace.is_empty() {
            None
        } else {
            Some(facts.namespace_data.known(facts.namespace)?.to_object())
        };
        Ok(self.namespace_object.get_or_init(|| built).as_ref())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> AdmissionRequest<'static> {
        let text = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "subResource": "scale",
            "name": "web",
            "namespace": "team-a",
            "operation": "UPDATE",
            "userInfo": {"username": "admin", "uid": "0", "groups": ["system:masters"],
                         "extra": {"scopes": ["a", "b"]}},
            "dryRun": true
        })
        .to_string();
        serde_json::from_str::<AdmissionRequest<'_>>(&text)
            .unwrap()
            .into_owned()
    }

    /// Every field, in order, as serde writes the request.
    #[test]
    fn the_whole_request_binding_is_the_request_as_serde_writes_it() {
        let bare = AdmissionRequest {
            uid: "u".to_string(),
            ..AdmissionRequest::default()
        };
        for request in [request(), bare] {
            let serde = json!({
                "uid": request.uid,
                "kind": request.kind,
                "resource": request.resource,
                "subResource": request.sub_resource.clone().unwrap_or_default(),
                "name": request.name.clone().unwrap_or_default(),
                "namespace": request.namespace.clone().unwrap_or_default(),
                "operation": request.operation,
                "userInfo": request.user_info,
                "dryRun": request.dry_run.unwrap_or(false),
            });
            let binding = request_binding(&request, RequestFields::ALL);
            assert_eq!(binding.to_string(), serde.to_string());
        }
    }

    /// Only the fields the candidates read, with the values the whole binding has.
    #[test]
    fn a_request_binding_holds_the_fields_read() {
        let request = request();
        let whole = request_binding(&request, RequestFields::ALL).to_value();
        let program = cel::Env::stdlib()
            .compile("request.namespace == '' || request.userInfo.username == ''")
            .unwrap();
        let fields = crate::expr::request_fields::analyse(program.expression());
        assert_eq!(
            request_binding(&request, fields),
            json!({"namespace": whole["namespace"], "userInfo": whole["userInfo"]})
        );
        assert_eq!(
            request_binding(&request, RequestFields::default()),
            json!({})
        );
    }
}
