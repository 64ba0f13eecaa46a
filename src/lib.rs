//! graft: a Kubernetes mutating admission webhook whose behaviour lives in declarative,
//! hot-reloaded YAML policies.
//!
//! # Layout
//!
//! - [`policy`]: the policy model, loading from files, lint findings, compilation into a
//!   [`policy::PolicySet`].
//! - [`jsonpath`]: compiled JSONPath, resolved against objects (policy and engine both use it).
//! - [`engine`]: the pure core. `(request, namespace data, policy set) -> evaluation`:
//!   select, match, mutate, diff.
//! - [`expr`]: CEL expressions and `{{ }}` templates, with the Kubernetes helpers.
//! - [`k8s`]: Kubernetes value formats (quantities, pod ordinals, Multus annotations).
//! - [`admission`]: AdmissionReview parsing (into trees that build what is read when it is
//!   first read) and responses; shared by the server and the CLI; and the requests the
//!   apiserver would send for plain objects, for the offline commands
//!   ([`admission::offline`]).
//! - [`server`]: `graft serve`, the HTTPS admission server (TLS, routes, probes, shutdown).
//! - [`metrics`]: the Prometheus metrics and their registry.
//! - [`logging`]: `graft serve`'s log lines: the JSON format and the buffered writer.
//! - [`namespaces`]: what a review knows of its namespace, and where that comes from.
//! - [`params`]: where the parameter objects of MutatingAdmissionPolicy bindings come from.
//! - [`tree`]: the JSON tree the request's objects are: vector maps, shared nodes,
//!   borrowed strings, text built on first read, path-copying edits, a diff that skips
//!   shared subtrees, RFC 6902 patches.
//! - [`watch`]: debounced directory watching for mounted ConfigMaps and Secrets.
//! - [`manifests`]: what graft generates for a cluster: the MutatingWebhookConfiguration a
//!   policy set needs, and a CA and serving certificate for the webhook Service.
//! - [`cli`]: the `graft` subcommands.
#![forbid(unsafe_code)]

pub mod admission;
pub mod cli;
pub mod engine;
pub mod expr;
pub mod jsonpath;
pub mod k8s;
pub mod logging;
pub mod manifests;
pub mod metrics;
pub mod namespaces;
pub mod params;
pub mod policy;
pub mod server;
pub mod tree;
pub mod watch;
