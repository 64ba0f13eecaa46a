//! The Kubernetes manifests graft generates rather than reads: the
//! MutatingWebhookConfiguration its policy set needs ([`webhook`]) and the CA and serving
//! certificate for its Service ([`certs`]).

pub mod certs;
pub mod webhook;
