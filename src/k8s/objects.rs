//! Kubernetes objects from YAML or JSON text, as `kubectl` reads files: several
//! documents, and the items of a `kind: List`. Used by the offline commands for their
//! objects and by the Namespace file reader (`--namespaces FILE`). Also which built-in
//! kinds are cluster-scoped, for the request an offline command builds for an object.

use std::fmt;

use serde_json::Value;

const NOT_AN_OBJECT: &str = "not an object (a Kubernetes object is a map with apiVersion and kind)";

#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    #[error("document {index}: {source}")]
    Yaml {
        index: usize,
        source: serde_yaml::Error,
    },
    #[error("document {index}: {}", NOT_AN_OBJECT)]
    NotAnObject { index: usize },
    #[error("document {index}: items[{item}]: {}", NOT_AN_OBJECT)]
    ItemNotAnObject { index: usize, item: usize },
    #[error("document {index}: items: a kind: List's items must be a list of objects")]
    ItemsNotAList { index: usize },
}

impl ObjectsError {
    /// The 1-based line of the text where reading stopped, when the YAML parser knows it.
    pub fn line(&self) -> Option<usize> {
        match self {
            ObjectsError::Yaml { source, .. } => source.location().map(|at| at.line()),
            _ => None,
        }
    }

    /// The message without the parser's "at line L column C", for a caller that puts the
    /// line in front as `file:line`.
    fn message_without_location(&self) -> String {
        let text = self.to_string();
        let ObjectsError::Yaml { source, .. } = self else {
            return text;
        };
        match source.location() {
            Some(at) => text.replacen(
                &format!(" at line {} column {}", at.line(), at.column()),
                "",
                1,
            ),
            None => text,
        }
    }
}

/// An [`ObjectsError`] in a named file: `FILE:LINE: document N: ...`, as compilers and
/// `graft lint` name places.
#[derive(Debug, thiserror::Error)]
pub struct FileObjectsError {
    /// The file as the user named it (`<stdin>` for standard input).
    pub file: String,
    pub error: ObjectsError,
}

impl fmt::Display for FileObjectsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.error.line() {
            Some(line) => write!(
                f,
                "{}:{line}: {}",
                self.file,
                self.error.message_without_location()
            ),
            None => write!(f, "{}: {}", self.file, self.error),
        }
    }
}

/// [`read_objects`] for the text of `file`, whose errors name it.
pub fn read_objects_in(file: &str, text: &str) -> Result<Vec<Value>, FileObjectsError> {
    read_objects(text).map_err(|error| FileObjectsError {
        file: file.to_string(),
        error,
    })
}

/// Reads objects from YAML or JSON text: several documents, and `kind: List` items.
pub fn read_objects(text: &str) -> Result<Vec<Value>, ObjectsError> {
    // kubectl strips a byte-order mark (editors on Windows write one); libyaml would read
    // it as content before the first document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = index + 1;
        let value: Value = serde::Deserialize::deserialize(document)
            .map_err(|source| ObjectsError::Yaml { index, source })?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                match map.get("items") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(items)) => {
                        for (item, object) in items.iter().enumerate() {
                            if !object.is_object() {
                                return Err(ObjectsError::ItemNotAnObject { index, item });
                            }
                            objects.push(object.clone());
                        }
                    }
                    Some(_) => return Err(ObjectsError::ItemsNotAList { index }),
                }
            }
            Value::Object(_) => objects.push(value),
            _ => return Err(ObjectsError::NotAnObject { index }),
        }
    }
    Ok(objects)
}

/// Whether a built-in kind is cluster-scoped: its objects have no namespace, so an
/// offline request for one gets none instead of `default`. The kinds a Kubernetes v1.36
/// apiserver serves as not namespaced (`kubectl api-resources --namespaced=false`, with
/// every alpha and beta API on). A custom resource's scope is in its CRD, which graft
/// does not read: pass `--namespace` for one.
pub fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED_KINDS.contains(&kind)
}

/// Sorted (a test checks), so that a reader finds a kind, or its place, at a glance.
const CLUSTER_SCOPED_KINDS: &[&str] = &[
    "APIService",                       // apiregistration.k8s.io
    "CSIDriver",                        // storage.k8s.io
    "CSINode",                          // storage.k8s.io
    "CertificateSigningRequest",        // certificates.k8s.io
    "ClusterRole",                      // rbac.authorization.k8s.io
    "ClusterRoleBinding",               // rbac.authorization.k8s.io
    "ClusterTrustBundle",               // certificates.k8s.io (beta)
    "ComponentStatus",                  // core
    "CustomResourceDefinition",         // apiextensions.k8s.io
    "DeviceClass",                      // resource.k8s.io
    "DeviceTaintRule",                  // resource.k8s.io (beta)
    "FlowSchema",                       // flowcontrol.apiserver.k8s.io
    "IPAddress",                        // networking.k8s.io
    "IngressClass",                     // networking.k8s.io
    "MutatingAdmissionPolicy",          // admissionregistration.k8s.io
    "MutatingAdmissionPolicyBinding",   // admissionregistration.k8s.io
    "MutatingWebhookConfiguration",     // admissionregistration.k8s.io
    "Namespace",                        // core
    "Node",                             // core
    "PersistentVolume",                 // core
    "PriorityClass",                    // scheduling.k8s.io
    "PriorityLevelConfiguration",       // flowcontrol.apiserver.k8s.io
    "ResourcePoolStatusRequest",        // resource.k8s.io (alpha)
    "ResourceSlice",                    // resource.k8s.io
    "RuntimeClass",                     // node.k8s.io
    "SelfSubjectAccessReview",          // authorization.k8s.io
    "SelfSubjectReview",                // authentication.k8s.io
    "SelfSubjectRulesReview",           // authorization.k8s.io
    "ServiceCIDR",                      // networking.k8s.io
    "StorageClass",                     // storage.k8s.io
    "StorageVersion",                   // internal.apiserver.k8s.io (alpha)
    "StorageVersionMigration",          // storagemigration.k8s.io (beta)
    "SubjectAccessReview",              // authorization.k8s.io
    "TokenReview",                      // authentication.k8s.io
    "ValidatingAdmissionPolicy",        // admissionregistration.k8s.io
    "ValidatingAdmissionPolicyBinding", // admissionregistration.k8s.io
    "ValidatingWebhookConfiguration",   // admissionregistration.k8s.io
    "VolumeAttachment",                 // storage.k8s.io
    "VolumeAttributesClass",            // storage.k8s.io
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_and_documents() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- {kind: Pod}\n- {kind: Pod}\n---\n{\"kind\": \"Node\"}\n---\n";
        assert_eq!(read_objects(text).unwrap().len(), 3);
        assert!(matches!(
            read_objects("- a\n"),
            Err(ObjectsError::NotAnObject { index: 1 })
        ));
    }

    #[test]
    fn list_items_must_be_objects() {
        let text = "{kind: Pod}\n---\napiVersion: v1\nkind: List\nitems: [{kind: Pod}, 42, s]\n";
        let error = read_objects(text).unwrap_err();
        assert!(
            matches!(error, ObjectsError::ItemNotAnObject { index: 2, item: 1 }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!("document 2: items[1]: {NOT_AN_OBJECT}")
        );
        assert!(matches!(
            read_objects("kind: List\nitems: {kind: Pod}\n"),
            Err(ObjectsError::ItemsNotAList { index: 1 })
        ));
        assert_eq!(read_objects("kind: List\nitems: []\n").unwrap().len(), 0);
    }

    #[test]
    fn a_byte_order_mark_and_directives_are_not_content() {
        let text = "\u{feff}%YAML 1.2\n---\n{kind: Pod}\n...\n%YAML 1.1\n--- {kind: Node}\n";
        let objects = read_objects(text).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "Node");
    }

    #[test]
    fn errors_in_a_file_put_the_line_first() {
        let text = "kind: Pod\n---\na:\n  - [\n  b: }\n";
        let error = read_objects_in("pods.yaml", text).unwrap_err();
        assert_eq!(error.error.line(), Some(5));
        let message = error.to_string();
        assert!(
            message.starts_with("pods.yaml:5: document 2: did not find expected node content"),
            "{message}"
        );
        assert!(!message.contains(" at line "), "{message}");
        let error = read_objects_in("-", "[1]\n").unwrap_err();
        assert_eq!(error.to_string(), format!("-: document 1: {NOT_AN_OBJECT}"));
    }

    #[test]
    fn cluster_scoped_kinds() {
        assert!(CLUSTER_SCOPED_KINDS.is_sorted());
        for kind in [
            "IngressClass",
            "CSIDriver",
            "Namespace",
            "Node",
            "TokenReview",
        ] {
            assert!(is_cluster_scoped(kind), "{kind}");
        }
        for kind in [
            "Pod",
            "Ingress",
            "Role",
            "CSIStorageCapacity",
            "ResourceClaim",
            "Lease",
        ] {
            assert!(!is_cluster_scoped(kind), "{kind}");
        }
    }
}
