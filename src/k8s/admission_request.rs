//! The AdmissionRequest of an AdmissionReview, as far as graft reads it: what the engine
//! evaluates and the admission module parses and answers.

use serde::{Deserialize, Serialize};

use crate::tree::Tree;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

impl GroupVersionKind {
    /// `apiVersion` and `kind` as a document writes them (the core group is "").
    pub fn parse(api_version: &str, kind: &str) -> GroupVersionKind {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), api_version.to_string()),
        };
        GroupVersionKind {
            group,
            version,
            kind: kind.to_string(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `group/version, Kind=K`, as Go prints a GroupVersionKind (`/v1, Kind=ConfigMap`).
    pub fn go_string(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// The part of an AdmissionRequest the engine uses; unknown fields are ignored. The
/// objects and `userInfo` borrow their strings from the body they were read from (`'t`).
/// `admission`'s parse reads it field by field; the derived `Deserialize` reads one
/// from JSON text (tests, and what the parse is checked against).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'t> {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub resource: GroupVersionResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: String,
    #[serde(default, borrow)]
    pub user_info: Tree<'t>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub object: Option<Tree<'t>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Tree<'t>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// The kind, resource and subresource of the request as the client made it, when the
    /// apiserver converted it to the version the webhook asked for; and the operation's
    /// options. Kept as their text until read: only a MutatingAdmissionPolicy's `request`
    /// shows them.
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<Tree<'t>>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<Tree<'t>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_sub_resource: Option<String>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    pub options: Option<Tree<'t>>,
}

impl<'t> AdmissionRequest<'t> {
    /// The object the request is about: its `object`, or at DELETE, which carries only
    /// `oldObject`, the old object. What policies match on and read (the engine's
    /// `Subject` makes the old object read-only), and what `graft explain` names.
    pub fn subject(&self) -> Option<&Tree<'t>> {
        self.object.as_ref().or(self.old_object.as_ref())
    }

    /// The request with objects free of the body they were read from, for a request
    /// kept beyond it.
    pub fn into_owned(self) -> AdmissionRequest<'static> {
        AdmissionRequest {
            object: self.object.map(Tree::into_static),
            old_object: self.old_object.map(Tree::into_static),
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info.into_static(),
            dry_run: self.dry_run,
            request_kind: self.request_kind.map(Tree::into_static),
            request_resource: self.request_resource.map(Tree::into_static),
            request_sub_resource: self.request_sub_resource,
            options: self.options.map(Tree::into_static),
        }
    }
}
