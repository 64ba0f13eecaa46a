//! The transport limit: graft's TLS and HTTP setup (tokio multi-thread runtime, rustls with
//! graft's configuration, hyper-util's auto builder with HTTP/1.1 keep-alive) answering
//! every request with one constant "allowed" AdmissionReview, without reading the review.
//! `bench/load.sh` drives it like graft, so each graft result is also a ratio to this.
//!
//! `transport_limit LISTEN_ADDR CA_FILE DURATION_SECONDS`: serves for at most
//! DURATION_SECONDS (it stops by itself), writing its self-signed CA to CA_FILE.
#![forbid(unsafe_code)]

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};

#[path = "support/transport.rs"]
mod transport;

/// The allocator `graft serve` runs with (see `src/main.rs`), so the measurement is of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What graft answers when no policy matches, minus the uid echo.
const ALLOWED: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"855e422d-d85e-42f4-8dac-3cd8bf3bb522","allowed":true,"auditAnnotations":{"revision":"sha256:000000000000"}}}"#;

fn main() -> anyhow::Result<()> {
    transport::run("/tmp/transport-limit-ca.pem", answer)
}

/// Reads the body (as graft must) and answers the constant review.
async fn answer(request: Request<Incoming>) -> transport::Answer {
    let _ = request.into_body().collect().await;
    Ok(transport::json(StatusCode::OK, Bytes::from_static(ALLOWED)))
}
