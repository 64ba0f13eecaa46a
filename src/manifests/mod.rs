//! The Kubernetes manifests graft generates rather than reads: the
//! MutatingWebhookConfiguration its policy set needs ([`webhook`], reaching graft through
//! its Service or at a [`webhook_url`]) and the CA and serving certificate for its Service
//! ([`certs`]).

pub mod certs;
pub mod webhook;
pub mod webhook_url;
