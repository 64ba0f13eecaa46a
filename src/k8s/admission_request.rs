//! The AdmissionRequest of an AdmissionReview, as far as graft reads it: what the engine
//! evaluates and the admission module parses and answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
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

/// The part of an AdmissionRequest the engine uses; unknown fields are ignored. `O` is
/// the type of the objects: parsed (`Value`), or still raw JSON while a lean parse
/// decides what of them to parse.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct AdmissionRequest<O = Value> {
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
    #[serde(default)]
    pub user_info: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<O>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<O>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

impl<O> AdmissionRequest<O> {
    /// The same request with its objects replaced.
    pub(crate) fn with_objects<P>(
        self,
        object: Option<P>,
        old_object: Option<P>,
    ) -> AdmissionRequest<P> {
        AdmissionRequest {
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            object,
            old_object,
            dry_run: self.dry_run,
        }
    }
}
