//! The integration tests that run graft's server: in process (`graft::server::start`) or
//! as the real `graft serve`, over TLS on loopback, with policy and certificate reloads,
//! the namespace cache against a stand-in API, and the monitoring against a running
//! server's /metrics.
//!
//! Each module was a test binary of its own; `cargo test --test server reload_live::` still runs
//! one of them alone.

#[path = "../support/mod.rs"]
mod support;

mod availability;
mod certs_handshake;
mod monitoring;
mod namespace_cache_fetch;
mod reload_lifecycle;
mod reload_live;
mod reload_recovery;
mod reload_startup;
mod server_admission;
mod server_admission_policy;
mod server_bad_inputs;
mod server_events;
mod server_http2_early_answer;
mod server_namespaces;
mod server_notices;
mod server_observability;
mod server_reload;
mod server_signal;
