//! graft: a Kubernetes mutating admission webhook whose behaviour lives in declarative,
//! hot-reloaded YAML policies.
//!
//! # Layout
//!
//! - [`policy`]: the policy model, loading from files, lint findings, compilation into a
//!   [`policy::PolicySet`].
//! - [`engine`]: the pure core. `(request, policy set) -> evaluation`: select, match,
//!   mutate, diff.
//! - [`expr`]: CEL expressions and `{{ }}` templates, with the Kubernetes helpers.
//! - [`k8s`]: Kubernetes value formats (quantities, pod ordinals, Multus annotations).
//! - [`admission`]: AdmissionReview parsing and responses; shared by the server and the CLI.
//! - [`cli`]: the `graft` subcommands.
#![forbid(unsafe_code)]

pub mod admission;
pub mod certs;
pub mod cli;
pub mod engine;
pub mod expr;
pub mod k8s;
pub mod policy;
pub mod webhook;
