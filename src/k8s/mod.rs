//! Kubernetes value formats and types, without CEL types.
//!
//! Pure functions over plain Rust and JSON values: no CEL types here, so the
//! rules can be tested (and reused by lint or the CLI) without an evaluator.
//! `expr` wraps them as CEL functions.
//!
//! - [`quantity`]: `resource.Quantity` strings (`500m`, `32Gi`, `129e6`), parse and format.
//! - [`ordinal`]: a StatefulSet pod's ordinal, from its label or its name.
//! - [`multus`]: the `k8s.v1.cni.cncf.io/networks` annotation, parse and merge.
//! - [`merge_keys`]: the lists Kubernetes merges item by item, and their keys.
//! - [`resources`]: the resource names of the built-in API groups.
//! - [`names`]: the names Kubernetes validates (DNS labels and subdomains, qualified
//!   names, label values), with its messages.
//! - [`admission_request`]: the AdmissionRequest graft reads.
//! - [`objects`]: Kubernetes objects from YAML or JSON text (documents, `kind: List`).
//! - [`image`]: container image references, parsed and normalised.
//! - [`labels`]: label selector requirements.
//! - [`pod_controllers`]: the controllers that make Pods from a template, and where it is.
//! - [`schema`]: the shapes of the built-in kinds (fields, types, how lists, maps and
//!   structs merge), from the table in `schema/kubernetes/`.
//! - [`apply_configuration`]: a MutatingAdmissionPolicy's ApplyConfiguration merged into
//!   the object as kube-apiserver merges it (structured-merge-diff).
//! - [`json_patch_v4`]: a MutatingAdmissionPolicy's JSONPatch applied as kube-apiserver
//!   applies it (evanphx/json-patch v4, which departs from RFC 6902).
//! - [`go_text`]: how Go writes strings, numbers and unstructured values into the
//!   apiserver's messages, for the messages graft reproduces.

pub mod admission_request;
pub mod apply_configuration;
pub mod go_text;
pub mod image;
pub mod json_patch_v4;
pub mod labels;
pub mod merge_keys;
pub mod multus;
pub mod names;
pub mod objects;
pub mod ordinal;
pub mod pod_controllers;
pub mod quantity;
pub mod resources;
pub mod schema;

/// The longest string a helper may produce. Annotation values are capped by the
/// apiserver far below this; the bound only stops a runaway expression.
pub const MAX_STRING_BYTES: usize = 1 << 20;
